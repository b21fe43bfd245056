// Kernel side of docs/ops.md 2 (indexer logits): launch parameters, the shared-memory plan and the
// launchers of the paged decode kernel (paged_mqa_logits.cu) and the ragged prefill kernel
// (mqa_logits.cu); and, for those two files only, the mainloop they share. The checked entry points
// are in kernels/mqa_logits_glue.h.
//
// Both kernels give a thread block one tile of kLogitsTileTokens keys and a group of up to
// rows_per_block query rows. The block decodes the group's q (all heads) and weights into shared
// memory, decodes each key of the tile once into shared memory, and computes
//   logit[r, t] = k_scale[t] * sum_h w[r, h] * relu(q[r, h, :] . k[t, :])
// in fp32. Mainloop: thread i is token lane i % 8 and head slot i / 8 (16 slots); it keeps a
// register tile of 8 tokens (lane, lane + 8, ...) x 4 heads (slot, slot + 16, ...) and walks the
// head dimension four values at a time (one 16-byte shared load per token and per head), so each
// shared load feeds 8 or 16 FMAs. The 16 slots' partial sums meet in shared memory.
#pragma once

#include <cstdint>

namespace mlacheck::kernels {

// Clean mode writes -inf to the columns of a row outside its range; unclean mode (what vLLM runs)
// leaves them unspecified (docs/ops.md 2.1).
enum class LogitsMode : int32_t { kClean, kUnclean };

// Keys per thread block (and the KV block size of the paged kernel's fast path, where a tile is
// one KV block).
constexpr int kLogitsTileTokens = 64;
constexpr int kLogitsThreads = 128;
// Consecutive tiles one block of the paged kernel computes (it stages q once for all of them).
constexpr int kLogitsTilesPerBlock = 4;
// Heads are processed 64 at a time (16 head slots x 4 heads per slot); q is padded with zero heads
// to a multiple of 64 and the head dimension with zeros to a multiple of 4, so the inner loop has
// no bounds test.
constexpr int kLogitsHeadsPerPass = 64;
constexpr int kLogitsTokenLanes = 8;
constexpr int kLogitsHeadSlots = kLogitsThreads / kLogitsTokenLanes;
constexpr int kLogitsMaxRowsPerBlock = 16;
// Dynamic shared memory per block: two blocks fit an H100/H200 SM (227 KiB).
constexpr int64_t kLogitsSharedBudget = 112 * 1024;

constexpr int64_t logits_padded_heads(int64_t heads) {
  return (heads + kLogitsHeadsPerPass - 1) / kLogitsHeadsPerPass * kLogitsHeadsPerPass;
}
// Floats per row of q or k in shared memory: D rounded up to 4, plus 4 (16-byte rows that put
// neighbouring tokens and heads on distinct bank groups).
constexpr int64_t logits_pitch(int64_t head_dim) { return (head_dim + 3) / 4 * 4 + 4; }
// Dynamic shared bytes of a block of `rows` query rows, all fp32: q [rows][Hp][pitch], w [rows][Hp],
// k [tile][pitch], k_scale [tile], and the slots' partial logits [kLogitsHeadSlots][tile].
constexpr int64_t logits_shared_bytes(int64_t rows, int64_t heads, int64_t head_dim) {
  return 4 * (rows * logits_padded_heads(heads) * (logits_pitch(head_dim) + 1) +
              kLogitsTileTokens * (logits_pitch(head_dim) + 1) + int64_t(kLogitsHeadSlots) * kLogitsTileTokens);
}
// The most query rows (at most `rows` and kLogitsMaxRowsPerBlock) one block can hold within the
// budget; 0 when not even one row of H x D fits.
constexpr int64_t logits_rows_per_block(int64_t rows, int64_t heads, int64_t head_dim) {
  int64_t n = rows < kLogitsMaxRowsPerBlock ? rows : kLogitsMaxRowsPerBlock;
  while (n > 0 && logits_shared_bytes(n, heads, head_dim) > kLogitsSharedBudget) --n;
  return n;
}

// docs/ops.md 2.1. Row r = b * next_n + j. All pointers are device pointers; strides in elements unless
// named in bytes.
struct PagedMqaLogitsParams {
  const uint8_t* q = nullptr;   // fp8 [B, next_n, H, D], contiguous
  const uint8_t* kv = nullptr;  // block p at kv + p * block_stride (block-flat layout)
  int64_t block_stride = 0;     // bytes, a multiple of 4, >= block_size * (D + 4)
  int64_t num_blocks = 0;       // page ids outside [0, num_blocks) give NaN keys, never a read
  int32_t block_size = 64;
  const float* weights = nullptr;  // [B * next_n, H], contiguous
  const int32_t* context_lens = nullptr;
  bool context_lens_2d = false;     // [B, next_n] C-contiguous; else [B] of total lengths L_b
  int64_t context_lens_stride = 1;  // 1-D: elements between requests
  const int32_t* block_table = nullptr;
  int64_t block_table_stride = 0;  // elements between rows; columns are contiguous
  int32_t block_table_width = 0;   // W: a row longer than W * block_size is cut there
  float* logits = nullptr;         // [B * next_n, max_context_len], unit column stride
  int64_t logits_stride = 0;       // >= max_context_len
  int32_t max_context_len = 0;     // lengths are clamped to it: nothing past it is ever written
  int32_t batch = 0, next_n = 1, heads = 0, head_dim = 0;
  int32_t rows_per_block = 1;  // logits_rows_per_block(next_n, H, D)
  LogitsMode mode = LogitsMode::kUnclean;
};

// docs/ops.md 2.2. Row m covers keys [ks[m], ke[m]) (clamped to [0, N]).
struct MqaLogitsParams {
  const uint8_t* q = nullptr;  // fp8 [M, H, D], contiguous
  const uint8_t* k = nullptr;  // fp8 [N, D], rows k_stride bytes apart
  int64_t k_stride = 0;
  const float* k_scale = nullptr;  // [N], k_scale_stride elements apart
  int64_t k_scale_stride = 1;
  const float* weights = nullptr;  // [M, H], contiguous
  const int32_t* ks = nullptr;
  int64_t ks_stride = 1;
  const int32_t* ke = nullptr;
  int64_t ke_stride = 1;
  float* logits = nullptr;    // [M, N], unit column stride
  int64_t logits_stride = 0;  // >= N
  int32_t rows = 0, keys = 0, heads = 0, head_dim = 0;
  int32_t rows_per_block = 1;  // logits_rows_per_block(M, H, D)
  LogitsMode mode = LogitsMode::kUnclean;
};

// The seeded-bug variants' decisions inside the paged kernel (docs/bugs.md), switched at compile
// time: kNone is production.
enum class PagedLogitsBug {
  kNone,
#define MLACHECK_BUG(variant, check, needs, enumerator) enumerator,
#include "kernels/paged_mqa_logits_bugs.def"
#undef MLACHECK_BUG
#undef MLACHECK_HOOK_BUG
};

// clang-format off
#define MLA_MQA_LOGITS_LAUNCHERS                                                  \
  void launch_paged_mqa_logits(const PagedMqaLogitsParams& p, void* stream);     \
  void launch_paged_mqa_logits_seeded(const PagedMqaLogitsParams& p, PagedLogitsBug bug, void* stream); \
  void launch_mqa_logits(const MqaLogitsParams& p, void* stream);
namespace host { MLA_MQA_LOGITS_LAUNCHERS }
namespace cuda { MLA_MQA_LOGITS_LAUNCHERS }
namespace hip { MLA_MQA_LOGITS_LAUNCHERS }
#undef MLA_MQA_LOGITS_LAUNCHERS
// clang-format on

}  // namespace mlacheck::kernels

