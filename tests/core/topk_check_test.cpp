// Tests of core/topk_check.h: valid answers in any order pass; each kind of wrong answer is named.
#include "core/topk_check.h"

#include <cmath>

#include <gtest/gtest.h>

namespace mlacheck {
namespace {

std::optional<std::string> row(std::vector<int32_t> idx, std::vector<double> values, int64_t n) {
  return check_topk_row(idx.data(), static_cast<int64_t>(idx.size()), values.data(), n);
}

TEST(TopkRow, LargestKInAnyOrderPass) {
  const std::vector<double> v = {0.5, 3.0, -1.0, 2.0, 7.0};
  EXPECT_EQ(row({4, 1, 3}, v, 5), std::nullopt);
  EXPECT_EQ(row({1, 3, 4}, v, 5), std::nullopt);
}

TEST(TopkRow, AnyTieBreakPasses) {
  const std::vector<double> v = {1.0, 2.0, 2.0, 2.0, 0.0};
  EXPECT_EQ(row({1, 2}, v, 5), std::nullopt);
  EXPECT_EQ(row({3, 1}, v, 5), std::nullopt);
  EXPECT_EQ(row({2, 3}, v, 5), std::nullopt);
}

TEST(TopkRow, DuplicateIndexIsRejected) {
  const auto bad = row({4, 1, 4}, {0.5, 3.0, -1.0, 2.0, 7.0}, 5);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("index 4 appears twice, at positions 0 and 2"), std::string::npos) << *bad;
}

TEST(TopkRow, OutOfRangeIndexIsRejected) {
  // Index 5 lies past the row's length: its value is garbage the kernel must not use.
  auto bad = row({5, 4, 1}, {0.5, 3.0, -1.0, 2.0, 7.0, 100.0}, 5);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("position 0 holds index 5, outside the row's [0, 5)"), std::string::npos) << *bad;
  bad = row({-7, 4, 1}, {0.5, 3.0, -1.0, 2.0, 7.0}, 5);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("index -7"), std::string::npos) << *bad;
}

// A slot the kernel never wrote holds the output's poison (0xA5 bytes): named as such, not only as
// the number it happens to read as.
TEST(TopkRow, AnUnwrittenSlotIsNamedAsThePoison) {
  const int32_t poison = static_cast<int32_t>(0xA5A5A5A5u);
  const auto bad = row({4, poison, 1}, {0.5, 3.0, -1.0, 2.0, 7.0}, 5);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("position 1 holds index -1515870811 (0xA5A5A5A5, the output's poison: an element never written), "
                      "outside the row's [0, 5)"),
            std::string::npos)
      << *bad;
  const auto other = row({-7, 4, 1}, {0.5, 3.0, -1.0, 2.0, 7.0}, 5);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->find("poison"), std::string::npos) << *other;
}

TEST(TopkRow, WrongValueIsRejectedNamingWhatWasLeftOut) {
  const auto bad = row({4, 0, 3}, {0.5, 3.0, -1.0, 2.0, 7.0}, 5);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("index 0 (value 0.5, position 1) was taken while index 1 (value 3) was left out"),
            std::string::npos)
      << *bad;
}

TEST(TopkRow, MinusOneInsideALongRowIsRejected) {
  const auto bad = row({4, -1, 3}, {0.5, 3.0, -1.0, 2.0, 7.0}, 5);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("position 1 holds -1"), std::string::npos) << *bad;
}

// "short_rows any-order" (a contract's declaration): each of [0, n) once and -1 elsewhere, any order.
TEST(TopkRow, ShortRowsInAnyOrderPassOnlyWhenDeclared) {
  TopkRules any;
  any.short_rows_any_order = true;
  const auto with = [&](std::vector<int32_t> idx, int64_t n) {
    return check_topk_row(idx.data(), static_cast<int64_t>(idx.size()), nullptr, n, any);
  };
  EXPECT_EQ(with({1, -1, 0, -1}, 2), std::nullopt);
  EXPECT_EQ(with({2, 0, 1}, 3), std::nullopt);
  EXPECT_EQ(with({-1, -1}, 0), std::nullopt);
  EXPECT_TRUE(row({1, 0, -1, -1}, {9, 9}, 2)) << "undeclared, a short row has one order";
  auto bad = with({1, 1, -1, -1}, 2);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("index 1 appears twice"), std::string::npos) << *bad;
  bad = with({1, -1, -1, -1}, 2);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("index 0 is missing"), std::string::npos) << *bad;
  bad = with({2, 0, 1, -1}, 2);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("position 0 holds 2, outside the row's [0, 2)"), std::string::npos) << *bad;
  bad = with({0, -3, 1, -1}, 2);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("position 1 holds -3"), std::string::npos) << *bad;
}

