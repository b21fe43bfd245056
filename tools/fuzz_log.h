// What a fuzz campaign's files say (tools/fuzz_command.h keeps them in --out DIR): libFuzzer's
// status lines, the artifacts it leaves for a failing input, and the triage of one failing input's
// rerun output into a key (what deduplicates) and a one-line summary.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace mlacheck {

// The numbers of one libFuzzer status line.
struct FuzzStats {
  int64_t execs = 0, cov = 0, ft = 0, corpus = 0, exec_per_s = 0;
};
// The last status line in text ("#N ... cov: C ft: F corp: K[/..] ... exec/s: E"), or zeros.
FuzzStats parse_fuzz_stats(const std::string& text);

// libFuzzer's artifacts for failing inputs in dir (crash-, timeout-, oom-, leak-), sorted; a
// slow-unit- file is not a failure and is left out.
std::vector<std::filesystem::path> crash_files(const std::filesystem::path& dir);

// Digits -> '#', so "row 7 of 12" and "row 3 of 12" share a key.
std::string without_numbers(const std::string& s);

struct Triage {
  std::string key;      // verdict or stack: what deduplicates
  std::string summary;  // one line for the report
  std::string property; // the violated property, when it was one
};
// What a harness printed for one failing input: a property violation ("==mlacheck== violation:
// <property> ..." then "==mlacheck== verdict: <line>": keyed by property and verdict without its
// numbers), or a sanitizer / libFuzzer report (keyed by its kind and the first three frames of
// project code).
Triage triage_output(const std::string& log);

// A 12-hex-digit key of s (FNV-1a), for file names.
std::string hex_key(const std::string& s);

}  // namespace mlacheck
