// Tests of oracle/k_cache_gather.h: a gather by hand (two requests, one of length 0, a table with
// a padded row and garbage past the columns used, scales that are NaN bit patterns), malformed
// inputs refused, a brute-force byte loop over random caches and tables, and the round trip with
// the insert's oracle (what 2.3 writes, 2.4 reads back).
#include "oracle/k_cache_gather.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "core/error.h"
#include "core/fp16.h"
#include "oracle/k_cache_insert.h"

namespace mlacheck::oracle {
namespace {

struct Cache {
  std::vector<uint8_t> bytes;
  PagedIndexerCache cache;
  Cache(int64_t blocks, int64_t block_size, int64_t D, int64_t stride) : bytes(static_cast<size_t>(blocks * stride)) {
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i);
    cache.blocks = HostTensor(bytes.data(), View(DType::kU8, {blocks, stride}, {stride, 1}, 0));
    cache.block_size = block_size;
    cache.head_dim = D;
  }
};

TEST(KCacheGather, RowsByHand) {
  // 3 blocks of 2 tokens of D 3: 2 x 3 codes, then 2 x 4 scale bytes, 2 bytes of padding (16 bytes).
  Cache c(3, 2, 3, 16);
  // Scales: block 2 slot 0 an fp32 NaN with a payload (0x7FA00001), block 1 slot 0 negative zero.
  const uint8_t nan[4] = {0x01, 0x00, 0xA0, 0x7F}, neg_zero[4] = {0, 0, 0, 0x80};
  std::memcpy(&c.bytes[2 * 16 + 6 + 0], nan, 4);
  std::memcpy(&c.bytes[1 * 16 + 6 + 0], neg_zero, 4);
  // Requests: 3 tokens (blocks 2, 0), 0 tokens, 1 token (block 1). Rows of 4 entries, W 2: entries
  // past each request's blocks and the row padding hold -1 and 99.
  std::vector<int32_t> table = {2, 0, 99, 99, /**/ -1, -1, 99, 99, /**/ 1, -1, 99, 99};
  std::vector<int32_t> cu = {0, 3, 3, 4};
  const std::vector<GatheredRow> rows = indexer_k_cache_gather(
      {c.cache, HostTensor(table.data(), View(DType::kI32, {3, 2}, {4, 1}, 0)),
       HostTensor(cu.data(), View::contiguous(DType::kI32, {4}))});
  ASSERT_EQ(rows.size(), 4u);
  // Row 0: request 0 token 0, block 2 slot 0: codes at 32..34, scale at 32 + 6.
  EXPECT_EQ(rows[0].block, 2);
  EXPECT_EQ(rows[0].slot, 0);
  EXPECT_EQ(rows[0].codes, (std::vector<uint8_t>{32, 33, 34}));
  EXPECT_EQ(std::memcmp(rows[0].scale, nan, 4), 0) << "a NaN scale's bytes are copied, payload and all";
  // Row 1: token 1, block 2 slot 1: codes 35..37, scale at 32 + 10 (bytes 42..45, unchanged).
  EXPECT_EQ(rows[1].codes, (std::vector<uint8_t>{35, 36, 37}));
  EXPECT_EQ(rows[1].scale[0], 42);
  EXPECT_EQ(rows[1].scale[3], 45);
  // Row 2: token 2, block 0 slot 0 (the table's second column).
  EXPECT_EQ(rows[2].block, 0);
  EXPECT_EQ(rows[2].codes, (std::vector<uint8_t>{0, 1, 2}));
  EXPECT_EQ(rows[2].scale[0], 6);
  // Row 3: request 2 (after the empty request 1) token 0, block 1 slot 0.
  EXPECT_EQ(rows[3].request, 2);
  EXPECT_EQ(rows[3].position, 0);
  EXPECT_EQ(rows[3].codes, (std::vector<uint8_t>{16, 17, 18}));
  EXPECT_EQ(std::memcmp(rows[3].scale, neg_zero, 4), 0);
}

TEST(KCacheGather, MalformedInputsAreRefused) {
  Cache c(2, 2, 3, 16);
  std::vector<int32_t> table = {0, 1, 1, 0};
  const HostTensor t(table.data(), View::contiguous(DType::kI32, {2, 2}));
  const auto gather = [&](std::vector<int32_t> cu) {
    return indexer_k_cache_gather({c.cache, t, HostTensor(cu.data(), View::contiguous(DType::kI32, {int64_t(cu.size())}))});
  };
  EXPECT_NO_THROW(gather({0, 4, 8}));
  EXPECT_THROW(gather({1, 4, 8}), Error) << "cu_seq_lens[0] is not 0";
  EXPECT_THROW(gather({0, 4, 3}), Error) << "decreasing";
  EXPECT_THROW(gather({0, 5, 5}), Error) << "5 tokens need 3 blocks of 2, the table has 2 columns";
  EXPECT_THROW(gather({0, 4}), Error) << "B + 1 entries for B = 2";
  table[1] = 2;
  EXPECT_THROW(gather({0, 4, 4}), Error) << "block 2 of a cache of 2";
  table[1] = -1;
  EXPECT_NO_THROW(gather({0, 2, 2})) << "an unused column may hold anything";
}

// The oracle against a byte loop over raw offsets, on random caches, tables and lengths.
TEST(KCacheGather, EveryRowIsTheBytesAtItsSlotBruteForce) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t B = 1 + static_cast<int64_t>(rng() % 5), D = 1 + static_cast<int64_t>(rng() % 140);
    const int64_t bs = 1 + static_cast<int64_t>(rng() % 9);
    std::vector<int32_t> cu = {0};
    int64_t need = 0, max_cols = 1;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = rng() % 4 == 0 ? 0 : static_cast<int64_t>(rng() % (3 * bs + 2));
      cu.push_back(cu.back() + static_cast<int32_t>(len));
      need += (len + bs - 1) / bs;
      max_cols = std::max(max_cols, (len + bs - 1) / bs);
    }
    const int64_t blocks = need + static_cast<int64_t>(rng() % 3);
    const int64_t stride = (bs * (D + 4) + 3) / 4 * 4 + 4 * static_cast<int64_t>(rng() % 3);
    Cache c(blocks, bs, D, stride);
    for (uint8_t& x : c.bytes) x = static_cast<uint8_t>(rng());
    const int64_t W = max_cols + static_cast<int64_t>(rng() % 3), row = W + static_cast<int64_t>(rng() % 3);
    std::vector<int32_t> table(static_cast<size_t>(B * row), -1);
    std::vector<int32_t> order(static_cast<size_t>(blocks));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    size_t next = 0;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = cu[static_cast<size_t>(b + 1)] - cu[static_cast<size_t>(b)];
      for (int64_t j = 0; j < (len + bs - 1) / bs; ++j) table[static_cast<size_t>(b * row + j)] = order[next++];
    }
    const std::vector<GatheredRow> rows = indexer_k_cache_gather(
        {c.cache, HostTensor(table.data(), View(DType::kI32, {B, W}, {row, 1}, 0)),
         HostTensor(cu.data(), View::contiguous(DType::kI32, {B + 1}))});
    ASSERT_EQ(static_cast<int64_t>(rows.size()), int64_t{cu.back()});
    for (int64_t b = 0, t = 0; b < B; ++b) {
      for (int64_t p = 0; p < cu[static_cast<size_t>(b + 1)] - cu[static_cast<size_t>(b)]; ++p, ++t) {
        const int64_t blk = table[static_cast<size_t>(b * row + p / bs)];
        const GatheredRow& r = rows[static_cast<size_t>(t)];
        ASSERT_EQ(r.request, b);
        ASSERT_EQ(r.position, p);
        for (int64_t d = 0; d < D; ++d) {
          ASSERT_EQ(r.codes[static_cast<size_t>(d)], c.bytes[static_cast<size_t>(blk * stride + (p % bs) * D + d)])
              << "trial " << trial << " row " << t << " code " << d;
        }
        for (int64_t i = 0; i < 4; ++i) {
          ASSERT_EQ(r.scale[i], c.bytes[static_cast<size_t>(blk * stride + bs * D + 4 * (p % bs) + i)])
              << "trial " << trial << " row " << t << " scale byte " << i;
        }
      }
    }
  }
}

