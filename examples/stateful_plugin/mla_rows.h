// The per-row work of the example MLA decode impl (docs/ops.md 5), written once for the host loop
// (mla_impl_plugin.cpp) and the CUDA kernel (mla_kernels.cu): one (request, query token, head) row
// of causal softmax attention over the paged cache, as plainly as it can be written. It includes
// nothing of mlacheck's, as a kernel engineer's own impl would not.
#pragma once

#include "number_formats.h"

namespace example_mla {

using example_numbers::bf16_to_float;
using example_numbers::float_to_bf16;
using example_numbers::fp8_e4m3_to_float;

constexpr int kDim = 576;    // a key (and q): 512 latent values then 64 rope dims
constexpr int kLatent = 512; // o: the latent part

// Element i of a bf16 (is_fp8 == 0) or fp8 e4m3 (is_fp8 == 1) array.
EXAMPLE_HD inline float load(const uint8_t* base, int is_fp8, int64_t i) {
  if (is_fp8) return fp8_e4m3_to_float(base[i]);
  uint16_t b;
  memcpy(&b, base + 2 * i, 2);
  return bf16_to_float(b);
}

// One decode launch: strides in elements.
struct MlaJob {
  const uint8_t* q;  // [B, q_len, H, 576]
  int32_t q_fp8;
  int64_t q_stride[4];
  const uint8_t* kv;  // [num_blocks, page, 576]
  int32_t kv_fp8;
  int64_t kv_stride[3];
  const int32_t* block_table;  // [B, W], row stride table_stride
  int64_t table_stride;
  const int32_t* seq_lens;  // [B], read when the job runs
  int64_t B, q_len, H, page;
  int64_t max_len;          // keys a request may have: W * page (the longest its table holds)
  float softmax_scale, out_scale;
  const float* scales;      // when not NULL: {softmax_scale, out_scale}, read when the job runs
  uint16_t* o;              // bf16 [B, q_len, H, 512]
  int64_t o_stride[4];
  float* lse;               // fp32 [B, q_len, H]
  int64_t lse_stride[3];
};

EXAMPLE_HD inline float score(const MlaJob& j, const uint8_t* q_row, int64_t b, int64_t s, float scale) {
  const int32_t block = j.block_table[b * j.table_stride + s / j.page];
  const int64_t key = block * j.kv_stride[0] + (s % j.page) * j.kv_stride[1];
  const int64_t kv_es = j.kv_fp8 ? 1 : 2;
  float dot = 0.0f;
  for (int64_t c = 0; c < kDim; ++c) {
    dot += load(q_row, j.q_fp8, c * j.q_stride[3]) * load(j.kv + key * kv_es, j.kv_fp8, c * j.kv_stride[2]);
  }
  return scale * dot;
}

// Row r = (b * q_len + t) * H + h: token t of request b sees keys [0, n), n = len - q_len + t + 1.
struct RowOf {
  int64_t b, n;
  const uint8_t* q_row;
  uint16_t* o;
  float* lse;
  float softmax_scale, out_scale;
};
EXAMPLE_HD inline RowOf row_of(const MlaJob& j, int64_t r) {
  const int64_t h = r % j.H, t = (r / j.H) % j.q_len, b = r / (j.H * j.q_len);
  int64_t len = j.seq_lens[b];
  len = len < 0 ? 0 : len > j.max_len ? j.max_len : len;
  RowOf w;
  w.b = b, w.n = len - j.q_len + t + 1;
  w.q_row = j.q + (b * j.q_stride[0] + t * j.q_stride[1] + h * j.q_stride[2]) * static_cast<int64_t>(j.q_fp8 ? 1 : 2);
  w.o = j.o + b * j.o_stride[0] + t * j.o_stride[1] + h * j.o_stride[2];
  w.lse = j.lse + b * j.lse_stride[0] + t * j.lse_stride[1] + h * j.lse_stride[2];
  w.softmax_scale = j.scales != nullptr ? j.scales[0] : j.softmax_scale;
  w.out_scale = j.scales != nullptr ? j.scales[1] : j.out_scale;
  return w;
}

// A row's keys are shared by `lanes` lanes, lane l taking keys l, l + lanes, ...: the largest score
// of a lane's keys, then (given the row's largest, m) their sum of exp(score - m) and that sum of
// V's into acc[512]. The host runs one lane; the CUDA kernel a warp per row, summing the lanes.
EXAMPLE_HD inline float lane_max(const MlaJob& j, const RowOf& w, int64_t lane, int64_t lanes) {
  float m = -INFINITY;
  for (int64_t s = lane; s < w.n; s += lanes) m = fmaxf(m, score(j, w.q_row, w.b, s, w.softmax_scale));
  return m;
}
EXAMPLE_HD inline float lane_sum(const MlaJob& j, const RowOf& w, float m, int64_t lane, int64_t lanes, float* acc) {
  for (int64_t d = 0; d < kLatent; ++d) acc[d] = 0.0f;
  float l = 0.0f;
  const int64_t kv_es = j.kv_fp8 ? 1 : 2;
  for (int64_t s = lane; s < w.n; s += lanes) {
    const float p = expf(score(j, w.q_row, w.b, s, w.softmax_scale) - m);
    l += p;
    const int32_t block = j.block_table[w.b * j.table_stride + s / j.page];
    const uint8_t* key = j.kv + (block * j.kv_stride[0] + (s % j.page) * j.kv_stride[1]) * kv_es;
    for (int64_t d = 0; d < kLatent; ++d) acc[d] += p * load(key, j.kv_fp8, d * j.kv_stride[2]);
  }
  return l;
}

// The host's row: one lane over all keys. A row without keys is o = 0, lse = -inf.
EXAMPLE_HD inline void mla_row(const MlaJob& j, int64_t r) {
  const RowOf w = row_of(j, r);
  if (w.n <= 0) {
    for (int64_t d = 0; d < kLatent; ++d) w.o[d * j.o_stride[3]] = 0;
    *w.lse = -INFINITY;
    return;
  }
  float acc[kLatent];
  const float m = lane_max(j, w, 0, 1), l = lane_sum(j, w, m, 0, 1, acc);
  for (int64_t d = 0; d < kLatent; ++d) w.o[d * j.o_stride[3]] = float_to_bf16(w.out_scale * (acc[d] / l));
  *w.lse = m + logf(l);
}

// The CUDA side (mla_kernels.cu): 0 or a CUDA error code. A graph is an instantiated CUDA graph.
int launch_rows(const MlaJob& j, void* stream);
int capture_rows(const MlaJob& j, void* stream, void** graph);
int replay_graph(void* graph, void* stream);
void destroy_graph(void* graph);
int copy_to_device(void* dst, const void* src, int64_t bytes);
int copy_to_host(void* dst, const void* src, int64_t bytes);

}  // namespace example_mla
