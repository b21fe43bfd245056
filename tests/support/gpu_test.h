// Shared by the GPU test programs and GPU benchmarks: skip without a GPU, one line per check.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/backend/cuda_runtime.h"

namespace mlacheck::gpu_test {

// Returns device 0's description, or prints "skipped: no GPU (<why>)" and exits 77 (ctest's
// SKIP_RETURN_CODE) when no device is usable.
inline cuda::DeviceInfo require_gpu() {
  cuda::DeviceInfo info = cuda::probe_device();
  if (!info.usable) {
    std::printf("skipped: no GPU (%s)\n", info.why_not.c_str());
    std::exit(77);
  }
  return info;
}

// Counts checks and failures; each check prints "  PASS  what" or "  FAIL  what".
struct Tally {
  int checks = 0, failures = 0;
  void report(bool ok, const std::string& what) {
    ++checks;
    if (!ok) ++failures;
    std::printf("  %s  %s\n", ok ? "PASS" : "FAIL", what.c_str());
    std::fflush(stdout);
  }
  // Prints "<title>: N checks, M failing" and returns the exit status (0 or 1).
  int finish(const char* title) const {
    std::printf("%s: %d checks, %d failing\n", title, checks, failures);
    return failures == 0 ? 0 : 1;
  }
};

}  // namespace mlacheck::gpu_test
