// The decode row rule of docs/ops.md (2.1, 3 and 5), stated once: the oracles use it, and the
// generators call it instead of restating it.
#pragma once

#include <algorithm>
#include <cstdint>

namespace mlacheck::oracle {

// Row j of a request's n rows (its j-th query token of n, j < n) sees the first
// max(0, L - n + j + 1) of the request's L keys: the last row sees all L, each row before it one
// fewer, and none fewer than 0. For top-k and the paged logits n is next_n (rows b·next_n + j over
// 1-D lengths); for the MLA decodes it is q_len (the causal rule of token t).
inline int64_t decode_row_length(int64_t keys, int64_t rows, int64_t j) {
  return std::max<int64_t>(0, keys - rows + j + 1);
}

}  // namespace mlacheck::oracle
