// GPU test of core/backend/cuda_reserved_buffer.h: an 8 GiB reserved buffer backed in two granules,
// read by a kernel past byte 2^32, a stray write in a backed granule reported as on the host, and a
// read of an unbacked byte (where an offset wrapped to 32 bits lands) a sticky fault, and a writable
// one's output view poisoned, written and its neighbour guarded.
//
// Plain main, one line per check; exits 0 on pass, 1 on a failure, 77 ("skipped: no GPU") when no
// GPU is usable. The fault runs first, in a child, before this process touches CUDA.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/backend/cuda_reserved_buffer.h"
#include "core/backend/cuda_runtime.h"
#include "core/backend/isolate.h"
#include "core/error.h"
#include "tests/support/gpu_test.h"

namespace {

using namespace mlacheck;

constexpr int64_t kGiB = int64_t{1} << 30;
gpu_test::Tally tally;

// out[0] = data[offset]: one thread, the offset computed on the host (any 64-bit value).
__global__ void read_byte(const uint8_t* data, int64_t offset, uint8_t* out) { *out = data[offset]; }
__global__ void write_byte(uint8_t* data, int64_t offset, uint8_t value) { data[offset] = value; }

uint8_t device_read(const uint8_t* data, int64_t offset) {
  uint8_t* out = nullptr;
  cuda::check(cudaMalloc(&out, 1), "cudaMalloc");
  read_byte<<<1, 1>>>(data, offset, out);
  uint8_t v = 0;
  const cudaError_t e = cudaMemcpy(&v, out, 1, cudaMemcpyDeviceToHost);
  cudaFree(out);
  cuda::check(e, "read_byte");
  return v;
}

}  // namespace

int main() {
  // A read 2 GiB before the allocation, in its reserved margin: the device faults.
  IsolationOptions opts;
  opts.timeout_seconds = 60;
  opts.is_sticky = cuda::is_sticky_fault;
  const IsolatedOutcome fault = run_isolated(
      []() -> std::string {
        if (!cuda::probe_device().usable) return "no GPU";
        DeviceReservedBuffer kv("kv", 3 * kGiB, {{2 * kGiB, 2 * kGiB + 64}});
        device_read(kv.data(), static_cast<int32_t>(static_cast<uint32_t>(2 * kGiB + 8)));  // wrapped: -2 GiB + 8
        return "the read returned";
      },
      opts);
  gpu_test::require_gpu();
  tally.report(fault.kind == IsolatedOutcome::kStickyFault,
               "a read where an offset wrapped to 32 bits lands is a sticky fault (" +
                   std::string(isolated_outcome_name(fault.kind)) + ": " + fault.message + ")");

  const int64_t far = 5 * kGiB + 12345;
  DeviceReservedBuffer kv("kv", 8 * kGiB, {{far, far + 100}, {16, 32}});
  tally.report(kv.granule() > 0 && kv.backed() != nullptr && kv.backed()->size() == 3,
               "8 GiB backed in two granules (" + std::to_string(kv.granule()) + " bytes each) plus the red zones' " +
                   std::to_string(kv.backed() ? kv.backed()->size() : 0) + " spans");
  std::vector<uint8_t> bytes(100);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(7 * i + 1);
  kv.write(far, bytes.data(), 100);
  std::vector<uint8_t> back(100);
  kv.read(far, back.data(), 100);
  tally.report(back == bytes, "bytes written past 2^32 read back");
  tally.report(device_read(kv.data(), far + 10) == bytes[10], "a kernel reads byte 5 GiB + 12355");
  bool refused = false;
  try {
    kv.write(3 * kGiB, bytes.data(), 1);
  } catch (const Error&) {
    refused = true;
  }
  tally.report(refused, "a host write to an unbacked byte is refused");

  kv.arm();
  GuardReport r = kv.check();
  tally.report(r.ok(), "armed and checked with nothing written: ok (" + r.describe() + ")");
  write_byte<<<1, 1>>>(kv.data(), far + 200, 0x5A);  // backed (the same granule), not the launch's to write
  r = kv.check();
  tally.report(!r.ok() && r.stray_bytes == 1 && r.first.offset == far + 200,
               "a stray write in a backed granule: " + r.describe());

  // Writable: an output view past 2^32 is poisoned by arm() and may be written; the byte after it
  // may not.
  DeviceReservedBuffer out("cache", 6 * kGiB, {{far, far + 600}}, GuardedMemory::kDefaultRedZone, /*writable=*/true);
  out.declare_output("slot scale", View::contiguous(DType::kF32, {1}, far + 520));
  out.arm();
  float scale = 0;
  out.read(far + 520, &scale, 4);
  tally.report(scale != scale, "arm() poisons an output view past 2^32 (NaN: " + std::to_string(scale) + ")");
  for (int b = 0; b < 4; ++b) write_byte<<<1, 1>>>(out.data(), far + 520 + b, static_cast<uint8_t>(0x40 - b));
  r = out.check();
  tally.report(r.ok(), "the view written by a kernel: ok (" + r.describe() + ")");
  write_byte<<<1, 1>>>(out.data(), far + 524, 0x11);
  r = out.check();
  tally.report(!r.ok() && r.stray_bytes == 1 && r.first.offset == far + 524 && r.first.nearest_view == "slot scale",
               "a write one past the output view: " + r.describe());
  // Armed again with the same outputs (the mask and a dense view's poison are kept from the last
  // arm): the written view is poisoned again, and a gapped view's gap keeps the byte it holds.
  out.clear_outputs();
  out.declare_output("slot scale", View::contiguous(DType::kF32, {1}, far + 520));
  out.declare_output("gapped", View(DType::kI32, {2}, {2}, far + 400));  // elements at +400 and +408
  const uint8_t gap_byte = 0x3C;
  out.write(far + 404, &gap_byte, 1);
  out.arm();
  for (int k = 0; k < 2; ++k) {
    for (int b = 0; b < 4; ++b) {
      write_byte<<<1, 1>>>(out.data(), far + 520 + b, 0x41);
      write_byte<<<1, 1>>>(out.data(), far + 400 + b, 0x42);
    }
    r = out.check();
    out.arm();
    uint8_t gap = 0;
    int32_t element = 0;
    out.read(far + 520, &scale, 4);
    out.read(far + 404, &gap, 1);
    out.read(far + 400, &element, 4);
    tally.report(r.ok() && scale != scale && gap == gap_byte && element == static_cast<int32_t>(0xA5A5A5A5u),
                 "re-arm " + std::to_string(k + 1) + " with the same outputs: both poisoned again, the gap kept (" +
                     r.describe() + ")");
  }
  return tally.finish("cuda reserved buffer");
}
