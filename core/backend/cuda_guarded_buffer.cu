// Guarded device memory: pattern fills, arm() through host staging, and the stray-write check and checksum kernels.
#include "core/backend/cuda_guarded_buffer.h"

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <utility>

#include "core/poison.h"
#include "core/tensor.h"

namespace mlacheck {
namespace {

constexpr int kThreads = 256;
// Chunks of 16 bytes each thread loads before comparing any: enough bytes in flight per SM to keep
// HBM busy without a deep pipeline.
constexpr int kUnroll = 4;
// The checksum reads one stream, not two: twice the chunks per thread for as many bytes in flight.
constexpr int kChecksumUnroll = 8;

// The result of one check, in device memory; the host fetches it whole.
struct Tally {
  unsigned long long first;      // lowest stray storage index; ~0 when there is none
  unsigned long long last;       // highest stray storage index
  unsigned long long count;      // stray bytes
  unsigned long long sum_now;    // checksum of the storage at check() (checksum fast path)
  unsigned long long sum_armed;  // checksum taken by arm()
};

// One byte per position modulo 256. Both patterns of GuardedMemory depend only on the offset
// modulo 256 (checked once, below), and red zones are multiples of 256, so a storage index gives
// the same table entry as its offset from data().
struct PatternTable {
  uint8_t byte[256];
};

PatternTable pattern_table(bool red) {
  PatternTable t;
  for (int i = 0; i < 256; ++i) t.byte[i] = red ? GuardedMemory::red_zone_byte(i) : GuardedMemory::poison_byte(i);
  return t;
}

// The device fills read the patterns from a 256-entry table; that is only the host's pattern if it
// repeats every 256 bytes. Fails loudly if someone changes the pattern functions so it does not.
void require_periodic_patterns() {
  static const bool ok = [] {
    for (int64_t off = -1024; off < 1024; ++off) {
      const uint8_t k = static_cast<uint8_t>(off & 0xFF);
      if (GuardedMemory::red_zone_byte(off) != GuardedMemory::red_zone_byte(k) ||
          GuardedMemory::poison_byte(off) != GuardedMemory::poison_byte(k)) {
        return false;
      }
    }
    return true;
  }();
  MLA_REQUIRE(ok, "DeviceGuardedBuffer: the red zone or poison pattern no longer repeats every 256 bytes; "
                  "the device fill tables (cuda_guarded_buffer.cu) must change with it");
}

__global__ void paint_kernel(uint8_t* storage, int64_t begin, int64_t end, PatternTable t) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = begin + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < end; i += stride) {
    storage[i] = t.byte[i & 0xFF];
  }
}

// Output bits of the 16 data bytes at offset off (a multiple of 16): bit b is byte off + b. Red
// zone bytes are never outputs. The mask is zero-padded, so the chunk that straddles the end of the
// data reads zeros for the trailing red zone's bytes.
__device__ __forceinline__ uint32_t output_bits16(const uint8_t* __restrict__ mask, int64_t off, int64_t size) {
  if (off < 0 || off >= size) return 0;
  return *reinterpret_cast<const uint16_t*>(mask + (off >> 3));
}

// Bit i set iff byte i of x is not zero.
__device__ __forceinline__ uint32_t nonzero_bytes(uint32_t x) {
  uint32_t t = ((x & 0x7F7F7F7Fu) + 0x7F7F7F7Fu) | x;  // bit 7 of each byte: the byte is not zero
  t &= 0x80808080u;
  return ((t >> 7) & 1u) | ((t >> 14) & 2u) | ((t >> 21) & 4u) | ((t >> 28) & 8u);
}

// Byte mask of a 4-bit group: bit j set makes byte j all ones.
__device__ __forceinline__ uint32_t byte_mask4(uint32_t bits) {
  return ((bits & 1u) ? 0x000000FFu : 0u) | ((bits & 2u) ? 0x0000FF00u : 0u) | ((bits & 4u) ? 0x00FF0000u : 0u) |
         ((bits & 8u) ? 0xFF000000u : 0u);
}

// Folds a thread's tally into the block's warp, then one lane adds it to the result. Every thread
// of the block must call it (warp collectives).
__device__ __forceinline__ void publish_strays(unsigned long long count, unsigned long long first,
                                               unsigned long long last, Tally* out) {
  if (__ballot_sync(0xFFFFFFFFu, count != 0) == 0) return;  // the common case: nothing to add
  for (int o = 16; o > 0; o >>= 1) {
    count += __shfl_xor_sync(0xFFFFFFFFu, count, o);
    first = min(first, __shfl_xor_sync(0xFFFFFFFFu, first, o));
    last = max(last, __shfl_xor_sync(0xFFFFFFFFu, last, o));
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&out->count, count);
    atomicMin(&out->first, first);
    atomicMax(&out->last, last);
  }
}

