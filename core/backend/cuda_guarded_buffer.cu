// Guarded device memory: the first fill, the arm, stray-write check and checksum kernels, and their batching (copies in and out and queued staging: cuda_guarded_buffer_host.cpp).
// Why one file past 500 lines: the kernels and the host side that batches them (arm_all, check_all)
// share the private layout of the batched work lists, which no header should expose.
#include "core/backend/cuda_guarded_buffer.h"
#include "core/backend/cuda_patterns.h"

#include "core/read_fence.h"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>

#include "core/poison.h"
#include "core/tensor.h"

namespace mlacheck {
namespace {

constexpr int kThreads = 256;
// Chunks of 16 bytes each thread loads before using any: enough bytes in flight per SM to keep HBM
// busy without a deep pipeline.
constexpr int kUnroll = 4;
// Buffers one batch kernel covers (blockIdx.y), and outputs per buffer poisoned on the device: the
// batch travels as a kernel parameter, about 2 KiB at these sizes (the limit is 4 KiB).
constexpr int kMaxSegments = 8;
// A buffer smaller than this copies its snapshot in the arm's own pass even on the checksum path:
// the copy of a few MiB costs less than the launch of the kernel that would gate it.
constexpr int64_t kGateBytes = int64_t(8) << 20;
constexpr int kMaxPoisonSpans = 4;
// The top bit of a check's serial: set on the exact comparison that follows a checksum mismatch.
constexpr uint32_t kRecheckSerial = 0x80000000u;

// The result of one check, in each buffer's device scratch. The last block of a check to finish
// copies it to the buffer's slot in mapped host memory (a Slot, with the serial the host gave the
// check) and resets it for the next; arm resets it too, so a check that never ran leaves nothing
// behind.
struct alignas(16) Tally {
  unsigned long long first;       // lowest stray storage index; ~0 when there is none
  unsigned long long last;        // highest stray storage index
  unsigned long long count;       // stray bytes
  unsigned long long sum_now;     // checksum of the storage at check() (checksum fast path)
  unsigned long long sum_armed;   // checksum taken by arm()
  unsigned long long sum_arming;  // arm's blocks add here; its last block moves it to sum_armed
  unsigned int done;              // blocks of the running kernel finished
  unsigned int serial;            // in the mapped slot: the check it is the result of
  unsigned int clean;             // checksum path: the last check's sums agreed (nothing strayed)
  unsigned int stale;             // set by a gated arm: the snapshot must be copied again
  unsigned int runs;              // checks this buffer has finished (the exact one after a mismatch aside)
};

// A check's result in the buffer's slot of mapped host memory. `outcome` is one 8-byte store, the
// last: the checks finished so far (Tally::runs) times two, plus one when nothing strayed (no byte
// differs, or the sums agree). A host that reads its own check's count there with the bit set
// knows the check ran clean without synchronizing the stream and without reading anything else
// (collect_checks); any other outcome waits for the stream and reads the rest.
struct alignas(16) Slot {
  unsigned long long first, last, count, sum_now, sum_armed;  // as in Tally
  unsigned long long outcome;
  unsigned int serial;  // the check it is the result of
};
static_assert(sizeof(Slot) <= cuda::MappedSlot::kSlotBytes, "a check's result fits its mapped slot");
__host__ __device__ constexpr unsigned long long outcome_of(unsigned int runs, bool clean) {
  return static_cast<unsigned long long>(runs) << 1 | (clean ? 1u : 0u);
}

using cuda::PatternTable;
using cuda::pattern_table;
using cuda::require_periodic_patterns;

// A new buffer's first fill, one kernel: the red zones' pattern before and after the data, the
// poison pattern over the data, and the output mask and the tally zeroed.
__global__ void init_kernel(uint8_t* storage, int64_t red_zone, int64_t size, int64_t total, PatternTable red,
                            PatternTable data, uint8_t* mask, int64_t mask_bytes, uint8_t* tally, int tally_bytes) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  for (int64_t i = first; i < total; i += stride) {
    storage[i] = (i < red_zone || i >= red_zone + size ? red : data).byte[i & 0xFF];
  }
  for (int64_t i = first; i < mask_bytes; i += stride) mask[i] = 0;
  if (first < tally_bytes) tally[first] = 0;
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
    __threadfence();  // before the block counts itself done (last_block_done)
  }
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


// The checksum of one 16-byte chunk at chunk index c, output bytes (bits of `out`) counted as zero.
__device__ __forceinline__ unsigned long long chunk_sum(uint4 v, uint32_t out, int64_t c) {
  if (out == 0xFFFFu) return 0;
  if (out != 0) {
    v.x &= ~byte_mask4(out & 0xFu);
    v.y &= ~byte_mask4((out >> 4) & 0xFu);
    v.z &= ~byte_mask4((out >> 8) & 0xFu);
    v.w &= ~byte_mask4((out >> 12) & 0xFu);
  }
  const unsigned long long i = static_cast<unsigned long long>(c) * 2;
  return word_term(v.x | (static_cast<unsigned long long>(v.y) << 32), i) +
         word_term(v.z | (static_cast<unsigned long long>(v.w) << 32), i + 1);
}

// The checksum term of a byte past the last whole chunk (always in the trailing red zone).
__device__ __forceinline__ unsigned long long tail_sum(uint8_t b, int64_t i) {
  return word_term(b, (1ull << 62) + static_cast<unsigned long long>(i));
}

// An output view's poison on the device. Its elements start at origin + a multiple of the element
// size, so the byte at data offset o of an element byte is pattern[(o - origin) & element_mask].
// In a dense view every byte of [begin, end) is an element byte; otherwise only those whose output
// bit is set (the host makes sure no other output's bytes lie in the span).
struct PoisonSpan {
  int64_t begin, end, origin;
  uint32_t element_mask;
  uint32_t dense;
  uint8_t pattern[8];
};

// One buffer of a batch.
struct Segment {
  uint8_t* storage;
  uint8_t* snapshot;
  const uint8_t* mask;
  Tally* tally;           // the buffer's scratch
  Slot* mapped;           // check: its slot in mapped host memory (a device pointer to it)
  uint32_t serial;        // check: the serial to leave in the slot
  int64_t chunks, total;  // whole 16-byte chunks of the storage; storage bytes
  int64_t red_zone, size;
  int32_t checksum;       // arm takes sum_armed; check computes sum_now instead of comparing
  int32_t force;          // arm (checksum path): copy the snapshot whatever the sums say
  int32_t chained;        // arm (checksum path): after a clean check, poison the outputs and stop
  int32_t outputs;        // the buffer has output bytes (else its mask is all zeros: not read)
  int32_t spans;
  PoisonSpan span[kMaxPoisonSpans];
};

struct Batch {
  Segment seg[kMaxSegments];
  PatternTable red;
  int32_t count;
};

// A DevicePoison (the host's description of an output poisoned on the device) as the kernels take it.
template <class Poison>
PoisonSpan poison_span(const Poison& p) {
  PoisonSpan d{};
  d.begin = p.begin, d.end = p.end, d.origin = p.origin;
  d.element_mask = static_cast<uint32_t>(p.element_bytes - 1), d.dense = p.dense;
  std::copy(p.pattern, p.pattern + 8, d.pattern);
  return d;
}

// Outputs past the arm kernel's kMaxPoisonSpans, each dense over its span (every byte an element
// byte, so all of it poison), from a list in device memory: a block per span at a time, its threads
// over the span's bytes. Queued after the arm kernel (which may store a chunk one of these shares)
// and after each re-poison.
__global__ void __launch_bounds__(kThreads) poison_spans_kernel(uint8_t* storage, int64_t red_zone,
                                                                const PoisonSpan* spans, int count) {
  for (int k = blockIdx.x; k < count; k += gridDim.x) {
    const PoisonSpan p = spans[k];
    unsigned long long pattern;
    memcpy(&pattern, p.pattern, 8);
    for (int64_t o = p.begin + threadIdx.x; o < p.end; o += blockDim.x) {
      storage[red_zone + o] = static_cast<uint8_t>(pattern >> (8 * ((o - p.origin) & p.element_mask)));
    }
  }
}

// The check fields of a tally as a check expects to find them: no stray yet, no sum.
__device__ __forceinline__ void reset_check(Tally* t) {
  t->first = ~0ull;
  t->last = t->count = t->sum_now = 0;
}

// True in thread 0 of the last block of this segment's grid row to get here. Every thread of the
// block must call it, after its own atomics on the tally, each followed by a __threadfence() of the
// thread that made it (only the few threads that add anything pay for a fence); the last block
// fences again before reading what the others added.
__device__ __forceinline__ bool last_block_done(Tally* t) {
  __syncthreads();
  if (threadIdx.x != 0) return false;
  __threadfence();
  if (atomicAdd(&t->done, 1u) != gridDim.x - 1) return false;
  __threadfence();
  t->done = 0;
  return true;
}

enum ChunkKind : uint32_t { kCopy, kPatch, kFill, kSkip };

// What arm does to chunk c: copy it as it is, patch some of its bytes (red zone or output poison),
// or fill it whole with one dense output's poison (no need to read it); for kFill, the span's
// index in the bits above the kind's two.
__device__ __forceinline__ uint32_t chunk_kind(const Segment& s, int64_t c) {
  const int64_t lo = c * 16 - s.red_zone, hi = lo + 16;
  if (lo < 0 || hi > s.size) return kPatch;
  uint32_t kind = kCopy;
  for (int k = 0; k < s.spans; ++k) {
    const PoisonSpan& p = s.span[k];
    if (hi <= p.begin || lo >= p.end) continue;
    if (p.dense && p.begin <= lo && hi <= p.end) return kFill | static_cast<uint32_t>(k) << 2;
    kind = kPatch;
  }
  return kind;
}

// The 16 bytes of any chunk wholly inside dense span p: an element's size divides 16 and chunks
// start 16 bytes apart, so every such chunk starts at the same phase of the element poison. One
// word per span, not a loop over each chunk's bytes (which made a 17 MB output's poison take 48 µs).
__device__ __forceinline__ uint4 dense_fill(const PoisonSpan& p, int64_t red_zone) {
  unsigned long long pattern;
  memcpy(&pattern, p.pattern, 8);
  unsigned long long w = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    w |= ((pattern >> (8 * ((j - red_zone - p.origin) & p.element_mask))) & 0xFFull) << (8 * j);
  }
  const uint32_t a = static_cast<uint32_t>(w), b = static_cast<uint32_t>(w >> 32);
  return make_uint4(a, b, a, b);
}

