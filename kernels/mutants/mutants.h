// Seeded-bug variants: each the correct op with one wrong decision that shipped upstream (a row of
// ../shared/BUGS.md), registered beside the correct implementation as <op>@<bug id> so every
// property, fuzzer and corpus case can be pointed at it and must fail. They live here, apart from
// the production code, which has no mutant switches.
#pragma once

#include "kernels/registry.h"

namespace mlacheck::kernels {

// R4 (top-k dispatch, vLLM #42072): the k = 2048 fast path taken for any k >= 2048.
void register_topk_mutants(Registry& reg);

// Every variant above.
inline void register_mutants(Registry& reg) { register_topk_mutants(reg); }

}  // namespace mlacheck::kernels
