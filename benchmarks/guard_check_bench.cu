// Benchmark: the device guard check's cost against a 1 GiB device-to-device copy (median of 20, CUDA events).
//
// For a 1 GiB DeviceGuardedBuffer with a 64 MiB output view (written by a kernel, as a launch
// would), times: a 1 GiB cudaMemcpy device to device, arm(), check() with no stray write and with
// one stray byte, each with the exact comparison and with the checksum fast path. Prints a table of
// median milliseconds, the ratio to the copy, and the bytes each moves per second. Then, by size
// (64 KiB to 64 MiB, a quarter of each an output view), the queued arm and the queued check of
// one buffer (arm_all / queue_check_all on a stream, as the property suite runs them) beside an
// empty kernel, in microseconds of device time: what is fixed and what grows with the bytes. Last,
// the host time of each step of staging one small buffer as a fuzzed case does.
// Exits 77 with "skipped: no GPU" without a usable GPU. Not a ctest: run
// build/cuda/benchmarks/guard_check_bench.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/cuda_guarded_buffer.h"
#include "core/backend/cuda_reserved_buffer.h"
#include "core/backend/cuda_runtime.h"
#include "core/error.h"
#include "tests/support/gpu_test.h"

namespace {

using namespace mlacheck;
using namespace mlacheck::cuda;

constexpr int kRepetitions = 20;
constexpr int64_t kGiB = int64_t(1) << 30;
constexpr int64_t kOutputBytes = int64_t(64) << 20;
constexpr int64_t kOutputOffset = int64_t(256) << 20;

__global__ void empty_kernel() {}

__global__ void write_output(float* out, int64_t n, float value) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = value;
  }
}

// Median milliseconds of kRepetitions runs of op on stream s, each timed by its own events; before,
// if given, runs ahead of each, untimed.
float median_ms(Stream& s, const std::function<void()>& op, const std::function<void()>& before = nullptr) {
  if (before) before();
  op();  // warm-up: first-touch costs and one-time uploads are not what is measured
  std::vector<float> ms;
  Event start, stop;
  for (int i = 0; i < kRepetitions; ++i) {
    if (before) {
      before();
      s.synchronize();
    }
    start.record(s);
    op();
    stop.record(s);
    stop.synchronize();
    ms.push_back(Event::elapsed_ms(start, stop));
  }
  std::sort(ms.begin(), ms.end());
  return (ms[kRepetitions / 2 - 1] + ms[kRepetitions / 2]) / 2;
}

