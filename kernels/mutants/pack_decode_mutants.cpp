// Top-k to global slots seeded bugs (kernels/mutants/mutants.h): the production entry point with its
// kernel compiled with one decision switched (TopkToGlobalBug, kernels/pack_decode.h).
#include "kernels/mutants/mutants.h"
#include "kernels/pack_decode_glue.h"

namespace mlacheck::kernels {

namespace {

// S1 (after vLLM #45324): an index with no slot is written as 0, not -1. Slot 0 is a real token of
// the cache, so a consumer reads it instead of skipping the entry.
void topk_to_global_s1(Device& device, const DeviceTensor& query_start_loc, const DeviceTensor& local,
                       const DeviceTensor& block_table, int64_t page, const DeviceTensor& global) {
  topk_to_global_seeded(device, query_start_loc, local, block_table, page, global, TopkToGlobalBug::kS1InvalidAsZero);
}

}  // namespace

void register_pack_decode_mutants(Registry& reg) {
  reg.add({"topk_to_global", "S1",
           "seeded bug S1 (after vLLM #45324): an index with no slot (-1, or past the table) written as slot 0, not -1"},
          &topk_to_global_s1);
}

}  // namespace mlacheck::kernels
