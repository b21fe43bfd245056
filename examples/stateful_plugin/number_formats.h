// The number formats the example stateful plugins read and write (bf16, OCP fp8 e4m3fn), for host
// loops and CUDA kernels alike.
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define EXAMPLE_HD __host__ __device__
#else
#define EXAMPLE_HD
#endif

namespace example_numbers {

EXAMPLE_HD inline float bf16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

EXAMPLE_HD inline uint16_t float_to_bf16(float f) {  // round to nearest even
  uint32_t bits;
  memcpy(&bits, &f, 4);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x7FFFFFu) != 0) return 0x7FC0;  // NaN
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

EXAMPLE_HD inline float fp8_e4m3_to_float(uint8_t v) {  // OCP e4m3fn: bias 7, no infinities
  const int sign = v >> 7, exponent = (v >> 3) & 0xF, mantissa = v & 0x7;
  float x;
  if (exponent == 0xF && mantissa == 0x7) {
    x = NAN;
  } else if (exponent == 0) {
    x = ldexpf(static_cast<float>(mantissa), -9);  // subnormal: m / 8 * 2^-6
  } else {
    x = ldexpf(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
  }
  return sign ? -x : x;
}

}  // namespace example_numbers
