// Tests of core/tolerances.h: every entry is usable and justified; unknown outputs are an error.
#include "core/tolerances.h"

#include <cstring>

#include <gtest/gtest.h>

namespace mlacheck {
namespace {

TEST(Tolerances, EveryEntryHasAReasonAndSaneBounds) {
  ASSERT_FALSE(tolerance_table().empty());
  for (const ToleranceEntry& e : tolerance_table()) {
    const Tolerance& t = e.tolerance;
    EXPECT_GT(std::strlen(t.reason), 40u) << e.op << "." << e.output;
    EXPECT_GE(t.atol, 0) << e.op;
    // No entry may be so loose that a result off by 1% everywhere passes the cosine step.
    EXPECT_LT(t.max_cosine_distance, 1e-4) << e.op << "." << e.output;
    EXPECT_LT(t.rtol, 1e-2) << e.op << "." << e.output;
    EXPECT_EQ(&tolerance_for(e.op, e.output), &t);
  }
}

TEST(Tolerances, SpecOpsWithFloatOutputsHaveEntries) {
  EXPECT_NO_THROW(tolerance_for("paged_mqa_logits", "logits"));
  EXPECT_NO_THROW(tolerance_for("sparse_mla_decode", "lse"));
  EXPECT_NO_THROW(tolerance_for("mla_decode", "o"));
}

TEST(Tolerances, UnknownOutputNamesTheKnownOnes) {
  try {
    tolerance_for("paged_mqa_logits", "nope");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("known: paged_mqa_logits.logits"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mlacheck
