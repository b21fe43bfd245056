// The example MLA impl's CUDA side: a warp per (request, token, head) row, and the graph calls a
// C author makes around it (capture on the stream mlacheck gives, instantiate, launch, destroy).
#include <cuda_runtime.h>

#include "mla_rows.h"

namespace example_mla {
namespace {

// One warp per row: each lane takes every 32nd key, the lanes' maxima, sums and acc are combined
// with shuffles, and lane i writes o's columns i, i + 32, ...
__global__ void rows_kernel(MlaJob j) {
  const int64_t r = blockIdx.x;
  const int lane = threadIdx.x;
  const RowOf w = row_of(j, r);
  if (w.n <= 0) {
    for (int64_t d = lane; d < kLatent; d += 32) w.o[d * j.o_stride[3]] = 0;
    if (lane == 0) *w.lse = -INFINITY;
    return;
  }
  float m = lane_max(j, w, lane, 32);
  for (int x = 16; x > 0; x /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, x));
  float acc[kLatent];
  float l = lane_sum(j, w, m, lane, 32, acc);
  for (int x = 16; x > 0; x /= 2) l += __shfl_xor_sync(0xffffffffu, l, x);
  for (int64_t d = 0; d < kLatent; ++d) {
    float v = acc[d];
    for (int x = 16; x > 0; x /= 2) v += __shfl_xor_sync(0xffffffffu, v, x);
    if (d % 32 == lane) w.o[d * j.o_stride[3]] = float_to_bf16(w.out_scale * (v / l));
  }
  if (lane == 0) *w.lse = m + logf(l);
}

}  // namespace

int launch_rows(const MlaJob& j, void* stream) {
  const int64_t rows = j.B * j.q_len * j.H;
  if (rows <= 0) return 0;
  rows_kernel<<<static_cast<unsigned>(rows), 32, 0, static_cast<cudaStream_t>(stream)>>>(j);
  return static_cast<int>(cudaGetLastError());
}

int capture_rows(const MlaJob& j, void* stream, void** graph) {
  const auto s = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) return static_cast<int>(e);
  const int launched = launch_rows(j, stream);
  cudaGraph_t g = nullptr;
  e = cudaStreamEndCapture(s, &g);
  if (launched != 0 || e != cudaSuccess) {
    if (g != nullptr) cudaGraphDestroy(g);
    return launched != 0 ? launched : static_cast<int>(e);
  }
  cudaGraphExec_t exec = nullptr;
  e = cudaGraphInstantiate(&exec, g, 0);
  cudaGraphDestroy(g);
  if (e != cudaSuccess) return static_cast<int>(e);
  *graph = exec;
  return 0;
}

int replay_graph(void* graph, void* stream) {
  return static_cast<int>(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), static_cast<cudaStream_t>(stream)));
}

void destroy_graph(void* graph) { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph)); }

int copy_to_device(void* dst, const void* src, int64_t bytes) {
  return static_cast<int>(cudaMemcpy(dst, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice));
}
int copy_to_host(void* dst, const void* src, int64_t bytes) {
  return static_cast<int>(cudaMemcpy(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost));
}

}  // namespace example_mla
