// The mlacheck command line as a function: what the executable's main runs (tools/mlacheck_main.cpp)
// and what the command-line fuzzer (tools/cli_fuzzer.cpp) runs in-process, one input at a time.
#pragma once

namespace mlacheck {

// Runs `mlacheck argv[1] argv[2] ...` (argv[0] is not read), writing to std::cout and std::cerr, and
// returns the exit status: 0 success, 1 a check failed, 2 bad usage or input (one line on stderr).
int cli_main(int argc, char** argv);

}  // namespace mlacheck
