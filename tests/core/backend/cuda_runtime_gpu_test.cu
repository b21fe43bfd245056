// GPU test of core/backend/cuda_runtime.h with isolate.h: sticky faults in a child, launch errors, streams, events, graphs, copies.
//
// Plain main, one line per check; exits 0 on pass, 1 on a failure, 77 ("skipped: no GPU") when
// probe_device() finds no usable GPU. The sticky-fault check runs first, in a child, before this
// process makes any CUDA call: a CUDA context does not survive fork.
#include <cuda_runtime.h>
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/backend/cuda_runtime.h"
#include "tests/support/gpu_spin.cuh"
#include "tests/support/gpu_test.h"
#include "core/backend/isolate.h"

namespace {

using namespace mlacheck;
using namespace mlacheck::cuda;

gpu_test::Tally tally;

void report(bool ok, const std::string& what) { tally.report(ok, what); }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

__global__ void write_to_address(int* p) { *p = 1; }

__global__ void add_one(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.0f;
}
__global__ void times_two(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * 2.0f;
}
__global__ void minus_three(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] - 3.0f;
}
__global__ void fill_int(int* p, int value, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = value + i;
}


// A kernel launch and a check of what it wrote, to show the context still works.
bool context_still_works() {
  const int n = 1000;
  DeviceAllocation p(n * sizeof(int));
  fill_int<<<(n + 255) / 256, 256>>>(p.as<int>(), 7, n);
  check_launch("fill_int");
  std::vector<int> h(n);
  copy_to_host(h.data(), p.get(), n * sizeof(int));
  for (int i = 0; i < n; ++i) {
    if (h[i] != 7 + i) return false;
  }
  return true;
}

}  // namespace

