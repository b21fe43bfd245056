// Tests of core/compare.h: each rule accepts what it should and names the worst element otherwise.
#include "core/compare.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/fp16.h"
#include "core/poison.h"

namespace mlacheck {
namespace {

constexpr Tolerance kTol{1e-3, 1e-2, 1e-4, "test"};

struct Pair {
  std::vector<float> actual;
  std::vector<double> expected;
  explicit Pair(std::vector<double> e) : actual(e.begin(), e.end()), expected(std::move(e)) {}
  HostTensor a(std::vector<int64_t> shape) { return {actual.data(), View::contiguous(DType::kF32, shape)}; }
  HostTensor b(std::vector<int64_t> shape) { return {expected.data(), View::contiguous(DType::kF64, shape)}; }
};

TEST(CompareClose, EqualValuesAndMatchingSpecialsPass) {
  Pair p({1.0, -INFINITY, NAN, INFINITY, 0.0, 2.5});
  const CompareReport r = compare_close(p.a({2, 3}), p.b({2, 3}), kTol);
  EXPECT_TRUE(r.ok) << r.describe();
  EXPECT_EQ(r.elements, 6);
  EXPECT_DOUBLE_EQ(r.cosine_distance, 0.0);
}

TEST(CompareClose, NaNWhereTheReferenceHasMinusInfIsRejected) {
  // A 0/0 in a padding row (vLLM #51065) must not pass as "masked".
  Pair p({1.0, -INFINITY, 3.0, -INFINITY});
  p.actual[3] = NAN;
  const CompareReport r = compare_close(p.a({2, 2}), p.b({2, 2}), kTol);
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.worst, (std::vector<int64_t>{1, 1}));
  EXPECT_NE(r.what.find("got NaN (nan), expected -inf"), std::string::npos) << r.what;
}

TEST(CompareClose, FiniteWhereTheReferenceHasInfIsRejected) {
  Pair p({-INFINITY, 0.0});
  p.actual[0] = -3.0e38f;
  const CompareReport r = compare_close(p.a({2}), p.b({2}), kTol);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.what.find("expected -inf"), std::string::npos) << r.what;
}

TEST(CompareClose, ElementwiseRuleReportsTheWorstElement) {
  Pair p({1.0, 2.0, 3.0, 100.0});
  p.actual[1] = 2.05f;   // allowed 1e-3 + 2e-2 = 0.021: 2.4x over
  p.actual[3] = 101.5f;  // allowed 1.001: 1.5x over
  const CompareReport r = compare_close(p.a({4}), p.b({4}), kTol);
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.mismatches, 2);
  EXPECT_EQ(r.worst, (std::vector<int64_t>{1}));
  EXPECT_FLOAT_EQ(static_cast<float>(r.worst_actual), 2.05f);
  EXPECT_NE(r.what.find("2 of 4 elements exceed"), std::string::npos) << r.what;
}

TEST(CompareClose, ElementwiseBoundIsInclusiveAndUsesTheExpectedMagnitude) {
  const Tolerance t{0.0, 0.5, 1.0, "test"};
  std::vector<double> a = {3.0}, b = {2.0};  // |3-2| = 1 <= 0.5*|2|
  EXPECT_TRUE(compare_close({a.data(), View::contiguous(DType::kF64, {1})},
                            {b.data(), View::contiguous(DType::kF64, {1})}, t).ok);
  std::vector<double> a2 = {3.0}, b2 = {2.0 - 1e-9};  // 1 + 1e-9 > 0.5 * |2 - 1e-9|
  EXPECT_FALSE(compare_close({a2.data(), View::contiguous(DType::kF64, {1})},
                             {b2.data(), View::contiguous(DType::kF64, {1})}, t).ok);
  std::vector<double> a3 = {0.0}, b3 = {1.0};  // 1 > 0.5
  EXPECT_FALSE(compare_close({a3.data(), View::contiguous(DType::kF64, {1})},
                             {b3.data(), View::contiguous(DType::kF64, {1})}, t).ok);
}

TEST(CompareClose, CosineDistanceCatchesASmallSystematicError) {
  // Every element within the loose elementwise bound, but the whole vector is off by 0.9%.
  std::vector<double> e(64);
  for (size_t i = 0; i < e.size(); ++i) e[i] = std::sin(static_cast<double>(i));
  Pair p(e);
  for (size_t i = 0; i < e.size(); i += 2) p.actual[i] = static_cast<float>(e[i] * 1.009);
  for (size_t i = 1; i < e.size(); i += 2) p.actual[i] = static_cast<float>(e[i] * 0.991);
  const Tolerance t{1e-3, 1e-2, 1e-6, "test"};
  const CompareReport r = compare_close(p.a({64}), p.b({64}), t);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.what.find("cosine distance"), std::string::npos) << r.what;
  EXPECT_GT(r.cosine_distance, 1e-6);
  EXPECT_LT(r.cosine_distance, 1e-4);
}