// "neg_inf masked": -inf is no candidate. A row with fewer than k values above -inf fills the rest
// with -1 (or -inf indices); every live value is still taken; k or more live values: the usual rule.
TEST(TopkRow, UnderNegInfMaskedMinusInfMayBeMinusOneAndEveryLiveValueIsTaken) {
  TopkRules masked;
  masked.neg_inf_masked = true;
  const double ninf = -HUGE_VAL;
  const auto with = [&](std::vector<int32_t> idx, std::vector<double> values, TopkRules rules) {
    return check_topk_row(idx.data(), static_cast<int64_t>(idx.size()), values.data(),
                          static_cast<int64_t>(values.size()), rules);
  };
  const std::vector<double> two_live = {ninf, 3.0, ninf, 1.0, ninf};  // n 5 > k 3, 2 live
  EXPECT_EQ(with({1, 3, -1}, two_live, masked), std::nullopt);
  EXPECT_EQ(with({3, 0, 1}, two_live, masked), std::nullopt);  // a -inf index is fine too
  EXPECT_TRUE(with({1, 3, -1}, two_live, TopkRules{})) << "undeclared: a long row holds no -1";
  auto bad = with({1, -1, -1}, two_live, masked);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("index 3 (value 1) was left out"), std::string::npos) << *bad;
  bad = with({1, 3, 5}, two_live, masked);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("outside the row's [0, 5)"), std::string::npos) << *bad;
  // Three live values for k = 3: the ordinary rule, no -1.
  bad = with({1, 3, -1}, {ninf, 3.0, 2.0, 1.0}, masked);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("holds -1"), std::string::npos) << *bad;
  // A short row in order, a -inf position -1; with any-order, any order.
  EXPECT_EQ(with({0, -1, 2, -1}, {1.0, ninf, 2.0}, masked), std::nullopt);
  EXPECT_TRUE(with({0, 1, -1, -1}, {1.0, ninf, 2.0}, masked)) << "position 2 must hold 2";
  TopkRules both = masked;
  both.short_rows_any_order = true;
  EXPECT_EQ(with({2, 0, -1, -1}, {1.0, ninf, 2.0}, both), std::nullopt);
  EXPECT_TRUE(with({2, -1, -1, -1}, {1.0, ninf, 2.0}, both)) << "index 0 (value 1) is live";
}

TEST(TopkRow, ShortRowsHaveExactlyOneAnswer) {
  EXPECT_EQ(row({0, 1, -1, -1}, {9, 9}, 2), std::nullopt);
  EXPECT_EQ(row({0, 1, 2}, {1, 2, 3}, 3), std::nullopt);  // n == k
  EXPECT_EQ(row({-1, -1}, {}, 0), std::nullopt);
  EXPECT_EQ(row({-1, -1}, {}, -3), std::nullopt);  // a negative length is an empty row
  auto bad = row({1, 0, -1}, {5, 6}, 2);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("position 0 holds 1, expected 0"), std::string::npos) << *bad;
  bad = row({0, 1, 2}, {5, 6, 7}, 2);  // -1 only past the row's length, nothing else
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("position 2 holds 2, expected -1"), std::string::npos) << *bad;
}

TEST(TopkRow, MinusInfIsAnOrdinaryLowestCandidate) {
  const std::vector<double> v = {-INFINITY, 1.0, -INFINITY, -INFINITY};
  EXPECT_EQ(row({1, 0}, v, 4), std::nullopt);
  EXPECT_EQ(row({3, 1}, v, 4), std::nullopt);
  EXPECT_TRUE(row({0, 2}, v, 4));
}

TEST(TopkRow, RowsWithNaNOnlyNeedDistinctInRangeIndices) {
  const std::vector<double> v = {NAN, 1.0, 2.0, 3.0};
  EXPECT_EQ(row({0, 1}, v, 4), std::nullopt);
  EXPECT_TRUE(row({0, 0}, v, 4));
  EXPECT_TRUE(row({0, 4}, v, 4));
}

TEST(TopkRow, ValuesPastTheRowLengthNeverMatter) {
  // The kernel saw garbage past n (unclean logits); the checker must not read it either.
  EXPECT_EQ(row({2, 1}, {1.0, 2.0, 3.0, 1e30, NAN}, 3), std::nullopt);
}

TEST(CheckTopk, ChecksEveryRowThroughViewsAndRowStarts) {
  // Prefill form: row r's values start at ks[r]; indices are relative to it.
  std::vector<float> logits = {9, 1, 5, 3, 0, 0,  //
                               0, 0, 4, 8, 2, 6};
  std::vector<int32_t> idx = {0, 2,  //
                              1, 3};
  HostTensor l(logits.data(), View::contiguous(DType::kF32, {2, 6}));
  HostTensor i(idx.data(), View::contiguous(DType::kI32, {2, 2}));
  TopkReport r = check_topk(i, l, {0, 2}, {4, 4});
  EXPECT_TRUE(r.ok) << r.describe();
  EXPECT_EQ(r.rows, 2);
  idx[3] = 2;  // row 1 now takes value 2 and leaves 6 out
  r = check_topk(i, l, {0, 2}, {4, 4});
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.first_bad_row, 1);
  EXPECT_EQ(r.bad_rows, 1);
  EXPECT_NE(r.describe().find("row 1: not the k largest"), std::string::npos) << r.describe();
  EXPECT_THROW(check_topk(i, l, {0}, {4}), Error);
  EXPECT_THROW(check_topk(i, l, {0, 3}, {4, 4}), Error);  // row 1 would span columns [3, 7)
}

TEST(CheckTopk, PoisonedIndicesNeverPass) {
  std::vector<float> logits(8, 1.0f);
  std::vector<int32_t> idx(2, static_cast<int32_t>(0xA5A5A5A5u));
  const TopkReport r = check_topk({idx.data(), View::contiguous(DType::kI32, {1, 2})},
                                  {logits.data(), View::contiguous(DType::kF32, {1, 8})}, {8});
  EXPECT_FALSE(r.ok);
}

}  // namespace
}  // namespace mlacheck
