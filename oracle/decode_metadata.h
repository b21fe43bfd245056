// Oracle of docs/ops.md section 1, "Decode metadata": per-token context lengths of a decode batch in
// the flattened layout (one row per token) and the native 2-D layout (one row per request).
//
// Pure functions of int32 views on the host; no globals. Padding requests (decode_len 0) take no
// rows in the flattened layout and a row of zeros in the native one.
#pragma once

#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "core/tensor.h"

namespace mlacheck::oracle {

using IntMatrix = Eigen::Matrix<int32_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// ctx(b, t) = max(0, L_b − d_b + t + 1): the keys token t of a request with L keys and d query
// tokens attends to. Never negative, even for a padding request (L = 0).
int32_t context_len(int32_t seq_len, int32_t decode_len, int32_t token);

// The decode batch as the metadata builder receives it. seq_lens and decode_lens are int32 [B]
// views, block_table int32 [B, W] with unit column stride (any row stride). decode_lens must lie in
// [0, next_n]. Throws mlacheck::Error naming what is inconsistent.
struct DecodeBatchViews {
  HostTensor seq_lens;
  HostTensor decode_lens;
  HostTensor block_table;
  int32_t next_n = 1;
};

// Flattened layout: row r of token t of request b holds ctx(b, t), block_table[b] (the source row's
// W entries) and decode length 1. Rows [num_decode_tokens, rows_allocated) are zero.
struct FlattenedMetadata {
  int64_t num_decode_tokens = 0;
  std::vector<int32_t> seq_lens;    // [rows_allocated]
  IntMatrix block_table;            // [rows_allocated, W]
  std::vector<int32_t> decode_lens; // [rows_allocated]
};
FlattenedMetadata flattened_metadata(const DecodeBatchViews& batch, int64_t rows_allocated);

// Native layout: context_lens [B, next_n'] with next_n' = max_b d_b (C-contiguous in the kernel's
// contract), left-aligned: column j < d_b holds ctx(b, j), padding columns hold 0.
struct NativeMetadata {
  int32_t next_n_live = 0;  // next_n'
  IntMatrix context_lens;   // [B, next_n']
  IntMatrix block_table;    // [B, W], the source rows
};
NativeMetadata native_metadata(const DecodeBatchViews& batch);

// True when every request has the same decode length and none is padding: the batches the fused
// uniform kernel may take (docs/ops.md 1).
bool is_uniform(const DecodeBatchViews& batch);

}  // namespace mlacheck::oracle
