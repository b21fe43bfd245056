// Benchmark of the host backend: a 512-thread block crossing 10 barriers, launches per second and
// barrier crossings per second, beside the same arithmetic as a plain C++ loop. Not a test.
//
// usage: host_executor_bench [seconds per measurement, default 2]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/backend/host_executor.h"
#include "tests/core/backend/simt_test_kernels.h"

namespace stk = mlacheck::simt_test_kernels;
namespace sh = mlacheck::simt::host;

namespace {

using Clock = std::chrono::steady_clock;

// Calls f repeatedly for about `seconds`; returns calls per second.
template <class F>
double rate(double seconds, F&& f) {
  f();  // warm: stacks mapped, caches filled
  long calls = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  do {
    f();
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  return calls / elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  if (!(seconds > 0)) {
    std::fprintf(stderr, "host_executor_bench: seconds must be a positive number, got '%s'\n", argv[1]);
    return 2;
  }
  const int threads = 512, barriers = 10;
  const stk::SimtKernels k = stk::host::kernels();

  std::printf("host backend: %d-thread blocks, %d barriers per launch, %.1f s per row\n", threads, barriers, seconds);
  std::printf("%-34s %14s %20s %14s\n", "configuration", "launches/s", "barrier crossings/s", "vs plain loop");

  // The fixed cost of a launch: the same block with no barriers (fiber start and the arithmetic).
  {
    std::vector<float> out(threads);
    const double launches = rate(seconds, [&] { k.barrier_loop(out.data(), 1, threads, 0); });
    std::printf("%-34s %14.0f %20s %14s  (%.0f us per launch)\n", "1 block, no barriers", launches, "-", "-",
                1e6 / launches);
  }

  // The plain loop: the kernel's arithmetic for one block, no threads, no barriers.
  const double plain = rate(seconds, [&] {
    volatile float sink = stk::expected_barrier_loop(1, threads, barriers)[0];
    (void)sink;
  });

  struct Row {
    const char* name;
    int blocks, workers;
    sh::Schedule schedule;
  };
  const Row rows[] = {{"1 block, 1 worker, ordered", 1, 1, sh::Schedule::kOrdered},
                      {"1 block, 1 worker, shuffled", 1, 1, sh::Schedule::kShuffled},
                      {"8 blocks, 1 worker, ordered", 8, 1, sh::Schedule::kOrdered},
                      {"8 blocks, 2 workers, ordered", 8, 2, sh::Schedule::kOrdered}};
  for (const Row& r : rows) {
    sh::Options o;
    o.workers = r.workers;
    o.schedule = r.schedule;
    sh::ScopedOptions scope(o);
    std::vector<float> out(static_cast<size_t>(r.blocks) * threads);
    k.barrier_loop(out.data(), r.blocks, threads, barriers);
    if (out != stk::expected_barrier_loop(r.blocks, threads, barriers)) {
      std::fprintf(stderr, "host_executor_bench: %s gave a wrong result\n", r.name);
      return 1;
    }
    const double launches = rate(seconds, [&] { k.barrier_loop(out.data(), r.blocks, threads, barriers); });
    // A crossing is one thread passing one barrier: threads x barriers per block.
    const double crossings = launches * r.blocks * threads * barriers;
    std::printf("%-34s %14.0f %20.3g %13.0fx\n", r.name, launches, crossings, plain / (launches * r.blocks));
  }
  std::printf("plain loop (one block's arithmetic): %.0f per second\n", plain);
  return 0;
}
