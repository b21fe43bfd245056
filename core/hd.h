// Host/device annotations and bit casts shared by code that must compile for CPU, CUDA and HIP.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define MLA_HD __host__ __device__
#else
#define MLA_HD
#endif

namespace mlacheck {

// memcpy-based bit casts: defined behaviour in C++17 and supported in CUDA/HIP device code.
MLA_HD inline uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

MLA_HD inline float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace mlacheck