TEST(CompareClose, ErrorsWithinTheAbsoluteBudgetDoNotCountAgainstTheCosineRule) {
  // The case that showed it: a row with one key has lse = its score, here a dot product of 576
  // terms of magnitude ~0.01 that cancels to 0.072; fp32 leaves 5e-6 of error, within atol 1e-5,
  // but 2.4e-9 as a plain cosine distance, over the lse limit of 1e-9.
  Pair p({0.072});
  p.actual[0] = static_cast<float>(0.072 + 5e-6);
  const Tolerance t{1e-5, 1e-6, 1e-9, "test"};
  const CompareReport r = compare_close(p.a({1}), p.b({1}), t);
  EXPECT_TRUE(r.ok) << r.what;
  EXPECT_EQ(r.cosine_distance, 0.0);
  // With atol = 0 the distance is the plain cosine distance, and the same error fails.
  const CompareReport strict = compare_close(p.a({1}), p.b({1}), Tolerance{0, 1e-3, 1e-9, "test"});
  EXPECT_FALSE(strict.ok);
  const double a = p.actual[0], b = 0.072;
  EXPECT_NEAR(strict.cosine_distance, 1.0 - 2.0 * a * b / (a * a + b * b), 1e-15);
}

TEST(CompareClose, AllPoisonOutputNeverPasses) {
  Pair p({1.0, 2.0});
  p.actual = {NAN, NAN};  // the poison an unwritten output keeps
  EXPECT_FALSE(compare_close(p.a({2}), p.b({2}), kTol).ok);
}

// An element still holding the testbed's output poison is named as never written; another NaN is
// named by its value.
TEST(CompareClose, TheOutputPoisonIsNamedAsNeverWritten) {
  Pair p({1.0, 2.0, 3.0});
  poison_output(p.a({3}));
  p.actual[1] = NAN;  // a NaN the kernel wrote
  const CompareReport r = compare_close(p.a({3}), p.b({3}), kTol);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.describe().find("first at [0]: got NaN (the output poison: never written)"), std::string::npos)
      << r.describe();
  EXPECT_NE(r.describe().find("2 of them hold the output poison"), std::string::npos) << r.describe();
  Pair q({1.0});
  q.actual[0] = NAN;
  EXPECT_EQ(compare_close(q.a({1}), q.b({1}), kTol).describe().find("poison"), std::string::npos);
}

TEST(CompareClose, Bf16AgainstFp64AndShapeMismatch) {
  std::vector<uint16_t> a = {float_to_bf16(1.0f), float_to_bf16(3.0f)};
  std::vector<double> b = {1.0, 3.0};
  HostTensor ta(a.data(), View::contiguous(DType::kBF16, {2}));
  EXPECT_TRUE(compare_close(ta, {b.data(), View::contiguous(DType::kF64, {2})}, kTol).ok);
  const CompareReport r = compare_close(ta, {b.data(), View::contiguous(DType::kF64, {1, 2})}, kTol);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.what.find("shape mismatch"), std::string::npos);
}

TEST(CompareExact, IntegersMustMatchExactly) {
  std::vector<int32_t> a = {0, 1, 2, -1, 5, 6}, b = a;
  HostTensor ta(a.data(), View::contiguous(DType::kI32, {2, 3}));
  HostTensor tb(b.data(), View::contiguous(DType::kI32, {2, 3}));
  EXPECT_TRUE(compare_exact(ta, tb).ok);
  a[4] = 4;
  const CompareReport r = compare_exact(ta, tb);
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.worst, (std::vector<int64_t>{1, 1}));
  EXPECT_NE(r.what.find("1 of 6 elements differ (exact comparison); first at [1, 1]: got 4, expected 5"),
            std::string::npos)
      << r.what;
}

TEST(CompareExact, ComparesThroughStridedViews) {
  std::vector<int32_t> padded = {1, 2, 99, 3, 4, 98};  // [2, 2] rows of stride 3
  std::vector<int32_t> dense = {1, 2, 3, 4};
  EXPECT_TRUE(compare_exact({padded.data(), View(DType::kI32, {2, 2}, {3, 1})},
                            {dense.data(), View::contiguous(DType::kI32, {2, 2})}).ok);
}

