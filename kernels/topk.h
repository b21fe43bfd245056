// Kernel side of docs/ops.md 3, top-k per row: the launch parameters, the row-length switch points the
// kernels branch on (named, so generators can straddle them), and the launchers of the general path
// (any k) and the k = 2048 fast path. The checked entry points are in kernels/topk_glue.h.
#pragma once

#include <cstdint>

#include "core/hd.h"

namespace mlacheck::kernels {

// The k of the fast path (DeepSeek-V3.2's index top-k): a compile-time K.
constexpr int32_t kTopkFastK = 2048;

// Algorithm by row length n (after n <= k, which only fills [0, n) and -1):
// - short rows, n <= kTopkShortRowMaxLen: the row is read once into shared memory and every radix
//   pass runs there (this is also the capacity of the shared candidate pool the other classes use);
// - long rows, up to kTopkSplitRowMinLen: one block streams the row from global memory per pass
//   until the elements tied with the threshold fit the pool;
// - very long rows, n > kTopkSplitRowMinLen: topk_num_splits(n) blocks each select the top k of a
//   chunk of about kTopkSplitChunkLen into the caller's workspace, and the row's block selects the
//   top k of those candidates.
constexpr int32_t kTopkShortRowMaxLen = 4096;
constexpr int32_t kTopkSplitRowMinLen = 32768;
constexpr int32_t kTopkSplitChunkLen = 16384;
constexpr int32_t kTopkMaxSplits = 8;

// Blocks a very long row of n elements is split over, and the chunk each takes (the last one may be
// shorter): n = 32769 gives 3 chunks; the split count steps up past every multiple of
// kTopkSplitChunkLen, up to kTopkMaxSplits.
MLA_HD constexpr int32_t topk_num_splits(int32_t n) {
  const int64_t s = (int64_t(n) + kTopkSplitChunkLen - 1) / kTopkSplitChunkLen;
  return static_cast<int32_t>(s < kTopkMaxSplits ? s : kTopkMaxSplits);
}
MLA_HD constexpr int32_t topk_split_chunk_len(int32_t n) {
  const int32_t s = topk_num_splits(n);
  return static_cast<int32_t>((int64_t(n) + s - 1) / s);
}
// Candidates the split blocks of a row leave in the workspace: min(chunk, k) per chunk, packed.
MLA_HD constexpr int32_t topk_split_candidates(int32_t n, int32_t k) {
  const int32_t s = topk_num_splits(n), chunk = topk_split_chunk_len(n);
  const int32_t last = n - (s - 1) * chunk;
  return (s - 1) * (chunk < k ? chunk : k) + (last < k ? last : k);
}

// Where a row's length comes from (docs/ops.md 3).
enum class TopkRowLengths : int32_t {
  kDecode1D,  // n = max(0, seq_lens[r / next_n] - next_n + r % next_n + 1)
  kDecode2D,  // n = seq_lens[r] of a C-contiguous [B, next_n] (negative: 0)
  kPrefill,   // n = ke[r] - ks[r], the row starting at column ks[r]; indices relative to ks
};

// What ran, counted per block when TopkParams::row_class_counts is set (a test hook; one atomic per
// block). The first four classify rows; the last two count selections (of a row, of a split chunk,
// or of a row's merged candidates).
enum TopkRowClass : int32_t {
  kTopkFillRow = 0,     // n <= k
  kTopkShortRow,        // k < n <= kTopkShortRowMaxLen
  kTopkLongRow,         // kTopkShortRowMaxLen < n <= kTopkSplitRowMinLen
  kTopkSplitRow,        // n > kTopkSplitRowMinLen (counted once, by the merging block)
  kTopkStreamedSelect,  // a selection whose tied elements never fit the pool: every pass from global
  kTopkEarlyExit,       // a selection that stopped before the last digit (all tied elements taken)
  kTopkRowClassCount
};

// Logit n of a row is at logits[r * logits_row_stride + (start + i) * logits_col_stride] for i < n.
// Lengths are clamped to the view's columns, so a row is never read outside [0, cols); values at
// and past n are never read. out row r is out[r * out_row_stride + 0 .. k), written entirely.
struct TopkParams {
  const float* logits = nullptr;
  int64_t logits_row_stride = 0;  // elements
  int64_t logits_col_stride = 1;
  int32_t rows = 0;
  int32_t cols = 0;
  int32_t k = 0;  // the fast path requires kTopkFastK
  TopkRowLengths lengths = TopkRowLengths::kDecode1D;
  const int32_t* seq_lens = nullptr;  // decode
  int32_t next_n = 1;
  const int32_t* ks = nullptr;  // prefill, [rows] each
  const int32_t* ke = nullptr;
  int32_t* out = nullptr;
  int64_t out_row_stride = 0;
  // Very long rows (cols > kTopkSplitRowMinLen): candidate keys and column indices, row r at
  // r * workspace_row_stride, workspace_row_stride = topk_workspace_row_stride(cols, k).
  uint32_t* workspace_keys = nullptr;
  int32_t* workspace_indices = nullptr;
  int64_t workspace_row_stride = 0;
  int32_t* row_class_counts = nullptr;  // optional [kTopkRowClassCount], incremented
};

// Workspace candidates per row: at most one row's elements, at most k per split.
MLA_HD constexpr int64_t topk_workspace_row_stride(int64_t cols, int64_t k) {
  return cols < int64_t(kTopkMaxSplits) * k ? cols : int64_t(kTopkMaxSplits) * k;
}

// topk_per_row: the general path, any k >= 1. topk_per_row_k2048: the fast path, k == kTopkFastK.
// topk_per_row_ties_by_arrival: the seeded variant D3 (docs/bugs.md), either path (fast_path: the
// k = 2048 one) with values tied across the threshold taken in the order threads reach them, not
// lowest index first. topk_per_row_row_offset_in_32_bits: the seeded variant W5, either path, with
// a row's element offset (row x row stride) computed in int32. topk_per_row_nan_dropped_on_prefill:
// the seeded variant N1, either path, whose last radix pass over a long prefill row skips NaN keys.
#define MLA_TOPK_LAUNCHERS                                                                 \
  void topk_per_row(const TopkParams& p, void* stream);                                   \
  void topk_per_row_k2048(const TopkParams& p, void* stream);                             \
  void topk_per_row_ties_by_arrival(const TopkParams& p, bool fast_path, void* stream);  \
  void topk_per_row_row_offset_in_32_bits(const TopkParams& p, bool fast_path, void* stream); \
  void topk_per_row_nan_dropped_on_prefill(const TopkParams& p, bool fast_path, void* stream);
namespace host { MLA_TOPK_LAUNCHERS }
namespace cuda { MLA_TOPK_LAUNCHERS }
namespace hip { MLA_TOPK_LAUNCHERS }
#undef MLA_TOPK_LAUNCHERS

}  // namespace mlacheck::kernels
