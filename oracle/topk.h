// Oracle of docs/ops.md section 3, "Top-k per row": the row lengths each variant uses, a reference
// selection (one admissible answer; core/topk_check.h accepts every admissible one), and the
// conversion of request-local indices to global KV slots.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace mlacheck::oracle {

// Decode row lengths for rows r = b·next_n + j. seq_lens is int32, either 2-D [B, next_n]
// (C-contiguous: n = seq_lens[b, j]) or 1-D [B] (n = max(0, seq_lens[b] − next_n + j + 1)).
// Throws mlacheck::Error for a non-contiguous 2-D seq_lens or a column count other than next_n.
std::vector<int64_t> topk_decode_row_lengths(const HostTensor& seq_lens, int64_t next_n);

// Prefill row lengths ke[m] − ks[m]; throws unless 0 <= ks <= ke.
std::vector<int64_t> topk_prefill_row_lengths(const HostTensor& ks, const HostTensor& ke);

// One admissible answer for a row of n values (values[0..n)): n <= k gives [0, .., n−1, −1, ..];
// else the k largest, ties to the lower index, in descending value order. NaN rows are not
// special-cased here (SPEC leaves their selection unspecified; the checker only asks for k
// distinct in-range indices).
std::vector<int32_t> topk_reference_row(const double* values, int64_t n, int64_t k);

// Global slot of request-local index i of request req: block_table[req, i / page]·page + i % page.
// −1 (or any negative) stays −1; an index whose block column is past the table's width becomes −1.
int32_t topk_to_global(int32_t index, const HostTensor& block_table, int64_t req, int64_t page);

}  // namespace mlacheck::oracle
