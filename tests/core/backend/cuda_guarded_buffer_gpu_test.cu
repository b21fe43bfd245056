// GPU test of core/backend/cuda_guarded_buffer.h: the device check finds each stray write and reports it exactly as the host buffer does.
//
// Mirrors tests/core/guarded_buffer_test.cpp on the device, then runs the same stray writes on a
// host GuardedBuffer and a DeviceGuardedBuffer of the same layout and compares the reports' text.
// Plain main, one line per check; exits 0 on pass, 1 on a failure, 77 ("skipped: no GPU") when
// probe_device() finds no usable GPU.
// Why one file past 500 lines: a test file per public header (docs/design.md, "Style").
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/cuda_guarded_buffer.h"
#include "core/backend/cuda_runtime.h"
#include "tests/support/gpu_spin.cuh"
#include "tests/support/gpu_test.h"
#include "core/error.h"
#include "core/guarded_buffer.h"
#include "core/poison.h"

namespace {

using namespace mlacheck;
using namespace mlacheck::cuda;

gpu_test::Tally tally;

void report(bool ok, const std::string& what) { tally.report(ok, what); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Writes value to every element of a 2-D fp32 view of the buffer at data, one thread per element:
// what a correct kernel does.
__global__ void write_view_f32(uint8_t* data, int64_t byte_offset, int rows, int cols, int64_t row_stride, float value) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<int64_t>(rows) * cols) return;
  const int64_t r = i / cols, c = i % cols;
  reinterpret_cast<float*>(data + byte_offset)[r * row_stride + c] = value;
}

// Sets data[offsets[i]] = values[i]: a kernel's stray writes (offsets may be negative, into the
// leading red zone, or past the data, into the trailing one).
__global__ void apply_writes(uint8_t* data, const int64_t* offsets, const uint8_t* values, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[offsets[i]] = values[i];
}

struct ByteWrite {
  int64_t offset;
  uint8_t value;
};

// Queues the writes on stream; with keep, the device copies of offsets and values go there (to
// outlive the queued kernel) and nothing waits; without, it waits for the kernel.
void device_writes(GuardedMemory& buf, const std::vector<ByteWrite>& w, cudaStream_t stream = nullptr,
                   std::vector<DeviceAllocation>* keep = nullptr) {
  if (w.empty()) return;
  std::vector<int64_t> offs;
  std::vector<uint8_t> vals;
  for (const ByteWrite& b : w) {
    offs.push_back(b.offset);
    vals.push_back(b.value);
  }
  DeviceAllocation d_offs(offs.size() * sizeof(int64_t)), d_vals(vals.size());
  copy_to_device(d_offs.get(), offs.data(), offs.size() * sizeof(int64_t));
  copy_to_device(d_vals.get(), vals.data(), vals.size());
  const int n = static_cast<int>(w.size());
  apply_writes<<<(n + 255) / 256, 256, 0, stream>>>(buf.data(), d_offs.as<int64_t>(), d_vals.as<uint8_t>(), n);
  check_launch("apply_writes");
  if (keep != nullptr) {
    keep->push_back(std::move(d_offs));
    keep->push_back(std::move(d_vals));
    return;
  }
  // Before the offsets and values are freed.
  check(cudaStreamSynchronize(stream), "apply_writes");
}

void host_writes(GuardedBuffer& buf, const std::vector<ByteWrite>& w) {
  for (const ByteWrite& b : w) buf.data()[b.offset] = b.value;
}

void write_view(DeviceGuardedBuffer& buf, const View& v, float value, cudaStream_t stream = nullptr) {
  const int rows = static_cast<int>(v.size(0)), cols = static_cast<int>(v.size(1));
  const int64_t n = static_cast<int64_t>(rows) * cols;
  write_view_f32<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(buf.data(), v.byte_offset(), rows, cols,
                                                                              v.stride(0), value);
  check_launch("write_view_f32");
}

void host_write_view(GuardedBuffer& buf, const View& v, float value) {
  HostTensor t = buf.tensor(v);
  v.for_each_index([&](const std::vector<int64_t>& i) { t.at<float>(i) = value; });
}

// The layout of tests/core/guarded_buffer_test.cpp: a [4, 6] fp32 output with rows 8 apart, 64
// bytes into a 512-byte allocation.
constexpr int64_t kRows = 4, kCols = 6, kStride = 8, kOffset = 64, kBytes = 512;
const View kOut = View::padded_rows(DType::kF32, {kRows, kCols}, kStride, kOffset);

struct Fixture {
  DeviceGuardedBuffer buf{"logits", kBytes};
  Fixture() {
    buf.declare_output("out", kOut);
    buf.arm();
  }
};

std::string coords_text(const std::vector<int64_t>& c) {
  std::string s = "{";
  for (size_t i = 0; i < c.size(); ++i) s += (i ? ", " : "") + std::to_string(c[i]);
  return s + "}";
}

