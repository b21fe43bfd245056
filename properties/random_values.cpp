// Bulk random fills for case staging (properties/random_values.h).
#include "properties/random_values.h"

#include <array>
#include <cstring>

#include "core/fp8.h"

namespace mlacheck {

namespace {

// code[u]: the e4m3 code of -2 + 4 u / 65536.
const std::array<uint8_t, 65536>& uniform_fp8_table() {
  static const std::array<uint8_t, 65536> table = [] {
    std::array<uint8_t, 65536> t{};
    for (uint32_t u = 0; u < 65536; ++u) t[u] = float_to_fp8_e4m3(-2.0f + static_cast<float>(u) * 0x1p-14f);
    return t;
  }();
  return table;
}

}  // namespace

void fill_uniform_fp8(uint8_t* base, const View& v, std::mt19937_64& rng) {
  const std::array<uint8_t, 65536>& code = uniform_fp8_table();
  uint64_t bits = 0;
  int left = 0;
  v.for_each_run([&](int64_t first, int64_t bytes) {
    for (int64_t i = 0; i < bytes; ++i) {
      if (left == 0) bits = rng(), left = 4;
      base[first + i] = code[bits & 0xFFFF];
      bits >>= 16;
      --left;
    }
  });
}

void fill_uniform_f32(uint8_t* base, const View& v, std::mt19937_64& rng, float lo, float hi, float scale) {
  v.for_each_byte_offset([&](int64_t at) {
    const float x = scale * uniform(rng, lo, hi);
    std::memcpy(base + at, &x, 4);
  });
}

}  // namespace mlacheck
