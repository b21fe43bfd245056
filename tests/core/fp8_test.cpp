// Tests of core/fp8.h: e4m3fn, e5m2 and ue8m0 against codec_reference.h and CUDA's host conversions.
#include "core/fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tests/core/codec_reference.h"

#ifdef MLACHECK_HAVE_CUDA_FP8_HEADERS
#include <cuda_fp8.h>
#endif

namespace mlacheck {
namespace {

namespace ref = codec_ref;

constexpr float kInf = std::numeric_limits<float>::infinity();

using ref::Mismatches;

float from_bits(uint32_t u) { return ref::float_from_bits(u); }
uint32_t to_bits(float f) { return ref::bits_of_float(f); }

// The codecs' results as ints, so that failures print numbers rather than characters.
int e4(float x) { return float_to_fp8_e4m3(x); }
int e5(float x) { return float_to_fp8_e5m2(x); }
int ue8(float x) { return float_to_ue8m0_ceil(x); }
int scale_ue8(float amax) { return fp8_e4m3_scale_ue8m0(amax); }

std::string code8(uint32_t c) { return ref::hex(c, 2); }

using Fp8Format = ref::CodecUnderTest<uint8_t>;

#ifdef MLACHECK_HAVE_CUDA_FP8_HEADERS
uint8_t cuda_encode_e4m3(float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); }
uint8_t cuda_encode_e5m2(float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2); }
float cuda_decode_e4m3(uint8_t c) {
  __nv_fp8_e4m3 v;
  v.__x = c;
  return static_cast<float>(v);
}
float cuda_decode_e5m2(uint8_t c) {
  __nv_fp8_e5m2 v;
  v.__x = c;
  return static_cast<float>(v);
}
#define MLA_CUDA_OR_NULL(f) f
#else
#define MLA_CUDA_OR_NULL(f) nullptr
#endif

const Fp8Format kE4M3{ref::e4m3fn(), float_to_fp8_e4m3, fp8_e4m3_to_float, MLA_CUDA_OR_NULL(cuda_encode_e4m3),
                      MLA_CUDA_OR_NULL(cuda_decode_e4m3)};
const Fp8Format kE5M2{ref::e5m2(), float_to_fp8_e5m2, fp8_e5m2_to_float, MLA_CUDA_OR_NULL(cuda_encode_e5m2),
                      MLA_CUDA_OR_NULL(cuda_decode_e5m2)};

// Encodes every input and compares with the reference and CUDA (see ref::compare_encodes).
void expect_encode_matches(const Fp8Format& f, const std::vector<float>& inputs, const char* what) {
  const ref::Comparison m = ref::compare_encodes(f, inputs);
  EXPECT_EQ(m.vs_ref.count(), 0) << what << " vs reference: " << m.vs_ref.report();
  EXPECT_EQ(m.vs_cuda.count(), 0) << what << " vs CUDA: " << m.vs_cuda.report();
}

void expect_decode_matches(const Fp8Format& f) {
  const ref::Comparison m = ref::compare_decodes(f);
  EXPECT_EQ(m.vs_ref.count(), 0) << m.vs_ref.report();
  EXPECT_EQ(m.vs_cuda.count(), 0) << m.vs_cuda.report();
}

// code -> float -> code: the identity on finite codes (-0 included), NaN codes give the canonical
// NaN, and e5m2's infinities saturate to the largest finite code of their sign.
void expect_round_trip(const Fp8Format& f) {
  for (uint32_t c = 0; c < 256; ++c) {
    const uint32_t back = f.encode(f.decode(static_cast<uint8_t>(c)));
    uint32_t want = c;
    if (f.ref.is_nan(c)) want = 0x7F;
    if (f.ref.is_inf(c)) want = (c & 0x80u) | f.ref.spec().max_finite;
    EXPECT_EQ(back, want) << f.ref.name() << " code " << code8(c) << " decodes to "
                          << ref::describe(f.decode(static_cast<uint8_t>(c))) << ", which encodes to "
                          << code8(back);
  }
}

