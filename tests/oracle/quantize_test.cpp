// Tests of oracle/quantize.h: hand-worked scales and codes, rounding-error bounds on random data,
// the 656-byte token's byte layout, and NaN and zero inputs.
#include "oracle/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/error.h"
#include "core/fp16.h"
#include "core/fp8.h"

namespace mlacheck::oracle {
namespace {

// e4m3 rounding to nearest: at most half a step, 2^-4 of the value for normals, 2^-10 of the scale
// for subnormals (plus float's own rounding of x / scale).
void expect_within_fp8_rounding(double got, float x, float scale) {
  const double bound = std::max(std::fabs(double(x)) * 0x1p-4, double(scale) * 0x1p-10) * (1 + 1e-6);
  EXPECT_LE(std::fabs(got - x), bound) << "x " << x << " scale " << scale;
}

TEST(Quantize, PerTokenScalesByHand) {
  const std::vector<float> x = {448, -224, 1, 0,  //
                                1000, 0.5f, 0, 0, //
                                0, 0, 0, 0};
  const Fp8Rows f = quantize_per_token_fp8(x, 3, 4, ScaleFormat::kFp32);
  EXPECT_EQ(f.scales[0], 1.0f);
  EXPECT_EQ(f.value(0, 0), 448);
  EXPECT_EQ(f.value(0, 1), -224);
  EXPECT_EQ(f.value(0, 2), 1);
  EXPECT_EQ(f.scales[1], 1000.0f / 448.0f);
  EXPECT_EQ(f.scales[2], 1e-4f / 448.0f) << "amax is clamped at 1e-4";
  EXPECT_EQ(f.codes[8], 0);

  const Fp8Rows u = quantize_per_token_fp8(x, 3, 4, ScaleFormat::kUe8m0);
  EXPECT_EQ(u.scales[0], 1.0f);
  EXPECT_EQ(u.scales[1], 4.0f) << "2^ceil(log2(1000 / 448)) = 2^2";
  EXPECT_EQ(u.value(1, 0), 1024) << "250 rounds to the e4m3 value 256";
  EXPECT_EQ(u.scales[2], 0x1p-22f) << "2^ceil(log2(1e-4 / 448))";
}

TEST(Quantize, RandomRowsStayWithinRoundingAndNeverSaturate) {
  std::mt19937 rng(5);
  for (ScaleFormat fmt : {ScaleFormat::kFp32, ScaleFormat::kUe8m0}) {
    const int64_t rows = 64, cols = 128;
    std::vector<float> x(rows * cols);
    for (int64_t r = 0; r < rows; ++r) {
      const float magnitude = std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
      std::normal_distribution<float> n(0.0f, magnitude);
      for (int64_t c = 0; c < cols; ++c) x[r * cols + c] = n(rng);
    }
    const Fp8Rows q = quantize_per_token_fp8(x, rows, cols, fmt);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        expect_within_fp8_rounding(q.value(r, c), x[r * cols + c], q.scales[r]);
        EXPECT_LE(std::fabs(x[r * cols + c] / q.scales[r]), 448.0f * (1 + 1e-6f)) << "saturated";
      }
    }
  }
}

TEST(Quantize, NaNGivesANaNScaleAndBadShapesAreErrors) {
  const Fp8Rows q = quantize_per_token_fp8({1, NAN, 2, 3}, 2, 2, ScaleFormat::kFp32);
  EXPECT_TRUE(std::isnan(q.scales[0]));
  EXPECT_FALSE(std::isnan(q.scales[1]));
  EXPECT_THROW(quantize_per_token_fp8({1, 2, 3}, 2, 2, ScaleFormat::kFp32), Error);
}

TEST(Quantize, DsMlaTokenLayoutAndDecode) {
  std::mt19937 rng(9);
  std::vector<float> latent(kDsMlaLatent), rope(kDsMlaRope);
  for (int tile = 0; tile < 4; ++tile) {
    std::normal_distribution<float> n(0.0f, std::ldexp(1.0f, 3 * tile - 4));  // tiles of different size
    for (int c = 0; c < kDsMlaTile; ++c) latent[tile * kDsMlaTile + c] = n(rng);
  }
  std::normal_distribution<float> nr(0.0f, 2.0f);
  for (float& v : rope) v = nr(rng);
  const auto token = pack_ds_mla_token(latent.data(), rope.data());
  double k[576];
  decode_ds_mla_token(token.data(), k);
  for (int tile = 0; tile < 4; ++tile) {
    float amax = 0, stored;
    for (int c = 0; c < kDsMlaTile; ++c) amax = std::max(amax, std::fabs(latent[tile * kDsMlaTile + c]));
    std::memcpy(&stored, token.data() + 512 + 4 * tile, 4);
    EXPECT_EQ(stored, amax / 448.0f) << "tile " << tile << "'s scale at byte " << 512 + 4 * tile;
    for (int c = 0; c < kDsMlaTile; ++c) {
      const int i = tile * kDsMlaTile + c;
      EXPECT_EQ(k[i], double(fp8_e4m3_to_float(token[i])) * stored);
      expect_within_fp8_rounding(k[i], latent[i], stored);
    }
  }
  for (int r = 0; r < kDsMlaRope; ++r) {
    uint16_t h;
    std::memcpy(&h, token.data() + 528 + 2 * r, 2);
    EXPECT_EQ(h, float_to_bf16(rope[r])) << "rope " << r << " at byte " << 528 + 2 * r;
    EXPECT_EQ(k[512 + r], double(bf16_to_float(h)));
  }
}

TEST(Quantize, PerTensorScaleCoversTheWholeTensor) {
  const PerTensorFp8 q = quantize_per_tensor_fp8({0.5f, -896.0f, 3.0f});
  EXPECT_EQ(q.scale, 2.0f);
  EXPECT_EQ(fp8_e4m3_to_float(q.codes[1]) * q.scale, -896.0f);
  EXPECT_EQ(fp8_e4m3_to_float(q.codes[0]) * q.scale, 0.5f);
  EXPECT_EQ(quantize_per_tensor_fp8({0.0f, 0.0f}).scale, 1e-4f / 448.0f);
}

}  // namespace
}  // namespace mlacheck::oracle