void mirror_host_tests() {
  std::printf("the host buffer's tests, on the device:\n");
  {
    DeviceGuardedBuffer d("fresh", kBytes);
    GuardedBuffer h("fresh", kBytes);
    std::vector<uint8_t> all(kBytes + 2 * GuardedMemory::kDefaultRedZone);
    copy_to_host(all.data(), d.data() - d.red_zone(), all.size());
    const uint8_t* hs = h.data() - h.red_zone();
    report(std::memcmp(all.data(), hs, all.size()) == 0,
           "a new buffer holds the host buffer's red zones and poison, byte for byte");
    report(d.on_device() && d.device_bytes() >= 2 * static_cast<int64_t>(all.size()) + kBytes / 8,
           "on_device, and device_bytes counts storage, snapshot and mask (" + std::to_string(d.device_bytes()) + ")");
  }
  {
    Fixture f;
    write_view(f.buf, kOut, 1.0f);
    const GuardReport r = f.buf.check();
    report(r.ok(), "a kernel that writes exactly its view passes: " + r.describe());
  }
  {
    Fixture f;
    float first = 0, last = 0;
    f.buf.read(kOut.byte_offset_of({0, 0}), &first, 4);
    f.buf.read(kOut.byte_offset_of({3, 5}), &last, 4);
    report(std::isnan(first) && std::isnan(last), "arm() poisons the outputs with NaN");
  }
  {
    Fixture f;
    write_view(f.buf, kOut, 1.0f);
    const int64_t at = kOut.byte_offset_of({2, 5}) + 4;
    device_writes(f.buf, {{at, 0x00}});
    const GuardReport r = f.buf.check();
    report(!r.ok() && r.stray_bytes == 1 && r.first.region == StrayRegion::kBetweenViews && r.first.nearest_view == "out" &&
               r.first.coords == std::vector<int64_t>{2, 6} && r.first.offset == kOffset + (2 * kStride + 6) * 4 &&
               contains(r.describe(), "row 2, column 6 (past the row's 6 columns, in its padding)"),
           "one byte past row 2: " + r.describe());
  }
  {
    Fixture f;
    write_view(f.buf, kOut, 1.0f);
    const int64_t at = kOffset + kRows * kStride * 4;
    device_writes(f.buf, {{at, 0x00}, {at + 1, 0x00}, {at + 2, 0x80}, {at + 3, 0x3F}});  // 1.0f
    const GuardReport r = f.buf.check();
    report(!r.ok() && r.first.coords == std::vector<int64_t>{4, 0} &&
               contains(r.describe(), "row 4, column 0 (past the view's 4 rows)"),
           "a row past the view (vLLM #42072): " + r.describe());
  }
  {
    DeviceGuardedBuffer buf("topk_indices_buffer", 1024);
    buf.declare_output("decode_rows", View::contiguous(DType::kI32, {4, 16}));
    buf.declare_output("prefill_rows", View::contiguous(DType::kI32, {4, 16}, 512));
    buf.arm();
    device_writes(buf, {{500, 0}});
    const GuardReport r = buf.check();
    report(!r.ok() && r.first.offset == 500 && r.first.nearest_view == "prefill_rows" &&
               r.first.coords == std::vector<int64_t>{-1, 13} && contains(r.describe(), "before the view's first row"),
           "between two views, the nearer is named: coords " + coords_text(r.first.coords));
  }
  {
    Fixture f;
    write_view(f.buf, kOut, 1.0f);
    device_writes(f.buf, {{-1, static_cast<uint8_t>(~GuardedMemory::red_zone_byte(-1))},
                          {kBytes + 255, static_cast<uint8_t>(~GuardedMemory::red_zone_byte(kBytes + 255))}});
    const GuardReport r = f.buf.check();
    report(!r.ok() && r.stray_bytes == 2 && r.first.region == StrayRegion::kBeforeAllocation && r.first.offset == -1 &&
               r.last_offset == kBytes + 255 && contains(r.describe(), "leading red zone"),
           "writes into both red zones: " + r.describe());
  }
  {
    DeviceGuardedBuffer buf("out", 64);
    buf.declare_output("out", View::contiguous(DType::kF32, {16}));
    buf.arm();
    check(cudaMemset(buf.data(), 0, 68), "cudaMemset");  // one element too many
    const GuardReport r = buf.check();
    report(!r.ok() && r.first.region == StrayRegion::kAfterAllocation && r.first.offset == 64 &&
               r.first.coords == std::vector<int64_t>{16},
           "one element past a 64-byte allocation is in the trailing red zone: " + r.describe());
  }
  {
    DeviceGuardedBuffer buf("kv", 256);
    std::vector<float> two(16, 2.0f);
    buf.write(0, two.data(), 64);
    buf.declare_output("out", View::contiguous(DType::kF32, {16}, 128));
    buf.arm();
    float back = 0;
    buf.read(60, &back, 4);
    const float three = 3.0f;
    buf.write(60, &three, 4);  // a kernel that writes its input
    const GuardReport r = buf.check();
    report(back == 2.0f && !r.ok() && r.first.offset == 62, "an overwritten input is found at its first changed byte: " +
                                                                std::to_string(r.first.offset));
  }
  {
    DeviceGuardedBuffer buf("x", 64);
    bool refused = false;
    try {
      buf.check();
    } catch (const Error&) {
      refused = true;
    }
    buf.declare_output("a", View::contiguous(DType::kF32, {8}));
    bool overlap = false;
    try {
      buf.declare_output("overlap", View::contiguous(DType::kF32, {2}, 28));
    } catch (const Error&) {
      overlap = true;
    }
    bool outside = false;
    try {
      uint8_t b[4] = {};
      buf.write(61, b, 4);
    } catch (const Error&) {
      outside = true;
    }
    report(refused && overlap && outside, "check before arm, overlapping outputs and writes outside are refused");
  }
  {
    DeviceGuardedBuffer buf("empty", 0);
    buf.arm();
    const bool ok = buf.check().ok();
    device_writes(buf, {{0, static_cast<uint8_t>(~GuardedMemory::red_zone_byte(0))}});
    report(ok && reinterpret_cast<uintptr_t>(buf.data()) % 256 == 0 &&
               buf.check().first.region == StrayRegion::kAfterAllocation,
           "a zero-byte buffer is aligned, passes, and sees a write into its trailing red zone");
  }
  {
    bool all = true;
    DeviceGuardedBuffer buf("x", 256);
    for (int value = 0; value < 256; ++value) {
      buf.arm();
      check(cudaMemset(buf.data() + 10, value, 32), "cudaMemset");
      all &= buf.check().stray_bytes >= 28;
      // Restore the poison so the next value is compared with the pattern, not with this one.
      std::vector<uint8_t> poison(32);
      for (int i = 0; i < 32; ++i) poison[i] = GuardedMemory::poison_byte(10 + i);
      buf.write(10, poison.data(), 32);
    }
    report(all, "a stray memset of any byte value changes at least 28 of 32 bytes");
  }
}

// A size that is not a multiple of 16: the 16-byte chunk across the end of the data is half output,
// half red zone, and the storage ends in bytes the vector loop does not cover.
void ragged_end() {
  std::printf("a 1000-byte buffer (not a multiple of 16):\n");
  for (bool checksum : {false, true}) {
    GuardedBuffer h("ragged", 1000);
    DeviceGuardedBuffer d("ragged", 1000);
    d.set_checksum_fast_path(checksum);
    const View tail = View::contiguous(DType::kU8, {8}, 992);  // the last 8 data bytes
    h.declare_output("tail", tail);
    d.declare_output("tail", tail);
    h.arm();
    d.arm();
    // The output itself (allowed), the first red zone byte after it, and the very last red zone byte.
    std::vector<ByteWrite> w;
    for (int64_t o = 992; o < 1000; ++o) w.push_back({o, 0x33});
    const bool clean_ok = [&] {
      device_writes(d, w);
      host_writes(h, w);
      return d.check().ok() && h.check().ok();
    }();
    const std::vector<ByteWrite> strays = {{1000, 0x01}, {1000 + 255, 0x02}};
    device_writes(d, strays);
    host_writes(h, strays);
    const GuardReport hr = h.check(), dr = d.check();
    report(clean_ok && dr.stray_bytes == 2 && dr.first.offset == 1000 && dr.last_offset == 1255 &&
               dr.describe() == hr.describe(),
           std::string(checksum ? "[checksum] " : "") + "writes to the output pass; the red zone after it and its last byte are found: " +
               dr.describe());
  }
}

// The same buffer on the host and on the device: same inputs, same outputs, same stray writes.
// The reports must read the same.
void compare_with_host() {
  std::printf("the same stray writes on a host and a device buffer:\n");
  struct Scenario {
    const char* name;
    std::vector<ByteWrite> writes;
  };
  // Output rows 512 bytes apart with 400 used, an index output, inputs before, between and in the
  // rows' padding.
  const int64_t bytes = 8192;
  const View out = View::padded_rows(DType::kF32, {8, 100}, 128, 256);  // bytes [256, 4240)
  const View idx = View::contiguous(DType::kI32, {4, 16}, 6144);        // bytes [6144, 6400)
  std::vector<Scenario> scenarios = {
      {"no stray write", {}},
      {"one byte in a row's padding", {{out.byte_offset_of({3, 99}) + 4, 0x41}}},
      {"a row past the view", {{256 + 8 * 512, 0}, {256 + 8 * 512 + 3, 0x3F}}},
      {"just before the first view", {{255, 0}}},
      {"the first and last red zone bytes", {{-256, 0}, {bytes + 255, 0}}},
      {"just past the allocation", {{bytes, 0x11}}},
      {"into an input", {{10, 0x5A}, {11, 0x5B}}},
      {"between the two views", {{5000, 0x00}}},
      {"into the padding inputs of row 7", {{256 + 7 * 512 + 460, 0x77}}},
  };
  Scenario across{"a 700-byte spray across the index view and the gaps around it", {}};
  for (int64_t o = 6000; o < 6700; ++o) across.writes.push_back({o, static_cast<uint8_t>(o * 7)});
  scenarios.push_back(across);
  Scenario tail{"a 300-byte spray over the end of the allocation", {}};
  for (int64_t o = 8000; o < 8300; ++o) tail.writes.push_back({o, static_cast<uint8_t>(o * 11 + 3)});
  scenarios.push_back(tail);

  for (bool checksum : {false, true}) {
    for (const Scenario& sc : scenarios) {
      GuardedBuffer h("kv_and_logits", bytes);
      DeviceGuardedBuffer d("kv_and_logits", bytes);
      d.set_checksum_fast_path(checksum);
      std::vector<uint8_t> inputs(200);
      for (size_t i = 0; i < inputs.size(); ++i) inputs[i] = static_cast<uint8_t>(i * 13 + 1);
      h.write(0, inputs.data(), 200);
      d.write(0, inputs.data(), 200);
      // Inputs in the output rows' padding too: arm() must keep them while it poisons the rows.
      for (int64_t r = 0; r < 8; ++r) {
        h.write(256 + r * 512 + 450, inputs.data(), 40);
        d.write(256 + r * 512 + 450, inputs.data(), 40);
      }
      for (GuardedMemory* m : {static_cast<GuardedMemory*>(&h), static_cast<GuardedMemory*>(&d)}) {
        m->declare_output("logits", out);
        m->declare_output("topk", idx);
        m->arm();
      }
      std::vector<uint8_t> hb(bytes), db(bytes);
      h.read(0, hb.data(), bytes);
      d.read(0, db.data(), bytes);
      const bool same_armed = hb == db;
      host_write_view(h, out, 0.5f);
      write_view(d, out, 0.5f);
      host_writes(h, sc.writes);
      device_writes(d, sc.writes);
      const GuardReport hr = h.check(), dr = d.check();
      const bool same = hr.describe() == dr.describe() && hr.stray_bytes == dr.stray_bytes &&
                        hr.last_offset == dr.last_offset && hr.first.coords == dr.first.coords;
      report(same_armed && same, std::string(checksum ? "[checksum] " : "") + sc.name + ": " +
                                     (same ? dr.describe() : "host: " + hr.describe() + " | device: " + dr.describe()));
    }
  }
}