// Exponents a few binades beyond the format's range on both sides.
std::vector<float> around_range(const ref::Codec& c, size_t n, uint32_t seed) {
  const int min_exp = 1 - c.spec().bias - c.spec().man_bits - 3;
  const int max_exp = (1 << c.spec().exp_bits) - 1 - c.spec().bias + 2;
  return ref::random_floats_with_exponents(n, min_exp, max_exp, seed);
}

constexpr size_t kSamples = 2'000'000;

// The reference itself, checked against facts from the OCP fp8 specification.
TEST(Fp8Reference, MatchesTheOcpDefinitions) {
  const ref::Codec& e4 = ref::e4m3fn();
  EXPECT_EQ(e4.values().size(), 127u);
  EXPECT_EQ(e4.max_finite_value(), 448.0);
  EXPECT_EQ(e4.values()[1], std::ldexp(1.0, -9));  // smallest subnormal
  EXPECT_EQ(e4.values()[8], std::ldexp(1.0, -6));  // smallest normal
  EXPECT_EQ(e4.decode(0x38), 1.0);
  EXPECT_EQ(e4.decode(0xC0), -2.0);
  EXPECT_TRUE(e4.is_nan(0x7F) && e4.is_nan(0xFF));
  EXPECT_FALSE(e4.is_nan(0x7E) || e4.is_inf(0x7E) || e4.is_inf(0x7F));
  EXPECT_EQ(e4.encode(1.0f), 0x38u);
  EXPECT_EQ(e4.encode(-0.0f), 0x80u);

  const ref::Codec& e5 = ref::e5m2();
  EXPECT_EQ(e5.values().size(), 124u);
  EXPECT_EQ(e5.max_finite_value(), 57344.0);
  EXPECT_EQ(e5.values()[1], std::ldexp(1.0, -16));
  EXPECT_EQ(e5.values()[4], std::ldexp(1.0, -14));
  EXPECT_EQ(e5.decode(0x3C), 1.0);
  EXPECT_TRUE(e5.is_inf(0x7C) && e5.is_inf(0xFC));
  EXPECT_TRUE(e5.is_nan(0x7D) && e5.is_nan(0x7E) && e5.is_nan(0x7F) && e5.is_nan(0xFD));
  EXPECT_EQ(e5.decode(0xFC), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(e5.encode(1.0f), 0x3Cu);
  EXPECT_EQ(e5.encode(kInf), 0x7Bu);  // saturating
}

TEST(Fp8E4M3, DecodesEveryCodeExactly) { expect_decode_matches(kE4M3); }
TEST(Fp8E5M2, DecodesEveryCodeExactly) { expect_decode_matches(kE5M2); }

TEST(Fp8E4M3, EveryCodeRoundTrips) { expect_round_trip(kE4M3); }
TEST(Fp8E5M2, EveryCodeRoundTrips) { expect_round_trip(kE5M2); }

TEST(Fp8E4M3, EncodesEveryRoundingBoundary) {
  expect_encode_matches(kE4M3, ref::boundary_inputs(kE4M3.ref), "boundaries");
}
TEST(Fp8E5M2, EncodesEveryRoundingBoundary) {
  expect_encode_matches(kE5M2, ref::boundary_inputs(kE5M2.ref), "boundaries");
}

TEST(Fp8E4M3, EncodesRandomFloats) {
  expect_encode_matches(kE4M3, ref::random_bit_patterns(kSamples, 0xE4A1u),
                        "random bit patterns (seed 0xe4a1)");
  expect_encode_matches(kE4M3, around_range(kE4M3.ref, kSamples, 0xE4A2u),
                        "floats around the range (seed 0xe4a2)");
}
TEST(Fp8E5M2, EncodesRandomFloats) {
  expect_encode_matches(kE5M2, ref::random_bit_patterns(kSamples, 0xE5A1u),
                        "random bit patterns (seed 0xe5a1)");
  expect_encode_matches(kE5M2, around_range(kE5M2.ref, kSamples, 0xE5A2u),
                        "floats around the range (seed 0xe5a2)");
}

TEST(Fp8E4M3, EncodesSpecialInputs) {
  expect_encode_matches(kE4M3, ref::special_inputs(), "special inputs");
  // The contract, stated directly.
  EXPECT_EQ(e4(0.0f), 0x00);
  EXPECT_EQ(e4(-0.0f), 0x80);
  EXPECT_EQ(e4(kInf), 0x7E);
  EXPECT_EQ(e4(-kInf), 0xFE);
  EXPECT_EQ(e4(std::numeric_limits<float>::quiet_NaN()), 0x7F);
  EXPECT_EQ(e4(-std::numeric_limits<float>::quiet_NaN()), 0x7F);
  EXPECT_EQ(e4(from_bits(0x7F800001u)), 0x7F);
  EXPECT_EQ(e4(from_bits(0x00000001u)), 0x00);  // fp32 subnormals underflow
  EXPECT_EQ(e4(from_bits(0x807FFFFFu)), 0x80);
  EXPECT_EQ(e4(std::ldexp(1.0f, -10)), 0x00);  // half the smallest subnormal: tie to 0
  EXPECT_EQ(e4(std::nextafter(std::ldexp(1.0f, -10), 1.0f)), 0x01);
  EXPECT_EQ(e4(-std::ldexp(1.0f, -11)), 0x80);
  EXPECT_EQ(e4(448.0f), 0x7E);
  for (float big : {449.0f, 464.0f, 464.5f, 480.0f, 512.0f, 1e6f, 3.4e38f}) {
    EXPECT_EQ(e4(big), 0x7E) << big;
    EXPECT_EQ(e4(-big), 0xFE) << big;
  }
  EXPECT_EQ(e4(1.0625f), 0x38);  // 1 + 1/16: tie, down to the even 1.0
  EXPECT_EQ(e4(1.1875f), 0x3A);  // 1 + 3/16: tie, up to the even 1.25
}

TEST(Fp8E5M2, EncodesSpecialInputs) {
  expect_encode_matches(kE5M2, ref::special_inputs(), "special inputs");
  EXPECT_EQ(e5(0.0f), 0x00);
  EXPECT_EQ(e5(-0.0f), 0x80);
  EXPECT_EQ(e5(kInf), 0x7B);  // saturates, although e5m2 has an infinity
  EXPECT_EQ(e5(-kInf), 0xFB);
  EXPECT_EQ(e5(-std::numeric_limits<float>::quiet_NaN()), 0x7F);
  EXPECT_EQ(e5(from_bits(0xFF800001u)), 0x7F);
  EXPECT_EQ(e5(from_bits(0x00400000u)), 0x00);
  EXPECT_EQ(e5(std::ldexp(1.0f, -17)), 0x00);
  EXPECT_EQ(e5(std::nextafter(std::ldexp(1.0f, -17), 1.0f)), 0x01);
  EXPECT_EQ(e5(57344.0f), 0x7B);
  for (float big : {57345.0f, 61440.0f, 65536.0f, 1e9f, 3.4e38f}) {
    EXPECT_EQ(e5(big), 0x7B) << big;
    EXPECT_EQ(e5(-big), 0xFB) << big;
  }
  EXPECT_EQ(e5(1.125f), 0x3C);  // 1 + 1/8: tie, down to the even 1.0
  EXPECT_EQ(e5(1.375f), 0x3E);  // 1 + 3/8: tie, up to the even 1.5
}

TEST(Ue8m0, DecodesEveryCode) {
  for (uint32_t e = 0; e < 256; ++e) {
    const float got = ue8m0_to_float(static_cast<uint8_t>(e));
    const double want = ref::ue8m0_decode(static_cast<uint8_t>(e));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "ue8m0 " << e << " decodes to " << ref::describe(got);
    } else {
      // 2^-127 (code 0) is an fp32 subnormal, still exact.
      EXPECT_EQ(to_bits(got), to_bits(static_cast<float>(want)))
          << "ue8m0 " << e << " decodes to " << ref::describe(got) << ", want 2^"
          << static_cast<int>(e) - 127;
    }
  }
}

