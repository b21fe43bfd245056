// `mlacheck repro FILE [--backend B] [--impl I]`: reruns one case file and prints its verdict.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace mlacheck {

// Returns the exit status: 0 the property holds, 1 it is violated (or the run crashed or hit a
// sticky GPU fault), 2 bad usage or a malformed case (one line on err).
int run_repro_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace mlacheck
