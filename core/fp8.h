// Bit-exact fp8 (OCP e4m3fn, e5m2) and ue8m0 codecs, callable from host and device code.
//
// Decoding is exact (every fp8 value is a float). Encoding rounds to nearest, ties to even, and
// saturates: a finite value or infinity beyond the largest finite fp8 value becomes that value with
// its sign (docs/ops.md "Conventions": quantizers saturate). NaN encodes to the canonical NaN 0x7F,
// whatever its sign, as CUDA's __nv_cvt_float_to_fp8(.., __NV_SATFINITE, ..) does.
#pragma once

#include <cstdint>

#include "core/hd.h"
#include "core/narrow_float.h"

namespace mlacheck {

namespace fp8_detail {

using E4M3 = narrow_float::Format<4, 3, 7, 0x7E, 0x7E>;   // saturates at 448
using E5M2 = narrow_float::Format<5, 2, 15, 0x7B, 0x7B>;  // saturates at 57344 (inf too)

// NaN encodes to the canonical 0x7F; everything else keeps its sign.
template <class F>
MLA_HD inline uint8_t encode(float x) {
  const uint32_t bits = float_bits(x);
  const uint32_t abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u) return 0x7F;
  return static_cast<uint8_t>(((bits >> 24) & 0x80u) | F::encode_magnitude(abs_bits));
}

}  // namespace fp8_detail

// OCP e4m3fn: largest finite 448, no infinities, NaN = 0x7F / 0xFF, smallest subnormal 2^-9.
constexpr float kFp8E4M3Max = 448.0f;
// e5m2: largest finite 57344, infinities 0x7C / 0xFC, NaN = 0x7D..0x7F with either sign.
constexpr float kFp8E5M2Max = 57344.0f;

MLA_HD inline float fp8_e4m3_to_float(uint8_t code) {
  if ((code & 0x7F) == 0x7F) return bits_float(0x7FC00000u | (static_cast<uint32_t>(code & 0x80u) << 24));
  return fp8_detail::E4M3::decode_finite(code);
}

MLA_HD inline uint8_t float_to_fp8_e4m3(float x) { return fp8_detail::encode<fp8_detail::E4M3>(x); }

MLA_HD inline float fp8_e5m2_to_float(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint8_t mag = code & 0x7F;
  if (mag == 0x7C) return bits_float(sign | 0x7F800000u);
  if (mag > 0x7C) return bits_float(sign | 0x7FC00000u);
  return fp8_detail::E5M2::decode_finite(code);
}

MLA_HD inline uint8_t float_to_fp8_e5m2(float x) { return fp8_detail::encode<fp8_detail::E5M2>(x); }

// ue8m0: an unsigned biased exponent, value 2^(e - 127); 0xFF is NaN.
MLA_HD inline float ue8m0_to_float(uint8_t e) {
  if (e == 0xFF) return bits_float(0x7FC00000u);
  if (e == 0) return bits_float(0x00400000u);  // 2^-127 is an fp32 subnormal
  return bits_float(static_cast<uint32_t>(e) << 23);
}

// The smallest power of two >= x, as ue8m0: how power-of-two scales are chosen (docs/ops.md
// "Conventions": 2^ceil(log2(amax / 448))). x <= 2^-127 gives 0 (2^-127); x > 2^127 saturates to
// 254 (2^127); NaN or a negative x gives 0xFF (NaN), since no scale represents them.
MLA_HD inline uint8_t float_to_ue8m0_ceil(float x) {
  const uint32_t bits = float_bits(x);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return 0xFF;  // NaN
  if (bits & 0x80000000u) return (bits & 0x7FFFFFFFu) == 0 ? 0 : 0xFF;  // -0 is 0; negatives NaN
  const uint32_t exp32 = bits >> 23;
  if (exp32 == 0) return bits > 0x00400000u ? 1 : 0;  // subnormals: 2^-127 or, above it, 2^-126
  const uint32_t frac = bits & 0x7FFFFFu;
  const uint32_t e = exp32 + (frac != 0 ? 1u : 0u);  // round up unless an exact power of two
  return e > 254 ? 254 : static_cast<uint8_t>(e);
}

// Per-token fp32 indexer key scale: max(amax, 1e-4) / 448 (docs/ops.md 2.1). A NaN amax gives NaN:
// a poisoned key must not quietly get a finite scale.
MLA_HD inline float fp8_e4m3_scale_fp32(float amax) {
  return (amax < 1e-4f ? 1e-4f : amax) / kFp8E4M3Max;  // NaN stays NaN, as torch clamp(min=) keeps it
}

// Per-token power-of-two key scale: 2^ceil(log2(max(amax, 1e-4) / 448)) (docs/ops.md 2.1), as ue8m0.
MLA_HD inline uint8_t fp8_e4m3_scale_ue8m0(float amax) {
  return float_to_ue8m0_ceil(fp8_e4m3_scale_fp32(amax));
}

}  // namespace mlacheck
