// The quantizers that make test inputs the way production does, and the decoders the oracle reads
// them back with (docs/ops.md "Conventions", 2.1, 4, 5):
//   per-token fp8 with an fp32 scale max(amax, 1e-4) / 448, or a ue8m0 power-of-two scale;
//   the 656-byte fp8_ds_mla token (512 fp8 latent values in 4 tiles of 128 with fp32 tile scales,
//   then 64 bf16 rope values);
//   per-tensor fp8 (dense MLA's k_scale / q_scale).
// Encoding rounds to nearest even and never saturates (the scale puts amax at most at 448).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace mlacheck::oracle {

enum class ScaleFormat { kFp32, kUe8m0 };

// rows x cols fp8 codes, row-major, and one scale per row (as a float; a ue8m0 scale is its value).
struct Fp8Rows {
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  double value(int64_t r, int64_t c) const;  // fp8(code) * scale, exactly
};
// x is rows x cols, row-major.
Fp8Rows quantize_per_token_fp8(const std::vector<float>& x, int64_t rows, int64_t cols, ScaleFormat format);

// One fp8_ds_mla token: bytes [0, 512) fp8 latent, [512, 528) four fp32 tile scales, [528, 656)
// 64 bf16 rope values.
constexpr int kDsMlaTokenBytes = 656;
constexpr int kDsMlaLatent = 512, kDsMlaRope = 64, kDsMlaTile = 128;
std::array<uint8_t, kDsMlaTokenBytes> pack_ds_mla_token(const float* latent, const float* rope);
// K[c] = fp8(byte c) * scale[c / 128] for c < 512, K[512 + r] = rope[r]; exact, into k[576].
void decode_ds_mla_token(const uint8_t* token, double* k);

// One scale for a whole tensor: max(amax, 1e-4) / 448.
struct PerTensorFp8 {
  std::vector<uint8_t> codes;
  float scale = 1.0f;
};
PerTensorFp8 quantize_per_tensor_fp8(const std::vector<float>& x);

}  // namespace mlacheck::oracle
