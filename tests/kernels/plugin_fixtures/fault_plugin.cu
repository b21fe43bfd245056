/* A plugin whose top-k kernel writes to an illegal address: on cuda the launch leaves a sticky
 * error (cudaErrorIllegalAddress) that kills the process's CUDA context; on the host backend the
 * same write is a segmentation fault. mlacheck must report either as a FAIL "crashed" with the case,
 * never exit 2 (tests/tools/plugin_cli_test.cpp). */
#include <cuda_runtime.h>

#include "mlacheck/plugin.h"

__global__ void write_wild(int32_t* wild) { *wild = 1; }

static int fault(const mlacheck_device* device, const mlacheck_topk_decode_args* a, char* error, size_t error_size) {
  (void)a;
  int32_t* wild = reinterpret_cast<int32_t*>(uintptr_t{16});
  if (device->backend == MLACHECK_BACKEND_CUDA) {
    write_wild<<<1, 1, 0, static_cast<cudaStream_t>(device->stream)>>>(wild);
    return cudaGetLastError() == cudaSuccess ? 0 : mlacheck_error(error, error_size, "fixture_fault: launch failed");
  }
  *reinterpret_cast<volatile int32_t*>(wild) = 1;
  return 0;
}

static int register_impls(const mlacheck_plugin_api* api) {
  return MLACHECK_ADD_TOPK_DECODE(api, "fixture_fault", "writes to address 16 (a sticky fault on cuda)", fault);
}

MLACHECK_DEFINE_PLUGIN("fixture_fault", register_impls)
