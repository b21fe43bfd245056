// Ragged prefill indexer logits, row m over keys [ks[m], ke[m]) (docs/ops.md 2.2), one source for every backend.
#include "core/backend/simt.h"
#include "kernels/mqa_logits.h"

namespace mlacheck::kernels::MLA_BACKEND_NS {
namespace {

using namespace logits_detail;

// Grid (groups of rows_per_block query rows, tiles of N keys): x runs fastest, so the blocks that
// share a key tile run together and find it in L2. Block (g, x) computes rows m0 = g *
// rows_per_block ... over keys [t0, t0 + 64), t0 = 64 x, and reads only the keys inside the union
// of the group's ranges. It writes the logit where ks[m] <= t < ke[m]; in clean mode -inf elsewhere;
// in unclean mode the logit of any key it read, and nothing else.
MLA_KERNEL void mqa_logits_kernel(MqaLogitsParams p) {
  MLA_DYNAMIC_SHARED(float, smem);
  MLA_SHARED(int, row_begin, kLogitsMaxRowsPerBlock);
  MLA_SHARED(int, row_end, kLogitsMaxRowsPerBlock);
  const int tid = static_cast<int>(simt::thread_idx().x), threads = static_cast<int>(simt::block_dim().x);
  const int m0 = static_cast<int>(simt::block_idx().x) * p.rows_per_block;
  const int rows = p.rows - m0 < p.rows_per_block ? p.rows - m0 : p.rows_per_block;
  const int t0 = static_cast<int>(simt::block_idx().y) * kLogitsTileTokens;
  const int tile_cols = p.keys - t0 < kLogitsTileTokens ? p.keys - t0 : kLogitsTileTokens;
  float* out = p.logits + int64_t(m0) * p.logits_stride + t0;
  const bool clean = p.mode == LogitsMode::kClean;

  if (tid < rows) {
    // Clamped so that a bad range can only shrink a row, never reach past the keys.
    const int begin = clamp_int(p.ks[(m0 + tid) * p.ks_stride], 0, p.keys);
    row_begin[tid] = begin;
    row_end[tid] = clamp_int(p.ke[(m0 + tid) * p.ke_stride], begin, p.keys);
  }
  simt::sync_threads();
  int lo = p.keys, hi = 0;  // the union of the group's non-empty ranges
  for (int r = 0; r < rows; ++r) {
    if (row_begin[r] == row_end[r]) continue;
    lo = row_begin[r] < lo ? row_begin[r] : lo;
    hi = row_end[r] > hi ? row_end[r] : hi;
  }
  const int first = clamp_int(lo - t0, 0, tile_cols), last = clamp_int(hi - t0, 0, tile_cols);
  if (first >= last) {  // no row of the group needs a key of this tile
    if (clean) {
      for (int i = tid; i < rows * tile_cols; i += threads)
        out[(i / tile_cols) * p.logits_stride + i % tile_cols] = negative_infinity();
    }
    return;
  }

  const TileSmem sm(smem, rows, p.heads, p.head_dim);
  stage_queries(sm, p.q + int64_t(m0) * p.heads * p.head_dim, p.weights + int64_t(m0) * p.heads);
  const int D = p.head_dim;
  for (int i = tid; i < kLogitsTileTokens * D; i += threads) {
    const int s = i / D, d = i % D;
    sm.k(s, d) = s >= first && s < last ? simt::fp8_e4m3_to_float(p.k[(t0 + s) * p.k_stride + d]) : 0.0f;
  }
  for (int s = tid; s < kLogitsTileTokens; s += threads) {
    sm.scale(s) = s >= first && s < last ? p.k_scale[(t0 + s) * p.k_scale_stride] : 0.0f;
  }
  zero_keys_from(sm, kLogitsTileTokens);  // the padding columns past D
  simt::sync_threads();

  weighted_relu_tile(sm, [&](int r, int s, float logit) {
    if (s >= tile_cols) return;  // past N
    float* at = out + r * p.logits_stride + s;
    if (t0 + s >= row_begin[r] && t0 + s < row_end[r]) {
      *at = logit;
    } else if (clean) {
      *at = negative_infinity();
    } else if (s >= first && s < last) {
      *at = logit;
    }
  });
}

}  // namespace

void launch_mqa_logits(const MqaLogitsParams& p, void* stream) {
  if (p.rows == 0 || p.keys == 0) return;
  const unsigned groups = static_cast<unsigned>((p.rows + p.rows_per_block - 1) / p.rows_per_block);
  const unsigned tiles = static_cast<unsigned>((p.keys + kLogitsTileTokens - 1) / kLogitsTileTokens);
  const simt::LaunchConfig config{{groups, tiles},
                                  {kLogitsThreads},
                                  static_cast<std::size_t>(logits_shared_bytes(p.rows_per_block, p.heads, p.head_dim)),
                                  static_cast<simt::Stream>(stream)};
  MLA_LAUNCH(mqa_logits_kernel, config, p);
}

}  // namespace mlacheck::kernels::MLA_BACKEND_NS