void expect_ue8m0_ceil_matches(const std::vector<float>& inputs, const char* what) {
  Mismatches m;
  for (float x : inputs) {
    const uint32_t got = float_to_ue8m0_ceil(x);
    const uint32_t want = ref::ue8m0_ceil(x);
    if (got != want)
      m.add([&] {
        return "float_to_ue8m0_ceil(" + ref::describe(x) + "): got " + std::to_string(got) + ", reference " +
               std::to_string(want);
      });
  }
  EXPECT_EQ(m.count(), 0) << what << ": " << m.report();
}

TEST(Ue8m0, CeilAtAndAroundEveryPowerOfTwo) {
  std::vector<float> inputs;
  for (int e = 0; e <= 254; ++e) {
    const float p = std::ldexp(1.0f, e - 127);
    for (float x : {p, std::nextafter(p, 0.0f), std::nextafter(p, kInf), p * 0.75f, p * 1.5f}) {
      inputs.push_back(x);
      inputs.push_back(-x);
    }
  }
  expect_ue8m0_ceil_matches(inputs, "powers of two and neighbours");
  for (int e = 1; e <= 253; ++e) {
    const float p = std::ldexp(1.0f, e - 127);
    EXPECT_EQ(ue8(p), e) << ref::describe(p);
    EXPECT_EQ(ue8(std::nextafter(p, kInf)), e + 1) << ref::describe(p);
    EXPECT_EQ(ue8(std::nextafter(p, 0.0f)), e) << ref::describe(p);
  }
}

