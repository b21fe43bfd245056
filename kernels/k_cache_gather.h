// Launch parameters of the indexer's K-cache gather (docs/ops.md 2.4), one launcher per backend.
#pragma once

#include <cstdint>

namespace mlacheck::kernels {

struct KCacheGatherParams {
  const uint8_t* cache = nullptr;        // block p at cache + p * block_stride
  int64_t block_stride = 0;              // bytes
  const int32_t* block_table = nullptr;  // [B, W], row stride table_row_stride, unit column stride
  int64_t table_row_stride = 0;          // elements
  int32_t table_cols = 0;                // W
  const int32_t* cu_seq_lens = nullptr;  // [B + 1]
  int32_t num_requests = 0;              // B
  uint8_t* dst_k = nullptr;              // [T, D], row stride dst_row_stride, unit column stride
  int64_t dst_row_stride = 0;            // bytes
  uint32_t* dst_scale = nullptr;         // fp32 [T] as its bits, contiguous
  int32_t num_rows = 0;                  // T (an upper bound of cu_seq_lens[B])
  int32_t head_dim = 0;                  // D
  int32_t block_size = 0;
};

// The seeded-bug variants' decisions inside the production kernel (docs/bugs.md), switched at
// compile time; kNone is production.
enum class KCacheGatherBug {
  kNone,
#define MLACHECK_BUG(variant, check, needs, enumerator) enumerator,
#include "kernels/k_cache_gather_bugs.def"
#undef MLACHECK_BUG
#undef MLACHECK_HOOK_BUG
};

#define MLA_K_CACHE_GATHER_LAUNCHERS                                                      \
  void k_cache_gather(const KCacheGatherParams& p, void* stream);                        \
  void k_cache_gather_seeded(const KCacheGatherParams& p, KCacheGatherBug bug, void* stream);
namespace host { MLA_K_CACHE_GATHER_LAUNCHERS }
namespace cuda { MLA_K_CACHE_GATHER_LAUNCHERS }
namespace hip { MLA_K_CACHE_GATHER_LAUNCHERS }
#undef MLA_K_CACHE_GATHER_LAUNCHERS

}  // namespace mlacheck::kernels