int main() {
  char dir_template[] = "/tmp/mlacheck_cuda_cases_XXXXXX";
  const char* dir = ::mkdtemp(dir_template);
  if (dir == nullptr) {
    std::printf("  FAIL  mkdtemp\n");
    return 1;
  }
  const std::string case_dir = dir;
  auto cleanup = [&] { std::system(("rm -rf '" + case_dir + "'").c_str()); };

  // 1. A kernel that writes to an illegal address, in a child. No CUDA call in this process yet.
  IsolationOptions opts;
  opts.save_dir = case_dir;
  opts.case_name = "illegal_address";
  opts.case_text = "kernel write_to_address\naddress 0x8\n";
  opts.is_sticky = is_sticky_fault;
  opts.timeout_seconds = 120;
  const IsolatedOutcome fault = run_isolated(
      []() -> std::string {
        const DeviceInfo d = probe_device();
        if (!d.usable) return "no GPU in the child: " + d.why_not;
        Stream s;
        write_to_address<<<1, 1, 0, s.get()>>>(reinterpret_cast<int*>(0x8));
        check_launch("write_to_address");
        s.synchronize();  // the fault surfaces here, as a StickyFault
        return "the write to address 0x8 was not reported";
      },
      opts);

  // 2. Now this process may use CUDA.
  const DeviceInfo device = probe_device();
  if (!device.usable) {
    std::printf("skipped: no GPU (%s)\n", device.why_not.c_str());
    cleanup();
    return 77;
  }
  std::printf("cuda runtime (core/backend/cuda_runtime.h, isolate.h) on %s, %d SMs, sm_%d%d, %.1f GiB\n", device.name.c_str(), device.sm_count, device.cc_major,
              device.cc_minor, device.global_bytes / 1073741824.0);

  report(fault.kind == IsolatedOutcome::kStickyFault && contains(fault.message, "cudaErrorIllegalAddress"),
         std::string("illegal address in a child is a sticky fault: ") + isolated_outcome_name(fault.kind) + ": " +
             fault.message);
  report(fault.saved_case_path == case_dir + "/illegal_address.case" &&
             read_file(fault.saved_case_path) == opts.case_text,
         "the faulting case is saved: " + fault.saved_case_path);

  // 3. A launch error is recoverable: 2048 threads per block is over every device's limit.
  {
    DeviceAllocation x(4096 * sizeof(float)), y(4096 * sizeof(float));
    add_one<<<2, 2048>>>(x.as<float>(), y.as<float>(), 4096);
    std::string got = "no error";
    try {
      check_launch("add_one");
    } catch (const StickyFault& e) {
      got = std::string("sticky: ") + e.what();
    } catch (const LaunchError& e) {
      // CUDA 13 says cudaErrorInvalidValue here; older runtimes cudaErrorInvalidConfiguration.
      got = "launch error";
      report(contains(e.what(), "launch of 'add_one': cudaError") && !is_sticky(e.code()),
             std::string("message: ") + e.what());
    }
    report(got == "launch error", "2048 threads per block is a LaunchError, not sticky (" + got + ")");
    report(context_still_works(), "after the launch error the context still runs kernels");
    // The error was cleared: the next check_launch does not blame another kernel for it.
    bool clean = true;
    try {
      fill_int<<<1, 32>>>(y.as<int>(), 0, 32);
      check_launch("fill_int");
    } catch (const Error&) {
      clean = false;
    }
    report(clean, "the next launch's check is not blamed for the earlier error");
  }

  // 4. Copies and fills.
  {
    const size_t n = 1 << 20;
    DeviceAllocation a(n);
    memset_device(a.get(), 0xAB, n);
    std::vector<uint8_t> h(n, 0);
    copy_to_host(h.data(), a.get(), n);
    bool all = true;
    for (uint8_t b : h) all &= b == 0xAB;
    std::vector<uint8_t> in(n);
    for (size_t i = 0; i < n; ++i) in[i] = static_cast<uint8_t>(i * 31 + 7);
    copy_to_device(a.get(), in.data(), n);
    copy_to_host(h.data(), a.get(), n);
    report(all && h == in, "memset_device, copy_to_device and copy_to_host round-trip 1 MiB");
    // A copy in, then at once a kernel on a non-blocking stream that reads the copy's last bytes
    // (the ones a copy still in flight would land last): it must read the new bytes.
    {
      const int m = 16 << 20, k = 1 << 16;
      std::vector<float> hx(m), hy(k);
      DeviceAllocation x(m * sizeof(float)), y(k * sizeof(float));
      Stream s;
      bool ordered = true;
      for (int round = 0; round < 8; ++round) {
        for (int i = 0; i < m; ++i) hx[i] = static_cast<float>((i + round * 7919) % 4096);
        copy_to_device(x.get(), hx.data(), m * sizeof(float));
        add_one<<<(k + 255) / 256, 256, 0, s.get()>>>(x.as<float>() + (m - k), y.as<float>(), k);
        check_launch("add_one");
        s.synchronize();
        copy_to_host(hy.data(), y.get(), k * sizeof(float));
        for (int i = 0; i < k; ++i) ordered &= hy[i] == hx[m - k + i] + 1.0f;
      }
      report(ordered, "copy_to_device is complete on return: a kernel on another stream reads the last bytes of 64 MiB");
    }
    DeviceAllocation moved = std::move(a);
    report(a.get() == nullptr && a.bytes() == 0 && moved.get() != nullptr && moved.bytes() == n,
           "a moved-from allocation is empty, the new owner holds the bytes");
    {
      // Moved over, an allocation gives its own block back (to the cache, when it is on) and takes
      // the other's; page-locked host bytes move the same way.
      const bool cached = !(std::getenv("MLACHECK_CUDA_CACHE") && std::string(std::getenv("MLACHECK_CUDA_CACHE")) == "0");
      DeviceAllocation x(5000), y(6000);
      void* const y_block = y.get();
      const size_t cached_before = allocation_cache_stats().device_cached_bytes;
      x = std::move(y);
      const size_t given_back = allocation_cache_stats().device_cached_bytes - cached_before;
      PinnedHostAllocation p(100), q;
      uint8_t* const p_bytes = p.data();
      q = std::move(p);
      char line[192];
      std::snprintf(line, sizeof line,
                    "move assignment: the target's old block given back (%zu bytes to the cache), the source's "
                    "taken, the source empty; pinned bytes too",
                    given_back);
      report(x.get() == y_block && x.bytes() == 6000 && y.get() == nullptr && y.bytes() == 0 &&
                 given_back == (cached ? allocation_size_class(5000) : 0) && q.data() == p_bytes && q.bytes() == 100 &&
                 p.data() == nullptr && p.bytes() == 0,
             line);
    }
    bool refused = false;
    try {
      DeviceAllocation huge(size_t(1) << 50);
    } catch (const LaunchError& e) {
      refused = e.code() == cudaErrorMemoryAllocation;
    }
    report(refused && context_still_works(), "a 1 PiB cudaMalloc is a LaunchError and the context lives on");
  }

  // 4b. The allocation cache: a freed block of the same size class is handed out again, holding
  // the requested size; a kernel still running on a non-blocking stream when its output's owner is
  // destroyed finishes before the block is reused (the release waits, as cudaFree does).
  {
    report(allocation_size_class(1) == 512 && allocation_size_class(513) == 1024 &&
               allocation_size_class(size_t(64) << 20) == (size_t(64) << 20) &&
               allocation_size_class((size_t(64) << 20) + 1) == (size_t(66) << 20),
           "size classes: powers of two from 512 B to 64 MiB, then 2 MiB steps");
    void* first = nullptr;
    {
      DeviceAllocation a(3000);
      first = a.get();
    }
    const AllocationCacheStats before = allocation_cache_stats();
    DeviceAllocation b(4000);  // same class (4 KiB)
    const AllocationCacheStats after = allocation_cache_stats();
    const char* cache_env = std::getenv("MLACHECK_CUDA_CACHE");
    char line[192];
    if (cache_env && std::string(cache_env) == "0") {
      std::snprintf(line, sizeof line, "MLACHECK_CUDA_CACHE=0: a 4000-byte request comes from cudaMalloc (cache hits +%zu)",
                    after.device_hits - before.device_hits);
      report(b.bytes() == 4000 && after.device_hits == before.device_hits, line);
    } else {
      std::snprintf(line, sizeof line,
                    "a freed 3000-byte block is reused for a 4000-byte request, which reports 4000 bytes "
                    "(same block %d, bytes %zu, cache hits +%zu)",
                    b.get() == first, b.bytes(), after.device_hits - before.device_hits);
      report(b.get() == first && b.bytes() == 4000 && after.device_hits == before.device_hits + 1, line);
    }
    const int n = 1 << 16;
    bool clean = true;
    for (int round = 0; round < 4; ++round) {
      Stream s;
      {
        DeviceAllocation out(n * sizeof(int));
        gpu_test::spin<<<1, 1, 0, s.get()>>>(2000000ull);  // 2 ms, then the fill below on the same stream
        fill_int<<<(n + 255) / 256, 256, 0, s.get()>>>(out.as<int>(), 7, n);
        check_launch("fill_int");
      }  // released while the stream still runs
      DeviceAllocation reused(n * sizeof(int));
      memset_device(reused.get(), 0, n * sizeof(int));
      std::vector<int> h(n, -1);
      copy_to_host(h.data(), reused.get(), n * sizeof(int));
      for (int v : h) clean &= v == 0;
      s.synchronize();
    }
    report(clean, "a block released while a kernel still writes it is reused only after the kernel is done");
  }

  // 5. Streams and events: time a kernel that spins for 2 ms.
  {
    Stream s;
    Event start, stop;
    start.record(s);
    gpu_test::spin<<<1, 1, 0, s.get()>>>(2000000ull);
    check_launch("spin");
    stop.record(s);
    stop.synchronize();
    const float ms = Event::elapsed_ms(start, stop);
    char line[128];
    std::snprintf(line, sizeof line, "events time a 2 ms spin on a stream: %.3f ms", ms);
    report(ms >= 1.9f && ms < 50.0f, line);
    s.synchronize();
  }

  // 6. Graph capture of 3 launches and replay after the input changes.
  {
    const int n = 1 << 20;
    const size_t bytes = n * sizeof(float);
    DeviceAllocation x(bytes), y(bytes), z(bytes), w(bytes);
    std::vector<float> hx(n), hw(n);
    for (int i = 0; i < n; ++i) hx[i] = static_cast<float>(i % 1000);
    copy_to_device(x.get(), hx.data(), bytes);
    memset_device(w.get(), 0, bytes);
    Stream s;
    const int blocks = (n + 255) / 256;
    Graph g = Graph::capture(s, [&](cudaStream_t st) {
      add_one<<<blocks, 256, 0, st>>>(x.as<float>(), y.as<float>(), n);
      check_launch("add_one");
      times_two<<<blocks, 256, 0, st>>>(y.as<float>(), z.as<float>(), n);
      check_launch("times_two");
      minus_three<<<blocks, 256, 0, st>>>(z.as<float>(), w.as<float>(), n);
      check_launch("minus_three");
    });
    report(g.node_count() == 3, "capture of 3 launches holds 3 nodes (" + std::to_string(g.node_count()) + ")");
    copy_to_host(hw.data(), w.get(), bytes);
    bool untouched = true;
    for (float v : hw) untouched &= v == 0.0f;
    report(untouched, "capturing runs nothing");
    auto follows = [&](const std::vector<float>& in) {
      copy_to_host(hw.data(), w.get(), bytes);
      for (int i = 0; i < n; ++i) {
        if (hw[i] != 2.0f * (in[i] + 1.0f) - 3.0f) return false;
      }
      return true;
    };
    g.replay(s);
    s.synchronize();
    report(follows(hx), "replay computes 2(x+1)-3");
    for (int i = 0; i < n; ++i) hx[i] = static_cast<float>(3 * (i % 777) + 7);
    copy_to_device(x.get(), hx.data(), bytes);
    g.replay(s);
    g.replay(s);
    s.synchronize();
    report(follows(hx), "replay after new inputs follows the new inputs");

    // A synchronizing call inside the body: reported, and the stream is usable afterwards.
    std::string msg = "no error";
    try {
      Graph::capture(s, [&](cudaStream_t st) {
        add_one<<<blocks, 256, 0, st>>>(x.as<float>(), y.as<float>(), n);
        check(cudaStreamSynchronize(st), "cudaStreamSynchronize inside the body");
      });
    } catch (const LaunchError& e) {
      msg = e.what();
    }
    report(contains(msg, "graph capture: the body failed: cudaStreamSynchronize inside the body") &&
               contains(msg, "not allowed during capture"),
           "a synchronizing call in the body is a clear LaunchError: " + msg);
    msg = "no error";
    try {
      Graph::capture(s, [&](cudaStream_t st) {
        add_one<<<blocks, 256, 0, st>>>(x.as<float>(), y.as<float>(), n);
        (void)cudaStreamSynchronize(st);  // error ignored by the body
        times_two<<<blocks, 256, 0, st>>>(y.as<float>(), z.as<float>(), n);
      });
    } catch (const LaunchError& e) {
      msg = e.what();
    }
    report(contains(msg, "cudaErrorStreamCaptureInvalidated") || contains(msg, "cudaErrorStreamCaptureUnsupported"),
           "an ignored error in the body is still reported at the end of capture: " + msg);
    for (int i = 0; i < n; ++i) hx[i] = static_cast<float>(i % 13);
    copy_to_device(x.get(), hx.data(), bytes);
    g.replay(s);
    s.synchronize();
    const bool graph_ok = follows(hx);
    report(graph_ok && context_still_works(), std::string("after failed captures the stream and the first graph still work") +
                                                  (graph_ok ? "" : " (the graph's result is wrong)"));
  }

  cleanup();
  return tally.finish("cuda runtime");
}
