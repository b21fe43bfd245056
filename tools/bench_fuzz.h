// `mlacheck bench fuzz`: fuzzing throughput per target, on the host backend and on a GPU in one run
// over the same inputs. Each target's harness body (fuzz/fuzz_runner.h, <op>@ref, the harnesses'
// default budgets) gets the same stream of seeded random inputs of 1 to --input-bytes bytes (64 by
// default: few bytes decode to small cases) for --seconds per target and backend, in this process,
// on one thread. The report: inputs run, refused, skipped, checked, checked cases per second, and
// the median microseconds per checked case. A violation on <op>@ref is a false positive of the
// suite: printed with its case, and the exit status is 1. With --jobs N each target and backend is
// measured by N processes of this program at once (worker j on seed + j), their counts and rates
// summed: what one GPU gives a fuzzing job of N workers (with an MPS daemon; without one the
// processes time-slice the GPU, and the header says so). --no-host leaves out the host backend.
#pragma once

#include <iosfwd>

#include "tools/flags_typed.h"

namespace mlacheck {

// f: the parsed `bench fuzz` command line. Returns the exit status: 0 measured, 1 a violation on a
// reference implementation, 2 a backend not usable or bad usage (one line on err).
int run_bench_fuzz(const flags::BenchFlags& f, std::ostream& out, std::ostream& err);

}  // namespace mlacheck