// Chunk c as arm leaves it: red zone bytes from the table (none with red null: repoison_kernel),
// output bytes poisoned, the rest as read.
// The few chunks that take this path (red zones, an output's first and last chunk) are each one
// warp lane's serial work, and the slowest of them is the kernel's critical path: so the red zone
// bytes are a fully unrolled loop over the table in shared memory (red: from the kernel's
// parameters, each lane's different byte was a constant-cache access serialized across the warp),
// and each output span is copied into registers once and visits only the bytes it covers. Before,
// a per-byte loop over every span made a 64 KiB arm take 10 µs.
__device__ __forceinline__ uint4 patch_chunk(const Segment& s, const uint8_t* red, int64_t c, uint4 v) {
  union {
    uint4 v;
    uint8_t b[16];
  } u;
  u.v = v;
  const int64_t lo = c * 16 - s.red_zone;  // the data offset of the chunk's first byte
  if (red != nullptr && (lo < 0 || lo + 16 > s.size)) {
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int64_t o = lo + j;
      if (o < 0 || o >= s.size) u.b[j] = red[(c * 16 + j) & 0xFF];
    }
  }
  for (int k = 0; k < s.spans; ++k) {
    const PoisonSpan p = s.span[k];
    const int64_t from = max(lo, p.begin), to = min(lo + 16, p.end);
    if (from >= to) continue;
    unsigned long long pattern;
    memcpy(&pattern, p.pattern, 8);
    for (int64_t o = from; o < to; ++o) {
      if (p.dense || ((s.mask[o >> 3] >> (o & 7)) & 1)) {
        u.b[o - lo] = static_cast<uint8_t>(pattern >> (8 * ((o - p.origin) & p.element_mask)));
      }
    }
  }
  return u.v;
}

