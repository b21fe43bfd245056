// The per-element work of the example indexer decode step (docs/ops.md 6), written once for the host
// loops (decode_step_plugin.cpp) and the CUDA kernels (step_kernels.cu): paged fp8 logits of one
// (row, column), the top-k of one (row, candidate), the unpack and the global slot of one (token,
// position). Rows are the metadata's: flattened, one per token, reading the per-token lengths and
// block-table rows the metadata step wrote; native, one per [request, next_n'] slot, reading
// context_lens, with q read in place through query_start_loc and top-k into padded rows unpacked
// afterwards.
#pragma once

#include <stdint.h>

#include "number_formats.h"

namespace example_step {

struct StepJob {
  // The batch (device arrays): query_start_loc [B + 1], block_table [B, W] (row stride table_stride).
  const int32_t* qsl;
  const int32_t* table;
  int64_t table_stride, W, B, T;
  int32_t native;  // 0: flattened rows; 1: [B, n] slot rows
  int64_t n;       // next_n' (native)
  // The metadata this step built: flattened per-token lengths and table rows, or native context_lens.
  const int32_t* token_lens;
  const int32_t* token_table;
  int64_t token_table_stride;
  const int32_t* context_lens;  // [B, n], C-contiguous
  // Inputs: q fp8 [T, H, D] and weights fp32 [T, H], contiguous; the block-flat cache.
  const uint8_t* q;
  const float* weights;
  const uint8_t* kv;
  int64_t block_stride, block_size, H, D;
  // Logits fp32 [rows, >= cols] (row stride logits_stride) and top-k rows int32 [rows, k].
  int64_t rows, cols, k;
  float* logits;
  int64_t logits_stride;
  int32_t* topk_rows;
  int64_t topk_rows_stride;
  // The token rows of the two outputs: int32 [T, k], unit column stride.
  int32_t* topk_buffer;
  int64_t topk_buffer_stride;
  int32_t* global;
  int64_t global_stride;
};

// The request holding token t: the last b with qsl[b] <= t, past requests with no tokens.
EXAMPLE_HD inline int64_t request_of(const StepJob& j, int64_t t) {
  int64_t lo = 0, hi = j.B - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (j.qsl[mid] <= t) lo = mid; else hi = mid - 1;
  }
  while (lo < j.B - 1 && j.qsl[lo + 1] <= t) ++lo;
  return lo;
}

// Row r's length, its q token and its block-table row.
struct Row {
  int64_t len, token;
  const int32_t* table;
};
EXAMPLE_HD inline Row row_of(const StepJob& j, int64_t r) {
  if (!j.native) return {j.token_lens[r], r, j.token_table + r * j.token_table_stride};
  const int64_t b = r / j.n, s = r % j.n;
  return {j.context_lens[r], j.qsl[b] + s, j.table + b * j.table_stride};
}

// logits[r, c] = scale_c * sum_h w[h] * relu(q[h] . k_c), for c inside the row (the rest is free).
EXAMPLE_HD inline void logit_element(const StepJob& j, int64_t r, int64_t c) {
  const Row row = row_of(j, r);
  if (c >= row.len) return;
  const uint8_t* block = j.kv + static_cast<int64_t>(row.table[c / j.block_size]) * j.block_stride;
  const int64_t slot = c % j.block_size;
  const uint8_t* key = block + slot * j.D;
  float scale;
  memcpy(&scale, block + j.block_size * j.D + 4 * slot, 4);
  float sum = 0.0f;
  for (int64_t h = 0; h < j.H; ++h) {
    const uint8_t* q = j.q + (row.token * j.H + h) * j.D;
    float dot = 0.0f;
    for (int64_t d = 0; d < j.D; ++d) dot += example_numbers::fp8_e4m3_to_float(q[d]) * example_numbers::fp8_e4m3_to_float(key[d]);
    sum += j.weights[row.token * j.H + h] * (dot > 0.0f ? dot : 0.0f);
  }
  j.logits[r * j.logits_stride + c] = scale * sum;
}

// Top-k of row r, candidate or position i in [0, max(len, k)): a row that fits (len <= k) is
// [0, len) then -1; otherwise candidate i goes to position rank(i) when that is below k (ties by
// index, so the k places are filled exactly once).
EXAMPLE_HD inline void topk_element(const StepJob& j, int64_t r, int64_t i) {
  const int64_t len = row_of(j, r).len;
  int32_t* out = j.topk_rows + r * j.topk_rows_stride;
  if (len <= j.k) {
    if (i < j.k) out[i] = i < len ? static_cast<int32_t>(i) : -1;
    return;
  }
  if (i >= len) return;
  const float* v = j.logits + r * j.logits_stride;
  int64_t rank = 0;
  for (int64_t x = 0; x < len && rank < j.k; ++x) rank += v[x] > v[i] || (v[x] == v[i] && x < i);
  if (rank < j.k) out[rank] = static_cast<int32_t>(i);
}

// Native: token t's row of the shared buffer from its slot row.
EXAMPLE_HD inline void unpack_element(const StepJob& j, int64_t t, int64_t i) {
  const int64_t b = request_of(j, t);
  const int64_t slot = b * j.n + (t - j.qsl[b]);
  j.topk_buffer[t * j.topk_buffer_stride + i] = j.topk_rows[slot * j.topk_rows_stride + i];
}

// Token t's position i as a global KV slot: block_table[b, idx / page] * page + idx % page, or -1.
EXAMPLE_HD inline void global_element(const StepJob& j, int64_t t, int64_t i) {
  const int64_t b = request_of(j, t);
  const int32_t idx = j.topk_buffer[t * j.topk_buffer_stride + i];
  int32_t out = -1;
  if (idx >= 0 && idx / j.block_size < j.W) {
    out = static_cast<int32_t>(static_cast<int64_t>(j.table[b * j.table_stride + idx / j.block_size]) * j.block_size +
                               idx % j.block_size);
  }
  j.global[t * j.global_stride + i] = out;
}

// The CUDA side (step_kernels.cu): each launches its stage over rows x columns; 0 or a CUDA error.
int launch_logits(const StepJob& j, void* stream);
int launch_topk(const StepJob& j, void* stream);
int launch_unpack(const StepJob& j, void* stream);
int launch_global(const StepJob& j, void* stream);

}  // namespace example_step
