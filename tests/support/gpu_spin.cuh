// A kernel that holds a stream up, for GPU tests of ordering: work queued behind it has not run
// until it ends, so a missing wait shows. Include from .cu files only.
#pragma once

namespace mlacheck::gpu_test {

// Spins for about ns nanoseconds of the device's global timer.
static __global__ void spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

}  // namespace mlacheck::gpu_test
