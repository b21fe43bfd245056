// Paged decode indexer logits over the block-flat fp8 KV cache (docs/ops.md 2.1), one source for every backend.
#include "core/backend/simt.h"
#include "kernels/mqa_logits.h"

namespace mlacheck::kernels::MLA_BACKEND_NS {
namespace {

using namespace logits_detail;

// 16 key bytes, for one vector load on the fast path.
struct alignas(16) Bytes16 {
  uint32_t word[4];
};

// Row (b, j)'s length: context_lens[b, j] (2-D) or max(0, L_b - next_n + j + 1) (1-D), clamped to
// what the launch can hold: max_context_len columns and W blocks of the table. (The oracle refuses
// longer rows; the kernel must still never write past the row or read past the table.)
MLA_DEVICE int row_length(const PagedMqaLogitsParams& p, int b, int j) {
  int64_t n;
  if (p.context_lens_2d) {
    n = p.context_lens[int64_t(b) * p.next_n + j];
  } else {
    n = int64_t(p.context_lens[b * p.context_lens_stride]) - p.next_n + j + 1;
  }
  const int64_t table_tokens = int64_t(p.block_table_width) * p.block_size;
  return clamp_int(n, 0, table_tokens < p.max_context_len ? table_tokens : p.max_context_len);
}

MLA_DEVICE bool valid_page(const PagedMqaLogitsParams& p, int32_t page) { return page >= 0 && page < p.num_blocks; }

// The byte offset of KV block `page` in the cache: in 64 bits, since block ids times strides pass
// 2^31 bytes in a large cache. The seeded bug W1 computes it in 32 bits.
template <PagedLogitsBug kBug>
MLA_DEVICE int64_t block_offset(const PagedMqaLogitsParams& p, int32_t page) {
  if (kBug == PagedLogitsBug::kW1BlockOffsetIn32Bits) {
    return static_cast<int32_t>(static_cast<uint32_t>(page) * static_cast<uint32_t>(p.block_stride));
  }
  return int64_t(page) * p.block_stride;
}

// Fast path (block size == tile, 16-byte aligned keys): the tile is KV block block_table[b, tile],
// whose first n tokens' keys are n * D contiguous bytes and whose scales follow at 64 * D.
template <PagedLogitsBug kBug>
MLA_DEVICE void stage_block_keys(const TileSmem& sm, const PagedMqaLogitsParams& p, int b, int tile, int n) {
  const int tid = static_cast<int>(simt::thread_idx().x), threads = static_cast<int>(simt::block_dim().x);
  const int32_t page = p.block_table[b * p.block_table_stride + tile];
  const bool valid = valid_page(p, page);
  const uint8_t* block = p.kv + (valid ? block_offset<kBug>(p, page) : 0);
  const Bytes16* chunks = reinterpret_cast<const Bytes16*>(block);
  const int D = sm.head_dim;
  for (int c = tid; c < n * D / 16; c += threads) {
    const int s = c * 16 / D, d = c * 16 % D;
    if (!valid) {
      for (int e = 0; e < 16; ++e) sm.k(s, d + e) = quiet_nan();
      continue;
    }
    const Bytes16 v = chunks[c];
    for (int e = 0; e < 16; ++e) {
      sm.k(s, d + e) = simt::fp8_e4m3_to_float(static_cast<uint8_t>(v.word[e / 4] >> (8 * (e % 4))));
    }
  }
  const float* scales = reinterpret_cast<const float*>(block + int64_t(kLogitsTileTokens) * D);
  for (int s = tid; s < n; s += threads) sm.scale(s) = valid ? scales[s] : quiet_nan();
}

// General path (any block size): token t0 + s lives in block block_table[b, t / block_size], slot
// t % block_size. One thread per token finds its key's byte offset (-1 for a page outside the
// cache) and scale, then the block decodes the keys bytewise.
template <PagedLogitsBug kBug>
MLA_DEVICE void stage_token_keys(const TileSmem& sm, const PagedMqaLogitsParams& p, int b, int t0, int n,
                                 const simt::shared_array<int64_t>& token_at) {
  const int tid = static_cast<int>(simt::thread_idx().x), threads = static_cast<int>(simt::block_dim().x);
  const int D = sm.head_dim;
  for (int s = tid; s < n; s += threads) {
    const int t = t0 + s;
    const int32_t page = p.block_table[b * p.block_table_stride + t / p.block_size];
    const int64_t slot = t % p.block_size;
    if (!valid_page(p, page)) {
      token_at[s] = -1;
      sm.scale(s) = quiet_nan();
      continue;
    }
    const int64_t at = block_offset<kBug>(p, page);
    const uint8_t* block = p.kv + at;
    token_at[s] = at + slot * D;
    // The scale is 4-aligned only when block_size * D is: assemble it from bytes.
    const uint8_t* sb = block + int64_t(p.block_size) * D + 4 * slot;
    sm.scale(s) = bits_float(uint32_t(sb[0]) | uint32_t(sb[1]) << 8 | uint32_t(sb[2]) << 16 | uint32_t(sb[3]) << 24);
  }
  simt::sync_threads();
  for (int i = tid; i < n * D; i += threads) {
    const int s = i / D, d = i % D;
    const int64_t at = token_at[s];
    sm.k(s, d) = at < 0 ? quiet_nan() : simt::fp8_e4m3_to_float(p.kv[at + d]);
  }
}

// kVariant: bit 0 the block-tile fast path, bits 1.. a PagedLogitsBug (one template argument, because
// a comma would split MLA_LAUNCH's arguments).
constexpr int kBlockTileVariant = 1, kBugShift = 1;

// Grid (groups of kLogitsTilesPerBlock tiles of max_context_len, B, groups of next_n rows). Block
// (x, b, z) computes rows j0 = z * rows_per_block ... of request b over the tiles [x * kTiles, ...)
// of 64 tokens each, staging q once for all of them, and writes their columns below
// max_context_len: the logit where t < ctx_r; in clean mode -inf elsewhere; in unclean mode the
// logit of any token below the group's longest row (a real key of the request) and nothing else.
template <int kVariant>
MLA_KERNEL void paged_mqa_logits_kernel(PagedMqaLogitsParams p) {
  constexpr bool kBlockTile = (kVariant & kBlockTileVariant) != 0;
  constexpr PagedLogitsBug kBug = static_cast<PagedLogitsBug>(kVariant >> kBugShift);
  MLA_DYNAMIC_SHARED(float, smem);
  MLA_SHARED(int, row_len, kLogitsMaxRowsPerBlock);
  MLA_SHARED(int64_t, token_at, kLogitsTileTokens);
  const int tid = static_cast<int>(simt::thread_idx().x), threads = static_cast<int>(simt::block_dim().x);
  const int b = static_cast<int>(simt::block_idx().y);
  const int j0 = static_cast<int>(simt::block_idx().z) * p.rows_per_block;
  const int rows = p.next_n - j0 < p.rows_per_block ? p.next_n - j0 : p.rows_per_block;
  const bool clean = p.mode == LogitsMode::kClean;

  if (tid < (kBug == PagedLogitsBug::kO1LengthsPastRows ? kLogitsMaxRowsPerBlock : rows)) {
    row_len[tid] = row_length(p, b, j0 + tid);
  }
  simt::sync_threads();
  int longest = 0;
  for (int r = 0; r < rows; ++r) longest = row_len[r] > longest ? row_len[r] : longest;

  const TileSmem sm(smem, rows, p.heads, p.head_dim);
  const int64_t row0 = int64_t(b) * p.next_n + j0;
  bool q_staged = false;
  // Every condition below is the same for all threads of the block, so barriers stay uniform.
  for (int i = 0; i < kLogitsTilesPerBlock; ++i) {
    const int tile = static_cast<int>(simt::block_idx().x) * kLogitsTilesPerBlock + i;
    const int t0 = tile * kLogitsTileTokens;
    if (t0 >= p.max_context_len) break;
    const int tile_cols = p.max_context_len - t0 < kLogitsTileTokens ? p.max_context_len - t0 : kLogitsTileTokens;
    float* out = p.logits + row0 * p.logits_stride + t0;
    const int n = clamp_int(longest - t0, 0, kLogitsTileTokens);  // tokens of the tile the block reads
    if (n == 0) {  // the tile is past every row of the group
      if (clean) {
        for (int e = tid; e < rows * tile_cols; e += threads)
          out[(e / tile_cols) * p.logits_stride + e % tile_cols] = negative_infinity();
      }
      continue;
    }
    if (!q_staged) {
      stage_queries(sm, p.q + row0 * p.heads * p.head_dim, p.weights + row0 * p.heads);
      q_staged = true;
    }
    if (kBlockTile) {
      stage_block_keys<kBug>(sm, p, b, tile, n);
    } else {
      stage_token_keys<kBug>(sm, p, b, t0, n, token_at);
    }
    zero_keys_from(sm, n);
    simt::sync_threads();

    weighted_relu_tile<kBug == PagedLogitsBug::kD1HeadSumsInArrivalOrder>(sm, [&](int r, int s, float logit) {
      if (s >= tile_cols) return;  // past max_context_len: not this view's
      float* at = out + r * p.logits_stride + s;
      if (t0 + s < row_len[r]) {
        *at = logit;
      } else if (clean) {
        *at = negative_infinity();
      } else if (s < n) {
        *at = logit;
      }
    });  // ends with a barrier: the next tile may overwrite the keys
  }
}

}  // namespace

void launch_paged_mqa_logits(const PagedMqaLogitsParams& p, void* stream) {
  launch_paged_mqa_logits_seeded(p, PagedLogitsBug::kNone, stream);
}

void launch_paged_mqa_logits_seeded(const PagedMqaLogitsParams& p, PagedLogitsBug bug, void* stream) {
  if (p.batch == 0 || p.next_n == 0 || p.max_context_len == 0) return;
  const int64_t tiles = (int64_t(p.max_context_len) + kLogitsTileTokens - 1) / kLogitsTileTokens;
  const unsigned tile_groups = static_cast<unsigned>((tiles + kLogitsTilesPerBlock - 1) / kLogitsTilesPerBlock);
  const unsigned groups = static_cast<unsigned>((p.next_n + p.rows_per_block - 1) / p.rows_per_block);
  const simt::LaunchConfig config{{tile_groups, static_cast<unsigned>(p.batch), groups},
                                  {kLogitsThreads},
                                  static_cast<std::size_t>(logits_shared_bytes(p.rows_per_block, p.heads, p.head_dim)),
                                  static_cast<simt::Stream>(stream)};
  // A tile is one KV block when blocks hold exactly a tile's tokens; the 16-byte loads need D and
  // every block start 16-byte aligned.
  const bool block_tile = p.block_size == kLogitsTileTokens && p.head_dim % 16 == 0 && p.block_stride % 16 == 0 &&
                          reinterpret_cast<std::uintptr_t>(p.kv) % 16 == 0;
  constexpr int kO1 = static_cast<int>(PagedLogitsBug::kO1LengthsPastRows) << kBugShift;
  constexpr int kD1 = static_cast<int>(PagedLogitsBug::kD1HeadSumsInArrivalOrder) << kBugShift;
  constexpr int kW1 = static_cast<int>(PagedLogitsBug::kW1BlockOffsetIn32Bits) << kBugShift;
  if (bug == PagedLogitsBug::kO1LengthsPastRows) {
    if (block_tile) {
      MLA_LAUNCH(paged_mqa_logits_kernel<kO1 | kBlockTileVariant>, config, p);
    } else {
      MLA_LAUNCH(paged_mqa_logits_kernel<kO1>, config, p);
    }
  } else if (bug == PagedLogitsBug::kD1HeadSumsInArrivalOrder) {
    if (block_tile) {
      MLA_LAUNCH(paged_mqa_logits_kernel<kD1 | kBlockTileVariant>, config, p);
    } else {
      MLA_LAUNCH(paged_mqa_logits_kernel<kD1>, config, p);
    }
  } else if (bug == PagedLogitsBug::kW1BlockOffsetIn32Bits) {
    if (block_tile) {
      MLA_LAUNCH(paged_mqa_logits_kernel<kW1 | kBlockTileVariant>, config, p);
    } else {
      MLA_LAUNCH(paged_mqa_logits_kernel<kW1>, config, p);
    }
  } else if (block_tile) {
    MLA_LAUNCH(paged_mqa_logits_kernel<kBlockTileVariant>, config, p);
  } else {
    MLA_LAUNCH(paged_mqa_logits_kernel<0>, config, p);
  }
}

}  // namespace mlacheck::kernels::MLA_BACKEND_NS
