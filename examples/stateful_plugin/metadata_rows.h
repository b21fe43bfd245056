// The per-row work of the example decode metadata builder (docs/ops.md 1), written once for the host
// loop (metadata_plugin.cpp) and the CUDA kernel (metadata_kernels.cu). It includes nothing of
// mlacheck's but plugin.h, as a kernel engineer's own builder would.
#pragma once

#include <stdint.h>

#include "number_formats.h"  // EXAMPLE_HD

namespace example_metadata {

// One step's flattened build: rows [0, T) get the tokens, rows [T, reset_end) are zeroed (the
// padding rows and whatever an earlier, larger step left there).
struct FlatStep {
  const int32_t* seq_lens;     // [B]
  const int32_t* decode_lens;  // [B]
  const int32_t* qsl;          // [B + 1]
  const int32_t* table;        // [B, W], row stride table_stride
  int64_t table_stride, W, B, T, reset_end;
  int32_t* out_seq_lens;       // [rows]
  int32_t* out_decode_lens;    // [rows]
  int32_t* out_table;          // [rows, width]
  int64_t width;
};

EXAMPLE_HD inline void flat_row(const FlatStep& s, int64_t r) {
  int32_t* table_row = s.out_table + r * s.width;
  if (r >= s.T) {
    s.out_seq_lens[r] = 0;
    s.out_decode_lens[r] = 0;
    for (int64_t w = 0; w < s.width; ++w) table_row[w] = 0;
    return;
  }
  // The request holding token row r: the last b with qsl[b] <= r (padding requests have d_b = 0).
  int64_t lo = 0, hi = s.B - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (s.qsl[mid] <= r) lo = mid; else hi = mid - 1;
  }
  while (lo < s.B - 1 && s.qsl[lo + 1] <= r) ++lo;  // skip requests with no tokens
  const int64_t t = r - s.qsl[lo];
  const int64_t ctx = static_cast<int64_t>(s.seq_lens[lo]) - s.decode_lens[lo] + t + 1;
  s.out_seq_lens[r] = static_cast<int32_t>(ctx > 0 ? ctx : 0);
  s.out_decode_lens[r] = 1;
  for (int64_t w = 0; w < s.width; ++w) table_row[w] = w < s.W ? s.table[lo * s.table_stride + w] : 0;
}

// One step's native build: context_lens [B, n] C-contiguous, elements [B * n, reset_end) zeroed.
struct NativeStep {
  const int32_t* seq_lens;
  const int32_t* decode_lens;
  int64_t B, n, reset_end;
  int32_t* context_lens;
};

EXAMPLE_HD inline void native_element(const NativeStep& s, int64_t e) {
  if (e >= s.B * s.n) {
    s.context_lens[e] = 0;
    return;
  }
  const int64_t b = e / s.n, j = e % s.n;
  const int64_t d = s.decode_lens[b];
  const int64_t ctx = static_cast<int64_t>(s.seq_lens[b]) - d + j + 1;
  s.context_lens[e] = j < d && ctx > 0 ? static_cast<int32_t>(ctx) : 0;
}

// Launches the steps on a CUDA stream (metadata_kernels.cu); 0 or a CUDA error code.
int launch_flat(const FlatStep& s, void* stream);
int launch_native(const NativeStep& s, void* stream);

}  // namespace example_metadata
