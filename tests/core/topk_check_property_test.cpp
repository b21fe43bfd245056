// Property tests of core/topk_check.h against an independent formulation: a selection is valid
// exactly when its sorted values equal the row's k largest values, sorted.
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/topk_check.h"

namespace mlacheck {
namespace {

// A row of n values drawn from a few levels, so ties are common, with some -inf.
rc::Gen<std::vector<double>> row_values(int64_t n) {
  return rc::gen::container<std::vector<double>>(
      static_cast<size_t>(n), rc::gen::weightedOneOf<double>({{1, rc::gen::just(-static_cast<double>(INFINITY))},
                                                                {6, rc::gen::map(rc::gen::inRange(-3, 4), [](int x) {
                                                                   return static_cast<double>(x) * 0.5;
                                                                 })}}));
}

bool multiset_rule(const std::vector<int32_t>& idx, const std::vector<double>& v) {
  std::vector<double> taken, all = v;
  for (int32_t i : idx) taken.push_back(v[i]);
  std::sort(taken.begin(), taken.end(), std::greater<>());
  std::sort(all.begin(), all.end(), std::greater<>());
  all.resize(idx.size());
  return taken == all;
}

RC_GTEST_PROP(TopkCheckProperty, AcceptsExactlyTheSelectionsWithTheReferenceMultiset, ()) {
  const int64_t n = *rc::gen::inRange<int64_t>(2, 40);
  const int64_t k = *rc::gen::inRange<int64_t>(1, n);
  const std::vector<double> v = *row_values(n);
  // Distinct indices: a random permutation's first k, biased toward the large values half the time.
  std::vector<int32_t> order(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(*rc::gen::arbitrary<uint32_t>()));
  if (*rc::gen::arbitrary<bool>()) {
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return v[a] > v[b]; });
    if (*rc::gen::arbitrary<bool>()) std::swap(order[*rc::gen::inRange<int64_t>(0, k)], order[*rc::gen::inRange<int64_t>(k, n)]);
  }
  std::vector<int32_t> idx(order.begin(), order.begin() + k);
  const bool valid = multiset_rule(idx, v);
  const auto verdict = check_topk_row(idx.data(), k, v.data(), n);
  RC_TAG(valid ? "valid" : "invalid");
  RC_ASSERT(valid == !verdict.has_value());
}

RC_GTEST_PROP(TopkCheckProperty, RejectsDuplicatesAndOutOfRangeEvenInNaNRows, ()) {
  const int64_t n = *rc::gen::inRange<int64_t>(3, 30);
  const int64_t k = *rc::gen::inRange<int64_t>(2, n);
  std::vector<double> v = *row_values(n);
  if (*rc::gen::arbitrary<bool>()) v[*rc::gen::inRange<int64_t>(0, n)] = NAN;
  std::vector<int32_t> idx(static_cast<size_t>(k));
  for (int32_t i = 0; i < k; ++i) idx[i] = i;
  const int64_t p = *rc::gen::inRange<int64_t>(0, k);
  if (*rc::gen::arbitrary<bool>()) {
    idx[p] = idx[(p + 1) % k];  // duplicate
  } else {
    idx[p] = *rc::gen::element<int32_t>(-2, static_cast<int32_t>(n), static_cast<int32_t>(n + 7), INT32_MIN);
  }
  RC_ASSERT(check_topk_row(idx.data(), k, v.data(), n).has_value());
}

}  // namespace
}  // namespace mlacheck
