// Kernel side of SPEC.md 2 (indexer logits): launch parameters, the shared-memory plan and the
// launchers of the paged decode kernel (paged_mqa_logits.cu) and the ragged prefill kernel
// (mqa_logits.cu); and, for those two files only, the mainloop they share. The checked entry points
// are in kernels/mqa_logits_glue.h.
//
// Both kernels give a thread block one tile of kLogitsTileTokens keys and a group of up to
// rows_per_block query rows. The block decodes the group's q (all heads) and weights into shared
// memory, decodes each key of the tile once into shared memory, and computes
//   logit[r, t] = k_scale[t] * sum_h w[r, h] * relu(q[r, h, :] . k[t, :])
// in fp32: a warp takes 16 or 32 tokens, 4 lanes per token split the heads, each lane keeps a
// register tile of 2 tokens x 8 heads over the head dimension, and two shuffles sum the heads.
#pragma once

#include <cstdint>

namespace mlacheck::kernels {

// Clean mode writes -inf to the columns of a row outside its range; unclean mode (what vLLM runs)
// leaves them unspecified (SPEC.md 2.1).
enum class LogitsMode : int32_t { kClean, kUnclean };

// Keys per thread block (and the KV block size of the paged kernel's fast path, where a tile is
// one KV block).
constexpr int kLogitsTileTokens = 64;
constexpr int kLogitsThreads = 128;
// Heads are processed 32 at a time (4 head lanes x 8 heads per lane); q is padded with zero heads
// to a multiple of 32, so the inner loop has no bounds test.
constexpr int kLogitsHeadsPerPass = 32;
constexpr int kLogitsMaxRowsPerBlock = 16;
// Dynamic shared memory per block: two blocks fit an H100/H200 SM (227 KiB).
constexpr int64_t kLogitsSharedBudget = 112 * 1024;

constexpr int64_t logits_padded_heads(int64_t heads) {
  return (heads + kLogitsHeadsPerPass - 1) / kLogitsHeadsPerPass * kLogitsHeadsPerPass;
}
// Dynamic shared bytes of a block of `rows` query rows: q [rows][Hp][D + 1] and w [rows][Hp], then
// k [tile][D + 1] and k_scale [tile], all fp32 (the row pitch D + 1 keeps lanes on distinct banks).
constexpr int64_t logits_shared_bytes(int64_t rows, int64_t heads, int64_t head_dim) {
  return 4 * (rows * logits_padded_heads(heads) * (head_dim + 2) + kLogitsTileTokens * (head_dim + 2));
}
// The most query rows (at most `rows` and kLogitsMaxRowsPerBlock) one block can hold within the
// budget; 0 when not even one row of H x D fits.
constexpr int64_t logits_rows_per_block(int64_t rows, int64_t heads, int64_t head_dim) {
  int64_t n = rows < kLogitsMaxRowsPerBlock ? rows : kLogitsMaxRowsPerBlock;
  while (n > 0 && logits_shared_bytes(n, heads, head_dim) > kLogitsSharedBudget) --n;
  return n;
}

// SPEC.md 2.1. Row r = b * next_n + j. All pointers are device pointers; strides in elements unless
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

// SPEC.md 2.2. Row m covers keys [ks[m], ke[m]) (clamped to [0, N]).
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

// clang-format off
#define MLA_MQA_LOGITS_LAUNCHERS                                                  \
  void launch_paged_mqa_logits(const PagedMqaLogitsParams& p, void* stream);     \
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

constexpr int kHeadLanes = 4;  // lanes that share a token and split its heads
constexpr int kHeadsPerLane = kLogitsHeadsPerPass / kHeadLanes;
constexpr int kTokensPerLane = 2;

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
  int rows, heads, padded_heads, head_dim, pitch;
  int64_t w_at, k_at, scale_at;

  MLA_DEVICE TileSmem(simt::shared_array<float> smem, int rows_, int heads_, int head_dim_)
      : s(smem),
        rows(rows_),
        heads(heads_),
        padded_heads((heads_ + kLogitsHeadsPerPass - 1) / kLogitsHeadsPerPass * kLogitsHeadsPerPass),
        head_dim(head_dim_),
        pitch(head_dim_ + 1) {
    w_at = int64_t(rows) * padded_heads * pitch;
    k_at = w_at + int64_t(rows) * padded_heads;
    scale_at = k_at + int64_t(kLogitsTileTokens) * pitch;
  }
  MLA_DEVICE float& q(int r, int h, int d) const { return s[(int64_t(r) * padded_heads + h) * pitch + d]; }
  MLA_DEVICE float& w(int r, int h) const { return s[w_at + int64_t(r) * padded_heads + h]; }
  MLA_DEVICE float& k(int t, int d) const { return s[k_at + int64_t(t) * pitch + d]; }
  MLA_DEVICE float& scale(int t) const { return s[scale_at + t]; }
};