// The outputs of one segment poisoned again and nothing else: the chunks each poison span covers,
// patched as arm patches them, red zones and snapshot left as they are. Two spans that share a
// chunk both store it whole, with the same bytes: patch_chunk poisons every span's bytes, and no
// other byte of it changes while this runs. The segment's blocks from `block` of `blocks`.
__device__ __forceinline__ void repoison_segment(const Segment& s, int64_t block, int64_t blocks) {
  uint4* storage = reinterpret_cast<uint4*>(s.storage);
  const int64_t stride = blocks * blockDim.x;
  for (int k = 0; k < s.spans; ++k) {
    const PoisonSpan& p = s.span[k];
    const uint4 fill = p.dense ? dense_fill(p, s.red_zone) : make_uint4(0, 0, 0, 0);
    const int64_t end = (s.red_zone + p.end + 15) / 16;
    for (int64_t c = (s.red_zone + p.begin) / 16 + block * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < end;
         c += stride) {
      const int64_t lo = c * 16 - s.red_zone;
      const bool whole = p.dense && p.begin <= lo && lo + 16 <= p.end;  // every byte is this span's poison
      storage[c] = whole ? fill : patch_chunk(s, nullptr, c, storage[c]);
    }
  }
}

// arm() of every segment (blockIdx.y): the storage with its outputs poisoned and red zones
// restored is written back where it changed and copied to the snapshot; with the checksum on, its
// checksum outside the outputs is added to sum_armed.
__global__ void __launch_bounds__(kThreads) arm_kernel(const Batch b) {
  const Segment& s = b.seg[blockIdx.y];
  uint4* storage = reinterpret_cast<uint4*>(s.storage);
  uint4* snapshot = reinterpret_cast<uint4*>(s.snapshot);
  // Chained arms: the last check found the sums equal, so every byte outside the outputs (red zones
  // included) is as the last full arm left it and as its snapshot holds it; only the outputs need
  // their poison again. No block of this kernel writes `clean` on this path, so all agree.
  if (s.chained && !s.force && *static_cast<const volatile unsigned int*>(&s.tally->clean) != 0) {
    repoison_segment(s, blockIdx.x, gridDim.x);
    return;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) reset_check(s.tally);  // untouched by arm's other blocks
  __shared__ uint32_t red_words[64];  // the red zone table (see patch_chunk)
  if (threadIdx.x < 64) red_words[threadIdx.x] = reinterpret_cast<const uint32_t*>(b.red.byte)[threadIdx.x];
  __syncthreads();
  const uint8_t* red = reinterpret_cast<const uint8_t*>(red_words);
  // The checksum path gates the snapshot: it is copied in this pass only when the host knows it is
  // stale (force: first arm, new outputs, a host write); otherwise this pass only sums, and
  // snapshot_kernel copies it after if the sum says the bytes changed since the last clean check.
  // (A chained arm that gets here copies its snapshot in this pass: its last check was not clean.)
  const bool gated = s.checksum && !s.force && !s.chained;
  unsigned long long acc = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c0 = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c0 < s.chunks; c0 += stride * kUnroll) {
    uint4 v[kUnroll];
    uint32_t kind[kUnroll], out[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + u * stride;
      kind[u] = c < s.chunks ? chunk_kind(s, c) : kSkip;
      v[u] = kind[u] == kCopy || kind[u] == kPatch ? __ldcs(storage + c)
             : (kind[u] & 3) == kFill             ? dense_fill(s.span[kind[u] >> 2], s.red_zone)
                                                  : make_uint4(0, 0, 0, 0);
      // The checksum's output bits, loaded with the data: loaded where they are used, each would
      // wait a memory latency of its own.
      out[u] = s.checksum && s.outputs && kind[u] != kSkip ? output_bits16(s.mask, c * 16 - s.red_zone, s.size) : 0u;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (kind[u] == kSkip) continue;
      const int64_t c = c0 + u * stride;
      if (kind[u] == kPatch) v[u] = patch_chunk(s, red, c, v[u]);
      if (kind[u] != kCopy) {
        storage[c] = v[u];
      }
      if (!gated) __stcs(snapshot + c, v[u]);
      if (s.checksum) acc += chunk_sum(v[u], out[u], c);
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    for (int64_t i = s.chunks * 16; i < s.total; ++i) {
      const uint8_t r = red[i & 0xFF];
      s.storage[i] = r;
      if (!gated) s.snapshot[i] = r;
      if (s.checksum) acc += tail_sum(r, i);
    }
  }
  if (!s.checksum) return;  // uniform over the block
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xFFFFFFFFu, acc, o);
  if ((threadIdx.x & 31) == 0 && acc != 0) {
    atomicAdd(&s.tally->sum_arming, acc);
    __threadfence();
  }
  if (last_block_done(s.tally)) {
    volatile Tally* t = s.tally;
    const unsigned long long sum = t->sum_arming;
    // Unchanged since a clean check (the same sum over the same bytes outside the same outputs):
    // the snapshot still holds them. Anything else, and snapshot_kernel copies it.
    t->stale = gated && !(t->clean && sum == t->sum_armed) ? 1u : 0u;
    t->sum_armed = sum;
    t->sum_arming = 0;
    t->clean = 0;
  }
}

// The outputs of every segment (blockIdx.y) poisoned again and nothing else (the launches of
// queue_repeats after the first).
__global__ void __launch_bounds__(kThreads) repoison_kernel(const Batch b) {
  repoison_segment(b.seg[blockIdx.y], blockIdx.x, gridDim.x);
}

// After a gated arm (the checksum path): copies the storage of each segment whose arm found it
// changed since its last clean check into its snapshot; the others return at once.
__global__ void __launch_bounds__(kThreads) snapshot_kernel(const Batch b) {
  const Segment& s = b.seg[blockIdx.y];
  if (!s.checksum || s.force) return;
  if (*static_cast<volatile unsigned int*>(&s.tally->stale) == 0) return;
  const uint4* storage = reinterpret_cast<const uint4*>(s.storage);
  uint4* snapshot = reinterpret_cast<uint4*>(s.snapshot);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c0 = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c0 < s.chunks; c0 += stride * kUnroll) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + u * stride;
      if (c < s.chunks) v[u] = __ldcs(storage + c);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + u * stride;
      if (c < s.chunks) __stcs(snapshot + c, v[u]);
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    for (int64_t i = s.chunks * 16; i < s.total; ++i) s.snapshot[i] = s.storage[i];
  }
}

