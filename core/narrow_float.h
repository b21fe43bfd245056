// The one rounding routine behind every narrow float codec (fp8 e4m3fn and e5m2, fp16): encode an
// fp32 magnitude with round-to-nearest-even, decode a finite code exactly.
#pragma once

#include <cstdint>

#include "core/hd.h"

namespace mlacheck::narrow_float {

// A binary float narrower than fp32: kExpBits exponent bits with bias kBias, kManBits fraction
// bits, subnormals. kMaxFinite is the largest finite code (sign clear); kOverflow is what infinity
// and anything rounding past kMaxFinite encode to: kMaxFinite for saturating formats, the
// infinity code for IEEE-style ones. Its smallest subnormal must lie far above fp32's (true for
// fp8 and fp16), so fp32 subnormals encode to zero.
template <int kExpBits, int kManBits, int kBias, uint32_t kMaxFinite, uint32_t kOverflow>
struct Format {
  static constexpr int kExpMask = (1 << kExpBits) - 1;
  static constexpr uint32_t kManMask = (1u << kManBits) - 1;

  // Encodes a non-NaN fp32 magnitude (sign bit clear) as a code in [0, kOverflow].
  MLA_HD static uint32_t encode_magnitude(uint32_t abs_bits) {
    const int exp32 = static_cast<int>(abs_bits >> 23);
    if (exp32 == 0) return 0;             // zero and fp32 subnormals
    if (exp32 == 0xFF) return kOverflow;  // infinity
    const uint32_t mant = (abs_bits & 0x7FFFFFu) | 0x800000u;  // with the implicit one
    const int unbiased = exp32 - 127;
    int target_exp = unbiased + kBias;
    uint32_t shift;
    if (target_exp >= 1) {
      shift = 23 - kManBits;  // a normal value: keep kManBits fraction bits
    } else {
      // A subnormal value, in units of 2^(1 - kBias - kManBits).
      const int s = 24 - kManBits - kBias - unbiased;  // >= 24 - kManBits
      if (s >= 25) return 0;  // below half the smallest subnormal
      shift = static_cast<uint32_t>(s);
      target_exp = 0;
    }
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    // q carries the implicit one for normals; adding the exponent field then lets a mantissa that
    // rounded up to 2.0 carry into the exponent, and a subnormal that rounds up become the
    // smallest normal.
    const uint32_t code =
        target_exp >= 1 ? (static_cast<uint32_t>(target_exp) << kManBits) + (q - (1u << kManBits)) : q;
    return code > kMaxFinite ? kOverflow : code;
  }

  // Decodes a code (sign bit at bit kExpBits + kManBits) whose magnitude is finite.
  MLA_HD static float decode_finite(uint32_t code) {
    const uint32_t sign = ((code >> (kExpBits + kManBits)) & 1u) << 31;
    const int e = static_cast<int>((code >> kManBits) & kExpMask);
    const uint32_t m = code & kManMask;
    if (e == 0) {
      // m * 2^(1 - kBias - kManBits); that power of two is a normal fp32 for fp8 and fp16.
      const float unit = bits_float(static_cast<uint32_t>(127 + 1 - kBias - kManBits) << 23);
      return bits_float(float_bits(static_cast<float>(m) * unit) | sign);
    }
    return bits_float(sign | (static_cast<uint32_t>(e - kBias + 127) << 23) | (m << (23 - kManBits)));
  }
};

}  // namespace mlacheck::narrow_float
