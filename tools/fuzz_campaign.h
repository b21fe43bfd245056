// One `mlacheck fuzz` campaign on one target (tools/fuzz_command.h is the command around it: its
// flags, `--target all`, the plugins and callables loaded once, the SARIF log and the summary table).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "tools/flags_typed.h"
#include "tools/fuzz_log.h"
#include "tools/report_formats.h"

namespace mlacheck {

// What the command's flags set for a campaign: the typed flags of `mlacheck fuzz` (tools/flags.def,
// through tools/flags_typed.h: defaults, `given`), and what follows from them.
struct FuzzOptions : flags::FuzzFlags {
  std::vector<std::string> python_specs;  // --python and --adapter as specs (kernels/python_bridge.h)
  std::string python_loaded;              // their $MLACHECK_PYTHON_LOADED, for the harness
};

// What a campaign ran and found.
struct CampaignSummary {
  std::string target;
  FuzzStats stats;
  size_t corpus = 0, crashes = 0, distinct = 0;
  bool ran_nothing = false;  // no input was run: NO RUN, never a clean campaign
  double seconds = 0;
  std::vector<report::Finding> findings;  // one per distinct crash, for --format sarif and --sarif
};

// Runs the campaign of o.target, its progress and findings on out (the layout of its folder:
// tools/fuzz_command.h). Throws mlacheck::Error for a setup that cannot run (no harness, a seed
// folder that cannot be read, a harness that refused to start).
CampaignSummary run_fuzz_campaign(FuzzOptions o, std::ostream& out);

}  // namespace mlacheck
