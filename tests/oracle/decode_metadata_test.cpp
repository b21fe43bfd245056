// Tests of oracle/decode_metadata.h (docs/ops.md 1): hand-worked batches, a brute-force count on random
// batches, flattened = native per token, and clear errors for malformed batches.
#include "oracle/decode_metadata.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace mlacheck::oracle {
namespace {

// Host storage for one batch; block_table rows are padded to a row stride of W + 2.
struct Batch {
  std::vector<int32_t> seq_lens, decode_lens, table;
  int64_t W = 0;
  DecodeBatchViews views(int32_t next_n) {
    const int64_t B = static_cast<int64_t>(seq_lens.size());
    return {HostTensor(seq_lens.data(), View::contiguous(DType::kI32, {B})),
            HostTensor(decode_lens.data(), View::contiguous(DType::kI32, {B})),
            HostTensor(table.data(), View::padded_rows(DType::kI32, {B, W}, W + 2)), next_n};
  }
  static Batch make(std::vector<int32_t> L, std::vector<int32_t> d, int64_t W) {
    Batch b{std::move(L), std::move(d), {}, W};
    b.table.assign(b.seq_lens.size() * (W + 2), -7);  // -7 in the row padding: must never be copied
    for (size_t r = 0; r < b.seq_lens.size(); ++r) {
      for (int64_t w = 0; w < W; ++w) b.table[r * (W + 2) + w] = static_cast<int32_t>(100 * r + w);
    }
    return b;
  }
};

TEST(DecodeMetadata, HandWorkedNonUniformBatchWithPadding) {
  Batch b = Batch::make({10, 7, 12, 0}, {3, 1, 4, 0}, 3);
  const FlattenedMetadata f = flattened_metadata(b.views(4), 10);
  EXPECT_EQ(f.num_decode_tokens, 8);
  EXPECT_EQ(f.seq_lens, (std::vector<int32_t>{8, 9, 10, 7, 9, 10, 11, 12, 0, 0}));
  EXPECT_EQ(f.decode_lens, (std::vector<int32_t>{1, 1, 1, 1, 1, 1, 1, 1, 0, 0}));
  // Rows 0..2 are request 0's table row, 3 is request 1's, 4..7 request 2's, 8..9 zero.
  EXPECT_EQ(f.block_table(2, 2), 2);
  EXPECT_EQ(f.block_table(3, 0), 100);
  EXPECT_EQ(f.block_table(7, 1), 201);
  EXPECT_EQ(f.block_table.row(8).sum(), 0);
  EXPECT_EQ((f.block_table.array() == -7).count(), 0) << "row padding was copied";

  const NativeMetadata n = native_metadata(b.views(4));
  EXPECT_EQ(n.next_n_live, 4);
  IntMatrix want(4, 4);
  want << 8, 9, 10, 0,  //
      7, 0, 0, 0,       //
      9, 10, 11, 12,    //
      0, 0, 0, 0;
  EXPECT_EQ(n.context_lens, want);
  EXPECT_FALSE(is_uniform(b.views(4)));
}

TEST(DecodeMetadata, UniformBatchAndShortSequencesNeverGoNegative) {
  Batch u = Batch::make({5, 9}, {2, 2}, 1);
  EXPECT_TRUE(is_uniform(u.views(2)));
  EXPECT_EQ(flattened_metadata(u.views(2), 4).seq_lens, (std::vector<int32_t>{4, 5, 8, 9}));
  // L = 2 with 4 query tokens: max(0, 2 - 4 + t + 1) = 0, 0, 1, 2; never -1 read as 4e9.
  Batch s = Batch::make({2}, {4}, 1);
  EXPECT_EQ(flattened_metadata(s.views(4), 4).seq_lens, (std::vector<int32_t>{0, 0, 1, 2}));
  EXPECT_EQ(context_len(0, 3, 0), 0);
  EXPECT_FALSE(is_uniform(Batch::make({3, 0}, {1, 0}, 1).views(1))) << "a padding request is not uniform";
}

// Brute force: token t of a request with L keys and d query tokens sits at position L - d + t and
// sees every key at or before it; count them one by one.
int32_t count_visible_keys(int32_t L, int32_t d, int32_t t) {
  int32_t n = 0;
  for (int32_t key = 0; key < L; ++key) n += key <= L - d + t ? 1 : 0;
  return n;
}

TEST(DecodeMetadata, RandomBatchesAgreeWithABruteForceCountAndAcrossLayouts) {
  std::mt19937 rng(3);
  for (int iter = 0; iter < 300; ++iter) {
    const int32_t next_n = 1 + static_cast<int32_t>(rng() % 8);
    const size_t B = rng() % 9;
    std::vector<int32_t> L(B), d(B);
    for (size_t b = 0; b < B; ++b) {
      d[b] = static_cast<int32_t>(rng() % (next_n + 1));
      L[b] = rng() % 5 == 0 ? static_cast<int32_t>(rng() % 3) : static_cast<int32_t>(rng() % 300);
    }
    Batch batch = Batch::make(L, d, 1 + static_cast<int64_t>(rng() % 4));
    const FlattenedMetadata f = flattened_metadata(batch.views(next_n), static_cast<int64_t>(B) * next_n);
    const NativeMetadata n = native_metadata(batch.views(next_n));
    int64_t r = 0;
    for (size_t b = 0; b < B; ++b) {
      for (int32_t t = 0; t < d[b]; ++t, ++r) {
        ASSERT_EQ(f.seq_lens[r], count_visible_keys(L[b], d[b], t)) << "L " << L[b] << " d " << d[b] << " t " << t;
        ASSERT_EQ(f.seq_lens[r], n.context_lens(static_cast<int64_t>(b), t)) << "flattened != native";
        ASSERT_EQ(f.block_table.row(r), n.block_table.row(static_cast<int64_t>(b)));
      }
      for (int32_t j = d[b]; j < n.next_n_live; ++j) ASSERT_EQ(n.context_lens(static_cast<int64_t>(b), j), 0);
    }
    ASSERT_EQ(r, f.num_decode_tokens);
    for (; r < static_cast<int64_t>(f.seq_lens.size()); ++r) ASSERT_EQ(f.seq_lens[r], 0) << "stale tail row " << r;
  }
}

TEST(DecodeMetadata, MalformedBatchesAreClearErrors) {
  Batch b = Batch::make({10, 7}, {3, 1}, 2);
  EXPECT_THROW(flattened_metadata(b.views(2), 8), Error);  // decode_lens 3 > next_n 2
  EXPECT_THROW(flattened_metadata(b.views(4), 3), Error);  // 4 tokens, 3 rows allocated
  Batch neg = Batch::make({-1}, {1}, 1);
  EXPECT_THROW(native_metadata(neg.views(1)), Error);
  DecodeBatchViews v = b.views(4);
  v.decode_lens.view = View::contiguous(DType::kI32, {1});  // shape mismatch
  EXPECT_THROW(native_metadata(v), Error);
  v = b.views(4);
  v.block_table.view = View(DType::kI32, {2, 2}, {4, 2}, 0);  // column stride 2
  try {
    native_metadata(v);
    ADD_FAILURE() << "a strided block_table column was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unit column stride"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mlacheck::oracle