// Decodes the group's q rows (contiguous [rows, H, D] fp8 from q) and weights ([rows, H] from w)
// into shared memory; heads past H get q = 0 and w = 0, so they add nothing.
MLA_DEVICE void stage_queries(const TileSmem& sm, const uint8_t* q, const float* w) {
  const int tid = static_cast<int>(simt::thread_idx().x), threads = static_cast<int>(simt::block_dim().x);
  const int64_t per_row = int64_t(sm.padded_heads) * sm.head_dim;
  for (int64_t i = tid; i < sm.rows * per_row; i += threads) {
    const int r = static_cast<int>(i / per_row), h = static_cast<int>(i % per_row / sm.head_dim);
    const int d = static_cast<int>(i % sm.head_dim);
    sm.q(r, h, d) = h < sm.heads ? simt::fp8_e4m3_to_float(q[(int64_t(r) * sm.heads + h) * sm.head_dim + d]) : 0.0f;
  }
  for (int i = tid; i < sm.rows * sm.padded_heads; i += threads) {
    const int r = i / sm.padded_heads, h = i % sm.padded_heads;
    sm.w(r, h) = h < sm.heads ? w[int64_t(r) * sm.heads + h] : 0.0f;
  }
}

// Zero keys (and scales) for tile tokens [first, kLogitsTileTokens) that the block does not load,
// so every token the mainloop touches is defined.
MLA_DEVICE void zero_keys_from(const TileSmem& sm, int first) {
  const int tid = static_cast<int>(simt::thread_idx().x), threads = static_cast<int>(simt::block_dim().x);
  for (int i = tid; i < (kLogitsTileTokens - first) * sm.head_dim; i += threads) {
    sm.k(first + i / sm.head_dim, i % sm.head_dim) = 0.0f;
  }
  for (int s = first + tid; s < kLogitsTileTokens; s += threads) sm.scale(s) = 0.0f;
}

// The logit of every (row r < sm.rows, tile token s) from the staged q, weights, keys and scales:
// emit(r, s, logit) is called once per pair, by one lane. Every thread of the block must call it
// (it uses warp shuffles); it reads shared memory only, so staging must be followed by a barrier.
template <class Emit>
MLA_DEVICE void weighted_relu_tile(const TileSmem& sm, Emit&& emit) {
  const int ws = simt::warp_size(), lane = simt::lane_id();
  const int head_lane = lane % kHeadLanes, token_lane = lane / kHeadLanes, token_lanes = ws / kHeadLanes;
  const int warps = static_cast<int>(simt::threads_per_block()) / ws;
  const int tokens_per_warp = token_lanes * kTokensPerLane;  // 16 or 32: divides the tile
  for (int base = simt::warp_id() * tokens_per_warp; base < kLogitsTileTokens; base += warps * tokens_per_warp) {
    int tok[kTokensPerLane];
    for (int i = 0; i < kTokensPerLane; ++i) tok[i] = base + token_lane + i * token_lanes;
    for (int r = 0; r < sm.rows; ++r) {
      float logit[kTokensPerLane] = {};
      for (int h0 = 0; h0 < sm.padded_heads; h0 += kLogitsHeadsPerPass) {
        float acc[kTokensPerLane][kHeadsPerLane] = {};
        for (int d = 0; d < sm.head_dim; ++d) {
          float kv[kTokensPerLane];
          for (int i = 0; i < kTokensPerLane; ++i) kv[i] = sm.k(tok[i], d);
          for (int jj = 0; jj < kHeadsPerLane; ++jj) {
            const float qv = sm.q(r, h0 + head_lane + jj * kHeadLanes, d);
            for (int i = 0; i < kTokensPerLane; ++i) acc[i][jj] += qv * kv[i];
          }
        }
        for (int jj = 0; jj < kHeadsPerLane; ++jj) {
          const float w = sm.w(r, h0 + head_lane + jj * kHeadLanes);
          for (int i = 0; i < kTokensPerLane; ++i) logit[i] += w * relu(acc[i][jj]);
        }
      }
      // Sum over the 4 head lanes of each token (the low two bits of the lane).
      for (int i = 0; i < kTokensPerLane; ++i) {
        logit[i] += simt::shfl_xor(logit[i], 1);
        logit[i] += simt::shfl_xor(logit[i], 2);
      }
      if (head_lane == 0) {
        for (int i = 0; i < kTokensPerLane; ++i) emit(r, tok[i], logit[i] * sm.scale(tok[i]));
      }
    }
  }
}

}  // namespace mlacheck::kernels::MLA_BACKEND_NS::logits_detail
#endif
