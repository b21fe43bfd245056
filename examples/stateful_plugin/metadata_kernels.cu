// The example builder's CUDA kernels: one thread per output row or element.
#include <cuda_runtime.h>

#include "metadata_rows.h"

namespace example_metadata {
namespace {

__global__ void flat_kernel(FlatStep s) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < s.reset_end) flat_row(s, r);
}
__global__ void native_kernel(NativeStep s) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < s.reset_end) native_element(s, e);
}

}  // namespace

int launch_flat(const FlatStep& s, void* stream) {
  if (s.reset_end <= 0) return 0;
  flat_kernel<<<static_cast<unsigned>((s.reset_end + 255) / 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(s);
  return static_cast<int>(cudaGetLastError());
}
int launch_native(const NativeStep& s, void* stream) {
  if (s.reset_end <= 0) return 0;
  native_kernel<<<static_cast<unsigned>((s.reset_end + 255) / 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(s);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace example_metadata
