// The guard kernels of a device guarded buffer: its first fill, the arm (outputs poisoned, red
// zones restored, snapshot or checksum), the re-poison, the gated snapshot copy, and the check
// (exact comparison or checksum) whose last block leaves the result in the buffer's mapped slot;
// each behind a launch function of cuda_guard_kernels.h. The host side that batches them is
// cuda_guarded_buffer.cpp.
#include "core/backend/cuda_guard_kernels.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "core/backend/cuda_runtime.h"

namespace mlacheck::guard_kernels {
namespace {

using cuda::PatternTable;

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

}  // namespace

void launch_init(int blocks, uint8_t* storage, int64_t red_zone, int64_t size, int64_t total, const PatternTable& red,
                 const PatternTable& data, uint8_t* mask, int64_t mask_bytes, uint8_t* tally, int tally_bytes,
                 cudaStream_t stream) {
  init_kernel<<<blocks, kThreads, 0, stream>>>(storage, red_zone, size, total, red, data, mask, mask_bytes, tally,
                                               tally_bytes);
  cuda::check_launch("guarded buffer: init_kernel");
}

namespace {
// One of the batch kernels over b, queued on stream.
void launch_batch(void (*kernel)(Batch), const char* what, const Batch& b, dim3 grid, cudaStream_t stream) {
  kernel<<<grid, kThreads, 0, stream>>>(b);
  cuda::check_launch(what);
}
}  // namespace

void launch_arm(const Batch& b, dim3 grid, cudaStream_t stream) {
  launch_batch(arm_kernel, "guarded buffers: arm_kernel", b, grid, stream);
}
void launch_repoison(const Batch& b, dim3 grid, cudaStream_t stream) {
  launch_batch(repoison_kernel, "guarded buffers: repoison_kernel", b, grid, stream);
}
void launch_snapshot(const Batch& b, dim3 grid, cudaStream_t stream) {
  launch_batch(snapshot_kernel, "guarded buffers: snapshot_kernel", b, grid, stream);
}
void launch_check(const Batch& b, dim3 grid, cudaStream_t stream) {
  launch_batch(check_kernel, "guarded buffers: check_kernel", b, grid, stream);
}

void launch_poison_spans(uint8_t* storage, int64_t red_zone, const PoisonSpan* spans, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<size_t>(count, 1024));
  poison_spans_kernel<<<blocks, kThreads, 0, stream>>>(storage, red_zone, spans, static_cast<int>(count));
  cuda::check_launch("guarded buffers: poison_spans_kernel");
}

int resident_blocks_per_multiprocessor() {
  int arm = 0, check = 0;
  cuda::check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&arm, arm_kernel, kThreads, 0),
              "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  cuda::check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&check, check_kernel, kThreads, 0),
              "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  return std::max({1, arm, check});
}

}  // namespace mlacheck::guard_kernels
