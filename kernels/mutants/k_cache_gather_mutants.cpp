// Indexer K-cache gather seeded bugs (kernels/mutants/mutants.h): the production entry point with
// its kernel compiled with one decision switched (KCacheGatherBug, kernels/k_cache_gather.h).
#include "kernels/k_cache_gather_glue.h"
#include "kernels/mutants/mutants.h"

namespace mlacheck::kernels {

namespace {

// G1: request b's block ids read at block_table + b x W (the table's columns), ignoring the row
// stride of a table that is a view into a wider one, as vLLM 0.29.0's CUDA gather indexes it.
void k_cache_gather_g1(Device& device, const DeviceTensor& kv_cache, const DeviceTensor& block_table,
                       const DeviceTensor& cu_seq_lens, const DeviceTensor& dst_k, const DeviceTensor& dst_scale,
                       int64_t block_size) {
  const KCacheGatherParams p = k_cache_gather_params(kv_cache, block_table, cu_seq_lens, dst_k, dst_scale, block_size);
  MLA_DISPATCH(device, k_cache_gather_seeded, p, KCacheGatherBug::kG1TableRowsAtWidth);
}

// G2: the search for a row's request compares with >= where the request's end excludes it: the
// first row of each request after the first (and row 0 when request 0 is empty) is read from the
// previous request, one token past its keys.
void k_cache_gather_g2(Device& device, const DeviceTensor& kv_cache, const DeviceTensor& block_table,
                       const DeviceTensor& cu_seq_lens, const DeviceTensor& dst_k, const DeviceTensor& dst_scale,
                       int64_t block_size) {
  const KCacheGatherParams p = k_cache_gather_params(kv_cache, block_table, cu_seq_lens, dst_k, dst_scale, block_size);
  MLA_DISPATCH(device, k_cache_gather_seeded, p, KCacheGatherBug::kG2RequestEndInclusive);
}

// G3 (T an upper bound, as vLLM 0.29.0's gather kernel is launched): the rows from cu_seq_lens[B] to T not skipped; T is an
// allocation's upper bound, and each of those rows is read as the last request's token past its
// keys (through table columns it does not own) and written.
void k_cache_gather_g3(Device& device, const DeviceTensor& kv_cache, const DeviceTensor& block_table,
                       const DeviceTensor& cu_seq_lens, const DeviceTensor& dst_k, const DeviceTensor& dst_scale,
                       int64_t block_size) {
  const KCacheGatherParams p = k_cache_gather_params(kv_cache, block_table, cu_seq_lens, dst_k, dst_scale, block_size);
  MLA_DISPATCH(device, k_cache_gather_seeded, p, KCacheGatherBug::kG3RowsPastTheLastRequest);
}

}  // namespace

void register_k_cache_gather_mutants(Registry& reg) {
  reg.add({"indexer_k_cache_gather", "G1",
           "seeded bug G1: a request's block-table row read at b x W (the table's width), not at its row stride"},
          &k_cache_gather_g1);
  reg.add({"indexer_k_cache_gather", "G2",
           "seeded bug G2: a request's first row given to the request before it (end compared with >=), read past its keys"},
          &k_cache_gather_g2);
  reg.add({"indexer_k_cache_gather", "G3",
           "seeded bug G3: rows past cu_seq_lens[B] (T an upper bound) read as the last request's and written"},
          &k_cache_gather_g3);
}

}  // namespace mlacheck::kernels
