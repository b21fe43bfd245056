// Property tests of core/view.h: reshape agrees with brute force; slice/select/transpose address
// the elements they claim.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/error.h"
#include "properties/view_gen.h"
#include "properties/view_properties.h"

namespace mlacheck {
namespace {

RC_GTEST_PROP(ViewProperty, ReshapeIsAViewExactlyWhenStridesCanExpressIt, ()) {
  const View v = *gen::view();
  const std::vector<int64_t> shape = *gen::reshape_target(v.numel());
  const Verdict bad = reshape_matches_brute_force(v, shape);
  RC_ASSERT(!bad.has_value());
  bool refused = false;
  try {
    v.reshape(shape);
  } catch (const Error&) {
    refused = true;
  }
  RC_TAG(v.is_contiguous() ? "contiguous source" : "strided source", refused ? "refused" : "viewed");
}

RC_GTEST_PROP(ViewProperty, SliceSelectTransposeAddressTheirElements, ()) {
  const View v = *gen::view();
  RC_PRE(v.rank() > 0);
  const int dim = *rc::gen::inRange(0, v.rank());
  const int64_t start = *rc::gen::inRange<int64_t>(0, v.size(dim) + 1);
  const int64_t stop = *rc::gen::inRange<int64_t>(start, v.size(dim) + 1);
  const int64_t step = *rc::gen::inRange<int64_t>(1, 4);
  const Verdict bad = view_ops_address_correctly(v, dim, start, stop, step);
  RC_ASSERT(!bad.has_value());
}

// The brute force itself must tell viewable from not: a transposed matrix cannot be flattened,
// its contiguous source can.
TEST(ViewProperty, BruteForceKnowsAViewableReshapeFromAnImpossibleOne) {
  const View m = View::contiguous(DType::kF32, {3, 4});
  EXPECT_TRUE(brute_force_reshape_strides(m, {12}).has_value());
  EXPECT_FALSE(brute_force_reshape_strides(m.transpose(0, 1), {12}).has_value());
  EXPECT_FALSE(brute_force_reshape_strides(m, {5, 2}).has_value());
}

}  // namespace
}  // namespace mlacheck
