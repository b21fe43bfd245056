// Quantizers and decoders of the fp8 layouts the kernels read.
#include "oracle/quantize.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "core/fp8.h"

namespace mlacheck::oracle {
namespace {

float amax_of(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return x[i];  // a NaN input gives a NaN scale, never a finite one
    m = std::max(m, std::fabs(x[i]));
  }
  return m;
}

}  // namespace

double Fp8Rows::value(int64_t r, int64_t c) const {
  return double(fp8_e4m3_to_float(codes[static_cast<size_t>(r * cols + c)])) * double(scales[static_cast<size_t>(r)]);
}

Fp8Rows quantize_per_token_fp8(const std::vector<float>& x, int64_t rows, int64_t cols, ScaleFormat format) {
  MLA_REQUIRE(rows >= 0 && cols >= 0 && static_cast<int64_t>(x.size()) == rows * cols, "quantize_per_token_fp8: ",
              x.size(), " values are not ", rows, " x ", cols);
  Fp8Rows q{rows, cols, std::vector<uint8_t>(x.size()), std::vector<float>(static_cast<size_t>(rows))};
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x.data() + r * cols;
    const float amax = amax_of(row, cols);
    const float scale =
        format == ScaleFormat::kFp32 ? fp8_e4m3_scale_fp32(amax) : ue8m0_to_float(fp8_e4m3_scale_ue8m0(amax));
    q.scales[static_cast<size_t>(r)] = scale;
    for (int64_t c = 0; c < cols; ++c) q.codes[static_cast<size_t>(r * cols + c)] = float_to_fp8_e4m3(row[c] / scale);
  }
  return q;
}

std::array<uint8_t, kDsMlaTokenBytes> pack_ds_mla_token(const float* latent, const float* rope) {
  std::array<uint8_t, kDsMlaTokenBytes> t{};
  for (int tile = 0; tile < kDsMlaLatent / kDsMlaTile; ++tile) {
    const float* v = latent + tile * kDsMlaTile;
    const float scale = fp8_e4m3_scale_fp32(amax_of(v, kDsMlaTile));
    std::memcpy(&t[kDsMlaLatent + 4 * tile], &scale, 4);
    for (int c = 0; c < kDsMlaTile; ++c) t[tile * kDsMlaTile + c] = float_to_fp8_e4m3(v[c] / scale);
  }
  for (int r = 0; r < kDsMlaRope; ++r) {
    const uint16_t h = float_to_bf16(rope[r]);
    std::memcpy(&t[kDsMlaLatent + 16 + 2 * r], &h, 2);
  }
  return t;
}

void decode_ds_mla_token(const uint8_t* token, double* k) {
  float scale[4];
  std::memcpy(scale, token + kDsMlaLatent, sizeof scale);
  for (int c = 0; c < kDsMlaLatent; ++c) k[c] = double(fp8_e4m3_to_float(token[c])) * double(scale[c / kDsMlaTile]);
  for (int r = 0; r < kDsMlaRope; ++r) {
    uint16_t h;
    std::memcpy(&h, token + kDsMlaLatent + 16 + 2 * r, 2);
    k[kDsMlaLatent + r] = bf16_to_float(h);
  }
}

PerTensorFp8 quantize_per_tensor_fp8(const std::vector<float>& x) {
  PerTensorFp8 q;
  q.scale = fp8_e4m3_scale_fp32(amax_of(x.data(), static_cast<int64_t>(x.size())));
  q.codes.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) q.codes[i] = float_to_fp8_e4m3(x[i] / q.scale);
  return q;
}

}  // namespace mlacheck::oracle
