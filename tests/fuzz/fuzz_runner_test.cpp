// Tests of fuzz/fuzz_runner.h: one input through its target's property under the fuzzing budgets,
// as the harnesses and `mlacheck bench fuzz` run it. The reference holds on random inputs, a seeded
// variant is a violation with its verdict and case, a ref-only property is skipped for another
// implementation, and a case past the memory budget is skipped, not run.
#include "fuzz/fuzz_runner.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>

#include "kernels/device.h"

namespace mlacheck::fuzz {
namespace {

std::string random_input(std::mt19937_64& rng) {
  std::string s(std::uniform_int_distribution<size_t>(1, 64)(rng), '\0');
  for (char& ch : s) ch = static_cast<char>(rng() % 4 == 0 ? rng() % 256 : rng() % 16);
  return s;
}

std::map<FuzzOutcome::Kind, int> run_many(FuzzRunner& runner, int n, std::string* first_violation = nullptr,
                                          std::string* its_case = nullptr) {
  std::mt19937_64 rng(7);
  std::map<FuzzOutcome::Kind, int> kinds;
  for (int i = 0; i < n; ++i) {
    const FuzzOutcome o = runner.run(random_input(rng));
    ++kinds[o.kind];
    if (o.kind == FuzzOutcome::kViolation && first_violation != nullptr && first_violation->empty()) {
      *first_violation = o.verdict;
      if (its_case != nullptr) *its_case = o.fc.text.format();
    }
  }
  return kinds;
}

TEST(FuzzRunner, TheReferenceHoldsOnRandomInputs) {
  const auto device = kernels::make_device(Backend::kHost);
  for (const char* target : {"topk_to_global", "decode_metadata"}) {
    FuzzRunner runner(find_fuzz_target(target), std::string(target) + "@ref", "host", *device, {});
    std::string violation;
    const auto kinds = run_many(runner, 200, &violation);
    EXPECT_EQ(kinds.count(FuzzOutcome::kViolation), 0u) << target << ": " << violation;
    EXPECT_GT(kinds.count(FuzzOutcome::kChecked) ? kinds.at(FuzzOutcome::kChecked) : 0, 100) << target;
  }
}

TEST(FuzzRunner, ASeededVariantIsAViolationWithItsVerdictAndCase) {
  const auto device = kernels::make_device(Backend::kHost);
  FuzzRunner runner(find_fuzz_target("topk_to_global"), "topk_to_global@S1", "host", *device, {});
  std::string violation, text;
  const auto kinds = run_many(runner, 300, &violation, &text);
  ASSERT_GT(kinds.count(FuzzOutcome::kViolation), 0u);
  EXPECT_NE(violation.find("the oracle says -1"), std::string::npos) << violation;
  EXPECT_NE(text.find("impl topk_to_global@S1"), std::string::npos) << text;
  EXPECT_NE(text.find("property topk_to_global."), std::string::npos) << text;
}

TEST(FuzzRunner, RefOnlyPropertiesAreSkippedForAnotherImplementationAndLargeCasesByTheBudget) {
  const auto device = kernels::make_device(Backend::kHost);
  // topk_decode has ref-only properties (the fast path against the general one): R4 skips them.
  FuzzRunner variant(find_fuzz_target("topk_decode"), "topk_decode@R4", "host", *device, {});
  const auto kinds = run_many(variant, 200);
  EXPECT_GT(kinds.count(FuzzOutcome::kSkipped), 0u);
  // A budget of one byte leaves no top-k case room for its buffers: every decoded case is skipped.
  FuzzBudgets tiny;
  tiny.bytes = 1;
  FuzzRunner small(find_fuzz_target("topk_decode"), "topk_decode@ref", "host", *device, tiny);
  const auto none = run_many(small, 50);
  EXPECT_EQ(none.count(FuzzOutcome::kChecked), 0u);
  EXPECT_EQ(none.count(FuzzOutcome::kViolation), 0u);
}

// Past the work budget, a case is large (skipped) or a hang (a violation): <op>@ref's steps on the
// same case tell them apart. H2 walks 2^27 tiles of an empty row, far past the budget, where the
// reference takes a few hundred steps: a hang, in any build. A correct variant under a budget its
// cases need is only ever skipped.
TEST(FuzzRunner, PastTheWorkBudgetAHangIsToldFromALargeCaseByTheReferencesWork) {
  const auto device = kernels::make_device(Backend::kHost);
  FuzzRunner h2(find_fuzz_target("sparse_mla_decode"), "sparse_mla_decode@H2", "host", *device, {});
  // corpus/regressions/H1-sparse-mla-empty-row-ends.case: one row with topk_length 0.
  std::ifstream in(std::string(MLACHECK_SOURCE_DIR) + "/corpus/regressions/H1-sparse-mla-empty-row-ends.case");
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(file.empty());
  const FuzzOutcome o = h2.run(encode_fuzz_input(file));
  ASSERT_EQ(o.kind, FuzzOutcome::kViolation) << o.fc.text.format();
  const std::string violation = o.verdict;
  EXPECT_EQ(violation.rfind("hang: the case's kernels took over 200000 thread steps, more than 16 times the ", 0), 0u)
      << violation;
  EXPECT_NE(violation.find("sparse_mla_decode@ref takes on it"), std::string::npos) << violation;
  FuzzBudgets tight;
  tight.max_steps = 3000;  // most cases need more: the reference's own work is past a sixteenth of it
  FuzzRunner w2(find_fuzz_target("sparse_mla_decode"), "sparse_mla_decode@W2", "host", *device, tight);
  const auto large = run_many(w2, 40);
  EXPECT_EQ(large.count(FuzzOutcome::kViolation), 0u);
  EXPECT_GT(large.count(FuzzOutcome::kSkipped), 0u);
}

}  // namespace
}  // namespace mlacheck::fuzz
