// HIP compile check of core/fp8.h and core/fp16.h: a kernel that calls every codec, built by hipcc
// for each AMD target and never run (the codecs' results are tested on the host and on CUDA).
#include <hip/hip_runtime.h>

#include <cstdint>

#include "core/fp16.h"
#include "core/fp8.h"

// out[i] gathers every codec applied to in[i], so that none of the calls can be dropped as dead.
__global__ void mlacheck_codecs_hip_check(const float* in, uint32_t* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const float x = in[i];
  const uint8_t code8 = static_cast<uint8_t>(i);
  const uint16_t code16 = static_cast<uint16_t>(i);
  uint32_t acc = 0;
  acc ^= mlacheck::float_to_fp8_e4m3(x);
  acc ^= mlacheck::float_to_fp8_e5m2(x) << 8;
  acc ^= mlacheck::float_to_ue8m0_ceil(x) << 16;
  acc ^= mlacheck::fp8_e4m3_scale_ue8m0(x) << 24;
  acc ^= mlacheck::float_bits(mlacheck::fp8_e4m3_scale_fp32(x));
  acc ^= mlacheck::float_bits(mlacheck::fp8_e4m3_to_float(code8));
  acc ^= mlacheck::float_bits(mlacheck::fp8_e5m2_to_float(code8));
  acc ^= mlacheck::float_bits(mlacheck::ue8m0_to_float(code8));
  acc ^= static_cast<uint32_t>(mlacheck::float_to_bf16(x)) << 16;
  acc ^= mlacheck::float_to_fp16(x);
  acc ^= mlacheck::float_bits(mlacheck::bf16_to_float(code16));
  acc ^= mlacheck::float_bits(mlacheck::fp16_to_float(code16));
  acc ^= mlacheck::float_bits(x * (1.0f / mlacheck::kFp8E4M3Max) + 1.0f / mlacheck::kFp8E5M2Max);
  out[i] = acc;
}