// The exact check of one segment: every byte outside the outputs against the snapshot, the strays
// added to the tally.
__device__ __forceinline__ void compare_storage(const Segment& s, const uint4* now, const uint4* was, int64_t stride) {
  unsigned long long count = 0, first = ~0ull, last = 0;
  for (int64_t c0 = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c0 < s.chunks; c0 += stride * kUnroll) {
    uint4 a[kUnroll], w[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + u * stride;
      if (c < s.chunks) {
        a[u] = __ldcs(now + c);
        w[u] = __ldcs(was + c);
      } else {
        a[u] = w[u] = make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t dx = a[u].x ^ w[u].x, dy = a[u].y ^ w[u].y, dz = a[u].z ^ w[u].z, dw = a[u].w ^ w[u].w;
      if ((dx | dy | dz | dw) == 0) continue;  // unchanged: most of any buffer
      const int64_t c = c0 + u * stride;
      const uint32_t out = output_bits16(s.mask, c * 16 - s.red_zone, s.size);
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
    for (int64_t i = s.chunks * 16; i < s.total; ++i) {
      if (s.storage[i] == s.snapshot[i]) continue;
      ++count;
      first = min(first, static_cast<unsigned long long>(i));
      last = max(last, static_cast<unsigned long long>(i));
    }
  }
  publish_strays(count, first, last, s.tally);
}

// check() of every segment (blockIdx.y): the storage against the snapshot outside the outputs into
// the tally, or with the checksum on only the checksum into sum_now (the host compares the sums and
// runs the comparison for a buffer whose sums differ).
__global__ void __launch_bounds__(kThreads) check_kernel(const Batch b) {
  const Segment& s = b.seg[blockIdx.y];
  const uint4* now = reinterpret_cast<const uint4*>(s.storage);
  const uint4* was = reinterpret_cast<const uint4*>(s.snapshot);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  if (s.checksum) {  // uniform over the block
    unsigned long long acc = 0;
    for (int64_t c0 = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c0 < s.chunks;
         c0 += stride * 2 * kUnroll) {
      // Every load of the round first, the mask's with the data's: one at a time where they are
      // used, each mask load would wait a full memory latency.
      uint4 a[2 * kUnroll];
      uint32_t out[2 * kUnroll];
#pragma unroll
      for (int u = 0; u < 2 * kUnroll; ++u) {
        const int64_t c = c0 + u * stride;
        const bool in = c < s.chunks;
        a[u] = in ? __ldcs(now + c) : make_uint4(0, 0, 0, 0);
        out[u] = !in ? 0xFFFFu : s.outputs ? output_bits16(s.mask, c * 16 - s.red_zone, s.size) : 0u;
      }
#pragma unroll
      for (int u = 0; u < 2 * kUnroll; ++u) acc += chunk_sum(a[u], out[u], c0 + u * stride);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      for (int64_t i = s.chunks * 16; i < s.total; ++i) acc += tail_sum(s.storage[i], i);
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xFFFFFFFFu, acc, o);
    if ((threadIdx.x & 31) == 0 && acc != 0) {
      atomicAdd(&s.tally->sum_now, acc);
      __threadfence();
    }
  } else {
    compare_storage(s, now, was, stride);
  }
  if (last_block_done(s.tally)) {
    // The host reads the slot's fields after synchronizing the stream, which makes these writes
    // visible: no system fence. Only the outcome is read without it, a single store. The tally is
    // read in 16-byte loads past L1 (the other blocks wrote it at L2).
    const ulonglong2* t = reinterpret_cast<const ulonglong2*>(s.tally);
    const ulonglong2 a = __ldcg(t), c = __ldcg(t + 1), e = __ldcg(t + 2);
    Slot r{};
    r.first = a.x, r.last = a.y, r.count = c.x, r.sum_now = c.y, r.sum_armed = e.x;
    r.serial = s.serial;
    // The exact comparison after a checksum mismatch is not a run of its own.
    const bool recheck = (s.serial & kRecheckSerial) != 0;
    r.outcome = recheck ? outcome_of(s.tally->runs, false) : outcome_of(++s.tally->runs, s.checksum ? c.y == e.x : c.x == 0);
    *s.mapped = r;
    reset_check(s.tally);
    // What a gated arm next asks: whether these bytes were left as armed (checksum path only; the
    // exact comparison that follows a mismatch leaves it unset).
    s.tally->clean = s.checksum && r.sum_now == r.sum_armed ? 1u : 0u;
  }
}

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

int blocks_for(int64_t work_items, int64_t per_block, int limit) {
  const int64_t want = (work_items + per_block - 1) / per_block;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(want, limit)));
}

// What one device's guard kernels launch with, found once per device (a process uses few).
struct DeviceShape {
  int multiprocessors = 1;
  int grid_limit = 1;  // blocks that fill the device once: the larger of arm's and check's occupancy
};

DeviceShape device_shape() {  // a copy: a later device's entry may move the vector
  static std::mutex m;
  static std::vector<std::pair<int, DeviceShape>> known;
  int device = 0;
  cuda::check(cudaGetDevice(&device), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(m);
  for (const auto& [d, shape] : known) {
    if (d == device) return shape;
  }
  int sms = 0, arm = 0, check = 0;
  cuda::check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  cuda::check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&arm, arm_kernel, kThreads, 0),
              "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  cuda::check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&check, check_kernel, kThreads, 0),
              "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  DeviceShape shape;
  shape.multiprocessors = std::max(1, sms);
  shape.grid_limit = shape.multiprocessors * std::max({1, arm, check});
  known.emplace_back(device, shape);
  return shape;
}

int grid_limit() { return device_shape().grid_limit; }
int multiprocessors() { return device_shape().multiprocessors; }

// The bytes poison_output writes into one element of dtype t.
std::vector<uint8_t> element_poison(DType t) {
  const View one = View::contiguous(t, {1});
  std::vector<uint8_t> bytes(static_cast<size_t>(one.byte_span().size()), 0);
  poison_output(HostTensor(bytes.data(), one));
  return bytes;
}

}  // namespace

