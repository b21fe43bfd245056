// Tests of oracle/k_cache_insert.h: a token's codes and scale by hand in both formats, the
// block-flat placement of codes and scale, padding tokens, malformed slots, and the round trip
// through 2.1's reader on random keys.
#include "oracle/k_cache_insert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/error.h"
#include "core/fp16.h"
#include "core/fp8.h"

namespace mlacheck::oracle {
namespace {

struct Keys {
  std::vector<uint16_t> bits;
  int64_t T, D;
  Keys(int64_t t, int64_t d) : bits(static_cast<size_t>(t * d)), T(t), D(d) {}
  void set(int64_t i, const std::vector<float>& row) {
    for (int64_t d = 0; d < D; ++d) bits[static_cast<size_t>(i * D + d)] = float_to_bf16(row[static_cast<size_t>(d)]);
  }
  HostTensor tensor() { return HostTensor(bits.data(), View::contiguous(DType::kBF16, {T, D})); }
};

struct Cache {
  std::vector<uint8_t> bytes;
  PagedIndexerCache cache;
  Cache(int64_t blocks, int64_t block_size, int64_t D, int64_t stride) : bytes(static_cast<size_t>(blocks * stride), 0xEE) {
    cache.blocks = HostTensor(bytes.data(), View(DType::kU8, {blocks, stride}, {stride, 1}, 0));
    cache.block_size = block_size;
    cache.head_dim = D;
  }
};

TEST(KCacheInsert, CodesAndScalesByHand) {
  Keys k(1, 4);
  k.set(0, {1, -2, 0.5f, 4});
  const QuantizedKey f = quantize_indexer_key(k.tensor(), 0, ScaleFormat::kFp32);
  EXPECT_EQ(f.scale, 4.0f / 448.0f);
  // x / scale = 112, -224, 56, 448: each exactly an e4m3 value (1.75 x 2^6, 2^7, 2^5, 2^8).
  EXPECT_EQ(f.codes, (std::vector<uint8_t>{0x6E, 0xF6, 0x66, 0x7E}));
  const QuantizedKey u = quantize_indexer_key(k.tensor(), 0, ScaleFormat::kUe8m0);
  EXPECT_EQ(u.scale, 0x1p-6f) << "2^ceil(log2(4 / 448)) = 2^-6";
  EXPECT_EQ(u.codes, (std::vector<uint8_t>{0x68, 0xF0, 0x60, 0x78}));  // 64, -128, 32, 256
  Keys zero(1, 4);
  EXPECT_EQ(quantize_indexer_key(zero.tensor(), 0, ScaleFormat::kFp32).scale, 1e-4f / 448.0f) << "amax clamped at 1e-4";
}

TEST(KCacheInsert, WritesCodesThenScalesOfEachBlockAndNothingElse) {
  Keys k(3, 4);
  k.set(0, {1, -2, 0.5f, 4});
  k.set(1, {9, 9, 9, 9});  // a padding token: never written
  k.set(2, {448, 0, 0, 0});
  std::vector<int32_t> slots = {5, -1, 2};  // block size 4: token 0 -> block 1 slot 1, token 2 -> block 0 slot 2
  Cache c(2, 4, 4, 36);  // 4 x (4 + 4) = 32 bytes used, 4 of padding
  const std::vector<int64_t> written = indexer_k_cache_insert(
      {k.tensor(), HostTensor(slots.data(), View::contiguous(DType::kI32, {3})), ScaleFormat::kFp32}, c.cache);
  EXPECT_EQ(written, (std::vector<int64_t>{5, 2}));
  std::vector<uint8_t> want(72, 0xEE);
  const uint8_t codes0[4] = {0x6E, 0xF6, 0x66, 0x7E};
  std::memcpy(&want[36 + 1 * 4], codes0, 4);
  const float scale0 = 4.0f / 448.0f;
  std::memcpy(&want[36 + 16 + 4 * 1], &scale0, 4);
  const uint8_t codes2[4] = {0x7E, 0, 0, 0};
  std::memcpy(&want[2 * 4], codes2, 4);
  const float scale2 = 1.0f;
  std::memcpy(&want[16 + 4 * 2], &scale2, 4);
  EXPECT_EQ(c.bytes, want);
}

TEST(KCacheInsert, MalformedSlotsAreRefused) {
  Keys k(2, 4);
  Cache c(2, 4, 4, 32);
  std::vector<int32_t> slots = {3, 3};
  const HostTensor s(slots.data(), View::contiguous(DType::kI32, {2}));
  EXPECT_THROW(indexer_k_cache_insert({k.tensor(), s, ScaleFormat::kFp32}, c.cache), Error) << "a repeated slot";
  slots = {0, 8};
  EXPECT_THROW(indexer_k_cache_insert({k.tensor(), s, ScaleFormat::kFp32}, c.cache), Error) << "past 2 blocks of 4";
  slots = {0, -2};
  EXPECT_THROW(indexer_k_cache_insert({k.tensor(), s, ScaleFormat::kFp32}, c.cache), Error) << "-2 is no sentinel";
  Keys wide(2, 8);
  slots = {0, 1};
  EXPECT_THROW(indexer_k_cache_insert({wide.tensor(), s, ScaleFormat::kFp32}, c.cache), Error) << "D 8 in a D 4 cache";
}

TEST(KCacheInsert, TheReaderGetsEveryKeyBackWithinFp8Rounding) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int64_t T = 1 + static_cast<int64_t>(rng() % 9), D = 1 + static_cast<int64_t>(rng() % 130);
    const int64_t block_size = 1 + static_cast<int64_t>(rng() % 8), blocks = (T + block_size - 1) / block_size + 1;
    Keys k(T, D);
    const float magnitude = std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
    for (uint16_t& b : k.bits) b = float_to_bf16(magnitude * (static_cast<float>(rng() % 2001) / 1000.0f - 1.0f));
    std::vector<int32_t> slots(static_cast<size_t>(T));
    for (int64_t i = 0; i < T; ++i) slots[static_cast<size_t>(i)] = static_cast<int32_t>(i + block_size);  // from block 1
    Cache c(blocks + 1, block_size, D, (block_size * (D + 4) + 3) / 4 * 4 + 4 * static_cast<int64_t>(rng() % 3));
    const ScaleFormat f = trial % 2 ? ScaleFormat::kUe8m0 : ScaleFormat::kFp32;
    indexer_k_cache_insert({k.tensor(), HostTensor(slots.data(), View::contiguous(DType::kI32, {T})), f}, c.cache);
    for (int64_t i = 0; i < T; ++i) {
      const std::vector<double> got = read_indexer_key(c.cache, slots[static_cast<size_t>(i)]);
      const float scale = quantize_indexer_key(k.tensor(), i, f).scale;
      for (int64_t d = 0; d < D; ++d) {
        const float x = bf16_to_float(k.bits[static_cast<size_t>(i * D + d)]);
        // Half an e4m3 step: 2^-4 of the value for normals, 2^-10 of the scale for subnormals.
        const double bound = std::max(std::fabs(double(x)) * 0x1p-4, double(scale) * 0x1p-10) * (1 + 1e-6);
        ASSERT_LE(std::fabs(got[static_cast<size_t>(d)] - x), bound) << "token " << i << " column " << d;
      }
    }
  }
}

}  // namespace
}  // namespace mlacheck::oracle