// ---- the shared mainloop: device code, compiled only into the two kernel files (after simt.h) ----
#if defined(MLA_BACKEND_NS)
namespace mlacheck::kernels::MLA_BACKEND_NS::logits_detail {

constexpr int kHeadsPerSlot = kLogitsHeadsPerPass / kLogitsHeadSlots;
constexpr int kTokensPerLane = kLogitsTileTokens / kLogitsTokenLanes;

MLA_DEVICE float relu(float x) { return x < 0.0f ? 0.0f : x; }  // NaN stays NaN, as torch.relu
MLA_DEVICE float negative_infinity() { return bits_float(0xFF800000u); }
MLA_DEVICE float quiet_nan() { return bits_float(0x7FC00000u); }
MLA_DEVICE int clamp_int(int64_t x, int64_t lo, int64_t hi) {
  return static_cast<int>(x < lo ? lo : (x > hi ? hi : x));
}

// The block's dynamic shared memory, laid out as logits_shared_bytes says, carved from one array so
// every access stays bounds-checked on the host backend.
struct TileSmem {
  simt::shared_array<float> s;
  int rows, heads, padded_heads, head_dim, padded_dim, pitch;
  int64_t w_at, k_at, scale_at, partial_at;

  MLA_DEVICE TileSmem(simt::shared_array<float> smem, int rows_, int heads_, int head_dim_)
      : s(smem),
        rows(rows_),
        heads(heads_),
        padded_heads((heads_ + kLogitsHeadsPerPass - 1) / kLogitsHeadsPerPass * kLogitsHeadsPerPass),
        head_dim(head_dim_),
        padded_dim((head_dim_ + 3) / 4 * 4),
        pitch(padded_dim + 4) {
    w_at = int64_t(rows) * padded_heads * pitch;
    k_at = w_at + int64_t(rows) * padded_heads;
    scale_at = k_at + int64_t(kLogitsTileTokens) * pitch;
    partial_at = scale_at + kLogitsTileTokens;
  }
  MLA_DEVICE int64_t q_at(int r, int h, int d) const { return (int64_t(r) * padded_heads + h) * pitch + d; }
  MLA_DEVICE int64_t key_at(int t, int d) const { return k_at + int64_t(t) * pitch + d; }
  MLA_DEVICE simt::shared_array<float>::reference q(int r, int h, int d) const { return s[q_at(r, h, d)]; }
  MLA_DEVICE simt::shared_array<float>::reference w(int r, int h) const { return s[w_at + int64_t(r) * padded_heads + h]; }
  MLA_DEVICE simt::shared_array<float>::reference k(int t, int d) const { return s[key_at(t, d)]; }
  MLA_DEVICE simt::shared_array<float>::reference scale(int t) const { return s[scale_at + t]; }
  MLA_DEVICE simt::shared_array<float>::reference partial(int slot, int t) const { return s[partial_at + int64_t(slot) * kLogitsTileTokens + t]; }
};

// Decodes the group's q rows (contiguous [rows, H, D] fp8 from q) and weights ([rows, H] from w)
// into shared memory; heads past H and columns past D get q = 0 (and w = 0), so they add nothing.
// A thread takes four columns of a (row, head) at a time with 32-bit index arithmetic; when D is a
// multiple of 4 and q is 4-byte aligned the four codes are one load.
MLA_DEVICE void stage_queries(const TileSmem& sm, const uint8_t* q, const float* w) {
  const int tid = static_cast<int>(simt::thread_idx().x), threads = static_cast<int>(simt::block_dim().x);
  const int quads = sm.padded_dim / 4, row_heads = sm.rows * sm.padded_heads;
  const bool word_loads = sm.head_dim % 4 == 0 && reinterpret_cast<uintptr_t>(q) % 4 == 0;
  for (int i = tid; i < row_heads * quads; i += threads) {
    const int rh = i / quads, d = (i - rh * quads) * 4;
    const int r = rh / sm.padded_heads, h = rh - r * sm.padded_heads;
    const int64_t at = (int64_t(r) * sm.heads + h) * sm.head_dim + d;
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (h < sm.heads) {
      if (word_loads) {
        const uint32_t codes = *reinterpret_cast<const uint32_t*>(q + at);
        for (int e = 0; e < 4; ++e) v[e] = simt::fp8_e4m3_to_float(static_cast<uint8_t>(codes >> (8 * e)));
      } else {
        for (int e = 0; e < 4; ++e) v[e] = d + e < sm.head_dim ? simt::fp8_e4m3_to_float(q[at + e]) : 0.0f;
      }
    }
    for (int e = 0; e < 4; ++e) sm.q(r, h, d + e) = v[e];
  }
  for (int i = tid; i < row_heads; i += threads) {
    const int r = i / sm.padded_heads, h = i - r * sm.padded_heads;
    sm.w(r, h) = h < sm.heads ? w[int64_t(r) * sm.heads + h] : 0.0f;
  }
}

// Zeroes what key staging leaves unwritten, so every value the mainloop reads is defined: columns
// [D, padded_dim) of tile tokens [0, first), and every column and the scale of tokens [first, tile).
// Staging writes columns [0, D) of tokens [0, first) only, so the two never touch the same float.
MLA_DEVICE void zero_keys_from(const TileSmem& sm, int first) {
  const int tid = static_cast<int>(simt::thread_idx().x), threads = static_cast<int>(simt::block_dim().x);
  const int pad = sm.padded_dim - sm.head_dim;
  for (int i = tid; i < first * pad; i += threads) sm.k(i / pad, sm.head_dim + i % pad) = 0.0f;
  for (int i = tid; i < (kLogitsTileTokens - first) * sm.padded_dim; i += threads) {
    sm.k(first + i / sm.padded_dim, i % sm.padded_dim) = 0.0f;
  }
  for (int s = first + tid; s < kLogitsTileTokens; s += threads) sm.scale(s) = 0.0f;
}

// The logit of every (row r < sm.rows, tile token s) from the staged q, weights, keys and scales:
// emit(r, s, logit) is called once per pair, by one thread (threads [0, tile) emit). Every thread of
// the block must call it (it has barriers); staging must be followed by a barrier.
// kArrivalOrder: the seeded bug D1 (PagedLogitsBug): the head slots' partial sums are added into
// one accumulator with atomics, in the order the slots arrive, not summed in slot order.
template <bool kArrivalOrder = false, class Emit>
MLA_DEVICE void weighted_relu_tile(const TileSmem& sm, Emit&& emit) {
  const int tid = static_cast<int>(simt::thread_idx().x);
  const int token_lane = tid % kLogitsTokenLanes, slot = tid / kLogitsTokenLanes;
  for (int r = 0; r < sm.rows; ++r) {
    float logit[kTokensPerLane] = {};
    for (int h0 = 0; h0 < sm.padded_heads; h0 += kLogitsHeadsPerPass) {
      float acc[kTokensPerLane][kHeadsPerSlot] = {};
      for (int d = 0; d < sm.padded_dim; d += 4) {
        simt::Float4 kv[kTokensPerLane];
        for (int i = 0; i < kTokensPerLane; ++i) kv[i] = simt::load4(sm.s, sm.key_at(token_lane + i * kLogitsTokenLanes, d));
        for (int j = 0; j < kHeadsPerSlot; ++j) {
          const simt::Float4 qv = simt::load4(sm.s, sm.q_at(r, h0 + slot + j * kLogitsHeadSlots, d));
          for (int i = 0; i < kTokensPerLane; ++i) {
            float a = acc[i][j];
            a += qv.x * kv[i].x;
            a += qv.y * kv[i].y;
            a += qv.z * kv[i].z;
            a += qv.w * kv[i].w;
            acc[i][j] = a;
          }
        }
      }
      for (int j = 0; j < kHeadsPerSlot; ++j) {
        const float w = sm.w(r, h0 + slot + j * kLogitsHeadSlots);
        for (int i = 0; i < kTokensPerLane; ++i) logit[i] += w * relu(acc[i][j]);
      }
    }
    if (kArrivalOrder) {
      if (tid < kLogitsTileTokens) sm.partial(0, tid) = 0.0f;
      simt::sync_threads();
      for (int i = 0; i < kTokensPerLane; ++i) simt::atomic_add(&sm.partial(0, token_lane + i * kLogitsTokenLanes), logit[i]);
      simt::sync_threads();
      if (tid < kLogitsTileTokens) emit(r, tid, sm.partial(0, tid) * sm.scale(tid));
      simt::sync_threads();
      continue;
    }
    for (int i = 0; i < kTokensPerLane; ++i) sm.partial(slot, token_lane + i * kLogitsTokenLanes) = logit[i];
    simt::sync_threads();
    if (tid < kLogitsTileTokens) {
      float sum = 0.0f;
      for (int k = 0; k < kLogitsHeadSlots; ++k) sum += sm.partial(k, tid);
      emit(r, tid, sum * sm.scale(tid));
    }
    simt::sync_threads();  // the next row reuses the partial sums
  }
}

}  // namespace mlacheck::kernels::MLA_BACKEND_NS::logits_detail
#endif