// Staging one small buffer the way a fuzzed case stages each of its buffers (harness/testbed.cpp):
// construct, write the host bytes, declare an output and queue the arm, queue the check, wait and
// take the reports, read the bytes back, destroy. Host clock, median of kStagingRounds, per step:
// what a small case costs in round trips, whatever its kernel. Each size twice: the first fill and
// the write waited for (the constructor without a stream, write()), and queued on the stream
// (with a stream, queue_write(): what Device::allocate and the testbed do). Then reserved memory.
constexpr int kStagingRounds = 200;
void staging_steps(Stream& s) {
  using Clock = std::chrono::steady_clock;
  const char* steps[] = {"construct", "write", "arm (queued)", "check, wait, reports", "read", "destroy"};
  constexpr int kSteps = 6;
  for (const auto& [bytes, queued] : {std::pair<int64_t, bool>{int64_t(4) << 10, false}, {int64_t(4) << 10, true},
                                      {int64_t(256) << 10, false}, {int64_t(256) << 10, true}}) {
    std::vector<std::vector<double>> us(kSteps);
    std::vector<double> whole;
    std::vector<uint8_t> host(static_cast<size_t>(bytes), 0x3C);
    for (int round = 0; round < kStagingRounds + 1; ++round) {
      Clock::time_point t[kSteps + 1];
      t[0] = Clock::now();
      auto b = queued ? std::make_unique<DeviceGuardedBuffer>("case", bytes, GuardedMemory::kDefaultRedZone, s.get())
                      : std::make_unique<DeviceGuardedBuffer>("case", bytes);
      t[1] = Clock::now();
      if (queued) {
        b->queue_write(0, host.data(), bytes, s.get());
      } else {
        b->write(0, host.data(), bytes);
      }
      t[2] = Clock::now();
      b->declare_output("out", View::contiguous(DType::kF32, {bytes / 16}, bytes / 2));
      std::vector<GuardedMemory*> one{b.get()};
      arm_all(one, s.get());
      t[3] = Clock::now();
      QueuedChecks q = queue_check_all(one, s.get());
      s.synchronize();
      const GuardReport r = q.reports()[0];
      t[4] = Clock::now();
      b->read(0, host.data(), bytes);
      t[5] = Clock::now();
      b.reset();
      t[6] = Clock::now();
      // The arm poisoned the output view; nothing wrote it, so the check is clean.
      if (!r.ok()) throw Error("staging: a clean buffer reported a stray write: " + r.describe());
      if (round == 0) continue;  // warm-up: the allocation cache and the slot pool fill
      for (int k = 0; k < kSteps; ++k) us[k].push_back(std::chrono::duration<double, std::micro>(t[k + 1] - t[k]).count());
      whole.push_back(std::chrono::duration<double, std::micro>(t[kSteps] - t[0]).count());
    }
    const auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    };
    std::printf("staging one buffer of %lld bytes, %s, host clock, median of %d, microseconds\n",
                static_cast<long long>(bytes),
                queued ? "first fill and write queued on the stream (as Device::allocate and the testbed do)"
                       : "first fill and write each waited for", kStagingRounds);
    for (int k = 0; k < kSteps; ++k) std::printf("  %-24s %8.1f\n", steps[k], median(us[k]));
    std::printf("  %-24s %8.1f\n", "all of it", median(whole));
  }
}

