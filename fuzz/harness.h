// The body every op harness shares: libFuzzer input bytes -> case (fuzz/fuzz_input.h) -> the
// case's property run under guarded buffers -> on a violation, the case text and the verdict, then
// abort, so libFuzzer keeps the input as a crash.
//
// libFuzzer owns the command line, so a harness is configured by its environment:
//   MLACHECK_BACKEND   host (default) or cuda: where the implementation runs
//   MLACHECK_IMPL      op@name (default <op>@ref); ref-only properties are skipped for another
//   MLACHECK_PLUGIN    plugins to load first (kernels/plugin.h), paths separated by ':'
//   MLACHECK_PYTHON_LOADED  the Python callables `mlacheck fuzz --python` loaded, registered again
//                      here as OP@py (kernels/python_bridge.h); with them, MLACHECK_FUZZ_CASE_TIMEOUT
//                      (seconds, libFuzzer's -timeout) and MLACHECK_FUZZ_COST_FILE, the clock and
//                      the shared measurements of interpreted Triton calls (kernels/interpreter_cost.h)
//   MLACHECK_CASE_DIR  where a violated case is also written, as <property>-<hash>.case
//   MLACHECK_FUZZ_MAX_MB  device memory one case may allocate, and host bytes it may stage before
//                      that (default 8 each); a larger case is skipped as too costly for
//                      fuzzing, not run
//   MLACHECK_FUZZ_MAX_STEPS  host backend: GPU-thread steps (a thread run until it returns or waits
//                      at a barrier or warp collective) one case's launches may take (default
//                      200000, twice the largest seed case's, 20 to 60 ms; 0: no cap); a case
//                      that would take more is given up and skipped
// Both defaults favour many small cases, which reach every kernel path: a fixed number of inputs
// from an empty corpus reaches the same coverage or more than with budgets of 32 MiB and 2 million
// steps, at 2 to 5 times the inputs per second.
//   MLACHECK_FUZZ_MAX_MS  a case that took longer (default 500) is still checked, but kept out of
//                      the corpus, so libFuzzer does not spend its time mutating it
// An input the case rules refuse, one skipped, or a slow one returns -1: libFuzzer keeps it out of
// the corpus. At exit the harness prints one line: inputs run, refused, skipped, slow.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mlacheck::fuzz {

// LLVMFuzzerInitialize: reads the environment and makes the device; on a bad setting or an
// unusable backend prints one line and exits with status 2. A null target is taken from
// MLACHECK_TARGET, or from the program's name (argv0, "<target>_fuzzer"): the all-targets harness.
int harness_init(const char* target, const char* argv0);
// LLVMFuzzerTestOneInput.
int harness_run(const uint8_t* data, size_t size);

}  // namespace mlacheck::fuzz

// Defines a harness's two libFuzzer entry points for target (a fuzz/fuzz_input.h target).
#define MLACHECK_FUZZ_HARNESS(target)                                                              \
  extern "C" int LLVMFuzzerInitialize(int*, char*** argv) {                                         \
    return ::mlacheck::fuzz::harness_init(target, (*argv)[0]);                                     \
  }                                                                                                \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {                        \
    return ::mlacheck::fuzz::harness_run(data, size);                                              \
  }
