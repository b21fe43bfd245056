// `mlacheck fuzz --target T`: a supervised libFuzzer campaign on one op's harness.
//
// It seeds the harness with the target's case files (encoded to bytes, fuzz/fuzz_input.h),
// runs libFuzzer in fork mode (a crash or a sticky GPU fault ends one job, not the campaign) for a
// time budget or a fixed number of runs, prints a progress line, then triages the crashes: each is
// rerun, keyed by its verdict (a property violation) or its stack (a sanitizer report), one per key
// is minimized and written as a readable case, and the corpus is merged. Layout of --out DIR:
//   corpus/   the merged corpus (kept between campaigns: the next one starts from it)
//   seeds/    the case files, encoded
//   crashes/  libFuzzer's raw crash inputs, and min-<key> for each distinct one
//   cases/    one readable case per distinct crash: <property>-<key>.case (mlacheck repro runs it)
//   fuzz.log  libFuzzer's output
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace mlacheck {

// Returns the exit status: 0 no crash, 1 crashes found (their cases written) or a target that ran no
// input (NO RUN), 2 bad usage or setup (one line on err). With --python, the callables are loaded
// here once and registered again in every harness process (kernels/python_bridge.h).
int run_fuzz_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace mlacheck
