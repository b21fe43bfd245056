// The CUDA side of simt.h's MLA_LAUNCH: shared-memory opt-in and launch error reporting.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "core/backend/cuda_runtime.h"

namespace mlacheck::simt::detail {

void prepare_launch(const void* kernel, std::size_t dynamic_shared_bytes, const char* name) {
  // Above 48 KiB a kernel must opt in to dynamic shared memory, or the launch fails.
  if (dynamic_shared_bytes <= 48 * 1024) return;
  const std::string what = std::string("kernel '") + name + "': opting in to " +
                           std::to_string(dynamic_shared_bytes) + " bytes of dynamic shared memory";
  cuda::check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(dynamic_shared_bytes)),
              what.c_str());
}

void check_launch(const char* kernel, cudaError_t e) {
  const std::string what = std::string("kernel '") + kernel + "'";
  cuda::check(e, what.c_str());
}

}  // namespace mlacheck::simt::detail
