// Tests of core/fp16.h: bf16 and fp16 against codec_reference.h and CUDA's host conversions.
#include "core/fp16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tests/core/codec_reference.h"

#ifdef MLACHECK_HAVE_CUDA_FP8_HEADERS
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace mlacheck {
namespace {

namespace ref = codec_ref;

using ref::Mismatches;

constexpr float kInf = std::numeric_limits<float>::infinity();

float from_bits(uint32_t u) { return ref::float_from_bits(u); }
std::string code16(uint32_t c) { return ref::hex(c, 4); }

// The codecs' results as ints, so that failures print numbers rather than characters.
int b16(float x) { return float_to_bf16(x); }
int h16(float x) { return float_to_fp16(x); }

using Format16 = ref::CodecUnderTest<uint16_t>;

#ifdef MLACHECK_HAVE_CUDA_FP8_HEADERS
uint16_t cuda_encode_bf16(float x) { return static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(x)).x; }
uint16_t cuda_encode_fp16(float x) { return static_cast<__half_raw>(__float2half_rn(x)).x; }
float cuda_decode_bf16(uint16_t c) {
  __nv_bfloat16_raw r;
  r.x = c;
  return __bfloat162float(__nv_bfloat16(r));
}
float cuda_decode_fp16(uint16_t c) {
  __half_raw r;
  r.x = c;
  return __half2float(__half(r));
}
#define MLA_CUDA_OR_NULL(f) f
#else
#define MLA_CUDA_OR_NULL(f) nullptr
#endif

const Format16 kBF16{ref::bf16(), float_to_bf16, bf16_to_float, MLA_CUDA_OR_NULL(cuda_encode_bf16),
                     MLA_CUDA_OR_NULL(cuda_decode_bf16)};
const Format16 kFP16{ref::fp16(), float_to_fp16, fp16_to_float, MLA_CUDA_OR_NULL(cuda_encode_fp16),
                     MLA_CUDA_OR_NULL(cuda_decode_fp16)};

// Encodes every input and compares with the reference and CUDA (see ref::compare_encodes).
void expect_encode_matches(const Format16& f, const std::vector<float>& inputs, const char* what) {
  const ref::Comparison m = ref::compare_encodes(f, inputs);
  EXPECT_EQ(m.vs_ref.count(), 0) << what << " vs reference: " << m.vs_ref.report();
  EXPECT_EQ(m.vs_cuda.count(), 0) << what << " vs CUDA: " << m.vs_cuda.report();
}

void expect_decode_matches(const Format16& f) {
  const ref::Comparison m = ref::compare_decodes(f);
  EXPECT_EQ(m.vs_ref.count(), 0) << m.vs_ref.report();
  EXPECT_EQ(m.vs_cuda.count(), 0) << m.vs_cuda.report();
}

// code -> float -> code is the identity on every non-NaN code (-0 and infinities included). A NaN
// code comes back as itself with the quiet bit set: sign and payload survive, and it stays NaN.
void expect_round_trip(const Format16& f) {
  const uint32_t quiet = 1u << (f.ref.spec().man_bits - 1);
  Mismatches m;
  for (uint32_t c = 0; c < f.ref.num_codes(); ++c) {
    const float x = f.decode(static_cast<uint16_t>(c));
    const uint32_t back = f.encode(x);
    const uint32_t want = f.ref.is_nan(c) ? (c | quiet) : c;
    if (back != want) {
      m.add([&] {
        return std::string(f.ref.name()) + " code " + code16(c) + " decodes to " + ref::describe(x) +
               ", which encodes to " + code16(back) + ", want " + code16(want);
      });
    }
  }
  EXPECT_EQ(m.count(), 0) << m.report();
}

constexpr size_t kSamples = 2'000'000;

// The reference itself, checked against the formats' definitions.
TEST(Fp16Reference, MatchesTheFormatDefinitions) {
  const ref::Codec& h = ref::fp16();
  EXPECT_EQ(h.values().size(), 0x7C00u);
  EXPECT_EQ(h.max_finite_value(), 65504.0);
  EXPECT_EQ(h.values()[1], std::ldexp(1.0, -24));
  EXPECT_EQ(h.values()[0x400], std::ldexp(1.0, -14));
  EXPECT_EQ(h.decode(0x3C00), 1.0);
  EXPECT_EQ(h.decode(0xC000), -2.0);
  EXPECT_TRUE(h.is_inf(0x7C00) && h.is_inf(0xFC00) && h.is_nan(0x7C01) && h.is_nan(0xFE00));
  EXPECT_EQ(h.encode(65519.0f), 0x7BFFu);
  EXPECT_EQ(h.encode(65520.0f), 0x7C00u);  // max + half an ulp rounds to infinity

  // bf16 is the upper half of an fp32 (docs/ops.md "Conventions"): every finite code's value is the
  // float with those 16 bits on top.
  const ref::Codec& b = ref::bf16();
  EXPECT_EQ(b.values().size(), 0x7F80u);
  for (uint32_t c = 0; c < 0x7F80u; ++c) {
    ASSERT_EQ(b.values()[c], static_cast<double>(from_bits(c << 16))) << code16(c);
  }
  EXPECT_TRUE(b.is_inf(0x7F80) && b.is_nan(0x7F81) && b.is_nan(0xFFC0));
}

TEST(BF16, DecodesEveryCodeExactly) { expect_decode_matches(kBF16); }
TEST(FP16, DecodesEveryCodeExactly) { expect_decode_matches(kFP16); }

TEST(BF16, EveryCodeRoundTrips) { expect_round_trip(kBF16); }
TEST(FP16, EveryCodeRoundTrips) { expect_round_trip(kFP16); }

// Every pair of adjacent values: ties, the subnormal range, and the overflow boundary included.
TEST(BF16, EncodesEveryRoundingBoundary) {
  expect_encode_matches(kBF16, ref::boundary_inputs(kBF16.ref), "boundaries");
}
TEST(FP16, EncodesEveryRoundingBoundary) {
  expect_encode_matches(kFP16, ref::boundary_inputs(kFP16.ref), "boundaries");
}

TEST(BF16, EncodesRandomFloats) {
  expect_encode_matches(kBF16, ref::random_bit_patterns(kSamples, 0xBF01u),
                        "random bit patterns (seed 0xbf01)");
  // fp32 and bf16 share their exponent range: sample its two ends, where subnormals and overflow are.
  expect_encode_matches(kBF16, ref::random_floats_with_exponents(kSamples / 2, -140, -120, 0xBF02u),
                        "floats near the bottom of the range (seed 0xbf02)");
  expect_encode_matches(kBF16, ref::random_floats_with_exponents(kSamples / 2, 120, 127, 0xBF03u),
                        "floats near the top of the range (seed 0xbf03)");
}
TEST(FP16, EncodesRandomFloats) {
  expect_encode_matches(kFP16, ref::random_bit_patterns(kSamples, 0xF161u),
                        "random bit patterns (seed 0xf161)");
  expect_encode_matches(kFP16, ref::random_floats_with_exponents(kSamples, -27, 18, 0xF162u),
                        "floats around the range (seed 0xf162)");
}

TEST(BF16, EncodesSpecialInputs) {
  expect_encode_matches(kBF16, ref::special_inputs(), "special inputs");
  EXPECT_EQ(b16(0.0f), 0x0000);
  EXPECT_EQ(b16(-0.0f), 0x8000);
  EXPECT_EQ(b16(kInf), 0x7F80);
  EXPECT_EQ(b16(-kInf), 0xFF80);
  EXPECT_EQ(b16(1.0f), 0x3F80);
  EXPECT_EQ(b16(from_bits(0x3F808000u)), 0x3F80);  // tie, down to the even code
  EXPECT_EQ(b16(from_bits(0x3F818000u)), 0x3F82);  // tie, up to the even code
  EXPECT_EQ(b16(from_bits(0x00008000u)), 0x0000);  // fp32 subnormals are bf16 subnormals
  EXPECT_EQ(b16(from_bits(0x00018000u)), 0x0002);
  EXPECT_EQ(b16(from_bits(0x807FFFFFu)), 0x8080);  // rounds up into the smallest normal
  EXPECT_EQ(b16(from_bits(0x7F7F7FFFu)), 0x7F7F);
  EXPECT_EQ(b16(from_bits(0x7F7F8000u)), 0x7F80);  // max + half an ulp: infinity
  EXPECT_EQ(b16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(b16(std::numeric_limits<float>::lowest()), 0xFF80);
}

TEST(FP16, EncodesSpecialInputs) {
  expect_encode_matches(kFP16, ref::special_inputs(), "special inputs");
  EXPECT_EQ(h16(0.0f), 0x0000);
  EXPECT_EQ(h16(-0.0f), 0x8000);
  EXPECT_EQ(h16(kInf), 0x7C00);
  EXPECT_EQ(h16(-kInf), 0xFC00);
  EXPECT_EQ(h16(1.0f), 0x3C00);
  EXPECT_EQ(h16(from_bits(0x00000001u)), 0x0000);  // fp32 subnormals underflow
  EXPECT_EQ(h16(from_bits(0x807FFFFFu)), 0x8000);
  EXPECT_EQ(h16(std::ldexp(1.0f, -25)), 0x0000);  // half the smallest subnormal: tie to 0
  EXPECT_EQ(h16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(h16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 subnormal units: tie, up to the even 2
  EXPECT_EQ(h16(65504.0f), 0x7BFF);
  EXPECT_EQ(h16(std::nextafter(65520.0f, 0.0f)), 0x7BFF);
  EXPECT_EQ(h16(65520.0f), 0x7C00);  // max + half an ulp: infinity
  EXPECT_EQ(h16(-65520.0f), 0xFC00);
  EXPECT_EQ(h16(1e6f), 0x7C00);
  EXPECT_EQ(h16(std::numeric_limits<float>::max()), 0x7C00);
}

// NaN stays NaN whatever its payload: in particular a signalling NaN whose payload lies only in the
// bits dropped by the conversion must not become infinity.
TEST(BF16, NanStaysNan) {
  for (float x : ref::special_inputs()) {
    if (!std::isnan(x)) continue;
    const uint32_t code = float_to_bf16(x);
    EXPECT_TRUE(kBF16.ref.is_nan(code)) << ref::describe(x) << " -> " << code16(code);
    EXPECT_EQ((code & 0x8000u) != 0, std::signbit(x)) << ref::describe(x) << " -> " << code16(code);
    EXPECT_TRUE(std::isnan(bf16_to_float(static_cast<uint16_t>(code)))) << code16(code);
  }
  EXPECT_EQ(b16(from_bits(0x7F800001u)), 0x7FC0);
  EXPECT_EQ(b16(from_bits(0xFFA12345u)), 0xFFE1);
}

TEST(FP16, NanStaysNan) {
  for (float x : ref::special_inputs()) {
    if (!std::isnan(x)) continue;
    const uint32_t code = float_to_fp16(x);
    EXPECT_TRUE(kFP16.ref.is_nan(code)) << ref::describe(x) << " -> " << code16(code);
    EXPECT_EQ((code & 0x8000u) != 0, std::signbit(x)) << ref::describe(x) << " -> " << code16(code);
    EXPECT_TRUE(std::isnan(fp16_to_float(static_cast<uint16_t>(code)))) << code16(code);
  }
  EXPECT_EQ(h16(from_bits(0x7F800001u)), 0x7E00);
  EXPECT_EQ(h16(from_bits(0xFFA12345u)), 0xFF09);  // sign, all-ones exponent, quiet bit, 0x212345 >> 13
}

}  // namespace
}  // namespace mlacheck
