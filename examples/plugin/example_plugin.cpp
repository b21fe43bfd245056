// An example plugin for mlacheck: top-k decode and paged indexer logits, each on the host and (when
// built with CUDA) on the GPU, registered as topk_decode@example and paged_mqa_logits@example (the twin: @example_buggy).
//
// It is written the way an outside kernel engineer would write one: it includes nothing of
// mlacheck's but include/mlacheck/plugin.h. Built with EXAMPLE_PLUGIN_BUG=1 it is its buggy twin
// (example_kernels.h says what the bug is), which mlacheck must catch.
//
//   mlacheck check --plugin ./libmlacheck_example_plugin.so        # every property holds
//   mlacheck check --plugin ./libmlacheck_example_plugin_buggy.so  # FAIL, with the case to rerun
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "example_kernels.h"

namespace example {

namespace {

// Orders candidates for the top-k: larger value first; NaN sorts last (docs/ops.md leaves a row with a
// NaN free to select any k distinct indices, so any consistent order is right).
struct Candidate {
  float value;
  int32_t index;
};
bool before(const Candidate& a, const Candidate& b) {
  const bool an = std::isnan(a.value), bn = std::isnan(b.value);
  if (an != bn) return bn;
  if (!an && a.value != b.value) return a.value > b.value;
  return a.index < b.index;
}

}  // namespace

int topk_decode_host(const mlacheck_topk_decode_args& a, char* error, size_t error_size) {
  if (a.logits.rank != 2 || a.out.rank != 2 || a.logits.dtype != MLACHECK_F32 || a.out.dtype != MLACHECK_I32) {
    return mlacheck_error(error, error_size, "example topk: logits must be fp32 [rows, cols] and out int32 [rows, k]");
  }
  const int64_t rows = a.logits.shape[0], k = a.k;
  const bool two_d = a.seq_lens.rank == 2;
  const auto* logits = static_cast<const float*>(a.logits.data);
  const auto* lens = static_cast<const int32_t*>(a.seq_lens.data);
  auto* out = static_cast<int32_t*>(a.out.data);
  std::vector<Candidate> row;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = topk_row_length(lens, a.seq_lens.strides[0], two_d, a.next_n, r);
    int32_t* dst = out + r * a.out.strides[0];
    if (n <= k) {
      const int64_t fill = topk_fill_count(k, a.out.strides[0]);
      for (int64_t i = 0; i < fill; ++i) dst[i] = i < n ? static_cast<int32_t>(i) : -1;
      continue;
    }
    row.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      row[static_cast<size_t>(i)] = {logits[r * a.logits.strides[0] + i * a.logits.strides[1]], static_cast<int32_t>(i)};
    }
    std::nth_element(row.begin(), row.begin() + k, row.end(), before);
    for (int64_t i = 0; i < k; ++i) dst[i] = row[static_cast<size_t>(i)].index;
  }
  return 0;
}

int paged_mqa_logits_host(const mlacheck_paged_mqa_logits_args& a, char* error, size_t error_size) {
  if (a.q.rank != 4 || a.q.dtype != MLACHECK_FP8_E4M3 || a.logits.dtype != MLACHECK_F32) {
    return mlacheck_error(error, error_size, "example logits: q must be fp8 [B, next_n, H, D], logits fp32");
  }
  const int64_t B = a.q.shape[0], next_n = a.q.shape[1], H = a.q.shape[2], D = a.q.shape[3];
  const int64_t bs = a.block_size, W = a.block_table.shape[1], max_len = a.max_context_len;
  const auto* q = static_cast<const uint8_t*>(a.q.data);
  const auto* cache = static_cast<const uint8_t*>(a.kv_blocks.data);
  const auto* weights = static_cast<const float*>(a.weights.data);
  const auto* lens = static_cast<const int32_t*>(a.context_lens.data);
  const auto* table = static_cast<const int32_t*>(a.block_table.data);
  auto* logits = static_cast<float*>(a.logits.data);
  std::vector<float> qf(static_cast<size_t>(H * D));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = 0; j < next_n; ++j) {
      const int64_t r = b * next_n + j;
      int64_t ctx = a.context_lens.rank == 2 ? lens[r] : lens[b * a.context_lens.strides[0]] - next_n + j + 1;
      ctx = std::max<int64_t>(0, std::min({ctx, max_len, W * bs}));
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t d = 0; d < D; ++d) qf[static_cast<size_t>(h * D + d)] = fp8_e4m3(q[((b * next_n + j) * H + h) * D + d]);
      }
      float* row = logits + r * a.logits.strides[0];
      for (int64_t t = 0; t < ctx; ++t) {
        const int64_t page = table[b * a.block_table.strides[0] + t / bs], slot = t % bs;
        const uint8_t* block = cache + page * a.kv_blocks.strides[0];
        float scale;
        std::memcpy(&scale, block + bs * D + 4 * slot, 4);
        float sum = 0.0f;
        for (int64_t h = 0; h < H; ++h) {
          float dot = 0.0f;
          for (int64_t d = 0; d < D; ++d) dot += qf[static_cast<size_t>(h * D + d)] * fp8_e4m3(block[slot * D + d]);
          sum += weights[r * a.weights.strides[0] + h] * std::max(dot, 0.0f);
        }
        row[t] = scale * sum;
      }
      if (a.clean) {
        for (int64_t t = ctx; t < max_len; ++t) row[t] = -std::numeric_limits<float>::infinity();
      }
    }
  }
  return 0;
}

#if !defined(EXAMPLE_PLUGIN_CUDA)
int topk_decode_cuda(const mlacheck_topk_decode_args&, void*, char* error, size_t error_size) {
  return mlacheck_error(error, error_size, "the example plugin was built without CUDA");
}
int paged_mqa_logits_cuda(const mlacheck_paged_mqa_logits_args&, void*, char* error, size_t error_size) {
  return mlacheck_error(error, error_size, "the example plugin was built without CUDA");
}
#endif

}  // namespace example

namespace {

int topk_decode(const mlacheck_device* device, const mlacheck_topk_decode_args* a, char* error, size_t error_size) {
  return device->backend == MLACHECK_BACKEND_CUDA ? example::topk_decode_cuda(*a, device->stream, error, error_size)
                                                  : example::topk_decode_host(*a, error, error_size);
}
int paged_mqa_logits(const mlacheck_device* device, const mlacheck_paged_mqa_logits_args* a, char* error,
                     size_t error_size) {
  return device->backend == MLACHECK_BACKEND_CUDA ? example::paged_mqa_logits_cuda(*a, device->stream, error, error_size)
                                                  : example::paged_mqa_logits_host(*a, error, error_size);
}

#if EXAMPLE_PLUGIN_BUG
constexpr const char* kName = "example_buggy";  // both plugins can be loaded at once
constexpr const char* kTopkSummary = "example's buggy twin: a short row's -1 fill runs on to the row stride";
#else
constexpr const char* kName = "example";
constexpr const char* kTopkSummary = "example: nth_element per row on the host, a radix select per row on the GPU";
#endif

int register_impls(const mlacheck_plugin_api* api) {
  if (MLACHECK_ADD_TOPK_DECODE(api, kName, kTopkSummary, topk_decode) != 0) return 1;
  return MLACHECK_ADD_PAGED_MQA_LOGITS(api, kName, "example: a loop per (row, token) over heads and dims",
                                       paged_mqa_logits);
}

}  // namespace

MLACHECK_DEFINE_PLUGIN("mlacheck example plugin", register_impls)