DeviceGuardedBuffer::DeviceGuardedBuffer(std::string name, int64_t bytes, int64_t red_zone, cudaStream_t stream)
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
  static_cast<volatile Slot*>(slot_.host())->outcome = 0;  // no run yet (a slot is reused once its owner is gone)

  static const PatternTable red = pattern_table(true), poison = pattern_table(false);
  if (cuda::capturing(stream)) stream = nullptr;  // allocated inside a capture: filled now, not at each replay
  init_kernel<<<blocks_for(std::max<int64_t>(total(), static_cast<int64_t>(mask_.bytes())), kThreads, grid_limit()),
                kThreads, 0, stream>>>(storage_.as<uint8_t>(), this->red_zone(), size(), total(), red, poison,
                                       mask_.as<uint8_t>(), static_cast<int64_t>(mask_.bytes()), scratch_.as<uint8_t>(),
                                       static_cast<int>(sizeof(Tally)));
  cuda::check_launch("guarded buffer: init_kernel");
  if (stream != nullptr) {
    pending_ = true, pending_on_ = stream;
    return;
  }
  cuda::check(cudaStreamSynchronize(nullptr), "guarded buffer: initial fill");
}

DeviceGuardedBuffer::DeviceGuardedBuffer(DeviceGuardedBuffer&&) noexcept = default;
DeviceGuardedBuffer& DeviceGuardedBuffer::operator=(DeviceGuardedBuffer&&) noexcept = default;
DeviceGuardedBuffer::~DeviceGuardedBuffer() {
  // Work still queued on this buffer (a fill or a write never waited for, a launch that threw
  // between arm and check) must finish before its slot can go to another owner. The whole device is
  // waited for, not the stream: the stream's owner (a Device) may be gone before its buffers. A
  // failure here is the work's, reported by the device's next user.
  if (pending_ || check_queued_) (void)cudaDeviceSynchronize();
  retire(*this);
}

void DeviceGuardedBuffer::arm() {
  cuda::check(cudaDeviceSynchronize(), ("guarded buffer '" + name() + "': arm (waiting for the device)").c_str());
  arm_buffers({this}, nullptr, true);
}

void DeviceGuardedBuffer::arm(cudaStream_t stream) { arm_buffers({this}, stream, true); }

GuardReport DeviceGuardedBuffer::check() const {
  cuda::check(cudaDeviceSynchronize(), ("guarded buffer '" + name() + "': check (waiting for the device)").c_str());
  queue_checks({this}, nullptr, false);
  return collect_checks({this}, nullptr).front();
}

GuardReport DeviceGuardedBuffer::check(cudaStream_t stream) const {
  queue_checks({this}, stream, false);
  return collect_checks({this}, stream).front();
}

namespace {

template <class Buffer, class Memory>
std::vector<Buffer*> as_device_buffers(const std::vector<Memory*>& group) {
  std::vector<Buffer*> buffers;
  buffers.reserve(group.size());
  for (Memory* m : group) buffers.push_back(&dynamic_cast<Buffer&>(*m));
  return buffers;
}

}  // namespace

void DeviceGuardedBuffer::arm_group(const std::vector<GuardedMemory*>& group, void* stream) {
  const auto buffers = as_device_buffers<DeviceGuardedBuffer>(group);
  if (stream != nullptr) {
    arm_buffers(buffers, static_cast<cudaStream_t>(stream), false);
    return;
  }
  cuda::check(cudaDeviceSynchronize(), "guarded buffers: arm (waiting for the device)");
  arm_buffers(buffers, nullptr, true);
}

bool DeviceGuardedBuffer::queue_check_group(const std::vector<GuardedMemory*>& group, void* stream) const {
  // Under compute-sanitizer's read fence (MLACHECK_DEVICE_FENCE=1) the check kernel reads bytes
  // the fence forbids until it is lifted: then the check waits for check_group.
  if (stream == nullptr || ReadFence::device_fences()) return false;
  queue_checks(as_device_buffers<const DeviceGuardedBuffer>(group), static_cast<cudaStream_t>(stream), false);
  return true;
}

void DeviceGuardedBuffer::requeue_check_group(const std::vector<GuardedMemory*>& group, void* stream) const {
  if (stream == nullptr || ReadFence::device_fences()) return;  // not queued: check_group checks at once
  for (const DeviceGuardedBuffer* b : as_device_buffers<const DeviceGuardedBuffer>(group)) {
    MLA_REQUIRE(b->check_serial_ != 0, "guarded buffer '", b->name(), "': replayed() with no check ever queued");
    b->check_queued_ = true, b->queued_on_ = static_cast<cudaStream_t>(stream);
    ++b->runs_pending_;  // one more run of the check to collect
  }
}

std::vector<GuardReport> DeviceGuardedBuffer::check_group(const std::vector<GuardedMemory*>& group, void* stream) const {
  const auto buffers = as_device_buffers<const DeviceGuardedBuffer>(group);
  bool queued = true;
  for (const DeviceGuardedBuffer* b : buffers) queued = queued && b->check_queued_ && b->queued_on_ == stream;
  if (queued) return collect_checks(buffers, static_cast<cudaStream_t>(stream));
  cuda::check(cudaDeviceSynchronize(), "guarded buffers: check (waiting for the device)");
  queue_checks(buffers, nullptr, false);
  return collect_checks(buffers, nullptr);
}

void DeviceGuardedBuffer::forget_clean_check(cudaStream_t stream) {
  if (!checksum_ || !chained_) return;
  last_check_clean_ = false;
  Tally* t = static_cast<Tally*>(scratch_.get());
  const std::string what = "guarded buffer '" + name() + "': after a write, the next arm a full one";
  cuda::check(cudaMemsetAsync(&t->clean, 0, sizeof t->clean, stream), what.c_str());
  // write() returns with its bytes in place; so does this, for an arm queued on any stream next.
  if (stream == nullptr) cuda::check(cudaStreamSynchronize(nullptr), what.c_str());
}

