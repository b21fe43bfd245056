// `mlacheck repro FILE|--all DIR [flags]` (its flags: tools/flags.def, or `mlacheck repro --help`): reruns a
// case file, or a raw fuzz input (decoded through its target's harness decoder,
// fuzz/fuzz_input.h), and prints its verdict. --plugin loads a plugin's implementations
// first (kernels/plugin.h); every case then runs in a child process.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace mlacheck {

// Returns the exit status: 0 the property holds (every case, with --all), 1 one is violated (or
// the run crashed or hit a sticky GPU fault), 2 bad usage or a malformed case (one line on err).
int run_repro_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace mlacheck
