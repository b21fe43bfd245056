// Tests of tools/suite_runner.h: a kernel that loses the device context (mlacheck::ContextLost, as a
// CUDA sticky fault throws) is a failure "crashed (<fault>)" with the case it ran, never a setup
// error; the case reruns; a kernel that never returns is a "hang" with its case once it runs
// past the case timeout, under every budget (a case under way when the budget ends is given the
// case timeout), and a slow case that ends is judged and the row ends with it; every property is
// judged (a crash in one does not end the others); a correct implementation passes.
#include "tools/suite_runner.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include "core/error.h"
#include "kernels/registry.h"
#include "kernels/topk_glue.h"
#include "harness/case_text.h"
#include "harness/memory_budget.h"
#include "properties/property_registry.h"

namespace mlacheck {
namespace {

// The correct top-k, except that a batch of more than one request loses the context, as a kernel
// with an illegal address does on cuda (the fault surfaces at the next synchronization).
kernels::TopkPath lose_context_on_batches(kernels::Device& device, const kernels::DeviceTensor& logits, int64_t next_n,
                                          const kernels::DeviceTensor& seq_lens, int64_t k,
                                          const kernels::DeviceTensor& out, const kernels::DeviceTensor& workspace,
                                          const kernels::DeviceTensor& counts) {
  if (seq_lens.view.size(0) > 1) {
    throw ContextLost("cudaStreamSynchronize: cudaErrorIllegalAddress (an illegal memory access was encountered)",
                      "cudaErrorIllegalAddress");
  }
  return kernels::topk_per_row_decode(device, logits, next_n, seq_lens, k, out, workspace, counts);
}

// The correct top-k, except that a batch of more than one request never returns (a kernel spinning
// on a flag no block sets).
kernels::TopkPath hang_on_batches(kernels::Device& device, const kernels::DeviceTensor& logits, int64_t next_n,
                                  const kernels::DeviceTensor& seq_lens, int64_t k, const kernels::DeviceTensor& out,
                                  const kernels::DeviceTensor& workspace, const kernels::DeviceTensor& counts) {
  while (seq_lens.view.size(0) > 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return kernels::topk_per_row_decode(device, logits, next_n, seq_lens, k, out, workspace, counts);
}

// The correct top-k, 0.7 s a call (a slow, correct kernel: one of its calls is under way at any
// moment, the end of a 1 s budget included).
kernels::TopkPath slow_on_batches(kernels::Device& device, const kernels::DeviceTensor& logits, int64_t next_n,
                                  const kernels::DeviceTensor& seq_lens, int64_t k, const kernels::DeviceTensor& out,
                                  const kernels::DeviceTensor& workspace, const kernels::DeviceTensor& counts) {
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  return kernels::topk_per_row_decode(device, logits, next_n, seq_lens, k, out, workspace, counts);
}

// The correct top-k, then its first index made -7 (a wrong answer, not a crash).
kernels::TopkPath wrong_first_index(kernels::Device& device, const kernels::DeviceTensor& logits, int64_t next_n,
                                    const kernels::DeviceTensor& seq_lens, int64_t k, const kernels::DeviceTensor& out,
                                    const kernels::DeviceTensor& workspace, const kernels::DeviceTensor& counts) {
  const kernels::TopkPath path = kernels::topk_per_row_decode(device, logits, next_n, seq_lens, k, out, workspace, counts);
  if (out.view.numel() > 0) *out.data<int32_t>() = -7;
  return path;
}

void register_once() {
  static const bool done = [] {
    kernels::registry().add({"topk_decode", "test_wrong", "test only: its first index -7"}, &wrong_first_index);
    kernels::registry().add({"topk_decode", "test_slow", "test only: 0.7 s a call"}, &slow_on_batches);
    kernels::registry().add({"topk_decode", "test_context_lost", "test only: loses the context on batches"},
                            &lose_context_on_batches);
    kernels::registry().add({"topk_decode", "test_hang", "test only: never returns on batches"}, &hang_on_batches);
    return true;
  }();
  (void)done;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(SuiteRunner, ALostContextIsAFailureWithItsCaseNotASetupError) {
  register_once();
  SuiteOptions o;
  o.budget = 10;
  o.cases = 3;
  const SuiteResult r = run_suite(o, "topk_decode@test_context_lost");
  ASSERT_TRUE(r.failed);
  EXPECT_EQ(r.first.check, "crashed (cudaErrorIllegalAddress)");
  EXPECT_NE(r.first.verdict.find("illegal memory access"), std::string::npos) << r.first.verdict;
  EXPECT_NE(r.first.verdict.find("(during "), std::string::npos) << r.first.verdict;
  EXPECT_EQ(r.false_positives, 0) << r.false_positive;
  // The case is whole, names the implementation, and fails again when rerun (in this process the
  // test implementation only throws: no context is really lost).
  ASSERT_FALSE(r.first.case_text.empty());
  const CaseText c = CaseText::parse(r.first.case_text);
  EXPECT_EQ(c.word("impl"), "topk_decode@test_context_lost");
  const ReproResult again = run_case_text(c);
  ASSERT_TRUE(again.verdict.has_value());
  EXPECT_EQ(again.fault, "cudaErrorIllegalAddress");
  EXPECT_EQ(again.verdict->rfind("crashed (cudaErrorIllegalAddress): ", 0), 0u) << *again.verdict;
  // The reference passes the same case.
  EXPECT_FALSE(run_case_text(c, "", "topk_decode@ref").verdict.has_value());
}

TEST(SuiteRunner, ACaseThatNeverEndsIsTimedOutWithItsCase) {
  register_once();
  SuiteOptions o;
  o.budget = 30;
  o.cases = 3;
  o.case_timeout = 2;
  const auto t0 = std::chrono::steady_clock::now();
  const SuiteResult r = run_suite(o, "topk_decode@test_hang");
  ASSERT_TRUE(r.failed) << r.budget_note << r.false_positive;
  EXPECT_EQ(r.first.check, "hang");
  EXPECT_NE(r.first.verdict.find("case timeout of 2 s"), std::string::npos) << r.first.verdict;
  EXPECT_EQ(r.false_positives, 0) << r.false_positive;
  ASSERT_FALSE(r.first.case_text.empty());
  EXPECT_EQ(CaseText::parse(r.first.case_text).word("impl"), "topk_decode@test_hang");
  // Found by the case timeout (and 8 s alone to confirm it), long before the budget.
  EXPECT_LT(seconds_since(t0), 25.0);
}

// A budget shorter than the case timeout still tells a hang: the case under way when the budget
// ends runs on to the case timeout, and is FAIL hang, never a pass and never "not judged".
TEST(SuiteRunner, AHangIsAFailureUnderABudgetShorterThanTheCaseTimeout) {
  register_once();
  SuiteOptions o;
  o.budget = 1;
  o.cases = 3;
  o.case_timeout = 2;
  const auto t0 = std::chrono::steady_clock::now();
  const SuiteResult r = run_suite(o, "topk_decode@test_hang");
  const double took = seconds_since(t0);
  ASSERT_TRUE(r.failed) << r.budget_note;
  EXPECT_EQ(r.first.check, "hang");
  EXPECT_NE(r.first.verdict.find("case timeout of 2 s"), std::string::npos) << r.first.verdict;
  EXPECT_NE(r.first.verdict.find("run again alone for 8 s (4 times the case timeout), it did not end either"),
            std::string::npos) << r.first.verdict;
  EXPECT_FALSE(r.passed());
  // The case timeout for the case under way, then four times it alone, with room for a loaded
  // machine; without the judged last case the row would end at 1 s "not judged".
  EXPECT_GE(took, 9.9);
  EXPECT_LT(took, 18.0);
}

// A slow case under way when the budget ends is judged when it ends, and the row ends with it: the
// budget holds up to that case.
TEST(SuiteRunner, ASlowCaseUnderWayWhenTheBudgetEndsIsJudgedAndTheRowEndsWithIt) {
  register_once();
  SuiteOptions o;
  o.budget = 1;
  o.cases = 3;
  o.case_timeout = 30;
  const auto t0 = std::chrono::steady_clock::now();
  const SuiteResult r = run_suite(o, "topk_decode@test_slow");
  const double took = seconds_since(t0);
  EXPECT_FALSE(r.failed) << r.first.check << ": " << r.first.verdict;
  EXPECT_TRUE(r.budget_note.empty()) << r.budget_note;
  EXPECT_GT(r.cases_run, 0);
  // The case under way at 1 s ended (no "budget ended during" note) and the row with it: 1 s and
  // one case of 0.7 s at most, with room for a loaded machine; far below the 30 s case timeout.
  EXPECT_GE(took, 1.05);
  EXPECT_LT(took, 8.0);
}

// A case past the case timeout that ends when run again alone with four times as long is a slow
// case, never a hang: counted, the row goes on and passes.
TEST(SuiteRunner, ACasePastTheCaseTimeoutThatEndsAloneIsSlowNotAHang) {
  register_once();
  SuiteOptions o;
  o.budget = 10;
  o.cases = 1;
  o.case_timeout = 1;  // below the 1.4 s and 2.8 s of cases of two and four calls of 0.7 s
  const SuiteResult r = run_suite(o, "topk_decode@test_slow");
  EXPECT_FALSE(r.failed) << r.first.check << ": " << r.first.verdict;
  EXPECT_GE(r.slow_cases, 1);
  EXPECT_NE(r.slow_case.find("a slow case, not a hang"), std::string::npos) << r.slow_case;
  EXPECT_GE(r.slow_cases, 2) << "a slow case does not end the row: a fresh child goes on";
}

// A failing case that took more memory than the budget repro runs under records what it took
// (max_mb), and repro runs it with that budget, where without the record it is refused.
TEST(SuiteRunner, AFailingCaseRecordsTheMemoryItTookForRepro) {
  register_once();
  SuiteOptions o;
  o.budget = 10;
  o.cases = 3;
  set_case_memory_budget_bytes(1);  // below any case's
  const SuiteResult r = run_suite(o, "topk_decode@test_wrong");
  set_case_memory_budget_bytes(0);
  ASSERT_TRUE(r.failed);
  const CaseText c = CaseText::parse(r.first.case_text);
  ASSERT_TRUE(c.has(kMaxMbKey)) << r.first.case_text;
  EXPECT_GE(c.integer(kMaxMbKey, 1, 1 << 20), 1);
  // The same case with the record runs on @ref within any budget's refusal (run_case_text reads the
  // key; the case is not malformed by it).
  EXPECT_FALSE(run_case_text(c, "", "topk_decode@ref").verdict.has_value());
}

// Every property is judged: a kernel that loses the context on every batch crashes in one
// property's case, and a fresh child goes on with the others, each reported with its own case.
TEST(SuiteRunner, ACrashInOnePropertyDoesNotEndTheOthers) {
  register_once();
  SuiteOptions o;
  o.budget = 20;
  o.cases = 3;
  o.every_property = true;
  const SuiteResult r = run_suite(o, "topk_decode@test_context_lost");
  ASSERT_TRUE(r.failed);
  ASSERT_GE(r.more.size(), 1u) << r.first.check << ": " << r.first.verdict;
  std::set<std::string> properties;
  for (const SuiteFinding* f : r.findings()) {
    EXPECT_EQ(f->check, "crashed (cudaErrorIllegalAddress)") << f->verdict;
    EXPECT_FALSE(f->case_text.empty());
    EXPECT_EQ(CaseText::parse(f->case_text).word("property"), f->property);
    EXPECT_TRUE(properties.insert(f->property).second) << f->property << " reported twice";
  }
  EXPECT_EQ(r.properties.size(), 4u);
  // Without every_property (mutants, check --fail-fast) the row ends at the first.
  o.every_property = false;
  o.budget = 5;
  const SuiteResult first_only = run_suite(o, "topk_decode@test_context_lost");
  ASSERT_TRUE(first_only.failed);
  EXPECT_TRUE(first_only.more.empty());
}

TEST(SuiteRunner, TheCorpusIsFoundBesideAnInstalledCommand) {
  namespace fs = std::filesystem;
  ::unsetenv("MLACHECK_CORPUS_DIR");
  EXPECT_EQ(corpus_root("/some/where"), "/some/where");
  // This test binary stands for bin/mlacheck: <its folder>/../share/mlacheck/corpus, once it holds
  // regressions/, is the corpus (a GPU bundle's layout); without it, the source tree's.
  const fs::path exe = fs::read_symlink("/proc/self/exe");
  const fs::path installed = exe.parent_path().parent_path() / "share" / "mlacheck" / "corpus";
  fs::remove_all(exe.parent_path().parent_path() / "share");
  EXPECT_NE(corpus_root(""), installed.string());
  fs::create_directories(installed / "regressions");
  EXPECT_EQ(corpus_root(""), installed.string());
  ::setenv("MLACHECK_CORPUS_DIR", "/from/env", 1);
  EXPECT_EQ(corpus_root(""), "/from/env");
  ::unsetenv("MLACHECK_CORPUS_DIR");
  fs::remove_all(exe.parent_path().parent_path() / "share");
}

// A property left without a case says why: its cases not taken, the first failure stopping the run
// (--fail-fast), or the budget; the GPU run of 2026-12-07 said "the budget ended first" of a 90 s
// budget that --fail-fast had stopped after one case.
TEST(SuiteRunner, APropertyWithoutACaseSaysWhy) {
  SuiteResult r;
  r.op = "topk_decode";
  r.properties = {"topk_decode.rows_admissible", "topk_decode.far_rows", "topk_decode.deterministic"};
  r.failed = true;
  r.first.property = "topk_decode.rows_admissible";
  r.tally["topk_decode.rows_admissible"].cases = 1;
  r.tally["topk_decode.far_rows"].add_not_taken(7, "reserved device memory is not lent on cuda");
  EXPECT_EQ(r.unjudged(), (std::vector<std::string>{"topk_decode.far_rows", "topk_decode.deterministic"}));
  EXPECT_EQ(r.no_case_reason("topk_decode.far_rows"), "7 not taken: reserved device memory is not lent on cuda");
  EXPECT_EQ(r.no_case_reason("topk_decode.deterministic"), "the budget ended first: give a longer --budget");
  r.stopped_at_first_failure = true;
  EXPECT_EQ(r.unjudged_reason(),
            "topk_decode.far_rows: no case ran (7 not taken: reserved device memory is not lent on cuda); "
            "topk_decode.deterministic: no case ran (not run: --fail-fast stopped the check at its first failure)");
}

// run_suite marks a row that --fail-fast (every_property off) stopped at its failure, and only that.
TEST(SuiteRunner, ARowStoppedAtItsFirstFailureIsMarkedSo) {
  SuiteOptions o;
  o.budget = 20;
  o.cases = 2;
  o.fuzz = false;
  const SuiteResult stopped = run_suite(o, "topk_decode@R4");
  ASSERT_TRUE(stopped.failed);
  EXPECT_TRUE(stopped.stopped_at_first_failure);
  o.every_property = true;
  const SuiteResult judged = run_suite(o, "topk_decode@R4");
  ASSERT_TRUE(judged.failed);
  EXPECT_FALSE(judged.stopped_at_first_failure);
  EXPECT_FALSE(run_suite(o, "topk_decode@ref").stopped_at_first_failure);
}

TEST(SuiteRunner, TheReferencePasses) {
  SuiteOptions o;
  o.budget = 3;
  o.cases = 1;
  const SuiteResult r = run_suite(o, "topk_decode@ref");
  EXPECT_FALSE(r.failed) << r.first.check << ": " << r.first.verdict;
  EXPECT_GT(r.cases_run, 0);
}

}  // namespace
}  // namespace mlacheck