// Compares the storage with the snapshot over `chunks` 16-byte chunks and the byte tail after them
// (always in the trailing red zone), ignoring bytes whose output bit is set. With `gated`, does
// nothing when the checksum pass found the sums equal.
__global__ void __launch_bounds__(kThreads) compare_kernel(const uint4* __restrict__ now, const uint4* __restrict__ was,
                                                           const uint8_t* __restrict__ mask, int64_t chunks,
                                                           int64_t total, int64_t red_zone, int64_t size, bool gated,
                                                           Tally* tally) {
  if (gated && tally->sum_now == tally->sum_armed) return;
  unsigned long long count = 0, first = ~0ull, last = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c0 = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c0 < chunks; c0 += stride * kUnroll) {
    uint4 a[kUnroll], b[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + u * stride;
      if (c < chunks) {
        a[u] = __ldcs(now + c);
        b[u] = __ldcs(was + c);
      } else {
        a[u] = b[u] = make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t dx = a[u].x ^ b[u].x, dy = a[u].y ^ b[u].y, dz = a[u].z ^ b[u].z, dw = a[u].w ^ b[u].w;
      if ((dx | dy | dz | dw) == 0) continue;  // unchanged: most of any buffer
      const int64_t c = c0 + u * stride;
      const uint32_t out = output_bits16(mask, c * 16 - red_zone, size);
      if (out == 0xFFFFu) continue;  // a chunk inside an output: any change is allowed
      uint32_t stray = nonzero_bytes(dx) | (nonzero_bytes(dy) << 4) | (nonzero_bytes(dz) << 8) | (nonzero_bytes(dw) << 12);
      stray &= ~out;  // with out == 0 (outside every output) every changed byte is stray
      if (stray == 0) continue;
      const unsigned long long base = static_cast<unsigned long long>(c) * 16;
      count += __popc(stray);
      first = min(first, base + static_cast<unsigned>(__ffs(stray) - 1));
      last = max(last, base + static_cast<unsigned>(31 - __clz(stray)));
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const uint8_t* n = reinterpret_cast<const uint8_t*>(now);
    const uint8_t* w = reinterpret_cast<const uint8_t*>(was);
    for (int64_t i = chunks * 16; i < total; ++i) {
      if (n[i] == w[i]) continue;
      ++count;
      first = min(first, static_cast<unsigned long long>(i));
      last = max(last, static_cast<unsigned long long>(i));
    }
  }
  publish_strays(count, first, last, tally);
}

// murmur3's 64-bit finalizer: a bijection that spreads every input bit over the output.
__device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
  z ^= z >> 33;
  z *= 0xFF51AFD7ED558CCDull;
  z ^= z >> 33;
  z *= 0xC4CEB9FE1A85EC53ull;
  z ^= z >> 33;
  return z;
}

// The checksum term of the 8-byte word at word index i (or of a tail byte, keyed past every word
// index). For a fixed position it is a bijection of the word, so changing one word always changes
// the sum.
__device__ __forceinline__ unsigned long long word_term(unsigned long long word, unsigned long long index) {
  return mix64(word ^ (index * 0x9E3779B97F4A7C15ull));
}

