// The example MLA impl's CUDA side: one thread per (request, token, head) row, and the graph calls a
// C author makes around it (capture on the stream mlacheck gives, instantiate, launch, destroy).
#include <cuda_runtime.h>

#include "mla_rows.h"

namespace example_mla {
namespace {

__global__ void rows_kernel(MlaJob j) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < j.B * j.q_len * j.H) mla_row(j, r);
}

}  // namespace

int launch_rows(const MlaJob& j, void* stream) {
  const int64_t rows = j.B * j.q_len * j.H;
  if (rows <= 0) return 0;
  rows_kernel<<<static_cast<unsigned>((rows + 63) / 64), 64, 0, static_cast<cudaStream_t>(stream)>>>(j);
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
