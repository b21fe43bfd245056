// `mlacheck bench guards [flags]` (its flags: tools/flags.def, or `mlacheck bench --help`): what
// guarded memory costs a launch. For each kernel (paged indexer
// logits, top-k decode, sparse MLA decode, dense MLA decode) at DeepSeek-V3.2 decode shapes, on
// buffers staged once, it times in the same process, alternately and N times each:
//   plain    the launch and a synchronize;
//   guarded  arm_all of the buffers (outputs poisoned, red zones restored, a snapshot), the launch,
//            a synchronize and check_all of the buffers (every byte outside the output views and in
//            the red zones compared with the snapshot; on cuda one kernel for all the buffers), as
//            the property suite does around every launch;
//   checksum the same with the checksum fast path (a clean check reads each buffer once);
// and prints the medians and the ratios guarded / plain and checksum / plain. --size small runs
// shapes a host backend finishes in seconds (for tests of the command, not for figures).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace mlacheck {

// Returns the exit status: 0 measured, 2 bad usage or a backend not usable (one line on err).
int run_bench_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// v with `digits` digits after the point, as the benchmarks print their figures.
std::string format_fixed(double v, int digits);

}  // namespace mlacheck