void streams_checksum_and_outputs() {
  std::printf("streams, the checksum fast path, changing outputs:\n");
  {
    Stream s;
    DeviceGuardedBuffer buf("on_stream", 1 << 20);
    const View v = View::contiguous(DType::kF32, {256, 256}, 4096);
    buf.declare_output("v", v);
    buf.arm(s.get());
    write_view(buf, v, 2.0f, s.get());
    const bool ok = buf.check(s.get()).ok();
    device_writes(buf, {{(1 << 20) - 1, 0}}, s.get());
    const GuardReport r = buf.check(s.get());
    report(ok && r.stray_bytes == 1 && r.first.offset == (1 << 20) - 1, "arm and check on a stream: " + r.describe());
  }
  {
    DeviceGuardedBuffer buf("checksum", 1 << 20);
    buf.set_checksum_fast_path(true);
    const View v = View::contiguous(DType::kF32, {1000}, 1000);
    buf.declare_output("v", v);
    bool refused = false;
    buf.arm();
    buf.set_checksum_fast_path(false);
    try {
      buf.check();
    } catch (const Error&) {
      refused = true;
    }
    buf.set_checksum_fast_path(true);
    buf.arm();
    write_view(buf, View::padded_rows(DType::kF32, {1, 1000}, 1000, 1000), 3.0f);
    const bool ok = buf.check().ok();
    // Two changed words, in different 8-byte words of the checksum.
    device_writes(buf, {{8, 0x01}, {16, 0xFF}});
    const GuardReport r = buf.check();
    report(refused && ok && r.stray_bytes == 2 && r.first.offset == 8 && r.last_offset == 16,
           "checksum fast path: passes clean, finds two changed words, re-arm needed after switching: " + r.describe());
  }
  {
    DeviceGuardedBuffer buf("reused", 4096);
    const View a = View::contiguous(DType::kF32, {64}, 0);
    const View b = View::contiguous(DType::kF32, {64}, 1024);
    buf.declare_output("a", a);
    buf.arm();
    write_view(buf, View::padded_rows(DType::kF32, {1, 64}, 64, 0), 1.0f);
    const bool a_ok = buf.check().ok();
    buf.clear_outputs();
    buf.declare_output("b", b);
    buf.arm();
    write_view(buf, View::padded_rows(DType::kF32, {1, 64}, 64, 0), 5.0f);  // a is no longer an output
    const GuardReport r = buf.check();
    report(a_ok && !r.ok() && r.first.offset == 2 && r.first.nearest_view == "b",
           "after the outputs change, arm() sends the new mask: " + r.describe());
  }
}

void large_buffer() {
  std::printf("a 256 MiB buffer:\n");
  const int64_t bytes = int64_t(256) << 20;
  DeviceGuardedBuffer buf("big", bytes);
  const View v = View::padded_rows(DType::kF32, {4096, 4096}, 4096, 0);  // the first 64 MiB
  buf.declare_output("big_out", v);
  buf.arm();
  write_view(buf, v, 1.0f);
  Event start, stop;
  start.record(nullptr);
  const GuardReport clean = buf.check();
  stop.record(nullptr);
  stop.synchronize();
  const float clean_ms = Event::elapsed_ms(start, stop);
  device_writes(buf, {{bytes - 3, 0x00}});
  start.record(nullptr);
  const GuardReport r = buf.check();
  stop.record(nullptr);
  stop.synchronize();
  const float stray_ms = Event::elapsed_ms(start, stop);
  char line[512];
  std::snprintf(line, sizeof line, "clean check %.3f ms; one stray byte near the end found in %.3f ms: %s", clean_ms,
                stray_ms, r.describe().c_str());
  report(clean.ok() && r.stray_bytes == 1 && r.first.offset == bytes - 3 &&
             r.first.region == StrayRegion::kBetweenViews,
         line);
  buf.set_checksum_fast_path(true);
  buf.arm();  // the first stray byte is now part of the snapshot: use another place
  const bool ok = buf.check().ok();
  device_writes(buf, {{bytes - 7, 0x5A}});
  const GuardReport c = buf.check();
  report(ok && c.stray_bytes == 1 && c.first.offset == bytes - 7, "with the checksum fast path too: " + c.describe());
  // Re-arming with the same outputs re-sends the kept poison: the view is all NaN again.
  buf.set_checksum_fast_path(false);
  buf.arm();
  std::vector<float> row(4096);
  buf.read(v.byte_offset_of({4095, 0}), row.data(), row.size() * 4);
  bool nan = true;
  for (float x : row) nan &= std::isnan(x);
  report(nan && buf.check().ok(), "re-arming poisons the written output again");
}


