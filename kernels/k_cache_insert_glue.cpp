// Checked entry point of the indexer's K-cache insert (kernels/k_cache_insert_glue.h).
#include "kernels/k_cache_insert_glue.h"

#include <limits>

#include "core/error.h"

namespace mlacheck::kernels {

KCacheInsertParams k_cache_insert_params(const DeviceTensor& k, const DeviceTensor& slot_mapping,
                                         const DeviceTensor& kv_cache, int64_t block_size, bool ue8m0) {
  const View& kv = k.view;
  MLA_REQUIRE(kv.dtype() == DType::kBF16 && kv.rank() == 2 && (kv.size(1) <= 1 || kv.stride(1) == 1) &&
                  kv.stride(0) >= kv.size(1),
              "indexer_k_cache_insert: k must be bf16 [T, D] with unit column stride, got ", kv.to_string());
  const int64_t T = kv.size(0), D = kv.size(1);
  MLA_REQUIRE(D >= 1 && T <= std::numeric_limits<int32_t>::max(), "indexer_k_cache_insert: k ", kv.to_string(),
              " must have D >= 1 and at most 2^31 - 1 tokens");
  const View& sv = slot_mapping.view;
  MLA_REQUIRE(sv.dtype() == DType::kI32 && sv.rank() == 1 && sv.size(0) == T && sv.is_contiguous(),
              "indexer_k_cache_insert: slot_mapping must be contiguous int32 [T = ", T, "], got ", sv.to_string());
  const View& cv = kv_cache.view;
  MLA_REQUIRE(cv.dtype() == DType::kU8 && cv.rank() == 2 && (cv.size(1) <= 1 || cv.stride(1) == 1),
              "indexer_k_cache_insert: kv_cache must be u8 [num_blocks, block_stride] with unit column stride, got ",
              cv.to_string());
  MLA_REQUIRE(block_size >= 1 && block_size <= std::numeric_limits<int32_t>::max() / (D + 4),
              "indexer_k_cache_insert: block_size ", block_size, " is not in [1, 2^31 / (D + 4))");
  MLA_REQUIRE(cv.size(1) >= block_size * (D + 4) && cv.stride(0) >= cv.size(1) && cv.stride(0) % 4 == 0,
              "indexer_k_cache_insert: kv_cache ", cv.to_string(), " cannot hold blocks of ", block_size,
              " tokens of ", D, " fp8 bytes and an fp32 scale (block_size * (D + 4) = ", block_size * (D + 4),
              " bytes a block, the block stride a multiple of 4)");
  KCacheInsertParams p;
  p.k = k.data<uint16_t>();
  p.k_row_stride = kv.stride(0);
  p.slot_mapping = slot_mapping.data<int32_t>();
  p.cache = kv_cache.data<uint8_t>();
  p.block_stride = cv.stride(0);
  p.num_tokens = static_cast<int32_t>(T);
  p.head_dim = static_cast<int32_t>(D);
  p.block_size = static_cast<int32_t>(block_size);
  p.ue8m0 = ue8m0;
  return p;
}

void indexer_k_cache_insert(Device& device, const DeviceTensor& k, const DeviceTensor& slot_mapping,
                            const DeviceTensor& kv_cache, int64_t block_size, bool ue8m0) {
  const KCacheInsertParams p = k_cache_insert_params(k, slot_mapping, kv_cache, block_size, ue8m0);
  MLA_DISPATCH(device, k_cache_insert, p);
}

}  // namespace mlacheck::kernels
