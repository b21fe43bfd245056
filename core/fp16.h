// Bit-exact bf16 and IEEE fp16 codecs, callable from host and device code.
//
// Encoding rounds to nearest, ties to even; overflow becomes infinity (both formats have one).
// NaN stays NaN with its sign and leading payload bits, forced quiet so it never becomes infinity.
#pragma once

#include <cstdint>

#include "core/hd.h"
#include "core/narrow_float.h"

namespace mlacheck {

// bf16 is the upper half of an fp32 (docs/ops.md "Conventions").
MLA_HD inline float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

MLA_HD inline uint16_t float_to_bf16(float x) {
  const uint32_t bits = float_bits(x);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  // Adding 0x7FFF plus the lowest kept bit rounds to nearest with ties to even; a carry out of the
  // mantissa moves the exponent, and past the largest finite value lands exactly on infinity.
  const uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

namespace fp16_detail {
using F16 = narrow_float::Format<5, 10, 15, 0x7BFF, 0x7C00>;  // overflow rounds to infinity
}

MLA_HD inline float fp16_to_float(uint16_t h) {
  if ((h & 0x7C00u) == 0x7C00u) {  // inf, or NaN with its payload
    return bits_float((static_cast<uint32_t>(h & 0x8000u) << 16) | 0x7F800000u | (static_cast<uint32_t>(h & 0x3FFu) << 13));
  }
  return fp16_detail::F16::decode_finite(h);
}

MLA_HD inline uint16_t float_to_fp16(float x) {
  const uint32_t bits = float_bits(x);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((abs_bits >> 13) & 0x3FFu));
  return static_cast<uint16_t>(sign | fp16_detail::F16::encode_magnitude(abs_bits));
}

}  // namespace mlacheck