// arm_all and check_all over more buffers than one batch kernel takes (8), of every shape of
// output the arm kernel poisons on the device (dense views of 1, 2 and 4-byte elements, rows with
// padding, five outputs in one buffer, two outputs whose spans interleave: those take the host
// path), mirrored on host buffers: after arm the bytes agree, and after the same correct and stray
// writes the reports read the same. One call also mixes host and device buffers.
void batches(bool queued) {
  std::printf("arm_all and check_all over 12 buffers (two batches)%s:\n",
              queued ? ", queued on a stream (arm_all(.., stream), queue_check_all)" : "");
  Stream stream;
  struct Spec {
    const char* name;
    int64_t bytes;
    std::vector<View> outputs;
    std::vector<ByteWrite> strays;
  };
  const std::vector<Spec> specs = {
      {"dense_f32", 4096, {View::contiguous(DType::kF32, {16, 32}, 1024)}, {{1023, 0x01}}},
      {"padded_bf16", 8192, {View::padded_rows(DType::kBF16, {10, 100}, 160, 64)}, {{64 + 200 + 3, 0x7E}}},
      {"fp8_and_i32", 3000, {View::contiguous(DType::kFP8E4M3, {100}, 8), View::contiguous(DType::kI32, {50}, 512)}, {}},
      {"empty", 0, {}, {{-1, 0x00}}},
      {"input_only", 1 << 20, {}, {{777777, 0x42}}},
      {"five_outputs", 2048,
       {View::contiguous(DType::kI32, {8}, 0), View::contiguous(DType::kI32, {8}, 64), View::contiguous(DType::kF32, {8}, 128),
        View::contiguous(DType::kBF16, {8}, 192), View::contiguous(DType::kU8, {8}, 256)},
       {{260, 0x00}, {264, 0x09}}},
      {"interleaved", 4096,
       {View::padded_rows(DType::kF32, {4, 10}, 32, 0), View::padded_rows(DType::kI32, {4, 8}, 32, 64)},
       {{40, 0x00}}},
      {"ragged", 1001, {View::contiguous(DType::kU8, {9}, 992)}, {{1001, 0x05}}},
      {"big_rows", 3 << 20, {View::padded_rows(DType::kF32, {300, 700}, 768, 4096)}, {{4096 + 299 * 3072 + 2900, 0x13}}},
      {"second_batch_a", 512, {View::contiguous(DType::kI32, {16})}, {}},
      {"second_batch_b", 700, {View::contiguous(DType::kF32, {10}, 300)}, {{299, 0xEE}}},
      // Elements off the 16-byte grid: the whole chunks of a dense view take its poison at their phase.
      {"unaligned_f32", 4096, {View::contiguous(DType::kF32, {300}, 1026)}, {{1025, 0x3A}}},
  };
  for (bool checksum : {false, true}) {
    for (bool stray : {false, true}) {
      std::vector<std::unique_ptr<GuardedBuffer>> hosts;
      std::vector<std::unique_ptr<DeviceGuardedBuffer>> devices;
      std::vector<GuardedMemory*> hs, ds, mixed;
      for (const Spec& sp : specs) {
        hosts.push_back(std::make_unique<GuardedBuffer>(sp.name, sp.bytes));
        devices.push_back(std::make_unique<DeviceGuardedBuffer>(sp.name, sp.bytes));
        devices.back()->set_checksum_fast_path(checksum && hosts.size() % 2 == 1);  // checksum on half of them
        std::vector<uint8_t> inputs(static_cast<size_t>(sp.bytes));
        for (size_t i = 0; i < inputs.size(); ++i) inputs[i] = static_cast<uint8_t>(i * 31 + sp.bytes);
        hosts.back()->write(0, inputs.data(), sp.bytes);
        devices.back()->write(0, inputs.data(), sp.bytes);
        for (size_t k = 0; k < sp.outputs.size(); ++k) {
          hosts.back()->declare_output("out" + std::to_string(k), sp.outputs[k]);
          devices.back()->declare_output("out" + std::to_string(k), sp.outputs[k]);
        }
        hs.push_back(hosts.back().get());
        ds.push_back(devices.back().get());
        mixed.push_back(hosts.size() % 3 == 0 ? static_cast<GuardedMemory*>(hosts.back().get()) : devices.back().get());
      }
      // Twice: the second arm re-poisons outputs the first launch wrote.
      bool same_armed = true;
      for (int round = 0; round < 2; ++round) {
        arm_all(hs);
        if (queued) {
          arm_all(ds, stream.get());
        } else {
          arm_all(ds);
        }
        for (size_t b = 0; b < specs.size(); ++b) {  // read(): waits for a queued arm first
          std::vector<uint8_t> hb(static_cast<size_t>(specs[b].bytes)), db(hb.size());
          hosts[b]->read(0, hb.data(), specs[b].bytes);
          devices[b]->read(0, db.data(), specs[b].bytes);
          if (hb != db) same_armed = false, std::printf("    armed bytes differ in '%s' (round %d)\n", specs[b].name, round);
        }
        if (queued) arm_all(ds, stream.get());  // again, and nothing waits for it before the check
        // A correct launch: every output byte written.
        std::vector<DeviceAllocation> keep;
        for (size_t b = 0; b < specs.size(); ++b) {
          std::vector<ByteWrite> w;
          for (const View& v : specs[b].outputs) {
            v.for_each_index([&](const std::vector<int64_t>& i) {
              for (int64_t e = 0; e < v.element_size(); ++e) w.push_back({v.byte_offset_of(i) + e, static_cast<uint8_t>(round + 1)});
            });
          }
          if (stray && round == 1) w.insert(w.end(), specs[b].strays.begin(), specs[b].strays.end());
          host_writes(*hosts[b], w);
          if (queued) {
            device_writes(*devices[b], w, stream.get(), &keep);
          } else {
            device_writes(*devices[b], w);
          }
        }
        std::vector<GuardReport> dr;
        if (queued) {
          QueuedChecks checks = queue_check_all(ds, stream.get());
          stream.synchronize();
          dr = checks.reports();
        } else {
          dr = check_all(ds);
        }
        const std::vector<GuardReport> hr = check_all(hs);
        for (size_t b = 0; b < specs.size(); ++b) {
          const bool want_stray = stray && round == 1 && !specs[b].strays.empty();
          const bool same = hr[b].describe() == dr[b].describe() && hr[b].stray_bytes == dr[b].stray_bytes &&
                            hr[b].last_offset == dr[b].last_offset;
          if (!same || dr[b].ok() == want_stray) {
            report(false, std::string(checksum ? "[checksum] " : "") + specs[b].name + " round " + std::to_string(round) +
                              ": host: " + hr[b].describe() + " | device: " + dr[b].describe());
          }
        }
      }
      report(same_armed, std::string(checksum ? "[checksum on half] " : "") + (stray ? "stray writes: " : "correct writes: ") +
                             "arm_all leaves the bytes arm() leaves on the host, and check_all's reports read the same");
      // A mixed call: host and device buffers, each armed and checked by its own kind.
      arm_all(mixed);
      const std::vector<GuardReport> mr = check_all(mixed);
      bool all_ok = true;
      for (const GuardReport& r : mr) all_ok &= r.ok();
      report(all_ok && mr.size() == specs.size(), "a call mixing host and device buffers arms and checks each");
    }
  }
  // One buffer listed twice is refused with a clear message.
  DeviceGuardedBuffer a("a", 64);
  bool refused = false;
  try {
    arm_all({&a, &a});
  } catch (const Error& e) {
    refused = contains(e.what(), "'a' is listed twice");
  }
  report(refused, "arm_all refuses a buffer listed twice");
}

// Many launches in a row queued on one stream, nothing read between arm and check: each report is
// that launch's own (a stray in round r is reported in round r only, at its offset), with the exact
// comparison and with the checksum fast path; a stray after a clean round and a clean round after a
// stray; and a buffer armed but never checked can be destroyed.
void queued_rounds() {
  std::printf("queued arm, launch and check, 60 rounds on one stream:\n");
  Stream stream;
  const View out = View::contiguous(DType::kF32, {64}, 256);
  for (bool checksum : {false, true}) {
    DeviceGuardedBuffer a("a", 4096), b("b", 1 << 16);
    a.set_checksum_fast_path(checksum);
    a.declare_output("out", out);
    std::vector<uint8_t> inputs(1 << 16, 0x3C);
    a.write(0, inputs.data(), 4096);
    b.write(0, inputs.data(), 1 << 16);
    int wrong = 0;
    for (int round = 0; round < 60; ++round) {
      const bool stray = round % 3 == 2;
      std::vector<GuardedMemory*> both{&a, &b};
      arm_all(both, stream.get());
      std::vector<DeviceAllocation> keep;
      write_view(a, View::contiguous(DType::kF32, {1, 64}, 256), static_cast<float>(round), stream.get());
      std::vector<ByteWrite> w;
      if (stray) w.push_back({100 + round, static_cast<uint8_t>(round)});  // 0x3C was there: always a change
      device_writes(b, w, stream.get(), &keep);
      QueuedChecks checks = queue_check_all(both, stream.get());
      stream.synchronize();
      // After the check ran, before its reports: a byte of b changes. A check that was queued
      // behind the launch never saw it; one run only now, in reports(), would report it.
      const uint8_t late = 0x5A;
      b.write(3000, &late, 1);
      const std::vector<GuardReport> r = checks.reports();
      const bool right = r.size() == 2 && r[0].ok() && r[1].ok() == !stray &&
                         (!stray || (r[1].stray_bytes == 1 && r[1].first.offset == 100 + round));
      if (!right) {
        ++wrong;
        std::printf("    round %d: a: %s | b: %s\n", round, r[0].describe().c_str(), r[1].describe().c_str());
      }
      b.write(3000, inputs.data(), 1);                   // the late byte back
      if (stray) b.write(100 + round, inputs.data(), 1);  // the stray byte back, for the next round
    }
    report(wrong == 0, std::string(checksum ? "[checksum] " : "") +
                           "60 queued rounds, every third with a stray byte: each round reports its own, and not a "
                           "byte changed after the check ran");
  }
  bool destroyed = true;
  try {
    auto c = std::make_unique<DeviceGuardedBuffer>("c", 1 << 20);
    std::vector<GuardedMemory*> one{c.get()};
    arm_all(one, stream.get());
    c.reset();  // waits for the queued arm before the memory goes
    stream.synchronize();
  } catch (const std::exception& e) {
    destroyed = false;
    std::printf("    %s\n", e.what());
  }
  report(destroyed, "a buffer armed on a stream and destroyed before any check is freed cleanly");
  QueuedChecks twice = queue_check_all({}, stream.get());
  (void)twice.reports();
  bool refused = false;
  try {
    (void)twice.reports();
  } catch (const Error& e) {
    refused = contains(e.what(), "asked twice");
  }
  report(refused, "a queued check's reports are taken once");
}