// Sums word_term over every byte of the storage outside the outputs (output bytes count as zero)
// into *sum; with copy_to, also copies the storage there (arm's snapshot, in the same pass).
__global__ void __launch_bounds__(kThreads) checksum_kernel(const uint4* __restrict__ src, uint4* __restrict__ copy_to,
                                                            const uint8_t* __restrict__ mask, int64_t chunks,
                                                            int64_t total, int64_t red_zone, int64_t size,
                                                            unsigned long long* sum) {
  unsigned long long acc = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c0 = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c0 < chunks;
       c0 += stride * kChecksumUnroll) {
    // Every load of the round first, the mask's with the data's: loaded one at a time where they
    // are used, each mask load would wait a full memory latency.
    uint4 a[kChecksumUnroll];
    uint32_t out[kChecksumUnroll];
#pragma unroll
    for (int u = 0; u < kChecksumUnroll; ++u) {
      const int64_t c = c0 + u * stride;
      const bool in = c < chunks;
      a[u] = in ? __ldcs(src + c) : make_uint4(0, 0, 0, 0);
      out[u] = in ? output_bits16(mask, c * 16 - red_zone, size) : 0xFFFFu;
    }
#pragma unroll
    for (int u = 0; u < kChecksumUnroll; ++u) {
      const int64_t c = c0 + u * stride;
      if (c >= chunks) continue;
      if (copy_to) copy_to[c] = a[u];
      const uint32_t m = out[u];
      if (m == 0xFFFFu) continue;
      uint4 v = a[u];
      if (m != 0) {
        v.x &= ~byte_mask4(m & 0xFu);
        v.y &= ~byte_mask4((m >> 4) & 0xFu);
        v.z &= ~byte_mask4((m >> 8) & 0xFu);
        v.w &= ~byte_mask4((m >> 12) & 0xFu);
      }
      const unsigned long long i = static_cast<unsigned long long>(c) * 2;
      acc += word_term(v.x | (static_cast<unsigned long long>(v.y) << 32), i);
      acc += word_term(v.z | (static_cast<unsigned long long>(v.w) << 32), i + 1);
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const uint8_t* s = reinterpret_cast<const uint8_t*>(src);
    uint8_t* d = reinterpret_cast<uint8_t*>(copy_to);
    for (int64_t i = chunks * 16; i < total; ++i) {
      if (d) d[i] = s[i];
      acc += word_term(s[i], (1ull << 62) + static_cast<unsigned long long>(i));
    }
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xFFFFFFFFu, acc, o);
  if ((threadIdx.x & 31) == 0 && acc != 0) atomicAdd(sum, acc);
}

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

int blocks_for(int64_t work_items, int64_t per_block, int limit) {
  const int64_t want = (work_items + per_block - 1) / per_block;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(want, limit)));
}

}  // namespace

DeviceGuardedBuffer::DeviceGuardedBuffer(std::string name, int64_t bytes, int64_t red_zone)
    : GuardedMemory(std::move(name), bytes, red_zone) {
  require_periodic_patterns();
  auto allocate = [this](int64_t n, const char* what) {
    try {
      return cuda::DeviceAllocation(static_cast<size_t>(n));
    } catch (const cuda::LaunchError& e) {
      throw cuda::LaunchError("guarded buffer '" + this->name() + "' (" + std::to_string(size()) + " bytes): " +
                                  what + ": " + e.what(),
                              e.code());
    }
  };
  // Storage and snapshot are 16-byte multiples (cudaMalloc aligns to 256) for the vector loads.
  const int64_t alloc = round_up(total(), 256);
  storage_ = allocate(alloc, "storage");
  snapshot_ = allocate(alloc, "snapshot");
  // One bit per data byte, zero-padded so the 16-bit mask load of the last chunk stays inside.
  mask_ = allocate(round_up((size() + 7) / 8, 16) + 16, "output mask");
  scratch_ = allocate(sizeof(Tally), "check tally");

  int device = 0, sms = 0, per_sm = 0;
  cuda::check(cudaGetDevice(&device), "cudaGetDevice");
  cuda::check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  cuda::check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, compare_kernel, kThreads, 0),
              "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  grid_limit_ = std::max(1, sms * std::max(1, per_sm));
  cuda::check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, checksum_kernel, kThreads, 0),
              "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  checksum_grid_limit_ = std::max(1, sms * std::max(1, per_sm));

  cuda::check(cudaMemset(mask_.get(), 0, mask_.bytes()), "guarded buffer: cudaMemset of the output mask");
  cuda::check(cudaMemset(scratch_.get(), 0, scratch_.bytes()), "guarded buffer: cudaMemset of the tally");
  paint(0, this->red_zone(), true, nullptr);
  paint(this->red_zone(), this->red_zone() + size(), false, nullptr);
  paint(this->red_zone() + size(), total(), true, nullptr);
  cuda::check(cudaStreamSynchronize(nullptr), "guarded buffer: initial fill");
}

DeviceGuardedBuffer::DeviceGuardedBuffer(DeviceGuardedBuffer&&) noexcept = default;
DeviceGuardedBuffer& DeviceGuardedBuffer::operator=(DeviceGuardedBuffer&&) noexcept = default;
DeviceGuardedBuffer::~DeviceGuardedBuffer() = default;

