// The production-style top-k decode on the GPU (production_topk.h says what it assumes).
#include <cuda_runtime.h>

#include <cstdio>

#include "production_topk.h"

namespace production {

namespace {

constexpr int kThreads = 256;

// One block per row; staged holds the row's k indices (dynamic shared memory, k x 4 bytes).
__global__ void topk_rows(const float* logits, int64_t row_stride, const int32_t* seq_lens, int64_t next_n, int64_t k,
                          int32_t* out) {
  extern __shared__ int32_t staged[];
  __shared__ uint32_t hist[256];
  __shared__ uint32_t prefix, prefix_mask;
  __shared__ long long remaining;
  __shared__ unsigned long long count_gt, count_eq;
  const int64_t r = blockIdx.x;
  const int64_t n = seq_lens[r / next_n] - next_n + r % next_n + 1;  // never clamped: seq_lens >= next_n
  const float* row = logits + r * row_stride;
  int32_t* dst = out + r * k;  // a contiguous output
  if (n <= k) {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = static_cast<int32_t>(i);
    for (int64_t i = fill_start(n) + threadIdx.x; i < k; i += blockDim.x) dst[i] = -1;
    return;
  }
  // A radix select of the k-th largest key, 8 bits at a time from the top.
  if (threadIdx.x == 0) prefix = 0, prefix_mask = 0, remaining = k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const uint32_t key = order_key(__float_as_uint(row[i]));
      if ((key & prefix_mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      long long above = 0;
      int d = 255;
      for (; d > 0; --d) {
        if (above + hist[d] >= remaining) break;
        above += hist[d];
      }
      remaining -= above;
      prefix |= static_cast<uint32_t>(d) << shift;
      prefix_mask |= 255u << shift;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) count_gt = 0, count_eq = 0;
  __syncthreads();
  const long long greater = k - remaining;  // keys above the threshold; `remaining` ties complete the k
  // The keys above the threshold in any order (compared as a set), the ties in index order: the
  // first `remaining` of them, the same ones every launch. (Taking ties in atomicAdd order chose
  // other ones from launch to launch: mlacheck's topk_decode.deterministic found it on a GPU.)
  __shared__ unsigned warp_ties[kThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t base = 0; base < n; base += blockDim.x) {
    const int64_t i = base + threadIdx.x;
    const uint32_t key = i < n ? order_key(__float_as_uint(row[i])) : 0u;
    if (i < n && key > prefix) staged[atomicAdd(&count_gt, 1ull)] = static_cast<int32_t>(i);
    const bool tie = i < n && key == prefix;
    const unsigned ties = __ballot_sync(0xFFFFFFFFu, tie);
    if (lane == 0) warp_ties[warp] = __popc(ties);
    __syncthreads();
    unsigned long long before = count_eq + __popc(ties & ((1u << lane) - 1u));
    for (int w = 0; w < warp; ++w) before += warp_ties[w];
    if (tie && static_cast<long long>(before) < remaining) staged[greater + static_cast<long long>(before)] = static_cast<int32_t>(i);
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 0; w < kThreads / 32; ++w) count_eq += warp_ties[w];
    }
    __syncthreads();
  }
  for (int64_t i = threadIdx.x; i < k; i += blockDim.x) dst[i] = staged[i];
}

}  // namespace

int topk_decode_cuda(const mlacheck_topk_decode_args& a, void* stream, char* error, size_t error_size) {
  const int64_t rows = a.logits.shape[0];
  if (rows == 0) return 0;
  // No cudaFuncSetAttribute: like many production kernels, it gets the default 48 KiB of dynamic
  // shared memory, and a k past that is a failed launch.
  topk_rows<<<static_cast<unsigned>(rows), kThreads, static_cast<size_t>(a.k) * 4, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const float*>(a.logits.data), a.logits.strides[0], static_cast<const int32_t*>(a.seq_lens.data),
      a.next_n, a.k, static_cast<int32_t*>(a.out.data));
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    char line[256];
    std::snprintf(line, sizeof line, "production topk: launch failed for k = %lld: %s", static_cast<long long>(a.k),
                  cudaGetErrorString(e));
    return mlacheck_error(error, error_size, line);
  }
  return 0;
}

}  // namespace production