// The checksum path's gated snapshot (buffers of 8 MiB and more): an arm after a clean check copies
// the snapshot only when the bytes changed since. Rounds on one stream, each a clean launch or one with a stray byte, and
// between some rounds an input changed outside any guarded launch (a kernel, or a host write): the
// next arm must see it and take a new snapshot (no stray reported for it), and a stray of the
// launch itself must still be reported, at its offset.
void gated_snapshot() {
  std::printf("the checksum path's gated snapshot:\n");
  Stream stream;
  constexpr int64_t kBytes = int64_t(16) << 20;  // gated from 8 MiB (smaller ones copy in the arm's pass)
  DeviceGuardedBuffer g("gated", kBytes);
  g.set_checksum_fast_path(true);
  g.declare_output("out", View::contiguous(DType::kF32, {256}, 4096));
  std::vector<uint8_t> inputs(static_cast<size_t>(kBytes), 0x3C);
  g.write(0, inputs.data(), kBytes);
  std::vector<GuardedMemory*> one{&g};
  int wrong = 0;
  for (int round = 0; round < 40; ++round) {
    std::vector<DeviceAllocation> keep;
    // Before the arm: an input changed by a kernel no guard watches (every 4th round), or by a host
    // write (every 7th).
    if (round % 4 == 1) device_writes(g, {{20000 + round, static_cast<uint8_t>(round + 1)}}, stream.get(), &keep);
    if (round % 7 == 3) {
      const uint8_t v = static_cast<uint8_t>(0x80 + round);
      g.write(30000 + round, &v, 1);
    }
    arm_all(one, stream.get());
    write_view(g, View::contiguous(DType::kF32, {1, 256}, 4096), static_cast<float>(round), stream.get());
    const bool stray = round % 5 == 4;
    if (stray) device_writes(g, {{50000 + round, static_cast<uint8_t>(0x11 + round)}}, stream.get(), &keep);
    QueuedChecks checks = queue_check_all(one, stream.get());
    stream.synchronize();
    const GuardReport r = checks.reports()[0];
    const bool right = stray ? r.stray_bytes == 1 && r.first.offset == 50000 + round : r.ok();
    if (!right) {
      ++wrong;
      std::printf("    round %d: %s\n", round, r.describe().c_str());
    }
  }
  report(wrong == 0, "40 rounds, inputs changed between some of them outside any launch: no false stray, every "
                     "launch's own stray reported");
}

// Chained arms (checksum path, set_chained_arms): after a clean check the arm only poisons the
// outputs again. Rounds on one stream over a 16 MiB and a 64 KiB buffer, each a clean launch or one
// with a stray byte (into the data, or every third one into the red zone); before some arms a host
// write (the next arm is a full one: no stray for it), and before others a kernel outside the guards
// writing an input byte, which the next check reports against the launch it guards (the window
// runs from the last clean check). Every round, the outputs hold their poison after the arm, and a
// round after a stray is clean again.
void chained_arms() {
  std::printf("chained arms on the checksum path:\n");
  Stream stream;
  for (const int64_t bytes : {int64_t(16) << 20, int64_t(64) << 10}) {
    DeviceGuardedBuffer g("chained", bytes);
    g.set_checksum_fast_path(true);
    g.set_chained_arms(true);
    const View out = View::contiguous(DType::kF32, {1, 256}, 4096);
    g.declare_output("out", out);
    std::vector<uint8_t> inputs(static_cast<size_t>(bytes), 0x3C);
    g.write(0, inputs.data(), bytes);
    std::vector<uint8_t> poison(1024, 0);
    poison_output(HostTensor(poison.data(), View::contiguous(DType::kF32, {1, 256})));
    std::vector<GuardedMemory*> one{&g};
    int wrong = 0, chained = 0;
    bool last_clean = false;  // the last check was clean: the next arm chains, unless the host wrote
    for (int round = 0; round < 40; ++round) {
      std::vector<DeviceAllocation> keep;
      const bool host_write = round % 7 == 3, outside = round % 4 == 1;
      const bool chains = last_clean && !host_write;
      chained += chains ? 1 : 0;
      if (host_write) {
        const uint8_t v = static_cast<uint8_t>(0x80 + round);
        g.write(30000 + round, &v, 1);
      }
      if (outside) device_writes(g, {{20000 + round, static_cast<uint8_t>(round + 1)}}, stream.get(), &keep);
      arm_all(one, stream.get());
      std::vector<uint8_t> now(poison.size());
      g.read(4096, now.data(), static_cast<int64_t>(now.size()));  // waits for the arm
      const bool poisoned = now == poison;
      write_view(g, out, static_cast<float>(round), stream.get());
      const bool stray = round % 5 == 4, red = stray && round % 3 == 0;
      const int64_t at = red ? -3 : 50000 + round;
      if (stray) device_writes(g, {{at, static_cast<uint8_t>(0x11 + round)}}, stream.get(), &keep);
      QueuedChecks checks = queue_check_all(one, stream.get());
      stream.synchronize();
      const GuardReport r = checks.reports()[0];
      // A full arm takes the write outside the guards into its snapshot; a chained one does not.
      const bool seen = outside && chains;
      const int64_t expected = (seen ? 1 : 0) + (stray ? 1 : 0);
      const int64_t first = seen && !red ? 20000 + round : at;  // the lowest: a red zone's, or 20000 below 50000
      const bool right = poisoned && (expected == 0 ? r.ok() : r.stray_bytes == expected && r.first.offset == first);
      if (!right) {
        ++wrong;
        std::printf("    %lld bytes, round %d%s: %s\n", static_cast<long long>(bytes), round,
                    poisoned ? "" : " (outputs not poisoned by the arm)", r.describe().c_str());
      }
      // What the guard reported stays written: the next arm is a full one and takes it as input.
      last_clean = r.ok();
    }
    report(wrong == 0 && chained >= 20, std::to_string(bytes) + " bytes, 40 rounds, " + std::to_string(chained) +
                       " of them chained: outputs poisoned by every arm, each "
                       "launch's stray reported (data and red zone), a host write not, a write outside the guards "
                       "by the next check");
  }
}

// A buffer's first arm inside a graph capture takes page-locked staging for its output mask. With
// the cache holding only blocks given back since the device was last idle (a buffer of the same
// shape just destroyed), taking one would synchronize the capturing stream, and allocating one is
// refused in a capture's default mode: both lost the capture. Run first, so no block of this size
// is ready in the cache.
void first_arm_in_capture() {
  std::printf("a buffer's first arm inside a graph capture:\n");
  constexpr int64_t kBytes = int64_t(40) << 20;  // a 5 MiB mask: a size class no other check uses first
  const View out = View::contiguous(DType::kU8, {4096}, 8192);
  Stream stream;
  {
    DeviceGuardedBuffer old("old", kBytes, GuardedMemory::kDefaultRedZone, stream.get());
    old.declare_output("out", out);
    old.arm(stream.get());
    stream.synchronize();
  }  // its staging goes back to the cache, not yet seen idle
  DeviceGuardedBuffer g("fresh", kBytes, GuardedMemory::kDefaultRedZone, stream.get());
  g.declare_output("out", out);
  std::vector<GuardedMemory*> one{&g};
  QueuedChecks checks;
  std::string error;
  try {
    Graph graph = Graph::capture(stream, [&](cudaStream_t s) {
      arm_all(one, s);
      checks = queue_check_all(one, s);
    });
    graph.replay(stream);
    stream.synchronize();
    const GuardReport r = checks.reports()[0];
    if (!r.ok()) error = "a stray where nothing wrote: " + r.describe();
  } catch (const std::exception& e) {
    error = e.what();
  }
  report(error.empty(), "captured and replayed, clean" + (error.empty() ? std::string() : ": " + error));
}