void DeviceGuardedBuffer::prepare_arm(cudaStream_t stream) {
  const std::string what = "guarded buffer '" + name() + "': arm";
  armed_ = false;
  bool same_outputs = prepared_ && prepared_outputs_.size() == outputs().size();
  for (size_t i = 0; same_outputs && i < outputs().size(); ++i) same_outputs = prepared_outputs_[i].view == outputs()[i].view;
  if (!same_outputs) {
    prepared_ = false;
    snapshot_stale_ = true;  // the sums cover other bytes now
    // The mask changes only with the outputs; re-sending it each arm would cost size/8 bytes of
    // host-to-device copy per launch.
    if (!output_mask().empty()) {
      // From a page-locked copy, so the upload is queued, not a copy the host waits on. Each
      // upload takes its own: one still queued reads the mask it was given.
      uint8_t* staging = take_staging(&mask_host_, &mask_upload_pending_, output_mask().size());
      std::memcpy(staging, output_mask().data(), output_mask().size());
      cuda::check(cudaMemcpyAsync(mask_.get(), staging, output_mask().size(), cudaMemcpyHostToDevice, stream),
                  (what + " (uploading the output mask)").c_str());
    }
    // Which outputs the arm kernel poisons: up to kMaxPoisonSpans whose byte spans do not
    // interleave with another output's (inside its span, a gapped view's bytes are then exactly
    // the mask's), with elements of a power-of-two size up to 8 bytes. More of them, each dense
    // over its span (all poison), go to a list in device memory that poison_spans_kernel takes
    // after the arm (a K-cache insert declares two views per slot written). The rest take a host
    // copy.
    device_poison_.clear();
    extra_poison_.clear();
    host_poisoned_.clear();
    for (size_t i = 0; i < outputs().size(); ++i) {
      const View& v = outputs()[i].view;
      const ByteSpan span = v.byte_span();
      if (span.empty()) continue;
      bool alone = true;
      for (size_t j = 0; alone && j < outputs().size(); ++j) {
        const ByteSpan other = outputs()[j].view.byte_span();
        alone = j == i || other.empty() || other.end <= span.begin || other.begin >= span.end;
      }
      const int64_t e = v.element_size();
      const std::vector<uint8_t> pattern = element_poison(v.dtype());
      const bool shaped = alone && e >= 1 && e <= 8 && (e & (e - 1)) == 0 && static_cast<int64_t>(pattern.size()) == e;
      const bool dense = v.numel() * e == span.size();
      const bool in_arm = shaped && device_poison_.size() < static_cast<size_t>(kMaxPoisonSpans);
      if (!in_arm && !(shaped && dense)) {
        host_poisoned_.push_back(i);
        continue;
      }
      DevicePoison p;
      p.begin = span.begin, p.end = span.end, p.origin = v.byte_offset();
      p.element_bytes = static_cast<int>(e);
      p.dense = dense;
      std::copy(pattern.begin(), pattern.end(), p.pattern);
      (in_arm ? device_poison_ : extra_poison_).push_back(p);
    }
    if (!extra_poison_.empty()) {
      std::vector<PoisonSpan> spans(extra_poison_.size());
      for (size_t k = 0; k < spans.size(); ++k) spans[k] = poison_span(extra_poison_[k]);
      const size_t bytes = spans.size() * sizeof(PoisonSpan);
      if (extra_spans_.bytes() < bytes) {
        // A queued poison_spans_kernel may still read the old list.
        cuda::check(cudaStreamSynchronize(stream), (what + " (growing the output span list)").c_str());
        extra_spans_ = cuda::DeviceAllocation(bytes);
      }
      uint8_t* staging = take_staging(&extra_host_, &extra_upload_pending_, bytes);
      std::memcpy(staging, spans.data(), bytes);
      cuda::check(cudaMemcpyAsync(extra_spans_.get(), staging, bytes, cudaMemcpyHostToDevice, stream),
                  (what + " (uploading the output span list)").c_str());
    }
  }
  // An output poisoned on the host: its bytes read back (a view with gaps keeps what they hold),
  // poisoned with poison_output and written again.
  for (size_t i : host_poisoned_) {
    const View& v = outputs()[i].view;
    const ByteSpan span = v.byte_span();
    std::vector<uint8_t> host(static_cast<size_t>(span.size()));
    cuda::check(cudaMemcpyAsync(host.data(), data() + span.begin, host.size(), cudaMemcpyDeviceToHost, stream),
                (what + " (reading an output view)").c_str());
    cuda::check(cudaStreamSynchronize(stream), (what + " (reading an output view)").c_str());
    poison_output(HostTensor(host.data(), v.with_byte_offset(v.byte_offset() - span.begin)));
    cuda::check(cudaMemcpyAsync(data() + span.begin, host.data(), host.size(), cudaMemcpyHostToDevice, stream),
                (what + " (writing an output view's poison)").c_str());
    cuda::check(cudaStreamSynchronize(stream), (what + " (writing an output view's poison)").c_str());
  }
  if (!same_outputs) prepared_outputs_ = outputs();
  prepared_ = true;
}

namespace {

// A batch of n buffers, segment i from segment_of(i), with the red zone table.
template <typename Fill>
Batch make_batch(size_t n, Fill&& segment_of) {
  static const PatternTable red = pattern_table(true);
  Batch b{};
  b.count = static_cast<int32_t>(n);
  b.red = red;
  for (size_t i = 0; i < n; ++i) b.seg[i] = segment_of(i);
  return b;
}

dim3 batch_grid(const Batch& b) {
  int64_t most = 1;
  for (int i = 0; i < b.count; ++i) most = std::max(most, b.seg[i].chunks);
  return dim3(static_cast<unsigned>(blocks_for(most, kThreads * kUnroll, grid_limit())), static_cast<unsigned>(b.count));
}

// The segment of buffer g, without its poison spans.
template <class Buffer>
Segment segment_of(Buffer& g, uint8_t* storage, uint8_t* snapshot, const uint8_t* mask, void* scratch, int64_t total,
                   int64_t red_zone) {
  Segment s{};
  s.storage = storage, s.snapshot = snapshot, s.mask = mask, s.tally = static_cast<Tally*>(scratch);
  s.chunks = total / 16, s.total = total, s.red_zone = red_zone, s.size = g.size();
  s.outputs = g.outputs().empty() ? 0 : 1;
  return s;
}

// The segment's poison spans: the outputs its buffer poisons on the device (DevicePoison).
template <class Poisons>
void set_spans(Segment& s, const Poisons& poisons) {
  s.spans = static_cast<int32_t>(poisons.size());
  for (size_t k = 0; k < poisons.size(); ++k) s.span[k] = poison_span(poisons[k]);
}

// The most 16-byte chunks any of these poison spans touches (a span need not start on a chunk):
// the chunks a thread each of repoison_segment's grid covers.
template <class Poisons>
int64_t widest_span_chunks(const Poisons& poisons) {
  int64_t most = 0;
  for (const auto& p : poisons) most = std::max(most, (p.end - p.begin) / 16 + 2);
  return most;
}

// poison_spans_kernel over the buffer's storage, queued on stream, when it has such spans.
void launch_poison_spans(uint8_t* storage, int64_t red_zone, const void* spans, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<size_t>(count, 1024));
  poison_spans_kernel<<<blocks, kThreads, 0, stream>>>(storage, red_zone, static_cast<const PoisonSpan*>(spans),
                                                       static_cast<int>(count));
  cuda::check_launch("guarded buffers: poison_spans_kernel");
}

}  // namespace

