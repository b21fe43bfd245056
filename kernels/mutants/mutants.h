// Seeded-bug variants: each the correct op with one wrong decision that shipped upstream (a row of
// ../shared/BUGS.md), registered beside the correct implementation as <op>@<bug id> so every
// property, fuzzer and corpus case can be pointed at it and must fail. They live here, apart from
// the production code, which has no mutant switches.
#pragma once

#include "kernels/registry.h"

namespace mlacheck::kernels {

// R4 (top-k dispatch, vLLM #42072): the k = 2048 fast path taken for any k >= 2048.
void register_topk_mutants(Registry& reg);
// R1, R2 (top-k decode glue of the indexer step, vLLM #42072): rows written past the view; packed
// rows regrouped with the configured next_n.
void register_indexer_decode_step_mutants(Registry& reg);
// K1, T2, K3 (MLA decode impl, vLLM #41778, #42885): scales cached from the first call; workspace
// allocated per call; workspace sized for q_len 1 and grown.
void register_mla_decode_impl_mutants(Registry& reg);

// Every variant above.
inline void register_mutants(Registry& reg) {
  register_topk_mutants(reg);
  register_indexer_decode_step_mutants(reg);
  register_mla_decode_impl_mutants(reg);
}

}  // namespace mlacheck::kernels
