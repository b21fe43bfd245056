// The example plugin's kernels, as an engineer outside mlacheck would write them: plain C++ for the
// host and CUDA for the GPU, over the views that include/mlacheck/plugin.h describes.
#pragma once

#include <cstdint>
#include <cstring>

#include "mlacheck/plugin.h"

namespace example {

// Row r of a decode top-k has this many candidates (docs/ops.md 3): seq_lens[b, j] for 2-D lengths,
// max(0, seq_lens[b] - next_n + j + 1) for 1-D ones.
#if defined(__CUDACC__)
__host__ __device__
#endif
inline int64_t topk_row_length(const int32_t* seq_lens, int64_t stride, bool two_d, int64_t next_n, int64_t r) {
  if (two_d) return seq_lens[r];  // [B, next_n] C-contiguous: row r is element r
  const int64_t n = seq_lens[(r / next_n) * stride] - next_n + r % next_n + 1;
  return n < 0 ? 0 : n;
}

// How many entries of a row that fits (n <= k) get written: k. The deliberate bug of the buggy
// twin: the row stride instead, so a row's -1 fill runs on into the padding after its k entries
// (a view inside a padded buffer, as vLLM's are): a write past the view that mlacheck's guards see.
#if defined(__CUDACC__)
__host__ __device__
#endif
inline int64_t topk_fill_count(int64_t k, int64_t row_stride) {
#if EXAMPLE_PLUGIN_BUG
  (void)k;
  return row_stride;
#else
  (void)row_stride;
  return k;
#endif
}

// One e4m3fn byte, exactly (bias 7, subnormals, 0x7F / 0xFF NaN).
#if defined(__CUDACC__)
__host__ __device__
#endif
inline float fp8_e4m3(uint8_t b) {
  const int sign = b >> 7, exponent = (b >> 3) & 0xF, mantissa = b & 7;
  float v;
  if (exponent == 0xF && mantissa == 7) {
    const uint32_t quiet_nan = 0x7FC00000u;
    memcpy(&v, &quiet_nan, 4);
  } else if (exponent == 0) {
    v = static_cast<float>(mantissa) * 0.001953125f;  // m x 2^-9
  } else {
    v = (1.0f + static_cast<float>(mantissa) * 0.125f) * static_cast<float>(1 << exponent) * (1.0f / 128.0f);
  }
  return sign ? -v : v;
}

// Host implementations (0: done; else the error line is written).
int topk_decode_host(const mlacheck_topk_decode_args& a, char* error, size_t error_size);
int paged_mqa_logits_host(const mlacheck_paged_mqa_logits_args& a, char* error, size_t error_size);
// CUDA implementations, enqueued on stream (built when the plugin is compiled with CUDA).
int topk_decode_cuda(const mlacheck_topk_decode_args& a, void* stream, char* error, size_t error_size);
int paged_mqa_logits_cuda(const mlacheck_paged_mqa_logits_args& a, void* stream, char* error, size_t error_size);

}  // namespace example
