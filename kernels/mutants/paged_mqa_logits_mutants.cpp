// Paged indexer logits seeded bugs (kernels/mutants/mutants.h): the production entry point
// (kernels/mqa_logits_glue.h) with its kernel compiled with one decision switched (PagedLogitsBug,
// kernels/mqa_logits.h).
#include "kernels/mqa_logits_glue.h"
#include "kernels/mutants/mutants.h"

namespace mlacheck::kernels {

namespace {

// O1 (after DeepGEMM #344): row lengths loaded for every row slot of a block, past the last request's.
void paged_mqa_logits_o1(Device& device, const PagedMqaLogitsArgs& args) {
  paged_mqa_logits_seeded(device, args, PagedLogitsBug::kO1LengthsPastRows);
}

// D1 (after DeepGEMM #392): head sums added in arrival order; results within rounding, bits by schedule.
void paged_mqa_logits_d1(Device& device, const PagedMqaLogitsArgs& args) {
  paged_mqa_logits_seeded(device, args, PagedLogitsBug::kD1HeadSumsInArrivalOrder);
}

// W1: a KV block's byte offset computed in 32 bits; it wraps past byte 2^31 of the cache.
void paged_mqa_logits_w1(Device& device, const PagedMqaLogitsArgs& args) {
  paged_mqa_logits_seeded(device, args, PagedLogitsBug::kW1BlockOffsetIn32Bits);
}

}  // namespace

void register_paged_mqa_logits_mutants(Registry& reg) {
  reg.add({"paged_mqa_logits", "O1",
           "seeded bug O1 (after DeepGEMM #344): each block loads 16 rows' lengths, the last request's past context_lens"},
          &paged_mqa_logits_o1);
  reg.add({"paged_mqa_logits", "D1",
           "seeded bug D1 (after DeepGEMM #392): head slots' partial logits added with atomics in arrival order: the bits depend on the schedule"},
          &paged_mqa_logits_d1);
  reg.add({"paged_mqa_logits", "W1",
           "seeded bug W1 (32-bit offsets): a KV block's byte offset, page x block_stride, computed in 32 bits: wraps past byte 2^31"},
          &paged_mqa_logits_w1);
}

}  // namespace mlacheck::kernels