// Two views of one shape, laid out differently (a padded, offset, transposed-stride one against a
// dense one): every element is paired with its own, across every carry of the index, and the worst
// one is named by its coordinates.
TEST(CompareClose, PairsElementsThroughDifferentLayoutsInEveryDimension) {
  const std::vector<int64_t> shape{2, 3, 4};
  std::vector<float> dense(24), odd(2 + 2 * 40, -7.0f);
  const View dv = View::contiguous(DType::kF32, shape);
  const View ov(DType::kF32, shape, {40, 1, 3}, 2 * 4);  // dims 1 and 2 swapped in memory, padded rows
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      for (int64_t k = 0; k < 4; ++k) {
        const float v = static_cast<float>(100 * i + 10 * j + k);
        dense[static_cast<size_t>(i * 12 + j * 4 + k)] = v;
        HostTensor(odd.data(), ov).at<float>({i, j, k}) = v;
      }
    }
  }
  EXPECT_TRUE(compare_close({odd.data(), ov}, {dense.data(), dv}, kTol).ok);
  EXPECT_TRUE(compare_exact({odd.data(), ov}, {dense.data(), dv}).ok);
  HostTensor(odd.data(), ov).at<float>({1, 2, 3}) += 5.0f;  // the last element, after every carry
  HostTensor(odd.data(), ov).at<float>({1, 0, 0}) += 2.0f;  // right after the outermost carry
  const CompareReport r = compare_close({odd.data(), ov}, {dense.data(), dv}, kTol);
  EXPECT_EQ(r.mismatches, 2) << r.what;
  EXPECT_EQ(r.worst, (std::vector<int64_t>{1, 2, 3})) << r.what;
  EXPECT_EQ(r.elements, 24);
  const CompareReport e = compare_exact({odd.data(), ov}, {dense.data(), dv});
  EXPECT_EQ(e.mismatches, 2) << e.what;
  EXPECT_EQ(e.worst, (std::vector<int64_t>{1, 0, 0})) << e.what;
}

TEST(MoveBySlack, MovesTowardTheWantedValueByAtMostTheSlackAndNeverPastIt) {
  std::vector<double> got = {1.5, 0.5, 2.0, NAN, 7.0, 3.0};
  const std::vector<double> want = {1.0, 1.0, 2.0, 1.0, INFINITY, 1.0};
  const std::vector<double> slack = {0.2, 1.0, 0.5, 1.0, 1.0, 0.0};
  EXPECT_TRUE(move_by_slack(got, want, slack));
  EXPECT_DOUBLE_EQ(got[0], 1.3);  // 0.5 away, moved 0.2
  EXPECT_DOUBLE_EQ(got[1], 1.0);  // within its slack: lands on want, not past it
  EXPECT_DOUBLE_EQ(got[2], 2.0);
  EXPECT_TRUE(std::isnan(got[3])) << "non-finite values stay";
  EXPECT_EQ(got[4], 7.0) << "an infinite wanted value moves nothing";
  EXPECT_EQ(got[5], 3.0) << "no slack, no move";
  std::vector<double> same = {1.0};
  EXPECT_FALSE(move_by_slack(same, {1.0}, {0.5})) << "nothing moved";
  EXPECT_THROW(move_by_slack(same, {1.0, 2.0}, {0.5}), Error);
}

// Two runs of one exact value, each as far from it as the oracle comparison allows (its slack plus
// atol + rtol |exact|), on opposite sides: twice that apart passes, and a little more fails, with
// the worst element named. What the H200 campaign found: two orders of one sparse row 1.008x the
// table's tolerance apart, each within it of the oracle, reported by the one-sided rule.
TEST(CompareRuns, TwoRunsMayBeTwiceTheOracleAllowanceApartAndNoMore) {
  const Tolerance tol{1e-5, 1e-6, 1e-9, "test"};
  const std::vector<double> exact = {-0.0180750, 3.8352415, INFINITY};
  const std::vector<double> slack = {0.0, 2e-6, 0.0};
  auto allowance = [&](size_t i) { return slack[i] + tol.atol + tol.rtol * std::abs(exact[i]); };
  auto runs = [&](double fraction) {
    std::vector<double> before = exact, after = exact;
    for (size_t i = 0; i < 2; ++i) {
      before[i] = exact[i] - fraction * allowance(i);
      after[i] = exact[i] + fraction * allowance(i);
    }
    return compare_runs(after, before, exact, slack, {3}, tol);
  };
  EXPECT_TRUE(runs(0.99).ok) << runs(0.99).what;
  EXPECT_FALSE(compare_close(HostTensor(std::vector<double>{exact[0] + 0.6 * allowance(0)}.data(),
                                        View::contiguous(DType::kF64, {1})),
                             HostTensor(std::vector<double>{exact[0] - 0.6 * allowance(0)}.data(),
                                        View::contiguous(DType::kF64, {1})),
                             tol)
                   .ok)
      << "the one-sided rule this replaces fails runs 1.2x the table's tolerance apart";
  const CompareReport r = runs(1.02);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.mismatches, 2) << r.what;
  // Special values must match in place, whatever the slack.
  EXPECT_FALSE(compare_runs({1.0, 2.0, 5.0}, {1.0, 2.0, INFINITY}, exact, slack, {3}, tol).ok);
  EXPECT_THROW(compare_runs({1.0}, {1.0, 2.0}, exact, slack, {3}, tol), Error);
}

// Verdicts print values at nine digits: two fp32 values an ulp apart print apart (at six they would not).
TEST(CompareText, ValuesAnUlpApartPrintApart) {
  const float a = 0.141741f, b = std::nextafter(a, 1.0f);
  EXPECT_NE(value_text(a), value_text(b));
  EXPECT_EQ(value_text(0.5), "0.5");
}

}  // namespace
}  // namespace mlacheck
