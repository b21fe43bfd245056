// Benchmark: the device guard check's cost against a 1 GiB device-to-device copy (median of 20, CUDA events).
//
// For a 1 GiB DeviceGuardedBuffer with a 64 MiB output view (written by a kernel, as a launch
// would), times: a 1 GiB cudaMemcpy device to device, arm(), check() with no stray write and with
// one stray byte, each with the exact comparison and with the checksum fast path. Prints a table of
// median milliseconds, the ratio to the copy, and the bytes each moves per second. Exits 77 with
// "skipped: no GPU" without a usable GPU. Not a ctest: run build/cuda/benchmarks/guard_check_bench.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/backend/cuda_guarded_buffer.h"
#include "core/backend/cuda_runtime.h"
#include "tests/support/gpu_test.h"

namespace {

using namespace mlacheck;
using namespace mlacheck::cuda;

constexpr int kRepetitions = 20;
constexpr int64_t kGiB = int64_t(1) << 30;
constexpr int64_t kOutputBytes = int64_t(64) << 20;
constexpr int64_t kOutputOffset = int64_t(256) << 20;

__global__ void write_output(float* out, int64_t n, float value) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = value;
  }
}

// Median milliseconds of kRepetitions runs of op on stream s, each timed by its own events.
float median_ms(Stream& s, const std::function<void()>& op) {
  op();  // warm-up: first-touch costs and one-time uploads are not what is measured
  std::vector<float> ms;
  Event start, stop;
  for (int i = 0; i < kRepetitions; ++i) {
    start.record(s);
    op();
    stop.record(s);
    stop.synchronize();
    ms.push_back(Event::elapsed_ms(start, stop));
  }
  std::sort(ms.begin(), ms.end());
  return (ms[kRepetitions / 2 - 1] + ms[kRepetitions / 2]) / 2;
}

}  // namespace

int main() {
  const DeviceInfo device = gpu_test::require_gpu();
  try {
    Stream s;
    DeviceGuardedBuffer buf("bench", kGiB);
    const View out = View::contiguous(DType::kF32, {kOutputBytes / 4}, kOutputOffset);
    buf.declare_output("out", out);
    DeviceAllocation src(kGiB), dst(kGiB);
    memset_device(src.get(), 1, kGiB);
    float* out_ptr = reinterpret_cast<float*>(buf.data() + kOutputOffset);
    auto launch = [&] {
      write_output<<<device.sm_count * 8, 256, 0, s.get()>>>(out_ptr, kOutputBytes / 4, 1.5f);
      check_launch("write_output");
    };

    const float copy = median_ms(s, [&] {
      check(cudaMemcpyAsync(dst.get(), src.get(), kGiB, cudaMemcpyDeviceToDevice, s.get()), "cudaMemcpyAsync");
    });
    struct Row {
      std::string what;
      float ms;
      double bytes;  // bytes read and written by the device work
    };
    std::vector<Row> rows;
    rows.push_back({"1 GiB cudaMemcpy device to device", copy, 2.0 * kGiB});
    const double total = static_cast<double>(kGiB + 2 * buf.red_zone());
    for (bool checksum : {false, true}) {
      buf.set_checksum_fast_path(checksum);
      const std::string mode = checksum ? " [checksum]" : "";
      // Device bytes: the snapshot copy (and the checksum's mask reads) and the poison written.
      rows.push_back({"arm()" + mode, median_ms(s, [&] { buf.arm(s.get()); }),
                      (checksum ? 2.125 : 2.0) * total + kOutputBytes});
      buf.arm(s.get());
      launch();
      // The comparison reads storage and snapshot, and the mask only where they differ (the
      // output); the checksum reads storage and mask.
      rows.push_back({"check(), no stray write" + mode, median_ms(s, [&] { (void)buf.check(s.get()); }),
                      checksum ? 1.125 * total : 2.0 * total + kOutputBytes / 8.0});
      // A new place each mode: the last mode's stray byte is in this arm()'s snapshot.
      const int64_t stray_at = kGiB - 5 - (checksum ? 1 : 0);
      check(cudaMemsetAsync(buf.data() + stray_at, 0x5A, 1, s.get()), "stray byte");
      GuardReport r;
      rows.push_back({"check(), one stray byte" + mode, median_ms(s, [&] { r = buf.check(s.get()); }),
                      (checksum ? 1.125 * total : 0.0) + 2.0 * total + kOutputBytes / 8.0});
      if (r.stray_bytes != 1 || r.first.offset != stray_at) {
        std::printf("FAIL: the stray byte was not found: %s\n", r.describe().c_str());
        return 1;
      }
    }
    std::printf("guard check on %s (%d SMs): 1 GiB buffer, 64 MiB output view, median of %d, device memory held %.2f GiB\n",
                device.name.c_str(), device.sm_count, kRepetitions, buf.device_bytes() / double(kGiB));
    std::printf("  %-44s %10s %10s %10s\n", "operation", "ms", "x copy", "GB/s");
    for (const Row& row : rows) {
      std::printf("  %-44s %10.3f %10.2f %10.0f\n", row.what.c_str(), row.ms, row.ms / copy, row.bytes / (row.ms * 1e6));
    }
    std::printf("  (GB/s: bytes the device reads and writes per second; arm() poisons the output on the device)\n");
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  return 0;
}