// arm_all, a launch and queue_check_all captured once in a CUDA graph and replayed: each replay's
// reports (QueuedChecks::replayed) are that replay's own. The captured launch writes one byte at
// an offset read from device memory, changed between replays: into the output (allowed) or, every
// third replay, past it (a stray at that offset). Three ways: exact, where a byte changed after a
// replay's check and before its reports must not be reported; the checksum path, whose exact
// comparison after a mismatch has a serial of its own (the next replay's check echoes the serial
// it was captured with); and chained arms, captured after a clean check, so that the captured arm
// poisons only, until a stray or a host write (every fifth replay, before it) makes the device's
// next arm a full one.
void graph_rounds() {
  std::printf("arm, launch and check in one CUDA graph, 30 replays:\n");
  for (const char* mode : {"exact", "checksum", "chained"}) {
    const bool checksum = std::string(mode) != "exact", chained = std::string(mode) == "chained";
    Stream stream;
    DeviceGuardedBuffer g("graphed", 1 << 16);
    g.set_checksum_fast_path(checksum);
    g.set_chained_arms(chained);
    g.declare_output("out", View::contiguous(DType::kU8, {4096}, 8192));
    std::vector<GuardedMemory*> one{&g};
    if (chained) {  // a clean check first: the arm captured next is not a forced one
      arm_all(one, stream.get());
      QueuedChecks first = queue_check_all(one, stream.get());
      stream.synchronize();
      (void)first.reports();
    }
    DeviceAllocation d_off(sizeof(int64_t)), d_val(1);
    QueuedChecks checks;
    Graph graph = Graph::capture(stream, [&](cudaStream_t s) {
      arm_all(one, s);
      apply_writes<<<1, 32, 0, s>>>(g.data(), d_off.as<int64_t>(), d_val.as<uint8_t>(), 1);
      checks = queue_check_all(one, s);
    });
    int wrong = 0;
    for (int round = 0; round < 30; ++round) {
      const bool stray = round % 3 == 2;
      const int64_t off = stray ? 100 + round : 8192 + round;
      const uint8_t val = static_cast<uint8_t>(0x40 + round);
      copy_to_device(d_off.get(), &off, sizeof off);
      copy_to_device(d_val.get(), &val, 1);
      if (round % 5 == 1) {  // a host write before the replay: new input, not a stray (the arm is a full one)
        const uint8_t input = static_cast<uint8_t>(0x90 + round);
        g.write(30000 + round, &input, 1);
      }
      graph.replay(stream);
      stream.synchronize();
      // After the replay's check, before its reports, a byte changes: it must not be reported (the
      // exact check only: on the checksum path a mismatch's comparison runs at reports()).
      uint8_t was = 0;
      const bool late = !checksum;
      if (late) {
        g.read(20000, &was, 1);
        const uint8_t changed = static_cast<uint8_t>(was ^ 0x5A);
        g.write(20000, &changed, 1);
      }
      if (round > 0) checks.replayed();
      const GuardReport r = checks.reports()[0];
      if (late) g.write(20000, &was, 1);
      const bool right = stray ? r.stray_bytes == 1 && r.first.offset == off : r.ok();
      if (!right) {
        ++wrong;
        std::printf("    %s, replay %d: %s\n", mode, round, r.describe().c_str());
      }
    }
    report(wrong == 0 && graph.node_count() >= 3,
           std::string(mode) + ": 30 replays of one captured arm, launch and check, every third with a stray byte: "
           "each reports its own" + (checksum ? "" : ", and not a byte changed after the replay's check"));
  }
}


// reports() of a queued check: with no synchronization before it, it waits for the check (which
// still sits behind a 5 ms kernel), for a replayed graph's check too (whose slot echoes the serial
// of the replay before); after the caller's synchronization, a clean check's reports need no wait of
// their own (collect_checks reads the check's outcome), while an upload queued after the check
// keeps its staging, and a buffer on a reused slot reads its own outcome.
void reports_without_wait() {
  std::printf("reports of queued checks, with and without a wait before them:\n");
  Stream stream;
  DeviceGuardedBuffer g("reported", 1 << 16);
  g.declare_output("out", View::contiguous(DType::kU8, {4096}, 8192));
  std::vector<GuardedMemory*> one{&g};
  {
    // No synchronization before reports(): the check still sits behind a 5 ms kernel and a stray
    // write. reports() must wait for it and report the stray.
    arm_all(one, stream.get());
    gpu_test::spin<<<1, 1, 0, stream.get()>>>(5000000ull);
    std::vector<DeviceAllocation> keep;
    device_writes(g, {{300, 0x11}}, stream.get(), &keep);
    QueuedChecks checks = queue_check_all(one, stream.get());
    const GuardReport r = checks.reports()[0];
    report(r.stray_bytes == 1 && r.first.offset == 300, "reports() with no wait before it waits for the check: " + r.describe());
    const uint8_t back = 0;
    g.write(300, &back, 1);
  }
  {
    // After the caller's synchronization, a clean check's reports() reads its outcome without
    // waiting again: work queued behind the check (a 50 ms kernel) is still running when it returns.
    arm_all(one, stream.get());
    QueuedChecks checks = queue_check_all(one, stream.get());
    stream.synchronize();
    gpu_test::spin<<<1, 1, 0, stream.get()>>>(50000000ull);
    const GuardReport r = checks.reports()[0];
    const cudaError_t busy = cudaStreamQuery(stream.get());
    report(r.ok() && busy == cudaErrorNotReady,
           std::string("after the caller's wait, a clean check's reports() does not wait for later work (stream ") +
               (busy == cudaErrorNotReady ? "still busy" : "idle") + "): " + r.describe());
    stream.synchronize();
  }
  {
    // Buffers made and dropped one after another take the same mapped slot: each new one's first
    // check, still behind a 2 ms kernel when reports() is called, reports its own stray, not the
    // clean outcome its slot's last owner left there.
    int wrong = 0;
    for (int i = 0; i < 6; ++i) {
      DeviceGuardedBuffer b("recycled", 4096);
      std::vector<GuardedMemory*> mine{&b};
      arm_all(mine, stream.get());
      gpu_test::spin<<<1, 1, 0, stream.get()>>>(2000000ull);
      std::vector<DeviceAllocation> keep;
      if (i % 2 == 1) device_writes(b, {{40, 0x12}}, stream.get(), &keep);
      QueuedChecks checks = queue_check_all(mine, stream.get());
      const GuardReport r = checks.reports()[0];
      if (r.ok() != (i % 2 == 0)) ++wrong, std::printf("    buffer %d: %s\n", i, r.describe().c_str());
    }
    report(wrong == 0, "six buffers in turn on a reused slot, every other one with a stray: each reports its own");
  }
  {
    // An upload queued after the check, behind a 5 ms kernel, keeps its staging through reports():
    // the next queue_write takes other staging, so the first upload still carries its own bytes.
    std::vector<uint8_t> a(512, 0xA1), b(512, 0xB2), back(1024);
    arm_all(one, stream.get());
    QueuedChecks checks = queue_check_all(one, stream.get());
    stream.synchronize();
    gpu_test::spin<<<1, 1, 0, stream.get()>>>(5000000ull);
    g.queue_write(10000, a.data(), 512, stream.get());
    const GuardReport r = checks.reports()[0];
    g.queue_write(10512, b.data(), 512, stream.get());
    g.read(10000, back.data(), 1024);
    report(r.ok() && std::equal(a.begin(), a.end(), back.begin()) && std::equal(b.begin(), b.end(), back.begin() + 512),
           "an upload queued after the check keeps its staging through reports()");
  }
  {
    // A graph's replay echoes the serial of its capture, as the replay before did: reports() after
    // replayed() waits, and the second replay's stray (behind a 5 ms kernel) is reported.
    DeviceAllocation d_off(sizeof(int64_t)), d_val(1);
    QueuedChecks checks;
    Graph graph = Graph::capture(stream, [&](cudaStream_t s) {
      arm_all(one, s);
      gpu_test::spin<<<1, 1, 0, s>>>(5000000ull);
      apply_writes<<<1, 32, 0, s>>>(g.data(), d_off.as<int64_t>(), d_val.as<uint8_t>(), 1);
      checks = queue_check_all(one, s);
    });
    int wrong = 0;
    for (int round = 0; round < 2; ++round) {
      const int64_t off = round == 0 ? 8192 : 500;  // an output byte, then a stray
      const uint8_t val = 0x77;
      copy_to_device(d_off.get(), &off, sizeof off);
      copy_to_device(d_val.get(), &val, 1);
      graph.replay(stream);
      if (round == 0) stream.synchronize();
      if (round > 0) checks.replayed();
      const GuardReport r = checks.reports()[0];
      const bool right = round == 0 ? r.ok() : r.stray_bytes == 1 && r.first.offset == 500;
      if (!right) ++wrong, std::printf("    replay %d: %s\n", round, r.describe().c_str());
    }
    report(wrong == 0, "a replayed check with no wait before reports(): its own stray, not the replay before's tally");
  }
}

