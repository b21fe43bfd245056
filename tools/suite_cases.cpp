// The cases of a suite run (tools/suite_cases.h).
#include "tools/suite_cases.h"

#include <algorithm>
#include <random>
#include <system_error>

#include "core/error.h"
#include "harness/case_bytes.h"
#include "harness/input_file.h"

namespace mlacheck {

namespace fs = std::filesystem;

std::vector<std::pair<fs::path, CaseText>> case_files(const fs::path& dir,
                                                       const std::function<bool(const PropertyEntry&)>& keep) {
  std::vector<std::pair<fs::path, CaseText>> out;
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".case") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    try {
      CaseText c = CaseText::parse(read_input_file(f.string()));  // bounded: a corpus folder is the user's
      if (keep(property_registry().find(c.word("property")))) out.emplace_back(f, std::move(c));
    } catch (const Error&) {
      // A malformed file is the corpus tests' business (corpus/CMakeLists.txt), not a kill.
    }
  }
  return out;
}

RandomCases::RandomCases(uint64_t seed, std::string impl, const FuzzTarget& target, fs::path corpus_dir,
                         bool mutate_seeds)
    : seed_(seed), impl_(std::move(impl)), target_(target), corpus_dir_(std::move(corpus_dir)),
      mutate_seeds_(mutate_seeds) {}

// A quarter of the random cases, where the property (or the op) has seed cases, are a seed's bytes
// with one to four bytes changed: random bytes decode mostly to small cases (harness/case_bytes.h),
// and the seeds hold the shapes they seldom reach (long rows of every value pattern, k = 2048, many
// splits), so the neighbours of those shapes are drawn too.
std::string RandomCases::bytes(const PropertyEntry* p, int r, const std::string& salt) const {
  std::seed_seq seq{seed_, std::hash<std::string>{}(impl_), std::hash<std::string>{}(p ? p->name : salt),
                    static_cast<uint64_t>(r)};
  std::mt19937_64 rng(seq);
  if (r % 4 == 3 && mutate_seeds_) {
    const std::vector<std::string>& seeds = seed_bytes(p);
    if (!seeds.empty()) {
      std::string mutated = seeds[static_cast<size_t>(r / 4) % seeds.size()];
      // With a property chosen (--property), the bytes that pick it are left alone: a changed one
      // would draw a case of a property that was not asked for.
      const size_t keep = p ? property_prefix(p).size() : 0;
      const int changes = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < changes && mutated.size() > keep; ++i) {
        mutated[keep + rng() % (mutated.size() - keep)] = static_cast<char>(rng() % 4 == 0 ? rng() % 256 : rng() % 16);
      }
      return mutated;
    }
  }
  std::string out = p ? property_prefix(p) : std::string();
  // Mostly small bytes, so mostly small cases (a byte's value is how far into its range a value
  // lies, harness/case_bytes.h), and now and then any byte, for the large values.
  const size_t n = 8 + rng() % 248;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t roll = rng() % 16;
    out.push_back(static_cast<char>(roll < 12 ? rng() % 16 : roll < 15 ? rng() % 224 : rng() % 256));
  }
  return out;
}

std::string RandomCases::property_prefix(const PropertyEntry* p) const {
  const std::vector<const PropertyEntry*> all = fuzz_target_properties(target_);
  const int64_t index = std::find(all.begin(), all.end(), p) - all.begin();
  ByteWriter w;
  w.in_range(index, 0, static_cast<int64_t>(all.size()) - 1);
  return w.bytes();
}

// The fuzz bytes of p's seed cases (nullptr: of every property of the op), those that encode, read
// once.
const std::vector<std::string>& RandomCases::seed_bytes(const PropertyEntry* p) const {
  const std::string key = p ? p->name : "";
  const auto known = seed_bytes_.find(key);
  if (known != seed_bytes_.end()) return known->second;
  std::vector<std::string> bytes;
  const auto files = case_files(corpus_dir_, [&](const PropertyEntry& e) { return p ? &e == p : e.op == target_.op; });
  for (const auto& [path, text] : files) {
    try {
      bytes.push_back(encode_fuzz_input(text.format()));
    } catch (const Error&) {
      // a seed the codec cannot write (an explicit value list past its limits): run as a seed only
    }
  }
  return seed_bytes_.emplace(key, std::move(bytes)).first->second;
}

std::string shrink_bytes(std::string bytes, const std::function<bool(const std::string&, bool)>& keep,
                         const std::function<bool()>& stop) {
  for (size_t chunk = std::max<size_t>(1, bytes.size() / 2); chunk >= 1 && !stop(); chunk /= 2) {
    for (size_t at = 0; at < bytes.size() && !stop();) {
      std::string removed = bytes;
      removed.erase(at, chunk);
      if (keep(removed, false)) {
        bytes = removed;
        continue;  // the same place again: it holds the next chunk now
      }
      std::string zeroed = bytes;
      bool changed = false;
      for (size_t i = at; i < std::min(bytes.size(), at + chunk); ++i) changed |= zeroed[i] != 0, zeroed[i] = 0;
      if (changed && keep(zeroed, false)) bytes = zeroed;
      at += chunk;
    }
    if (chunk == 1) break;
  }
  // Then each byte lowered as far as the failure stays, by halves between 0 (its zeroing, above)
  // and its value (a top-k wrong past 40 columns, found at 216, ends at 41).
  for (size_t at = 0; at < bytes.size() && !stop(); ++at) {
    int lo = 0, hi = static_cast<uint8_t>(bytes[at]);
    while (hi - lo > 1 && !stop()) {
      const int mid = lo + (hi - lo) / 2;
      std::string lowered = bytes;
      lowered[at] = static_cast<char>(mid);
      if (keep(lowered, true)) {
        bytes = lowered, hi = mid;
      } else {
        lo = mid;
      }
    }
  }
  return bytes;
}

}  // namespace mlacheck