// What the insert's oracle (2.3) writes into a request's slots, the gather (2.4) reads back: each
// token's codes and scale as quantize_indexer_key makes them.
TEST(KCacheGather, ReadsBackWhatTheInsertWrote) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t D = 1 + static_cast<int64_t>(rng() % 70), bs = 1 + static_cast<int64_t>(rng() % 6);
    const int64_t len = 1 + static_cast<int64_t>(rng() % 20), cols = (len + bs - 1) / bs, blocks = cols + 2;
    Cache c(blocks, bs, D, (bs * (D + 4) + 3) / 4 * 4);
    std::vector<int32_t> table(static_cast<size_t>(cols));
    for (int64_t j = 0; j < cols; ++j) table[static_cast<size_t>(j)] = static_cast<int32_t>(blocks - 1 - j);
    std::vector<uint16_t> keys(static_cast<size_t>(len * D));
    for (uint16_t& k : keys) k = float_to_bf16(static_cast<float>(static_cast<int64_t>(rng() % 2001) - 1000) / 64.0f);
    std::vector<int32_t> slots(static_cast<size_t>(len));
    for (int64_t p = 0; p < len; ++p) slots[static_cast<size_t>(p)] = static_cast<int32_t>(table[static_cast<size_t>(p / bs)] * bs + p % bs);
    const HostTensor k(keys.data(), View::contiguous(DType::kBF16, {len, D}));
    const ScaleFormat f = trial % 2 ? ScaleFormat::kUe8m0 : ScaleFormat::kFp32;
    indexer_k_cache_insert({k, HostTensor(slots.data(), View::contiguous(DType::kI32, {len})), f}, c.cache);
    std::vector<int32_t> cu = {0, static_cast<int32_t>(len)};
    const std::vector<GatheredRow> rows = indexer_k_cache_gather(
        {c.cache, HostTensor(table.data(), View::contiguous(DType::kI32, {1, cols})),
         HostTensor(cu.data(), View::contiguous(DType::kI32, {2}))});
    ASSERT_EQ(static_cast<int64_t>(rows.size()), len);
    for (int64_t p = 0; p < len; ++p) {
      const QuantizedKey q = quantize_indexer_key(k, p, f);
      EXPECT_EQ(rows[static_cast<size_t>(p)].codes, q.codes) << "trial " << trial << " token " << p;
      EXPECT_EQ(std::memcmp(rows[static_cast<size_t>(p)].scale, &q.scale, 4), 0) << "trial " << trial << " token " << p;
    }
  }
}

}  // namespace
}  // namespace mlacheck::oracle
