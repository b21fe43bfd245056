// `--sanitize memcheck` (check, mutants, repro): the command run again under compute-sanitizer's
// memcheck, with device read fences on (MLACHECK_DEVICE_FENCE=1, core/read_fence.h): each launch's
// guarded device allocations are NVTX heaps whose only regions are the launch's views, so memcheck
// reports an access to any other byte of them, a read or write past a view that stays inside its
// allocation (which plain memcheck cannot see), naming the nearest region "<buffer>: <view>". The
// kernel that made the access fails (cudaErrorLaunchFailure), so the check reports the case as
// FAIL crashed, with memcheck's report above it.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace mlacheck {

// When args ask for --sanitize (and this process is not already the sanitized one): replaces this
// process with `compute-sanitizer --tool memcheck ... <this program> cmd args-without-it`, or
// returns 2 after one line on err when that cannot be done (an unknown tool, no compute-sanitizer).
// nullopt: nothing to do.
std::optional<int> run_sanitized(const std::string& cmd, const std::vector<std::string>& args, std::ostream& err);

// The arguments compute-sanitizer is given before the program (for the test and the docs).
std::vector<std::string> memcheck_arguments();

}  // namespace mlacheck
