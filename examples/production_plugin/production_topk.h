// A top-k decode written the way production kernels are (vLLM's top_k_per_row_decode is the model):
// one block per row, the row's k indices staged in k x 4 bytes of dynamic shared memory, and the
// shortcuts such a kernel takes, which its contract (production_plugin.cpp) declares:
//   - out is contiguous: row r starts at out + r * k;
//   - logits rows are padded at most: column stride 1, only the row stride is read;
//   - seq_lens is 1-D and seq_lens[b] >= next_n: a row's length seq_lens[b] - next_n + j + 1 is
//     never clamped, and its -1 fill starts at that length;
//   - inputs are finite (NaN keys would be selected as the largest);
//   - k <= 2048 (the shared memory the launch asks for).
// Built with PRODUCTION_PLUGIN_BUG=1 it is its buggy twin, with one bug inside that contract.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mlacheck/plugin.h"

namespace production {

// Where a row's -1 fill starts: at its length n. The twin's bug: one past it, so entry n of a short
// row (n < k) keeps whatever was there.
#if defined(__CUDACC__)
__host__ __device__
#endif
inline int64_t fill_start(int64_t n) {
#if PRODUCTION_PLUGIN_BUG
  return n + 1;
#else
  return n;
#endif
}

// A float's order as an unsigned key: larger floats have larger keys (-0 just below +0).
#if defined(__CUDACC__)
__host__ __device__
#endif
inline uint32_t order_key(uint32_t bits) { return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u); }

int topk_decode_host(const mlacheck_topk_decode_args& a, char* error, size_t error_size);
int topk_decode_cuda(const mlacheck_topk_decode_args& a, void* stream, char* error, size_t error_size);

}  // namespace production
