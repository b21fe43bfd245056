// Indexer K-cache insert seeded bugs (kernels/mutants/mutants.h): the production entry point with
// its kernel compiled with one decision switched (KCacheBug, kernels/k_cache_insert.h).
#include "kernels/k_cache_insert_glue.h"
#include "kernels/mutants/mutants.h"

namespace mlacheck::kernels {

namespace {

// L1: the writer lays each slot out as [D codes, 4 scale bytes] (token-interleaved) while the
// reader (the paged logits kernel, docs/ops.md 2.1) expects a block's codes and then its scales.
void k_cache_insert_l1(Device& device, const DeviceTensor& k, const DeviceTensor& slot_mapping,
                       const DeviceTensor& kv_cache, int64_t block_size, bool ue8m0) {
  const KCacheInsertParams p = k_cache_insert_params(k, slot_mapping, kv_cache, block_size, ue8m0);
  MLA_DISPATCH(device, k_cache_insert_seeded, p, KCacheBug::kL1TokenInterleaved);
}

}  // namespace

void register_k_cache_insert_mutants(Registry& reg) {
  reg.add({"indexer_k_cache_insert", "L1",
           "seeded bug L1: slots written token-interleaved ([D codes, scale]), the reader's layout is block-flat"},
          &k_cache_insert_l1);
}

}  // namespace mlacheck::kernels
