// Launch parameters of the indexer's K-cache insert (docs/ops.md 2.3), one launcher per backend.
#pragma once

#include <cstdint>

namespace mlacheck::kernels {

struct KCacheInsertParams {
  const uint16_t* k = nullptr;         // bf16 [T, D], row stride k_row_stride, unit column stride
  int64_t k_row_stride = 0;            // elements
  const int32_t* slot_mapping = nullptr;  // [T]: -1, or a slot below num_blocks * block_size
  uint8_t* cache = nullptr;            // block p at cache + p * block_stride
  int64_t block_stride = 0;            // bytes
  int32_t num_tokens = 0;              // T
  int32_t head_dim = 0;                // D
  int32_t block_size = 0;
  bool ue8m0 = false;                  // the scale: a power of two (else amax / 448 in fp32)
};

// The seeded-bug variants' decisions inside the production kernel (docs/bugs.md), switched at
// compile time; kNone is production.
enum class KCacheBug {
  kNone,
#define MLACHECK_BUG(variant, check, needs, enumerator) enumerator,
#include "kernels/k_cache_insert_bugs.def"
#undef MLACHECK_BUG
#undef MLACHECK_HOOK_BUG
};

#define MLA_K_CACHE_INSERT_LAUNCHERS                                                      \
  void k_cache_insert(const KCacheInsertParams& p, void* stream);                        \
  void k_cache_insert_seeded(const KCacheInsertParams& p, KCacheBug bug, void* stream);
namespace host { MLA_K_CACHE_INSERT_LAUNCHERS }
namespace cuda { MLA_K_CACHE_INSERT_LAUNCHERS }
namespace hip { MLA_K_CACHE_INSERT_LAUNCHERS }
#undef MLA_K_CACHE_INSERT_LAUNCHERS

}  // namespace mlacheck::kernels
