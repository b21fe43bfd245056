// Tests of oracle/topk.h (docs/ops.md 3): row lengths of both variants by hand, the reference row against
// a brute-force sort and the independent checker (core/topk_check.h), global slots by hand.
#include "oracle/topk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.h"
#include "core/topk_check.h"
#include "oracle/decode_rows.h"

namespace mlacheck::oracle {
namespace {

TEST(TopkOracle, DecodeRowLengthsFromOneAndTwoDimensionalSeqLens) {
  std::vector<int32_t> one = {10, 3, 1};
  EXPECT_EQ(topk_decode_row_lengths(HostTensor(one.data(), View::contiguous(DType::kI32, {3})), 2),
            (std::vector<int64_t>{9, 10, 2, 3, 0, 1}));
  EXPECT_EQ(topk_decode_row_lengths(HostTensor(one.data(), View::contiguous(DType::kI32, {1})), 3),
            (std::vector<int64_t>{8, 9, 10}));
  std::vector<int32_t> two = {5, 6, 0, 1};
  EXPECT_EQ(topk_decode_row_lengths(HostTensor(two.data(), View::contiguous(DType::kI32, {2, 2})), 2),
            (std::vector<int64_t>{5, 6, 0, 1}));
}

// oracle/decode_rows.h, the rule the top-k and logits oracles, the MLA decode's causal mask and the
// generators share, by hand: the last of n rows sees every key, each row before it one fewer, none
// fewer than 0.
TEST(DecodeRows, TheLastRowSeesEveryKeyEachBeforeItOneFewerAndNoneFewerThanZero) {
  EXPECT_EQ(decode_row_length(10, 2, 1), 10);
  EXPECT_EQ(decode_row_length(10, 2, 0), 9);
  EXPECT_EQ(decode_row_length(10, 1, 0), 10);
  EXPECT_EQ(decode_row_length(1, 4, 3), 1);
  EXPECT_EQ(decode_row_length(1, 4, 2), 0);
  EXPECT_EQ(decode_row_length(1, 4, 0), 0);  // -2 clamped
  EXPECT_EQ(decode_row_length(0, 1, 0), 0);
}

TEST(TopkOracle, ANonContiguousTwoDimensionalSeqLensIsRefused) {
  // [:, :2] of a [2, 4] buffer: strides (4, 1). A kernel indexing b * next_n + j would read 7 for
  // row 2 where the view says 0.
  std::vector<int32_t> wide = {5, 6, 7, 8, 0, 1, 2, 3};
  try {
    topk_decode_row_lengths(HostTensor(wide.data(), View(DType::kI32, {2, 2}, {4, 1}, 0)), 2);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not C-contiguous"), std::string::npos) << e.what();
  }
  EXPECT_THROW(topk_decode_row_lengths(HostTensor(wide.data(), View::contiguous(DType::kI32, {2, 4})), 2), Error);
}

TEST(TopkOracle, PrefillRowLengths) {
  std::vector<int32_t> ks = {0, 5, 2}, ke = {4, 5, 9};
  EXPECT_EQ(topk_prefill_row_lengths(HostTensor(ks.data(), View::contiguous(DType::kI32, {3})),
                                     HostTensor(ke.data(), View::contiguous(DType::kI32, {3}))),
            (std::vector<int64_t>{4, 0, 7}));
  std::swap(ks[2], ke[2]);
  EXPECT_THROW(topk_prefill_row_lengths(HostTensor(ks.data(), View::contiguous(DType::kI32, {3})),
                                        HostTensor(ke.data(), View::contiguous(DType::kI32, {3}))),
               Error);
}

TEST(TopkOracle, ReferenceRowsByHand) {
  const double v[] = {1, 5, 3, 5, -INFINITY};
  EXPECT_EQ(topk_reference_row(v, 5, 2), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(topk_reference_row(v, 5, 4), (std::vector<int32_t>{1, 3, 2, 0}));
  EXPECT_EQ(topk_reference_row(v, 2, 4), (std::vector<int32_t>{0, 1, -1, -1}));
  EXPECT_EQ(topk_reference_row(v, 0, 2), (std::vector<int32_t>{-1, -1}));
  const double nan_row[] = {NAN, 2, NAN, 1};
  EXPECT_EQ(topk_reference_row(nan_row, 4, 2), (std::vector<int32_t>{1, 3}));
}

TEST(TopkOracle, RandomRowsMatchABruteForceSortAndPassTheChecker) {
  std::mt19937 rng(13);
  for (int iter = 0; iter < 500; ++iter) {
    const int64_t n = rng() % 300, k = 1 + rng() % 64;
    std::vector<double> v(static_cast<size_t>(n));
    const int distinct = 1 + static_cast<int>(rng() % 20);  // few distinct values: many ties
    for (double& x : v) x = static_cast<double>(rng() % distinct) - (rng() % 9 == 0 ? INFINITY : 0);
    const std::vector<int32_t> row = topk_reference_row(v.data(), n, k);
    ASSERT_FALSE(check_topk_row(row.data(), k, v.data(), n).has_value()) << *check_topk_row(row.data(), k, v.data(), n);
    if (n > k) {
      std::vector<double> sorted = v, taken;
      std::sort(sorted.begin(), sorted.end(), std::greater<double>());
      for (int32_t i : row) taken.push_back(v[static_cast<size_t>(i)]);
      std::sort(taken.begin(), taken.end(), std::greater<double>());
      ASSERT_TRUE(std::equal(taken.begin(), taken.end(), sorted.begin())) << "n " << n << " k " << k;
    }
  }
}

TEST(TopkOracle, GlobalSlotsByHand) {
  std::vector<int32_t> table = {7, 2, 9, -5, /* row 1 */ 4, 4, 4, -5};
  const HostTensor t(table.data(), View::padded_rows(DType::kI32, {2, 3}, 4));
  EXPECT_EQ(topk_to_global(0, t, 0, 4), 28);
  EXPECT_EQ(topk_to_global(5, t, 0, 4), 9);
  EXPECT_EQ(topk_to_global(11, t, 0, 4), 39);
  EXPECT_EQ(topk_to_global(12, t, 0, 4), -1) << "block column 3 is past the table's 3 columns";
  EXPECT_EQ(topk_to_global(-1, t, 0, 4), -1);
  EXPECT_EQ(topk_to_global(6, t, 1, 4), 18);
  EXPECT_THROW(topk_to_global(0, t, 2, 4), Error);
}

}  // namespace
}  // namespace mlacheck::oracle