// Staging queued on a stream (the constructor with a stream, queue_write), as Device::allocate and
// the testbed stage a case: nothing waits, yet every byte is where it must be when it is used. A
// stream held up by a spinning kernel makes a missing wait show: the work behind it has not run.
void queued_staging() {
  std::printf("staging queued on a stream:\n");
  Stream s, other;
  std::vector<uint8_t> a(4096), b(4096);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i * 7 + 1), b[i] = static_cast<uint8_t>(i * 13 + 5);
  {
    gpu_test::spin<<<1, 1, 0, s.get()>>>(2000000ull);  // 2 ms: the fill and the write below wait behind it
    DeviceGuardedBuffer g("queued", 4096, GuardedMemory::kDefaultRedZone, s.get());
    g.queue_write(0, a.data(), 4096, s.get());
    std::vector<uint8_t> src = b;
    g.queue_write(1024, src.data(), 512, s.get());  // a second upload before anything waited
    std::fill(src.begin(), src.end(), 0xEE);        // src is free once queue_write returns
    std::vector<uint8_t> back(4096), want = a;
    std::copy(b.begin(), b.begin() + 512, want.begin() + 1024);
    g.read(0, back.data(), 4096);  // waits for the stream
    report(back == want, "queued first fill and two queued writes behind a busy stream: read() sees every byte, "
                         "and src was free to reuse at once");
  }
  {
    // The whole sequence queued: fill, write, arm, a launch writing the output, check; one wait.
    DeviceGuardedBuffer g("sequence", 4096, GuardedMemory::kDefaultRedZone, s.get());
    gpu_test::spin<<<1, 1, 0, s.get()>>>(1000000ull);
    g.queue_write(0, a.data(), 4096, s.get());
    g.declare_output("out", View::contiguous(DType::kF32, {1, 64}, 2048));
    std::vector<GuardedMemory*> one{&g};
    arm_all(one, s.get());
    write_view(g, View::contiguous(DType::kF32, {1, 64}, 2048), 2.5f, s.get());
    QueuedChecks clean = queue_check_all(one, s.get());
    s.synchronize();
    const GuardReport r = clean.reports()[0];
    float f = 0;
    g.read(2048, &f, 4);
    uint8_t first = 0;
    g.read(0, &first, 1);
    report(r.ok() && f == 2.5f && first == a[0], "fill, write, arm, launch and check all queued: clean (" + r.describe() + ")");
    std::vector<DeviceAllocation> keep;
    arm_all(one, s.get());
    device_writes(g, {{100, static_cast<uint8_t>(a[100] ^ 0xFF)}}, s.get(), &keep);
    QueuedChecks stray = queue_check_all(one, s.get());
    s.synchronize();
    const GuardReport rs = stray.reports()[0];
    report(rs.stray_bytes == 1 && rs.first.offset == 100, "and a stray byte after a queued write is reported: " + rs.describe());
  }
  {
    // Written on one stream, armed on another: the arm must wait for the write. Held up by a 20 ms
    // kernel, the write lands long after an arm that did not wait; the check is queued only once it
    // has landed, so such an arm's snapshot (the bytes before the write) makes it a stray.
    DeviceGuardedBuffer g("two streams", 4096, GuardedMemory::kDefaultRedZone, other.get());
    // A first write and a read take the staging and wait: the second write reuses it, so nothing in
    // queue_write waits for the device (a staging allocation may).
    g.queue_write(0, b.data(), 4096, other.get());
    uint8_t x = 0;
    g.read(0, &x, 1);
    gpu_test::spin<<<1, 1, 0, other.get()>>>(20000000ull);
    g.queue_write(0, a.data(), 4096, other.get());
    std::vector<GuardedMemory*> one{&g};
    arm_all(one, s.get());
    other.synchronize();
    QueuedChecks q = queue_check_all(one, s.get());
    s.synchronize();
    const GuardReport r = q.reports()[0];
    report(r.ok(), "a write queued on another stream is waited for before an arm: " + r.describe());
  }
  {
    // Past 1 MiB queue_write is write(): the bytes are there on return.
    const int64_t big = int64_t(3) << 20;
    std::vector<uint8_t> src(static_cast<size_t>(big));
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 31 + 3);
    DeviceGuardedBuffer g("big", big, GuardedMemory::kDefaultRedZone, s.get());
    g.queue_write(0, src.data(), big, s.get());
    std::vector<uint8_t> back(static_cast<size_t>(big));
    g.read(0, back.data(), big);
    report(back == src, "a 3 MiB queue_write (past the 1 MiB staged) lands whole");
  }
  {
    // Allocated inside a capture (per-call scratch of a captured call): filled at once on the
    // legacy stream in relaxed capture mode, not queued into the graph to run again at each replay,
    // and the capture goes on; its nodes are the body's own launches only.
    std::string why;
    size_t nodes = 99;
    try {
      Graph graph = Graph::capture(s, [&](cudaStream_t cs) {
        DeviceGuardedBuffer inside("captured", 4096, GuardedMemory::kDefaultRedZone, cs);
      });
      nodes = graph.node_count();
    } catch (const LaunchError& e) {
      why = e.what();
    }
    report(why.empty() && nodes == 0,
           "a buffer made inside a capture is filled then, outside the graph (" + std::to_string(nodes) +
               " nodes captured)" + (why.empty() ? "" : ": " + why));
    std::vector<uint8_t> back(4096);
    DeviceGuardedBuffer after("after", 4096, GuardedMemory::kDefaultRedZone, s.get());
    after.queue_write(0, a.data(), 4096, s.get());
    after.read(0, back.data(), 4096);
    report(back == a, "and the stream stages the next buffer as before");
  }
  {
    // read_all: three buffers read back with one wait, one of them past the 8 MiB staged; the same
    // bytes read() gives.
    DeviceGuardedBuffer x("x", 4096, GuardedMemory::kDefaultRedZone, s.get()), y("y", 100000), z("z", int64_t(9) << 20);
    x.queue_write(0, a.data(), 4096, s.get());
    std::vector<uint8_t> big(static_cast<size_t>(z.size()));
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 5 + 7);
    z.write(0, big.data(), z.size());
    std::vector<uint8_t> rx(4096), ry(100000), rz(big.size()), ry_one(100000);
    read_all({&x, &y, &z}, {rx.data(), ry.data(), rz.data()});
    y.read(0, ry_one.data(), y.size());
    report(rx == a && ry == ry_one && rz == big, "read_all of three buffers (4 KiB queued, 100 KB poisoned, 9 MiB) "
                                                 "reads what read() does");
  }
}