void DeviceGuardedBuffer::queue_repoison(const std::vector<DeviceGuardedBuffer*>& buffers, cudaStream_t stream) {
  for (size_t from = 0; from < buffers.size(); from += kMaxSegments) {
    const size_t n = std::min<size_t>(kMaxSegments, buffers.size() - from);
    int64_t most = 0;  // chunks of the widest span
    const Batch batch = make_batch(n, [&](size_t i) {
      DeviceGuardedBuffer& g = *buffers[from + i];
      MLA_REQUIRE(g.armed_ && g.host_poisoned_.empty(), "guarded buffer '", g.name(),
                  "': outputs poisoned again before an arm that poisons them all on the device");
      Segment s = segment_of(g, g.storage_.as<uint8_t>(), g.snapshot_.as<uint8_t>(), g.mask_.as<const uint8_t>(),
                             g.scratch_.get(), g.total(), g.red_zone());
      set_spans(s, g.device_poison_);
      most = std::max(most, widest_span_chunks(g.device_poison_));
      return s;
    });
    if (most > 0) {
      repoison_kernel<<<dim3(static_cast<unsigned>(blocks_for(most, kThreads, grid_limit())), static_cast<unsigned>(n)),
                        kThreads, 0, stream>>>(batch);
      cuda::check_launch("guarded buffers: repoison_kernel");
    }
    for (size_t i = 0; i < n; ++i) {
      DeviceGuardedBuffer& g = *buffers[from + i];
      launch_poison_spans(g.storage_.as<uint8_t>(), g.red_zone(), g.extra_spans_.get(), g.extra_poison_.size(), stream);
    }
  }
}

void DeviceGuardedBuffer::arm_buffers(const std::vector<DeviceGuardedBuffer*>& buffers, cudaStream_t stream, bool wait) {
  for (DeviceGuardedBuffer* b : buffers) {
    b->wait_for_queued_unless_on(stream);  // a first fill or a write queued on another stream
    b->prepare_arm(stream);
  }
  for (size_t from = 0; from < buffers.size(); from += kMaxSegments) {
    const size_t n = std::min<size_t>(kMaxSegments, buffers.size() - from);
    bool gated = false;  // some buffer's snapshot copy waits for its sum (snapshot_kernel)
    // Whether every buffer is expected to take the chained arm (its last check's reports were
    // clean): then the grid covers their output spans only. The device decides; a buffer that
    // finds otherwise still takes its full pass, over fewer blocks.
    bool all_chained = true;
    int64_t most = 1;  // chunks of the widest output span
    const Batch batch = make_batch(n, [&](size_t i) {
      DeviceGuardedBuffer& g = *buffers[from + i];
      Segment s = segment_of(g, g.storage_.as<uint8_t>(), g.snapshot_.as<uint8_t>(), g.mask_.as<const uint8_t>(),
                             g.scratch_.get(), g.total(), g.red_zone());
      s.checksum = g.checksum_;
      s.chained = g.checksum_ && g.chained_ ? 1 : 0;
      s.force = g.snapshot_stale_ || (!s.chained && g.total() < kGateBytes) ? 1 : 0;
      gated = gated || (g.checksum_ && !s.force && !s.chained);
      all_chained = all_chained && s.chained && !s.force && g.last_check_clean_;
      set_spans(s, g.device_poison_);
      most = std::max(most, widest_span_chunks(g.device_poison_));
      return s;
    });
    const dim3 grid = all_chained ? dim3(static_cast<unsigned>(blocks_for(most, kThreads, grid_limit())), batch.count)
                                  : batch_grid(batch);
    arm_kernel<<<grid, kThreads, 0, stream>>>(batch);
    cuda::check_launch("guarded buffers: arm_kernel");
    for (size_t i = 0; i < n; ++i) {
      DeviceGuardedBuffer& g = *buffers[from + i];
      launch_poison_spans(g.storage_.as<uint8_t>(), g.red_zone(), g.extra_spans_.get(), g.extra_poison_.size(), stream);
    }
    if (gated) {
      // Mostly it finds nothing to copy: a block per SM per buffer, not the arm's full grid, whose
      // blocks would each be scheduled only to return.
      const dim3 grid(static_cast<unsigned>(std::min<int64_t>(multiprocessors(), batch_grid(batch).x)), static_cast<unsigned>(batch.count));
      snapshot_kernel<<<grid, kThreads, 0, stream>>>(batch);
      cuda::check_launch("guarded buffers: snapshot_kernel");
    }
  }
  if (wait) {
    cuda::check(cudaStreamSynchronize(stream), "guarded buffers: arm");
    for (DeviceGuardedBuffer* b : buffers) b->stream_drained();
  }
  for (DeviceGuardedBuffer* b : buffers) {
    b->armed_ = true;
    b->snapshot_stale_ = false;
    b->last_check_clean_ = false;  // until this arm's check says otherwise
    b->check_queued_ = false;
    b->pending_ = !wait, b->pending_on_ = stream;
  }
}