void DeviceGuardedBuffer::paint(int64_t begin, int64_t end, bool red, cudaStream_t stream) {
  if (end <= begin) return;
  paint_kernel<<<blocks_for(end - begin, kThreads, grid_limit_), kThreads, 0, stream>>>(storage_.as<uint8_t>(), begin,
                                                                                          end, pattern_table(red));
  cuda::check_launch("paint_kernel");
}

void DeviceGuardedBuffer::write(int64_t offset, const void* src, int64_t bytes) {
  require_inside(offset, bytes, "write");
  if (bytes == 0) return;
  cuda::check(cudaMemcpy(data() + offset, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice),
              ("guarded buffer '" + name() + "': write (cudaMemcpy)").c_str());
  // cudaMemcpy from pageable memory may return before its last DMA lands; a kernel launched next on
  // a non-blocking stream must see the bytes.
  cuda::check(cudaStreamSynchronize(cudaStreamLegacy), ("guarded buffer '" + name() + "': write").c_str());
}

void DeviceGuardedBuffer::read(int64_t offset, void* dst, int64_t bytes) const {
  require_inside(offset, bytes, "read");
  if (bytes == 0) return;
  cuda::check(cudaMemcpy(dst, data() + offset, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost),
              ("guarded buffer '" + name() + "': read (cudaMemcpy)").c_str());
}

void DeviceGuardedBuffer::set_checksum_fast_path(bool on) {
  if (on == checksum_) return;
  checksum_ = on;
  armed_ = false;  // the armed checksum is taken by arm()
}

int64_t DeviceGuardedBuffer::device_bytes() const {
  return static_cast<int64_t>(storage_.bytes() + snapshot_.bytes() + mask_.bytes() + scratch_.bytes());
}

void DeviceGuardedBuffer::arm() {
  cuda::check(cudaDeviceSynchronize(), ("guarded buffer '" + name() + "': arm (waiting for the device)").c_str());
  arm_on(nullptr);
}

void DeviceGuardedBuffer::arm(cudaStream_t stream) { arm_on(stream); }

void DeviceGuardedBuffer::arm_on(cudaStream_t stream) {
  const std::string what = "guarded buffer '" + name() + "': arm";
  armed_ = false;
  bool same_outputs = prepared_ && prepared_outputs_.size() == outputs().size();
  for (size_t i = 0; same_outputs && i < outputs().size(); ++i) same_outputs = prepared_outputs_[i].view == outputs()[i].view;
  if (!same_outputs) {
    prepared_ = false;
    poison_images_.clear();
    // The mask changes only with the outputs; re-sending it each arm would cost size/8 bytes of
    // host-to-device copy per launch.
    if (!output_mask().empty()) {
      cuda::check(cudaMemcpyAsync(mask_.get(), output_mask().data(), output_mask().size(), cudaMemcpyHostToDevice, stream),
                  (what + " (uploading the output mask)").c_str());
    }
    // A dense view (its elements cover its whole byte span) is all poison after arm(), whatever it
    // held: its poisoned bytes are made once here and re-sent by later arms.
    for (const NamedView& o : outputs()) {
      const ByteSpan span = o.view.byte_span();
      const bool dense = !span.empty() && o.view.numel() * o.view.element_size() == span.size();
      poison_images_.emplace_back(dense ? static_cast<size_t>(span.size()) : 0);
      if (dense) {
        poison_output(HostTensor(poison_images_.back().data(), o.view.with_byte_offset(o.view.byte_offset() - span.begin)));
      }
    }
  }
  // Output poison: the same poison_output as the host buffer, applied to a host copy of each
  // view's byte span. A view with gaps (padded rows) is read back first, since its gaps hold bytes
  // the launch must leave alone; the staging copies live until the final synchronize.
  std::vector<std::unique_ptr<uint8_t[]>> staging;
  for (size_t i = 0; i < outputs().size(); ++i) {
    const View& v = outputs()[i].view;
    const ByteSpan span = v.byte_span();
    if (span.empty()) continue;
    const uint8_t* poisoned = poison_images_[i].data();
    if (poisoned == nullptr) {
      staging.emplace_back(new uint8_t[static_cast<size_t>(span.size())]);
      uint8_t* host = staging.back().get();
      cuda::check(cudaMemcpyAsync(host, data() + span.begin, static_cast<size_t>(span.size()), cudaMemcpyDeviceToHost, stream),
                  (what + " (reading an output view)").c_str());
      cuda::check(cudaStreamSynchronize(stream), (what + " (reading an output view)").c_str());
      poison_output(HostTensor(host, v.with_byte_offset(v.byte_offset() - span.begin)));
      poisoned = host;
    }
    cuda::check(cudaMemcpyAsync(data() + span.begin, poisoned, static_cast<size_t>(span.size()), cudaMemcpyHostToDevice, stream),
                (what + " (writing an output view's poison)").c_str());
  }
  paint(0, red_zone(), true, stream);
  paint(red_zone() + size(), total(), true, stream);
  prepared_outputs_ = outputs();
  prepared_ = true;

  const int64_t chunks = total() / 16;
  if (checksum_) {
    Tally* t = scratch_.as<Tally>();
    cuda::check(cudaMemsetAsync(&t->sum_armed, 0, sizeof t->sum_armed, stream), what.c_str());
    checksum_kernel<<<blocks_for(chunks, kThreads * kChecksumUnroll, checksum_grid_limit_), kThreads, 0, stream>>>(
        storage_.as<const uint4>(), snapshot_.as<uint4>(), mask_.as<const uint8_t>(), chunks, total(), red_zone(), size(),
        &t->sum_armed);
    cuda::check_launch("checksum_kernel");
  } else {
    cuda::check(cudaMemcpyAsync(snapshot_.get(), storage_.get(), static_cast<size_t>(total()), cudaMemcpyDeviceToDevice,
                                stream),
                (what + " (snapshot)").c_str());
  }
  cuda::check(cudaStreamSynchronize(stream), what.c_str());
  armed_ = true;
}