TEST(Ue8m0, CeilOfSpecialInputs) {
  expect_ue8m0_ceil_matches(ref::special_inputs(), "special inputs");
  EXPECT_EQ(ue8(1.0f), 127);
  EXPECT_EQ(ue8(1.5f), 128);
  EXPECT_EQ(ue8(0.75f), 127);
  EXPECT_EQ(ue8(0.0f), 0);
  EXPECT_EQ(ue8(-0.0f), 0);
  EXPECT_EQ(ue8(from_bits(0x00000001u)), 0);  // tiny: 2^-127 is the smallest scale
  EXPECT_EQ(ue8(std::ldexp(1.0f, -127)), 0);
  // Between 2^-127 and 2^-126 (fp32 subnormals): the smallest power of two >= x is 2^-126.
  EXPECT_EQ(ue8(from_bits(0x00400001u)), 1);
  EXPECT_EQ(ue8(from_bits(0x007FFFFFu)), 1);
  EXPECT_EQ(ue8(std::ldexp(1.0f, 127)), 254);
  EXPECT_EQ(ue8(std::numeric_limits<float>::max()), 254);  // saturates
  EXPECT_EQ(ue8(kInf), 254);
  EXPECT_EQ(ue8(-1.0f), 0xFF);
  EXPECT_EQ(ue8(-kInf), 0xFF);
  EXPECT_EQ(ue8(std::numeric_limits<float>::quiet_NaN()), 0xFF);
}