void DeviceGuardedBuffer::queue_checks(const std::vector<const DeviceGuardedBuffer*>& buffers, cudaStream_t stream,
                                       bool exact) {
  for (const DeviceGuardedBuffer* b : buffers) {
    MLA_REQUIRE(b->armed_, "guarded buffer '", b->name(), "': check() before arm() (or outputs changed since)");
  }
  for (size_t from = 0; from < buffers.size(); from += kMaxSegments) {
    const size_t n = std::min<size_t>(kMaxSegments, buffers.size() - from);
    const Batch batch = make_batch(n, [&](size_t i) {
      const DeviceGuardedBuffer& g = *buffers[from + i];
      Segment s = segment_of(g, const_cast<uint8_t*>(g.storage_.as<const uint8_t>()),
                             const_cast<uint8_t*>(g.snapshot_.as<const uint8_t>()), g.mask_.as<const uint8_t>(),
                             const_cast<void*>(g.scratch_.get()), g.total(), g.red_zone());
      s.checksum = g.checksum_ && !exact;
      s.mapped = static_cast<Slot*>(g.slot_.device());
      // The exact comparison after a checksum mismatch has a serial of its own (the top bit set)
      // and leaves check_serial_ alone: a check captured in a graph echoes the serial it was
      // captured with at every replay.
      if (!exact) {
        g.check_serial_ = g.check_serial_ % (kRecheckSerial - 1) + 1;  // 1 to kRecheckSerial - 1
        ++g.runs_pending_;
      }
      s.serial = exact ? g.check_serial_ | kRecheckSerial : g.check_serial_;
      return s;
    });
    check_kernel<<<batch_grid(batch), kThreads, 0, stream>>>(batch);
    cuda::check_launch("guarded buffers: check_kernel");
  }
  for (const DeviceGuardedBuffer* b : buffers) {
    b->check_queued_ = true, b->queued_on_ = stream;
    b->pending_ = false;  // the check is queued behind the arm: waiting for it waits for both
    b->staged_at_check_ = b->staged_;
  }
}

std::vector<GuardReport> DeviceGuardedBuffer::collect_checks(const std::vector<const DeviceGuardedBuffer*>& buffers,
                                                             cudaStream_t stream) {
  // Each check counts its runs in its slot's outcome. When every slot shows the runs this host
  // queued (or replayed) since it last collected, each finished, clean, and so did everything
  // queued on the stream before it: the caller's own synchronization (the pattern of QueuedChecks)
  // leaves nothing to wait for, and a clean check nothing else to read. Otherwise, wait and read the
  // tallies. (A replayed graph's check echoes its capture's serial, so the serial cannot tell this
  // run's result from the last one's; the count can.)
  bool clean = true;
  for (const DeviceGuardedBuffer* b : buffers) {
    const unsigned int runs = b->runs_collected_ + b->runs_pending_;
    clean = clean && b->runs_pending_ > 0 &&
            static_cast<const volatile Slot*>(b->slot_.host())->outcome == outcome_of(runs, true);
  }
  if (clean) {
    std::vector<GuardReport> reports(buffers.size());
    for (const DeviceGuardedBuffer* b : buffers) {
      const DeviceGuardedBuffer& g = *b;
      g.check_queued_ = false;
      g.runs_collected_ += g.runs_pending_, g.runs_pending_ = 0;
      g.last_check_clean_ = g.checksum_;
      // Staging taken after the check was queued may feed an upload still queued behind it.
      if (g.staged_ == g.staged_at_check_) g.stream_drained();
    }
    return reports;
  }
  cuda::check(cudaStreamSynchronize(stream), "guarded buffers: check");
  // The tally the check's last block left in the buffer's slot, once it carries that check's serial.
  const auto tally_of = [](const DeviceGuardedBuffer& g, bool recheck) {
    const volatile Slot* t = static_cast<const volatile Slot*>(g.slot_.host());
    const uint32_t serial = t->serial, expected = recheck ? g.check_serial_ | kRecheckSerial : g.check_serial_;
    MLA_REQUIRE(serial == expected, "guarded buffer '", g.name(), "': the check's tally is not in its slot "
                "(serial ", serial, ", expected ", expected, ")");
    Tally r{};
    r.first = t->first, r.last = t->last, r.count = t->count, r.sum_now = t->sum_now, r.sum_armed = t->sum_armed;
    return r;
  };
  std::vector<GuardReport> reports;
  reports.reserve(buffers.size());
  for (const DeviceGuardedBuffer* b : buffers) {
    const DeviceGuardedBuffer& g = *b;
    g.check_queued_ = false;
    g.stream_drained();
    g.runs_collected_ = static_cast<unsigned int>(static_cast<const volatile Slot*>(g.slot_.host())->outcome >> 1);
    g.runs_pending_ = 0;
    Tally t = tally_of(g, false);
    // The checksum fast path: equal sums mean nothing outside the outputs changed; different
    // ones, that something did, and the exact comparison says where.
    g.last_check_clean_ = g.checksum_ && t.sum_now == t.sum_armed;
    if (g.checksum_ && t.sum_now != t.sum_armed) {
      queue_checks({b}, stream, true);
      cuda::check(cudaStreamSynchronize(stream), "guarded buffers: check");
      g.check_queued_ = false;
      t = tally_of(g, true);
    } else if (g.checksum_) {
      t.first = ~0ull, t.last = 0, t.count = 0;
    }
    reports.push_back(g.report(t.first, t.last, t.count, stream));
  }
  return reports;
}

GuardReport DeviceGuardedBuffer::report(unsigned long long first, unsigned long long last, unsigned long long count,
                                        cudaStream_t stream) const {
  GuardReport r;
  if (count == 0) return r;
  const std::string what = "guarded buffer '" + name() + "': check";
  uint8_t now = 0, was = 0;
  cuda::check(cudaMemcpyAsync(&now, storage_.as<const uint8_t>() + first, 1, cudaMemcpyDeviceToHost, stream), what.c_str());
  cuda::check(cudaMemcpyAsync(&was, snapshot_.as<const uint8_t>() + first, 1, cudaMemcpyDeviceToHost, stream), what.c_str());
  cuda::check(cudaStreamSynchronize(stream), what.c_str());
  r.stray_bytes = static_cast<int64_t>(count);
  r.first = describe_stray(static_cast<int64_t>(first) - red_zone(), was, now);
  r.last_offset = static_cast<int64_t>(last) - red_zone();
  return r;
}

}  // namespace mlacheck
