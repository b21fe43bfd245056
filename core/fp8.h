// Bit-exact fp8 (OCP e4m3fn, e5m2) and ue8m0 codecs, callable from host and device code.
//
// Decoding is exact (every fp8 value is a float). Encoding rounds to nearest, ties to even, and
// saturates: a finite value or infinity beyond the largest finite fp8 value becomes that value with
// its sign (SPEC.md "Conventions": quantizers saturate). NaN encodes to the canonical NaN 0x7F,
// whatever its sign, as CUDA's __nv_cvt_float_to_fp8(.., __NV_SATFINITE, ..) does.
#pragma once

#include <cstdint>

#include "core/hd.h"

namespace mlacheck {

namespace fp8_detail {

// A narrow binary float: kExpBits exponent bits with bias kBias, kManBits mantissa bits, subnormals,
// and kMaxFinite as the largest finite code (sign bit clear).
template <int kExpBits, int kManBits, int kBias, uint8_t kMaxFinite>
struct Format {
  static constexpr int kExpMask = (1 << kExpBits) - 1;
  static constexpr int kManMask = (1 << kManBits) - 1;

  // Encodes a non-NaN float magnitude (sign cleared) as a code in [0, kMaxFinite].
  MLA_HD static uint8_t encode_magnitude(uint32_t abs_bits) {
    const int exp32 = static_cast<int>(abs_bits >> 23);
    if (exp32 == 0) return 0;       // zero and fp32 subnormals are far below the fp8 range
    if (exp32 == 0xFF) return kMaxFinite;  // infinity saturates
    const uint32_t mant = (abs_bits & 0x7FFFFFu) | 0x800000u;  // with the implicit one
    const int unbiased = exp32 - 127;
    int target_exp = unbiased + kBias;
    uint32_t shift;
    if (target_exp >= 1) {
      shift = 23 - kManBits;  // a normal fp8 value: keep kManBits fraction bits
    } else {
      // A subnormal fp8 value: units of 2^(1 - kBias - kManBits).
      const int s = 24 - kManBits - kBias - unbiased;  // >= 24 - kManBits
      if (s >= 25) return 0;  // below half the smallest subnormal
      shift = static_cast<uint32_t>(s);
      target_exp = 0;
    }
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    // q carries the implicit one for normals; adding target_exp << kManBits then lets a mantissa
    // overflow carry into the exponent, and a subnormal that rounds up become the smallest normal.
    uint32_t code;
    if (target_exp >= 1) {
      code = (static_cast<uint32_t>(target_exp) << kManBits) + (q - (1u << kManBits));
    } else {
      code = q;
    }
    return code > kMaxFinite ? kMaxFinite : static_cast<uint8_t>(code);
  }

  MLA_HD static uint8_t encode(float x) {
    const uint32_t bits = float_bits(x);
    const uint32_t abs_bits = bits & 0x7FFFFFFFu;
    if (abs_bits > 0x7F800000u) return 0x7F;  // NaN: canonical code
    const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
    return static_cast<uint8_t>(sign | encode_magnitude(abs_bits));
  }

  // Decodes codes that are finite in this format; NaN and infinity are handled by the callers.
  MLA_HD static float decode_finite(uint8_t code) {
    const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
    const int e = (code >> kManBits) & kExpMask;
    const uint32_t m = code & kManMask;
    if (e == 0) {
      // m * 2^(1 - kBias - kManBits); the power of two is a normal float for both formats.
      const float unit = bits_float(static_cast<uint32_t>(127 + 1 - kBias - kManBits) << 23);
      const float mag = static_cast<float>(m) * unit;
      return bits_float(float_bits(mag) | sign);
    }
    return bits_float(sign | (static_cast<uint32_t>(e - kBias + 127) << 23) | (m << (23 - kManBits)));
  }
};

using E4M3 = Format<4, 3, 7, 0x7E>;
using E5M2 = Format<5, 2, 15, 0x7B>;

}  // namespace fp8_detail

// OCP e4m3fn: largest finite 448, no infinities, NaN = 0x7F / 0xFF, smallest subnormal 2^-9.
constexpr float kFp8E4M3Max = 448.0f;
// e5m2: largest finite 57344, infinities 0x7C / 0xFC, NaN = 0x7D..0x7F with either sign.
constexpr float kFp8E5M2Max = 57344.0f;

MLA_HD inline float fp8_e4m3_to_float(uint8_t code) {
  if ((code & 0x7F) == 0x7F) return bits_float(0x7FC00000u | (static_cast<uint32_t>(code & 0x80u) << 24));
  return fp8_detail::E4M3::decode_finite(code);
}

MLA_HD inline uint8_t float_to_fp8_e4m3(float x) { return fp8_detail::E4M3::encode(x); }

MLA_HD inline float fp8_e5m2_to_float(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint8_t mag = code & 0x7F;
  if (mag == 0x7C) return bits_float(sign | 0x7F800000u);
  if (mag > 0x7C) return bits_float(sign | 0x7FC00000u);
  return fp8_detail::E5M2::decode_finite(code);
}

MLA_HD inline uint8_t float_to_fp8_e5m2(float x) { return fp8_detail::E5M2::encode(x); }

// ue8m0: an unsigned biased exponent, value 2^(e - 127); 0xFF is NaN.
MLA_HD inline float ue8m0_to_float(uint8_t e) {
  if (e == 0xFF) return bits_float(0x7FC00000u);
  if (e == 0) return bits_float(0x00400000u);  // 2^-127 is an fp32 subnormal
  return bits_float(static_cast<uint32_t>(e) << 23);
}

// The smallest power of two >= x, as ue8m0: how power-of-two scales are chosen (SPEC.md
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

// Per-token fp32 indexer key scale: max(amax, 1e-4) / 448 (SPEC.md 2.1). A NaN amax gives NaN:
// a poisoned key must not quietly get a finite scale.
MLA_HD inline float fp8_e4m3_scale_fp32(float amax) {
  return (amax < 1e-4f ? 1e-4f : amax) / kFp8E4M3Max;  // NaN stays NaN, as torch clamp(min=) keeps it
}

// Per-token power-of-two key scale: 2^ceil(log2(max(amax, 1e-4) / 448)) (SPEC.md 2.1), as ue8m0.
MLA_HD inline uint8_t fp8_e4m3_scale_ue8m0(float amax) {
  return float_to_ue8m0_ceil(fp8_e4m3_scale_fp32(amax));
}

}  // namespace mlacheck