TEST(Ue8m0, CeilOfRandomFloats) {
  expect_ue8m0_ceil_matches(ref::random_bit_patterns(500'000, 0x0E81u), "random bit patterns (seed 0xe81)");
}

std::vector<float> amax_samples() {
  std::vector<float> amax = {0.0f,
                             1e-6f,
                             std::nextafter(1e-4f, 0.0f),
                             1e-4f,
                             std::nextafter(1e-4f, 1.0f),
                             1.0f,
                             224.0f,
                             448.0f,
                             std::nextafter(448.0f, 0.0f),
                             std::nextafter(448.0f, 1e9f),
                             3e38f,
                             kInf};
  for (int k = -30; k <= 100; ++k) {  // 448 * 2^k and its neighbours: exactly where the ceiling steps
    const float v = std::ldexp(448.0f, k);
    amax.insert(amax.end(), {v, std::nextafter(v, 0.0f), std::nextafter(v, kInf)});
  }
  for (float x : ref::random_floats_with_exponents(100'000, -20, 20, 0x5CA1u)) amax.push_back(std::fabs(x));
  return amax;
}

TEST(Fp8Scale, Fp32ScaleIsClampedAmaxOver448) {
  EXPECT_EQ(fp8_e4m3_scale_fp32(448.0f), 1.0f);
  EXPECT_EQ(fp8_e4m3_scale_fp32(0.0f), 1e-4f / 448.0f);
  // A NaN amax (a poisoned key) must not quietly become a finite scale.
  EXPECT_TRUE(std::isnan(fp8_e4m3_scale_fp32(std::nanf(""))));
  EXPECT_EQ(fp8_e4m3_scale_ue8m0(std::nanf("")), 0xFF);
  Mismatches m;
  for (float amax : amax_samples()) {
    const float got = fp8_e4m3_scale_fp32(amax);
    const float want = ref::e4m3_scale_fp32(amax);
    if (to_bits(got) != to_bits(want))
      m.add([&] {
        return "fp8_e4m3_scale_fp32(" + ref::describe(amax) + "): got " + ref::describe(got) +
               ", reference " + ref::describe(want);
      });
  }
  EXPECT_EQ(m.count(), 0) << m.report();
}

TEST(Fp8Scale, Ue8m0ScaleIsCeilLog2OfClampedAmaxOver448) {
  EXPECT_EQ(scale_ue8(448.0f), 127);
  EXPECT_EQ(scale_ue8(449.0f), 128);
  EXPECT_EQ(scale_ue8(224.0f), 126);
  EXPECT_EQ(scale_ue8(0.0f), 127 - 22);  // 1e-4 / 448 = 2^-22.09
  Mismatches m;
  for (float amax : amax_samples()) {
    const uint32_t got = fp8_e4m3_scale_ue8m0(amax);
    const uint32_t want = ref::e4m3_scale_ue8m0(amax);
    if (got != want)
      m.add([&] {
        return "fp8_e4m3_scale_ue8m0(" + ref::describe(amax) + "): got " + std::to_string(got) +
               ", reference " + std::to_string(want);
      });
    // The scale must bring amax into range: amax / 2^(e - 127) <= 448.
    if (std::isfinite(amax) && amax / std::ldexp(1.0, static_cast<int>(got) - 127) > 448.0) {
      m.add([&] {
        return "fp8_e4m3_scale_ue8m0(" + ref::describe(amax) + ") = " + std::to_string(got) +
               " leaves amax above 448";
      });
    }
  }
  EXPECT_EQ(m.count(), 0) << m.report();
}

#ifdef MLACHECK_HAVE_CUDA_FP8_HEADERS
// CUDA's e8m0 conversion rounds |x|, so only non-negative, non-NaN inputs are comparable.
TEST(Ue8m0, MatchesCudaOnNonNegativeInputs) {
  Mismatches m;
  for (uint32_t e = 0; e < 255; ++e) {
    const uint32_t bf = __nv_cvt_e8m0_to_bf16raw(static_cast<__nv_fp8_storage_t>(e)).x;
    const float cuda = from_bits(bf << 16);
    const float got = ue8m0_to_float(static_cast<uint8_t>(e));
    if (to_bits(got) != to_bits(cuda))
      m.add([&] {
        return "ue8m0 decode of " + std::to_string(e) + ": got " + ref::describe(got) + ", CUDA " +
               ref::describe(cuda);
      });
  }
  std::vector<float> inputs = ref::random_bit_patterns(200'000, 0x0E82u);
  for (float x : ref::special_inputs()) inputs.push_back(x);
  for (int e = 0; e <= 254; ++e) {
    const float p = std::ldexp(1.0f, e - 127);
    inputs.insert(inputs.end(), {p, std::nextafter(p, 0.0f), std::nextafter(p, kInf)});
  }
  for (float x : inputs) {
    if (std::isnan(x) || std::signbit(x)) continue;
    const uint32_t got = float_to_ue8m0_ceil(x);
    const uint32_t cuda = __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf);
    if (got != cuda)
      m.add([&] {
        return "float_to_ue8m0_ceil(" + ref::describe(x) + "): got " + std::to_string(got) + ", CUDA " +
               std::to_string(cuda);
      });
  }
  EXPECT_EQ(m.count(), 0) << m.report();
}
#endif

}  // namespace
}  // namespace mlacheck
