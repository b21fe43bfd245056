// The cases of a suite run (tools/suite_runner.h), apart from running them: the corpus's case files
// of a property, the bytes of the random cases (seeded, a quarter of them mutated seeds), and the
// shrinking of a failing case's bytes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "harness/case_text.h"
#include "properties/property_registry.h"

namespace mlacheck {

// The .case files of dir whose property keep accepts, in name order, each parsed; a file that does
// not parse or names no property is left out (the corpus tests report those).
std::vector<std::pair<std::filesystem::path, CaseText>> case_files(
    const std::filesystem::path& dir, const std::function<bool(const PropertyEntry&)>& keep);

// The fuzz bytes of the random cases of one implementation's suite: random case r of property p
// (nullptr: any property of the target, as the fuzzer's first byte picks one) is seeded by seed,
// the implementation, the property (or salt) and r, so a run draws the same cases again.
class RandomCases {
 public:
  // corpus_dir: the corpus's folder of the target (its seed cases). mutate_seeds: a quarter of the
  // cases are a seed's bytes with one to four bytes changed (not for a Python implementation, whose
  // calls cost milliseconds to seconds: a budget of them goes further on small random cases).
  RandomCases(uint64_t seed, std::string impl, const FuzzTarget& target, std::filesystem::path corpus_dir,
              bool mutate_seeds);
  std::string bytes(const PropertyEntry* p, int r, const std::string& salt) const;
  // The bytes that pick p among its target's properties (a case's first bytes).
  std::string property_prefix(const PropertyEntry* p) const;

 private:
  const std::vector<std::string>& seed_bytes(const PropertyEntry* p) const;
  uint64_t seed_;
  std::string impl_;
  const FuzzTarget& target_;
  std::filesystem::path corpus_dir_;
  bool mutate_seeds_;
  mutable std::map<std::string, std::vector<std::string>> seed_bytes_;  // by property name ("": every one)
};

// Shrinks bytes against keep(candidate, same_size), true when the candidate still fails the same way
// (and is kept from then on): each chunk removed, else zeroed, by halves down to single bytes
// (same_size false: the candidate must decode to a smaller case), then each byte lowered by halves
// between 0 and its value (same_size true: a case as large is kept too; a width, a count or a
// length shrinks by steps no removal takes). stop() ends it early (tries, a deadline). Returns the
// last bytes kept. Small bytes decode to small cases (harness/case_bytes.h).
std::string shrink_bytes(std::string bytes, const std::function<bool(const std::string&, bool)>& keep,
                         const std::function<bool()>& stop);

}  // namespace mlacheck
