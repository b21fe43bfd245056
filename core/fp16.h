// Bit-exact bf16 and IEEE fp16 codecs, callable from host and device code.
//
// Encoding rounds to nearest, ties to even; overflow becomes infinity (both formats have one).
// NaN stays NaN with its sign and leading payload bits, forced quiet so it never becomes infinity.
#pragma once

#include <cstdint>

#include "core/hd.h"

namespace mlacheck {

// bf16 is the upper half of an fp32 (SPEC.md "Conventions").
MLA_HD inline float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

MLA_HD inline uint16_t float_to_bf16(float x) {
  const uint32_t bits = float_bits(x);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  // Adding 0x7FFF plus the lowest kept bit rounds to nearest with ties to even; a carry out of the
  // mantissa moves the exponent, and past the largest finite value lands exactly on infinity.
  const uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

MLA_HD inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1F;
  const uint32_t m = h & 0x3FFu;
  if (e == 0x1F) return bits_float(sign | 0x7F800000u | (m << 13));  // inf, or NaN with its payload
  if (e == 0) {
    const float mag = static_cast<float>(m) * bits_float(0x33800000u);  // m * 2^-24, exact
    return bits_float(float_bits(mag) | sign);
  }
  return bits_float(sign | ((e - 15 + 127) << 23) | (m << 13));
}

MLA_HD inline uint16_t float_to_fp16(float x) {
  const uint32_t bits = float_bits(x);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((abs_bits >> 13) & 0x3FFu));
  if (abs_bits == 0x7F800000u) return static_cast<uint16_t>(sign | 0x7C00u);
  const int exp32 = static_cast<int>(abs_bits >> 23);
  if (exp32 == 0) return sign;  // fp32 subnormals are far below fp16's smallest subnormal 2^-24
  const uint32_t mant = (abs_bits & 0x7FFFFFu) | 0x800000u;
  int target_exp = exp32 - 127 + 15;
  uint32_t shift;
  if (target_exp >= 1) {
    shift = 13;
  } else {
    const int s = 14 - (exp32 - 127 + 15);  // units of 2^-24
    if (s >= 25) return sign;
    shift = static_cast<uint32_t>(s);
    target_exp = 0;
  }
  uint32_t q = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  uint32_t code = target_exp >= 1 ? (static_cast<uint32_t>(target_exp) << 10) + (q - 0x400u) : q;
  if (code > 0x7C00u) code = 0x7C00u;  // overflow rounds to infinity
  return static_cast<uint16_t>(sign | code);
}

}  // namespace mlacheck
