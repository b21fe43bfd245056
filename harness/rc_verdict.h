// The bridge from verdict functions to RapidCheck: a failing property prints its case as a file
// `mlacheck repro` runs.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include <rapidcheck.h>

#include "harness/case_text.h"
#include "harness/verdict.h"

namespace mlacheck {

// When MLACHECK_SAMPLE_DIR is set, writes the first MLACHECK_SAMPLE_COUNT (default 8) cases of each
// property this process runs there as <property>-<n>.case: the generators' cases, to seed the
// fuzzers with: MLACHECK_SAMPLE_DIR=corpus/<op> MLACHECK_SAMPLE_COUNT=4 <the op's property test binary>
// (docs/adding-an-op.md, step 7).
inline void sample_case(const CaseText& c) {
  const char* dir = std::getenv("MLACHECK_SAMPLE_DIR");
  if (!dir || !*dir || !c.has("property")) return;
  static std::map<std::string, int> written;
  const char* count = std::getenv("MLACHECK_SAMPLE_COUNT");
  const int limit = count && *count ? std::atoi(count) : 8;
  const std::string property = c.word("property");
  int& n = written[property];
  if (n >= limit) return;
  std::ofstream(std::string(dir) + "/" + property + "-" + std::to_string(n++) + ".case") << c.format();
}

// Inside a RapidCheck property: passes when v is empty; otherwise fails with the verdict and the
// case text. When MLACHECK_CASE_DIR is set the case is also written there as <property>.case; the
// last failure RapidCheck sees is its shrunk case, so that file ends up holding the shrunk one.
inline void rc_require(const Verdict& v, const CaseText& c) {
  sample_case(c);
  if (!v) return;
  const std::string text = c.format();
  if (const char* dir = std::getenv("MLACHECK_CASE_DIR"); dir && *dir) {
    const std::string name = c.has("property") ? c.word("property") : std::string("case");
    std::ofstream(std::string(dir) + "/" + name + ".case") << text;
  }
  RC_FAIL(*v + "\n--- the case (save it as FILE.case and run `mlacheck repro FILE.case`) ---\n" + text);
}

}  // namespace mlacheck
