// The indexer's K-cache gather (oracle/k_cache_gather.h, docs/ops.md 2.4).
#include "oracle/k_cache_gather.h"

#include <cstring>

#include "core/error.h"

namespace mlacheck::oracle {

std::vector<GatheredRow> indexer_k_cache_gather(const KCacheGatherInputs& in) {
  const View& cv = in.cache.blocks.view;
  const View& tv = in.block_table.view;
  const View& lv = in.cu_seq_lens.view;
  const int64_t D = in.cache.head_dim, bs = in.cache.block_size;
  MLA_REQUIRE(cv.dtype() == DType::kU8 && cv.rank() == 2 && D >= 1 && bs >= 1 && cv.size(1) >= bs * (D + 4),
              "k cache gather: kv_cache must be u8 [num_blocks, >= block_size * (D + 4) = ", bs * (D + 4), "], got ",
              cv.to_string());
  MLA_REQUIRE(tv.dtype() == DType::kI32 && tv.rank() == 2, "k cache gather: block_table must be int32 [B, W], got ",
              tv.to_string());
  const int64_t B = tv.size(0), W = tv.size(1), num_blocks = cv.size(0);
  MLA_REQUIRE(lv.dtype() == DType::kI32 && lv.rank() == 1 && lv.size(0) == B + 1,
              "k cache gather: cu_seq_lens must be int32 [B + 1 = ", B + 1, "], got ", lv.to_string());
  MLA_REQUIRE(in.cu_seq_lens.at<int32_t>({0}) == 0, "k cache gather: cu_seq_lens[0] is ",
              in.cu_seq_lens.at<int32_t>({0}), ", not 0");
  std::vector<GatheredRow> rows;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t start = in.cu_seq_lens.at<int32_t>({b}), end = in.cu_seq_lens.at<int32_t>({b + 1});
    MLA_REQUIRE(end >= start, "k cache gather: cu_seq_lens decreases at request ", b, " (", start, " then ", end, ")");
    const int64_t len = end - start;
    MLA_REQUIRE((len + bs - 1) / bs <= W, "k cache gather: request ", b, " has ", len, " tokens, ",
                (len + bs - 1) / bs, " blocks of ", bs, ", and the table has ", W, " columns");
    for (int64_t p = 0; p < len; ++p) {
      GatheredRow r;
      r.request = b, r.position = p;
      r.block = in.block_table.at<int32_t>({b, p / bs});
      r.slot = p % bs;
      MLA_REQUIRE(r.block >= 0 && r.block < num_blocks, "k cache gather: request ", b, " token ", p, " is in block ",
                  r.block, " (table column ", p / bs, "), outside [0, ", num_blocks, ")");
      const uint8_t* block = static_cast<const uint8_t*>(in.cache.blocks.element({r.block, 0}));
      r.codes.assign(block + r.slot * D, block + (r.slot + 1) * D);
      std::memcpy(r.scale, block + bs * D + 4 * r.slot, 4);
      rows.push_back(std::move(r));
    }
  }
  return rows;
}

}  // namespace mlacheck::oracle
