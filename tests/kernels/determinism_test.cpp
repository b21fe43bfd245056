// Determinism in ctest (docs/bugs.md D1, D3, D4): every op whose results could depend on the order
// its threads arrive in is launched again and again on cases chosen to expose order (dense MLA with
// 8 to 32 splits over rows of unequal length; sparse MLA over rows of unequal length; indexer
// logits with many head slots; top-k rows of ties, long and split), the later launches under
// shuffled schedules on the host, and compared bit for bit (a top-k row as a set): the
// `<op>.deterministic` property of `mlacheck check`. The reference passes; the seeded variants
// whose sums or ties follow arrival order fail, by the executor's float-atomic order check
// ("order: ...") or by the launches' bits ("nondeterministic: ...").
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <string>
#include <vector>

#include "harness/property.h"
#include "properties/mla_decode_gen.h"
#include "properties/mqa_logits_gen.h"
#include "properties/property_registry.h"
#include "properties/sparse_mla_gen.h"
#include "properties/topk_gen.h"

namespace mlacheck {
namespace {

constexpr uint64_t kCases = 10;  // per op: fixed seeds, so a run is the same run every time

template <class Case>
Case draw(const rc::Gen<Case>& g, uint64_t seed, int size = 40) {
  return g(rc::Random(seed), size).value();
}

// The verdict of `property` (an <op>.deterministic) on impl for the case text t.
Verdict run(CaseText t, const std::string& property, const std::string& impl) {
  t.set("property", property);
  return run_case_text(CaseText::parse(t.format()), "host", impl).verdict;
}

bool order_verdict(const Verdict& v) {
  return v && (v->rfind("order: ", 0) == 0 || v->rfind("nondeterministic: ", 0) == 0);
}

// Dense MLA with many splits: 8 to 32, as many as the case's workspace allows.
std::vector<CaseText> dense_cases() {
  std::vector<CaseText> out;
  for (uint64_t seed = 1; out.size() < kCases && seed < 100; ++seed) {
    MlaDecodeCase c = draw(gen::mla_decode_case(gen::MlaDecodeSize::kLight), seed);
    const int64_t most = c.most_splits();
    if (most < 8 || c.max_len() < 16) continue;
    c.num_splits = std::min<int64_t>(most, 8 + static_cast<int64_t>((seed * 7) % 25));
    CaseText t = case_header("mla_decode.deterministic", "mla_decode@ref");
    mla_decode_to_text(c, t);
    out.push_back(t);
  }
  return out;
}

TEST(Determinism, DenseMlaWithManySplitsWritesTheSameBitsEveryLaunch) {
  const std::vector<CaseText> cases = dense_cases();
  ASSERT_EQ(cases.size(), kCases);
  int killed = 0;
  for (const CaseText& t : cases) {
    EXPECT_EQ(run(t, "mla_decode.deterministic", "mla_decode@ref"), std::nullopt) << t.format();
    const Verdict v = run(t, "mla_decode.deterministic", "mla_decode@D4");
    killed += order_verdict(v);
  }
  EXPECT_EQ(killed, static_cast<int>(kCases)) << "D4 (the merge's sums in arrival order) passed a case of many splits";
}

TEST(Determinism, SparseMlaOverRowsOfUnequalLengthWritesTheSameBitsEveryLaunch) {
  for (uint64_t seed = 1; seed <= kCases; ++seed) {
    SparseMlaCase c = draw(gen::sparse_mla_case(), seed);
    CaseText t = case_header("sparse_mla_decode.deterministic", "sparse_mla_decode@ref");
    sparse_mla_to_text(c, t);
    EXPECT_EQ(run(t, "sparse_mla_decode.deterministic", "sparse_mla_decode@ref"), std::nullopt) << t.format();
  }
}

TEST(Determinism, IndexerLogitsWithManyHeadSlotsWriteTheSameBitsEveryLaunch) {
  int killed = 0, drawn = 0;
  for (uint64_t seed = 1; drawn < static_cast<int>(kCases) && seed < 200; ++seed) {
    const PagedLogitsCase c = draw(gen::paged_logits_case(gen::PagedCaseShape{false, true, false}), seed);
    if (c.H < 5) continue;  // at least two head slots sum each logit
    ++drawn;
    CaseText t = case_header("paged_mqa_logits.deterministic", "paged_mqa_logits@ref");
    paged_logits_to_text(c, t);
    EXPECT_EQ(run(t, "paged_mqa_logits.deterministic", "paged_mqa_logits@ref"), std::nullopt) << t.format();
    killed += order_verdict(run(t, "paged_mqa_logits.deterministic", "paged_mqa_logits@D1"));
  }
  ASSERT_EQ(drawn, static_cast<int>(kCases));
  // A case whose head sums never round (ReLU zeros, exact partial sums) has no order to show; most do.
  EXPECT_GE(killed, drawn / 2) << "D1 (head sums in arrival order) passed most cases of several head slots";
  for (uint64_t seed = 1; seed <= kCases; ++seed) {
    const PrefillLogitsCase c = draw(gen::prefill_logits_case(), seed);
    CaseText t = case_header("mqa_logits.deterministic", "mqa_logits@ref");
    prefill_logits_to_text(c, t);
    EXPECT_EQ(run(t, "mqa_logits.deterministic", "mqa_logits@ref"), std::nullopt) << t.format();
  }
}

// Top-k rows of ties (few values, all equal) on every path: long rows (the radix passes), rows split
// across blocks, and the k = 2048 path; decode and prefill.
TEST(Determinism, TopkRowsOfTiesSelectTheSameSetEveryLaunch) {
  int killed = 0, cases = 0;
  const std::vector<rc::Gen<TopkCase>> gens = {
      gen::topk_long_row_case(TopkLengths::kDecode1D), gen::topk_long_row_case(TopkLengths::kPrefill),
      gen::topk_split_row_case(), gen::topk_fast_k_case(TopkLengths::kDecode2D)};
  for (size_t g = 0; g < gens.size(); ++g) {
    for (uint64_t seed = 1; seed <= 2; ++seed) {
      TopkCase c = draw(gens[g], seed, 20);
      for (size_t r = 0; r < c.patterns.size(); ++r) {
        c.patterns[r] = (r + seed) % 2 ? TopkPattern::kAllEqual : TopkPattern::kFewValues;
      }
      c.explicit_rows.clear();
      const std::string op = c.prefill() ? "topk_prefill" : "topk_decode";
      CaseText t = case_header(op + ".deterministic", op + "@ref");
      topk_to_text(c, t);
      ++cases;
      EXPECT_EQ(run(t, op + ".deterministic", op + "@ref"), std::nullopt) << t.format();
      if (op == "topk_decode") killed += order_verdict(run(t, op + ".deterministic", "topk_decode@D3"));
    }
  }
  EXPECT_GE(killed, 1) << "D3 (ties by arrival) passed every decode case of ties";
}

}  // namespace
}  // namespace mlacheck
