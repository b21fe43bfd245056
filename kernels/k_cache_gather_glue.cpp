// Checked entry point of the indexer's K-cache gather (kernels/k_cache_gather_glue.h).
#include "kernels/k_cache_gather_glue.h"

#include <cstdint>
#include <limits>

#include "core/error.h"

namespace mlacheck::kernels {

KCacheGatherParams k_cache_gather_params(const DeviceTensor& kv_cache, const DeviceTensor& block_table,
                                         const DeviceTensor& cu_seq_lens, const DeviceTensor& dst_k,
                                         const DeviceTensor& dst_scale, int64_t block_size) {
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  const View& kv = dst_k.view;
  MLA_REQUIRE(kv.dtype() == DType::kU8 && kv.rank() == 2 && (kv.size(1) <= 1 || kv.stride(1) == 1) &&
                  kv.stride(0) >= kv.size(1),
              "indexer_k_cache_gather: dst_k must be u8 [T, D] with unit column stride and a row stride >= D, got ",
              kv.to_string());
  const int64_t T = kv.size(0), D = kv.size(1);
  MLA_REQUIRE(D >= 1 && T <= kInt32Max, "indexer_k_cache_gather: dst_k ", kv.to_string(),
              " must have D >= 1 and at most 2^31 - 1 rows");
  const View& sv = dst_scale.view;
  MLA_REQUIRE(sv.dtype() == DType::kF32 && sv.rank() == 1 && sv.size(0) == T && (T <= 1 || sv.stride(0) == 1),
              "indexer_k_cache_gather: dst_scale must be contiguous fp32 [T = ", T, "], got ", sv.to_string());
  MLA_REQUIRE(reinterpret_cast<uintptr_t>(dst_scale.data<uint8_t>()) % 4 == 0,
              "indexer_k_cache_gather: dst_scale ", sv.to_string(), " does not start at a multiple of 4 bytes");
  const View& tv = block_table.view;
  MLA_REQUIRE(tv.dtype() == DType::kI32 && tv.rank() == 2 && (tv.size(1) <= 1 || tv.stride(1) == 1) &&
                  tv.stride(0) >= tv.size(1) && tv.size(0) <= kInt32Max - 1 && tv.size(1) <= kInt32Max,
              "indexer_k_cache_gather: block_table must be int32 [B, W] with unit column stride and a row stride >= W, got ",
              tv.to_string());
  const int64_t B = tv.size(0);
  const View& lv = cu_seq_lens.view;
  MLA_REQUIRE(lv.dtype() == DType::kI32 && lv.rank() == 1 && lv.size(0) == B + 1 && lv.is_contiguous(),
              "indexer_k_cache_gather: cu_seq_lens must be contiguous int32 [B + 1 = ", B + 1, "], got ", lv.to_string());
  const View& cv = kv_cache.view;
  MLA_REQUIRE(cv.dtype() == DType::kU8 && cv.rank() == 2 && (cv.size(1) <= 1 || cv.stride(1) == 1),
              "indexer_k_cache_gather: kv_cache must be u8 [num_blocks, block_stride] with unit column stride, got ",
              cv.to_string());
  MLA_REQUIRE(block_size >= 1 && block_size <= kInt32Max / (D + 4),
              "indexer_k_cache_gather: block_size ", block_size, " is not in [1, 2^31 / (D + 4))");
  MLA_REQUIRE(cv.size(1) >= block_size * (D + 4) && cv.stride(0) >= cv.size(1) && cv.stride(0) % 4 == 0,
              "indexer_k_cache_gather: kv_cache ", cv.to_string(), " cannot hold blocks of ", block_size, " tokens of ", D,
              " fp8 bytes and an fp32 scale (block_size * (D + 4) = ", block_size * (D + 4),
              " bytes a block, the block stride a multiple of 4)");
  KCacheGatherParams p;
  p.cache = kv_cache.data<uint8_t>();
  p.block_stride = cv.stride(0);
  p.block_table = block_table.data<int32_t>();
  p.table_row_stride = tv.stride(0);
  p.table_cols = static_cast<int32_t>(tv.size(1));
  p.cu_seq_lens = cu_seq_lens.data<int32_t>();
  p.num_requests = static_cast<int32_t>(B);
  p.dst_k = dst_k.data<uint8_t>();
  p.dst_row_stride = kv.stride(0);
  p.dst_scale = dst_scale.data<uint32_t>();
  p.num_rows = static_cast<int32_t>(T);
  p.head_dim = static_cast<int32_t>(D);
  p.block_size = static_cast<int32_t>(block_size);
  return p;
}

void indexer_k_cache_gather(Device& device, const DeviceTensor& kv_cache, const DeviceTensor& block_table,
                            const DeviceTensor& cu_seq_lens, const DeviceTensor& dst_k, const DeviceTensor& dst_scale,
                            int64_t block_size) {
  const KCacheGatherParams p = k_cache_gather_params(kv_cache, block_table, cu_seq_lens, dst_k, dst_scale, block_size);
  MLA_DISPATCH(device, k_cache_gather, p);
}

}  // namespace mlacheck::kernels
