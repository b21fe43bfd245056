// The example plugin's CUDA kernels (example_kernels.h): a radix select per top-k row and a thread
// per logit. Simple rather than fast; launched on the stream mlacheck passes.
#include <cuda_runtime.h>

#include <cstdio>

#include "example_kernels.h"

namespace example {

namespace {

constexpr int kThreads = 256;

// Larger float, larger key; NaN below everything.
__device__ uint32_t order_key(float v) {
  if (v != v) return 0;
  const uint32_t bits = __float_as_uint(v);
  return bits & 0x80000000u ? ~bits : bits | 0x80000000u;
}

// One block per row: the k-th largest key by 32 counting passes, then the keys above it and as many
// equal to it as fit.
__global__ void topk_rows(const float* logits, int64_t row_stride, int64_t col_stride, const int32_t* lens,
                          int64_t lens_stride, bool two_d, int64_t next_n, int64_t k, int32_t* out,
                          int64_t out_stride) {
  const int64_t r = blockIdx.x;
  const int64_t n = topk_row_length(lens, lens_stride, two_d, next_n, r);
  int32_t* dst = out + r * out_stride;
  if (n <= k) {
    const int64_t fill = topk_fill_count(k, out_stride);
    for (int64_t i = threadIdx.x; i < fill; i += blockDim.x) dst[i] = i < n ? static_cast<int32_t>(i) : -1;
    return;
  }
  const float* row = logits + r * row_stride;
  __shared__ unsigned long long count;
  __shared__ unsigned int taken;
  uint32_t threshold = 0;
  for (int bit = 31; bit >= 0; --bit) {
    const uint32_t probe = threshold | (1u << bit);
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
    unsigned long long mine = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) mine += order_key(row[i * col_stride]) >= probe;
    atomicAdd(&count, mine);
    __syncthreads();
    if (count >= static_cast<unsigned long long>(k)) threshold = probe;
    __syncthreads();
  }
  if (threadIdx.x == 0) taken = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    if (order_key(row[i * col_stride]) > threshold) dst[atomicAdd(&taken, 1u)] = static_cast<int32_t>(i);
  }
  __syncthreads();
  // The ties in index order, the first k - taken of them: the same ones every launch. (Taken in
  // atomicAdd order they were other ones from launch to launch, and the order within a row is free
  // but the set is not: mlacheck's topk_decode.deterministic found it on a GPU.) Each pass numbers a
  // chunk's ties by a ballot per warp and the counts of the warps before.
  __shared__ unsigned int warp_ties[kThreads / 32];
  const unsigned int greater = taken;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned int ties_before = 0;  // in the chunks before this one: the same in every thread
  for (int64_t base = 0; base < n; base += blockDim.x) {
    const int64_t i = base + threadIdx.x;
    const bool tie = i < n && order_key(row[i * col_stride]) == threshold;
    const unsigned int ties = __ballot_sync(0xFFFFFFFFu, tie);
    if (lane == 0) warp_ties[warp] = __popc(ties);
    __syncthreads();
    unsigned int slot = greater + ties_before + __popc(ties & ((1u << lane) - 1u));
    for (int w = 0; w < warp; ++w) slot += warp_ties[w];
    if (tie && static_cast<int64_t>(slot) < k) dst[slot] = static_cast<int32_t>(i);
    for (int w = 0; w < kThreads / 32; ++w) ties_before += warp_ties[w];
    __syncthreads();
  }
}

// One thread per (row, token): the row's logit of that token, or -inf past the row in clean mode.
__global__ void paged_logits(mlacheck_paged_mqa_logits_args a, int64_t next_n, int64_t H, int64_t D) {
  const int64_t r = blockIdx.y, t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= a.max_context_len) return;
  const int64_t b = r / next_n, j = r % next_n, bs = a.block_size;
  const auto* lens = static_cast<const int32_t*>(a.context_lens.data);
  int64_t ctx = a.context_lens.rank == 2 ? lens[r] : lens[b * a.context_lens.strides[0]] - next_n + j + 1;
  ctx = ctx < 0 ? 0 : ctx;
  ctx = ctx < a.max_context_len ? ctx : a.max_context_len;
  ctx = ctx < a.block_table.shape[1] * bs ? ctx : a.block_table.shape[1] * bs;
  float* row = static_cast<float*>(a.logits.data) + r * a.logits.strides[0];
  if (t >= ctx) {
    if (a.clean) row[t] = -__int_as_float(0x7f800000);
    return;
  }
  const int32_t page = static_cast<const int32_t*>(a.block_table.data)[b * a.block_table.strides[0] + t / bs];
  const uint8_t* block = static_cast<const uint8_t*>(a.kv_blocks.data) + page * a.kv_blocks.strides[0];
  const int64_t slot = t % bs;
  float scale;
  memcpy(&scale, block + bs * D + 4 * slot, 4);
  const uint8_t* q = static_cast<const uint8_t*>(a.q.data) + r * H * D;
  const float* w = static_cast<const float*>(a.weights.data) + r * a.weights.strides[0];
  float sum = 0.0f;
  for (int64_t h = 0; h < H; ++h) {
    float dot = 0.0f;
    for (int64_t d = 0; d < D; ++d) dot += fp8_e4m3(q[h * D + d]) * fp8_e4m3(block[slot * D + d]);
    sum += w[h] * fmaxf(dot, 0.0f);
  }
  row[t] = scale * sum;
}

int launched(char* error, size_t error_size) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return 0;
  char line[256];
  snprintf(line, sizeof line, "example plugin: launch failed: %s", cudaGetErrorString(e));
  return mlacheck_error(error, error_size, line);
}

}  // namespace

int topk_decode_cuda(const mlacheck_topk_decode_args& a, void* stream, char* error, size_t error_size) {
  const int64_t rows = a.logits.shape[0];
  if (rows == 0) return 0;
  if (rows > 2147483647) return mlacheck_error(error, error_size, "example topk: too many rows");
  topk_rows<<<static_cast<unsigned>(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const float*>(a.logits.data), a.logits.strides[0], a.logits.strides[1],
      static_cast<const int32_t*>(a.seq_lens.data), a.seq_lens.strides[0], a.seq_lens.rank == 2, a.next_n, a.k,
      static_cast<int32_t*>(a.out.data), a.out.strides[0]);
  return launched(error, error_size);
}

int paged_mqa_logits_cuda(const mlacheck_paged_mqa_logits_args& a, void* stream, char* error, size_t error_size) {
  const int64_t rows = a.q.shape[0] * a.q.shape[1];
  if (rows == 0 || a.max_context_len == 0) return 0;
  if (rows > 65535) return mlacheck_error(error, error_size, "example logits: more than 65535 rows");
  const dim3 grid(static_cast<unsigned>((a.max_context_len + kThreads - 1) / kThreads), static_cast<unsigned>(rows));
  paged_logits<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(a, a.q.shape[1], a.q.shape[2], a.q.shape[3]);
  return launched(error, error_size);
}

}  // namespace example
