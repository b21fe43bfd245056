// The bridge from verdict functions to RapidCheck: a failing property prints its case as a file
// `mlacheck repro` runs.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <rapidcheck.h>

#include "properties/case_text.h"
#include "properties/view_properties.h"

namespace mlacheck {

// Inside a RapidCheck property: passes when v is empty; otherwise fails with the verdict and the
// case text. When MLACHECK_CASE_DIR is set the case is also written there as <property>.case; the
// last failure RapidCheck sees is its shrunk case, so that file ends up holding the shrunk one.
inline void rc_require(const Verdict& v, const CaseText& c) {
  if (!v) return;
  const std::string text = c.format();
  if (const char* dir = std::getenv("MLACHECK_CASE_DIR"); dir && *dir) {
    const std::string name = c.has("property") ? c.word("property") : std::string("case");
    std::ofstream(std::string(dir) + "/" + name + ".case") << text;
  }
  RC_FAIL(*v + "\n--- the case (save it as FILE.case and run `mlacheck repro FILE.case`) ---\n" + text);
}

}  // namespace mlacheck