GuardReport DeviceGuardedBuffer::check() const {
  cuda::check(cudaDeviceSynchronize(), ("guarded buffer '" + name() + "': check (waiting for the device)").c_str());
  return check_on(nullptr);
}

GuardReport DeviceGuardedBuffer::check(cudaStream_t stream) const { return check_on(stream); }

GuardReport DeviceGuardedBuffer::check_on(cudaStream_t stream) const {
  MLA_REQUIRE(armed_, "guarded buffer '", name(), "': check() before arm() (or outputs changed since)");
  const std::string what = "guarded buffer '" + name() + "': check";
  Tally* t = scratch_.as<Tally>();
  // Reset count, last and sum_now to 0 and first to ~0 (no stray yet); sum_armed stays.
  cuda::check(cudaMemsetAsync(t, 0, offsetof(Tally, sum_armed), stream), what.c_str());
  cuda::check(cudaMemsetAsync(&t->first, 0xFF, sizeof t->first, stream), what.c_str());
  const int64_t chunks = total() / 16;
  const int grid = blocks_for(chunks, kThreads * kUnroll, grid_limit_);
  if (checksum_) {
    checksum_kernel<<<blocks_for(chunks, kThreads * kChecksumUnroll, checksum_grid_limit_), kThreads, 0, stream>>>(storage_.as<const uint4>(), nullptr, mask_.as<const uint8_t>(), chunks,
                                                   total(), red_zone(), size(), &t->sum_now);
    cuda::check_launch("checksum_kernel");
  }
  // Gated on the checksum: when the sums agree every block returns at once, and the report is
  // built from the tally's zeros.
  compare_kernel<<<grid, kThreads, 0, stream>>>(storage_.as<const uint4>(), snapshot_.as<const uint4>(),
                                                mask_.as<const uint8_t>(), chunks, total(), red_zone(), size(), checksum_, t);
  cuda::check_launch("compare_kernel");
  Tally h{};
  cuda::check(cudaMemcpyAsync(&h, t, sizeof h, cudaMemcpyDeviceToHost, stream), what.c_str());
  cuda::check(cudaStreamSynchronize(stream), what.c_str());

  GuardReport report;
  if (h.count == 0) return report;
  uint8_t now = 0, was = 0;
  cuda::check(cudaMemcpyAsync(&now, storage_.as<const uint8_t>() + h.first, 1, cudaMemcpyDeviceToHost, stream), what.c_str());
  cuda::check(cudaMemcpyAsync(&was, snapshot_.as<const uint8_t>() + h.first, 1, cudaMemcpyDeviceToHost, stream), what.c_str());
  cuda::check(cudaStreamSynchronize(stream), what.c_str());
  report.stray_bytes = static_cast<int64_t>(h.count);
  report.first = describe_stray(static_cast<int64_t>(h.first) - red_zone(), was, now);
  report.last_offset = static_cast<int64_t>(h.last) - red_zone();
  return report;
}

}  // namespace mlacheck