// Staging reserved memory the way a far-rows case does (properties/topk_properties.cpp): a buffer of
// 12 GiB whose `rows` rows, 1.5 GiB apart, are backed (each its own granule), steps timed as above.
void reserved_steps(int rows) {
  using Clock = std::chrono::steady_clock;
  const char* steps[] = {"construct", "write", "arm", "check", "read", "destroy"};
  constexpr int kSteps = 6, kRounds = 40;
  const int64_t bytes = int64_t(12) << 30, stride = int64_t(3) << 29, row = 4096;
  std::vector<ByteSpan> backed;
  for (int r = 0; r < rows; ++r) backed.push_back({r * stride, r * stride + row});
  std::vector<uint8_t> host(static_cast<size_t>(row), 0x3C);
  std::vector<std::vector<double>> us(kSteps);
  for (int round = 0; round < kRounds + 1; ++round) {
    Clock::time_point t[kSteps + 1];
    t[0] = Clock::now();
    auto b = std::make_unique<DeviceReservedBuffer>("far", bytes, backed);
    t[1] = Clock::now();
    for (const ByteSpan& r : backed) b->write(r.begin, host.data(), row);
    t[2] = Clock::now();
    b->arm();
    t[3] = Clock::now();
    const GuardReport rep = b->check();
    t[4] = Clock::now();
    for (const ByteSpan& r : backed) b->read(r.begin, host.data(), row);
    t[5] = Clock::now();
    b.reset();
    t[6] = Clock::now();
    if (!rep.ok()) throw Error("reserved staging: a clean buffer reported a stray write: " + rep.describe());
    if (round == 0) continue;
    for (int k = 0; k < kSteps; ++k) us[k].push_back(std::chrono::duration<double, std::micro>(t[k + 1] - t[k]).count());
  }
  std::printf("staging a 12 GiB reserved buffer with %d far rows of 4 KiB backed, host clock, median of %d, microseconds\n",
              rows, kRounds);
  double all = 0;
  for (int k = 0; k < kSteps; ++k) {
    std::vector<double> v = us[k];
    std::sort(v.begin(), v.end());
    const double m = (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    all += m;
    std::printf("  %-24s %8.1f\n", steps[k], m);
  }
  std::printf("  %-24s %8.1f\n", "sum of the medians", all);
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
      // Device bytes: the snapshot copy and the poison written; with the checksum, after a clean
      // check (as in a run of launches), the storage read once and the poison written.
      if (checksum) {
        buf.arm(s.get());  // the first arm on the path copies the snapshot
        rows.push_back({"arm() after a clean check" + mode, median_ms(s, [&] { buf.arm(s.get()); }, [&] {
                          launch();
                          (void)buf.check(s.get());
                        }),
                        1.125 * total + kOutputBytes});
      } else {
        rows.push_back({"arm()" + mode, median_ms(s, [&] { buf.arm(s.get()); }), 2.0 * total + kOutputBytes});
      }
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

    // By size: device time of the queued arm and check of one buffer, beside an empty kernel.
    const float empty = median_ms(s, [&] {
      empty_kernel<<<1, 32, 0, s.get()>>>();
      check_launch("empty_kernel");
    });
    std::printf("queued guards by buffer size, median of %d, microseconds of device time (an empty kernel: %.1f)\n",
                kRepetitions, empty * 1000);
    std::printf("  %10s %10s %10s %10s %10s\n", "bytes", "arm us", "check us", "arm GB/s", "check GB/s");
    for (int64_t bytes : {int64_t(64) << 10, int64_t(1) << 20, int64_t(5) << 19, int64_t(16) << 20, int64_t(64) << 20}) {
      DeviceGuardedBuffer b("sweep", bytes);
      b.declare_output("out", View::contiguous(DType::kF32, {bytes / 16}, bytes / 2));
      std::vector<GuardedMemory*> one{&b};
      const float arm = median_ms(s, [&] { arm_all(one, s.get()); });
      arm_all(one, s.get());
      const float chk = median_ms(s, [&] {
        QueuedChecks q = queue_check_all(one, s.get());
        // The events bracket the kernel: reports() waits for the stream after the stop event.
        (void)q;
      });
      // queue_check_all without reports(): collect the last one so the buffer's state is clean.
      QueuedChecks last = queue_check_all(one, s.get());
      s.synchronize();
      if (!last.reports()[0].ok()) {
        std::printf("FAIL: a clean buffer of %lld bytes reported a stray write\n", static_cast<long long>(bytes));
        return 1;
      }
      std::printf("  %10lld %10.1f %10.1f %10.0f %10.0f\n", static_cast<long long>(bytes), arm * 1000, chk * 1000,
                  2.0 * bytes / (arm * 1e6), 2.0 * bytes / (chk * 1e6));
    }
    // Four buffers in one batch, as top-k's launch has them: 2 MiB of logits (input), 512 KiB of
    // indices (output), two of 256 bytes.
    {
      DeviceGuardedBuffer logits("logits", int64_t(2) << 20), out("out", int64_t(512) << 10), lens("lens", 256),
          rows("rows", 256);
      out.declare_output("out", View::contiguous(DType::kI32, {(int64_t(512) << 10) / 4}));
      std::vector<GuardedMemory*> four{&logits, &out, &lens, &rows};
      const float arm = median_ms(s, [&] { arm_all(four, s.get()); });
      arm_all(four, s.get());
      const float chk = median_ms(s, [&] { (void)queue_check_all(four, s.get()); });
      QueuedChecks last = queue_check_all(four, s.get());
      s.synchronize();
      for (const GuardReport& r : last.reports()) {
        if (!r.ok()) {
          std::printf("FAIL: top-k's clean buffers reported a stray write: %s\n", r.describe().c_str());
          return 1;
        }
      }
      std::printf("  %10s %10.1f %10.1f   (top-k's four buffers: 2 MiB, 512 KiB, 256 B, 256 B)\n", "2.5 MiB", arm * 1000,
                  chk * 1000);
    }
    staging_steps(s);
    reserved_steps(1);
    reserved_steps(8);
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  return 0;
}
