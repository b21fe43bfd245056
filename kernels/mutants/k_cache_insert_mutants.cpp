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

// W4: the slot's block offset computed in int32; past byte 2^31 the key lands 4 GiB before its block.
void k_cache_insert_w4(Device& device, const DeviceTensor& k, const DeviceTensor& slot_mapping,
                       const DeviceTensor& kv_cache, int64_t block_size, bool ue8m0) {
  const KCacheInsertParams p = k_cache_insert_params(k, slot_mapping, kv_cache, block_size, ue8m0);
  MLA_DISPATCH(device, k_cache_insert_seeded, p, KCacheBug::kW4BlockOffsetIn32Bits);
}

}  // namespace

void register_k_cache_insert_mutants(Registry& reg) {
  reg.add({"indexer_k_cache_insert", "L1",
           "seeded bug L1: slots written token-interleaved ([D codes, scale]), the reader's layout is block-flat"},
          &k_cache_insert_l1);
  reg.add({"indexer_k_cache_insert", "W4",
           "seeded bug W4 (32-bit offsets): a slot's block offset, block x block_stride, computed in int32: a write 4 GiB before its block past byte 2^31"},
          &k_cache_insert_w4);
}

}  // namespace mlacheck::kernels
