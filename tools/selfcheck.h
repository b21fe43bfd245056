// `mlacheck selfcheck`: the toolkit checks its own foundations on this machine and prints a table.
#pragma once

#include <cstdint>
#include <ostream>

namespace mlacheck {

// Runs every self-check, prints one line per check and a closing "N passed, N failed" line.
// Returns the number of failed checks.
int run_selfcheck(std::ostream& out, uint64_t seed, int64_t samples);

}  // namespace mlacheck
