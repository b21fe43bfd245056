// The example decode step's CUDA kernels: one thread per element of each stage (step_rows.h).
#include <cuda_runtime.h>

#include "step_rows.h"

namespace example_step {
namespace {

template <void (*Element)(const StepJob&, int64_t, int64_t)>
__global__ void grid_kernel(StepJob j, int64_t rows, int64_t cols) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < rows * cols) Element(j, e / cols, e % cols);
}

template <void (*Element)(const StepJob&, int64_t, int64_t)>
int launch(const StepJob& j, int64_t rows, int64_t cols, void* stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return 0;
  grid_kernel<Element><<<static_cast<unsigned>((n + 255) / 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(j, rows, cols);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int launch_logits(const StepJob& j, void* stream) { return launch<logit_element>(j, j.rows, j.cols, stream); }
int launch_topk(const StepJob& j, void* stream) {
  return launch<topk_element>(j, j.rows, j.cols > j.k ? j.cols : j.k, stream);
}
int launch_unpack(const StepJob& j, void* stream) { return launch<unpack_element>(j, j.T, j.k, stream); }
int launch_global(const StepJob& j, void* stream) { return launch<global_element>(j, j.T, j.k, stream); }

}  // namespace example_step