// queue_repeats: launches back to back after one arm with one check after the last. Each launch's
// reads hold that launch's outputs; the outputs are poisoned again before each later launch (a
// launch that writes nothing reads back poison, a gapped view's gaps keep their bytes); red zones
// are not restored between launches, so the one check sees a stray byte of any launch, at its
// offset. Where it cannot queue (no stream, host memory, an output poisoned on the host) it says
// so with nullptr.
void queued_repeats() {
  std::printf("queued repeats (queue_repeats):\n");
  Stream stream;
  const View gapped(DType::kF32, {2, 2}, {3, 1}, 64);  // rows of 3 floats, the view taking 2
  const View dense = View::contiguous(DType::kF32, {1, 40}, 256);
  DeviceGuardedBuffer a("a", 1024, GuardedMemory::kDefaultRedZone, stream.get()), b("b", 4096, GuardedMemory::kDefaultRedZone, stream.get());
  a.declare_output("g", gapped);
  b.declare_output("d", dense);
  std::vector<GuardedMemory*> both{&a, &b};
  const float values[3] = {1.0f, 0.0f, 3.0f};  // launch 1 writes nothing
  for (int stray_launch : {-1, 1}) {
    arm_all(both, stream.get());
    std::unique_ptr<RepeatedLaunches> rep = queue_repeats(both, both, stream.get(), 3);
    if (rep == nullptr) {
      report(false, "queue_repeats on two device buffers armed on a stream");
      return;
    }
    std::vector<DeviceAllocation> keep;
    for (int k = 0; k < 3; ++k) {
      if (k > 0) rep->poison_outputs();
      if (values[k] != 0.0f) {
        write_view(a, gapped, values[k], stream.get());
        write_view(b, dense, values[k], stream.get());
      }
      if (k == stray_launch) device_writes(a, {{-3, static_cast<uint8_t>(~GuardedMemory::red_zone_byte(GuardedMemory::kDefaultRedZone - 3))}},
                                                  stream.get(), &keep);  // the leading red zone
      rep->read();
    }
    QueuedChecks checks = queue_check_all(both, stream.get());
    stream.synchronize();
    const std::vector<GuardReport> r = checks.reports();
    int wrong = 0;
    for (int k = 0; k < 3; ++k) {
      const uint8_t* ga = rep->bytes(k, 0);
      const uint8_t* db = rep->bytes(k, 1);
      gapped.for_each_index([&](const std::vector<int64_t>& i) {
        const uint8_t* e = ga + gapped.byte_offset_of(i);
        float f;
        std::memcpy(&f, e, 4);
        if (values[k] == 0.0f ? !is_output_poison(DType::kF32, e) : f != values[k]) ++wrong;
      });
      dense.for_each_index([&](const std::vector<int64_t>& i) {
        const uint8_t* e = db + dense.byte_offset_of(i);
        float f;
        std::memcpy(&f, e, 4);
        if (values[k] == 0.0f ? !is_output_poison(DType::kF32, e) : f != values[k]) ++wrong;
      });
      // The gap between the rows (row 0's third float) is no output: every launch leaves it as staged.
      const int64_t gap = gapped.byte_offset() + 8;
      if (std::memcmp(ga + gap, rep->bytes(0, 0) + gap, 4) != 0 || is_output_poison(DType::kF32, ga + gap)) ++wrong;
    }
    if (stray_launch < 0) {
      report(wrong == 0 && r.size() == 2 && r[0].ok() && r[1].ok(),
             "three launches queued: each read holds its launch's outputs, a launch that wrote nothing reads back "
             "poison, the gap keeps its bytes, the one check finds nothing");
    } else {
      report(wrong == 0 && r.size() == 2 && r[0].stray_bytes == 1 && r[0].first.offset == -3 && r[1].ok(),
             "a stray byte in the red zone by the second of three launches is the one check's report, at its "
             "offset (red zones are not restored between launches): " + r[0].describe());
      a.arm();  // the red zone restored, for the next part
    }
  }
  {
    GuardedBuffer host("host", 1024);
    host.declare_output("g", gapped);
    std::vector<GuardedMemory*> one{&host};
    arm_all(one, nullptr);
    report(queue_repeats(one, one, nullptr, 2) == nullptr, "host memory: nullptr (its launches run at once)");
    arm_all(both, stream.get());
    report(queue_repeats(both, both, nullptr, 2) == nullptr, "no stream: nullptr");
    std::vector<GuardedMemory*> mixed{&a, &host};
    report(queue_repeats(mixed, mixed, stream.get(), 2) == nullptr, "device and host memory together: nullptr");
    stream.synchronize();
  }
  {
    // Five outputs, the fifth with gaps: past the four the arm's pass poisons, and not dense, so it
    // takes a host copy at each arm.
    DeviceGuardedBuffer many("many", 4096, GuardedMemory::kDefaultRedZone, stream.get());
    for (int i = 0; i < 4; ++i) many.declare_output("o" + std::to_string(i), View::contiguous(DType::kF32, {8}, 256 * i));
    many.declare_output("gapped", View(DType::kF32, {2, 2}, {3, 1}, 1024));
    std::vector<GuardedMemory*> one{&many};
    arm_all(one, stream.get());
    report(queue_repeats(one, one, stream.get(), 2) == nullptr, "an output poisoned on the host: nullptr");
    stream.synchronize();
  }
  {
    // Six dense outputs: four poisoned in the arm's pass, two from the span list after it. Both
    // kinds come back poisoned after the arm and after a re-poison, and poisoning them writes
    // nothing else: a byte between two of them written by the second launch is the check's stray.
    DeviceGuardedBuffer six("six", 4096, GuardedMemory::kDefaultRedZone, stream.get());
    std::vector<View> views;
    for (int i = 0; i < 6; ++i) {
      views.push_back(View::contiguous(DType::kF32, {1, 8}, 256 * i));
      six.declare_output("o" + std::to_string(i), View::contiguous(DType::kF32, {8}, 256 * i));
    }
    std::vector<GuardedMemory*> one{&six};
    arm_all(one, stream.get());
    std::unique_ptr<RepeatedLaunches> rep = queue_repeats(one, one, stream.get(), 2);
    if (rep == nullptr) {
      report(false, "six dense outputs: queue_repeats");
    } else {
      std::vector<DeviceAllocation> keep;
      for (const View& v : views) write_view(six, v, 1.0f, stream.get());
      rep->read();
      rep->poison_outputs();
      const int64_t between = 256 * 4 + 40;  // after o4's 32 bytes, before o5
      device_writes(six, {{between, static_cast<uint8_t>(~GuardedMemory::poison_byte(GuardedMemory::kDefaultRedZone + between))}},
                    stream.get(), &keep);
      rep->read();
      QueuedChecks checks = queue_check_all(one, stream.get());
      stream.synchronize();
      const std::vector<GuardReport> r = checks.reports();
      int wrong = 0;
      for (const View& v : views) {
        for (int64_t c = 0; c < 8; ++c) {
          const int64_t at = v.byte_offset() + 4 * c;
          float f;
          std::memcpy(&f, rep->bytes(0, 0) + at, 4);
          if (f != 1.0f || !is_output_poison(DType::kF32, rep->bytes(1, 0) + at)) ++wrong;
        }
      }
      report(wrong == 0 && r.size() == 1 && r[0].stray_bytes == 1 && r[0].first.offset == between,
             "six dense outputs (four in the arm's pass, two from the span list): written, then poisoned again; a "
             "byte between two is the check's one stray: " + r[0].describe());
    }
    six.arm();
    float f = 0;
    six.read(256 * 5, &f, 4);
    report(is_output_poison(DType::kF32, reinterpret_cast<const uint8_t*>(&f)), "and arm() alone poisons the sixth");
  }
}

}  // namespace

int main() {
  const DeviceInfo device = gpu_test::require_gpu();
  std::printf("device guarded buffers (core/backend/cuda_guarded_buffer.h) on %s\n", device.name.c_str());
  try {
    first_arm_in_capture();
    mirror_host_tests();
    ragged_end();
    compare_with_host();
    batches(false);
    batches(true);
    queued_rounds();
    gated_snapshot();
    chained_arms();
    graph_rounds();
    reports_without_wait();
    queued_staging();
    streams_checksum_and_outputs();
    large_buffer();
    queued_repeats();
  } catch (const std::exception& e) {
    report(false, std::string("unexpected exception: ") + e.what());
  }
  return tally.finish("device guarded buffers");
}
