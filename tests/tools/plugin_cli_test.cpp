// Tests of the commands' --plugin (kernels/plugin.h, tools/check_command.h): the example plugin
// passes `mlacheck check`, its buggy twin fails it with a readable verdict and a case that `repro`
// reruns, `mutants` kills the twin, `fuzz` finds it, and a plugin that cannot be loaded, has another
// ABI version or crashes while registering is one line and exit 2, never a crashed mlacheck.
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <gtest/gtest.h>

#include "tests/support/cli.h"

namespace {

using mlacheck::test::CliResult;
using mlacheck::test::run_mlacheck;

int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

const std::string kGood = EXAMPLE_PLUGIN, kBuggy = EXAMPLE_PLUGIN_BUGGY;

TEST(PluginCli, TheExamplePassesTheWholeSuite) {
  const CliResult r = run_mlacheck("check --plugin " + kGood + " --budget 4");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("topk_decode@example       PASS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("paged_mqa_logits@example  PASS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 of 2 passed"), std::string::npos) << r.out;
}

TEST(PluginCli, TheBuggyTwinFailsWithAVerdictAndACaseThatReproFails) {
  const std::string dir = ::testing::TempDir() + "plugin_cli_check";
  const CliResult r =
      run_mlacheck("check --plugin " + kBuggy + " --impl topk_decode@example_buggy --budget 120 --fail-fast --no-shrink --save " + dir);
  ASSERT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("topk_decode@example_buggy  FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("guard of topk_indices_buffer"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rerun it with `mlacheck repro FILE --plugin"), std::string::npos) << r.out;
  const std::string saved = dir + "/topk_decode-example_buggy.case";
  const CliResult again = run_mlacheck("repro " + saved + " --plugin " + kBuggy);
  EXPECT_EQ(again.status, 1) << again.out;
  EXPECT_NE(again.out.find("FAIL"), std::string::npos) << again.out;
  // The same case on the correct example, and on the reference, holds.
  EXPECT_EQ(run_mlacheck("repro " + saved + " --plugin " + kGood + " --impl topk_decode@example").status, 0);
  EXPECT_EQ(run_mlacheck("repro " + saved + " --impl topk_decode@ref").status, 0);
  // Without the plugin the implementation is unknown: bad input, one line.
  const CliResult unknown = run_mlacheck("repro " + saved);
  EXPECT_EQ(unknown.status, 2);
  EXPECT_EQ(lines(unknown.out), 1) << unknown.out;
}

// A stateful example plugin of examples/stateful_plugin/ and its buggy twin: check PASSes the
// plugin; the twin FAILs with every needle in its report; the twin's saved case FAILs again on the
// twin under repro and PASSes on the plugin.
void expect_example_and_twin(const std::string& op, const std::string& plugin, const std::string& twin,
                             const std::vector<std::string>& needles) {
  const std::string dir = ::testing::TempDir() + "plugin_cli_" + op;
  const CliResult r = run_mlacheck("check --plugin " + plugin + " --budget 8 --no-fuzz --save " + dir);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find(op + "@example  PASS"), std::string::npos) << r.out;
  // The twin's first failure is what is asked (--fail-fast: the others would run to the budget). It
  // is found within seconds; --no-shrink: the case as found is saved and reproduces (shrinking the
  // MLA impl's took 197 tries, 25 s, under the sanitizers).
  const CliResult bug = run_mlacheck("check --plugin " + twin + " --budget 30 --fail-fast --no-shrink --save " + dir);
  EXPECT_EQ(bug.status, 1) << bug.out;
  EXPECT_NE(bug.out.find(op + "@example_buggy  FAIL"), std::string::npos) << bug.out;
  for (const std::string& needle : needles) EXPECT_NE(bug.out.find(needle), std::string::npos) << needle << "\n" << bug.out;
  const std::string saved = dir + "/" + op + "-example_buggy.case";
  const CliResult again = run_mlacheck("repro " + saved + " --plugin " + twin);
  EXPECT_EQ(again.status, 1) << again.out;
  const CliResult fixed = run_mlacheck("repro " + saved + " --plugin " + plugin + " --impl " + op + "@example");
  EXPECT_EQ(fixed.status, 0) << fixed.out;
}

// The builder's twin resets only its own padding: a larger step's rows survive a smaller one.
TEST(PluginCli, AStatefulBuilderPluginPassesAndItsTwinIsCaughtWithCoordinates) {
  expect_example_and_twin("decode_metadata", METADATA_PLUGIN, METADATA_PLUGIN_BUGGY, {" row "});
}

// The MLA impl's twin bounds a graph's keys by the lengths at capture: a replay after they grow is
// wrong. Which comparison of the replay says so first (against the oracle, "step N: replay: mla_decode
// o: ... worst at [...]", or against an eager launch, "step N: replay differs from an eager launch")
// depends on the case the shrinking ends at, which depends on the time it gets.
TEST(PluginCli, AStatefulMlaImplPluginPassesAndItsTwinIsCaughtOnReplay) {
  expect_example_and_twin("mla_decode_impl", MLA_IMPL_PLUGIN, MLA_IMPL_PLUGIN_BUGGY,
                          {"mla_decode_impl.replay_equals_eager: step ", ": replay"});
}

// The decode step's twin runs its flattened top-k over the graph-padded rows into the shared
// buffer's prefill rows: the guard names the row past the view ("at row T, column 0 (past the
// view's T rows)").
TEST(PluginCli, AStatefulDecodeStepPluginPassesAndItsTwinIsCaughtPastTheTokenRows) {
  expect_example_and_twin("indexer_decode_step", DECODE_STEP_PLUGIN, DECODE_STEP_PLUGIN_BUGGY,
                          {"guard of topk_buffer: ", "nearest output view 'decode rows'", " rows)"});
}

// A production-style kernel with its contract declared: PASS, though it breaks outside the contract
// (the probe shows it, never as a failure); its twin's bug inside the contract is caught.
TEST(PluginCli, AProductionStyleKernelPassesInsideItsContract) {
  const std::string dir = ::testing::TempDir() + "plugin_cli_production";
  const CliResult r = run_mlacheck("check --plugin " PRODUCTION_PLUGIN " --budget 8 --contract-probe --save " + dir);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("topk_decode@production  PASS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("declares the contract: k <= 2048; out contiguous; logits padded-rows; seq_lens rank 1; "
                       "seq_lens >= next_n; finite"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("outside the declared contract (probe, never a failure)"), std::string::npos) << r.out;
  const CliResult twin = run_mlacheck("check --plugin " PRODUCTION_PLUGIN_BUGGY " --budget 120 --save " + dir);
  EXPECT_EQ(twin.status, 1) << twin.out;
  EXPECT_NE(twin.out.find("topk_decode@production_buggy  FAIL"), std::string::npos) << twin.out;
  EXPECT_NE(twin.out.find(": position "), std::string::npos) << twin.out;  // row and column
  const CliResult again =
      run_mlacheck("repro " + dir + "/topk_decode-production_buggy.case --plugin " PRODUCTION_PLUGIN_BUGGY);
  EXPECT_EQ(again.status, 1) << again.out;
  // A corpus case outside the contract (2-D lengths): repro says so and runs nothing, unless asked.
  const std::string seed = MLACHECK_SOURCE_DIR "/corpus/topk_decode/rows_admissible-0.case";
  const CliResult outside =
      run_mlacheck("repro " + seed + " --plugin " PRODUCTION_PLUGIN " --impl topk_decode@production");
  EXPECT_EQ(outside.status, 1) << outside.out;  // not run is never a pass
  EXPECT_NE(outside.out.find("OUTSIDE  the case lies outside topk_decode@production's contract"), std::string::npos)
      << outside.out;
  // A folder of which no case ran is not a pass either; the summary counts the outside cases apart.
  const std::string folder = dir + "/outside-only";
  std::filesystem::create_directories(folder);
  std::filesystem::copy_file(seed, folder + "/rows_admissible-0.case", std::filesystem::copy_options::overwrite_existing);
  const CliResult none = run_mlacheck("repro --all " + folder + " --plugin " PRODUCTION_PLUGIN " --impl topk_decode@production");
  EXPECT_EQ(none.status, 1) << none.out;
  EXPECT_NE(none.out.find(": 0 of 1 hold, 0 fail, 1 outside the contract (not run), 0 malformed"), std::string::npos)
      << none.out;
  const CliResult forced = run_mlacheck("repro " + seed + " --plugin " PRODUCTION_PLUGIN
                                        " --impl topk_decode@production --ignore-contract");
  EXPECT_EQ(forced.out.find("OUTSIDE"), std::string::npos) << forced.out;
  const CliResult listed = run_mlacheck("list --plugin " PRODUCTION_PLUGIN);
  EXPECT_NE(listed.out.find("contract: k <= 2048"), std::string::npos) << listed.out;
}

TEST(PluginCli, MutantsKillsThePluginsVariant) {
  const CliResult r = run_mlacheck("mutants --plugin " + kBuggy + " --only topk_decode@example_buggy --budget 20");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("topk_decode@example_buggy  killed"), std::string::npos) << r.out;
}

TEST(PluginCli, APluginThatCannotBeLoadedIsOneLineAndExit2) {
  for (const std::string& cmd : {std::string("check --budget 1 --plugin "), std::string("list --plugin "),
                                 std::string("repro " MLACHECK_SOURCE_DIR "/corpus/topk_decode/rows_admissible-0.case --plugin "),
                                 std::string("mutants --budget 1 --plugin ")}) {
    for (const std::string& plugin : {std::string(FIXTURE_WRONG_VERSION), std::string(FIXTURE_REGISTER_CRASH),
                                      std::string(FIXTURE_NO_SYMBOL), std::string("/nonexistent/lib.so")}) {
      const CliResult r = run_mlacheck(cmd + plugin);
      EXPECT_EQ(r.status, 2) << cmd << plugin << "\n" << r.out;
      EXPECT_EQ(lines(r.out), 1) << cmd << plugin << "\n" << r.out;
    }
  }
  const CliResult version = run_mlacheck("check --plugin " FIXTURE_WRONG_VERSION);
  EXPECT_NE(version.out.find("was built against plugin ABI version"), std::string::npos) << version.out;
  const CliResult crash = run_mlacheck("check --plugin " FIXTURE_REGISTER_CRASH);
  EXPECT_NE(crash.out.find("loading it crashed"), std::string::npos) << crash.out;
}

TEST(PluginCli, AnImplementationThatCrashesIsAFailNotACrash) {
  const std::string dir = ::testing::TempDir() + "plugin_cli_crash";
  const CliResult r = run_mlacheck("check --plugin " FIXTURE_IMPL_CRASH " --budget 5 --save " + dir);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("topk_decode@fixture_crash  FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("crashed"), std::string::npos) << r.out;
  // The case was saved, and repro crashes on it again (in a child: FAIL, exit 1).
  const CliResult again = run_mlacheck("repro " + dir + "/topk_decode-fixture_crash.case --plugin " FIXTURE_IMPL_CRASH);
  EXPECT_EQ(again.status, 1) << again.out;
  EXPECT_NE(again.out.find("FAIL  crashed"), std::string::npos) << again.out;
  // Refusing every call fails every property, one after another. As JUnit: a failing test case per
  // property, and the suite's time the row's (at least each failure's time into it; not the first
  // failure's, which the others come after).
  const CliResult refused = run_mlacheck("check --plugin " FIXTURE_IMPL_ERROR " --budget 5 --format junit --save " + dir);
  EXPECT_EQ(refused.status, 1) << refused.out;
  EXPECT_NE(refused.out.find("this implementation refuses every call"), std::string::npos) << refused.out;
  const size_t suite_at = refused.out.find("<testsuite name=\"mlacheck check topk_decode@fixture_error\"");
  ASSERT_NE(suite_at, std::string::npos) << refused.out;
  double suite_time = -1, latest = -1;
  ASSERT_EQ(std::sscanf(refused.out.c_str() + refused.out.find(" time=\"", suite_at), " time=\"%lf", &suite_time), 1);
  int failures = 0;
  for (size_t at = refused.out.find("<testcase ", suite_at); at != std::string::npos;
       at = refused.out.find("<testcase ", at + 1)) {
    double t = -1;
    ASSERT_EQ(std::sscanf(refused.out.c_str() + refused.out.find(" time=\"", at), " time=\"%lf", &t), 1);
    latest = std::max(latest, t);
    failures += refused.out.substr(at, refused.out.find("</testcase>", at) - at).find("<failure message=") != std::string::npos;
  }
  EXPECT_EQ(failures, 4) << refused.out;
  EXPECT_GE(suite_time, latest) << refused.out;
}

// A plugin kernel that never returns is FAIL hang under every budget, never PASS or NO RUN: the
// case under way when the budget ends runs to the case timeout, and alone for four times that.
TEST(PluginCli, AKernelThatNeverReturnsIsAHangUnderEveryBudget) {
  const std::string dir = ::testing::TempDir() + "plugin_cli_hang";
  for (const char* budget : {"1", "5"}) {
    const CliResult r = run_mlacheck(std::string("check --plugin " FIXTURE_IMPL_HANG " --case-timeout 1 --budget ") +
                                     budget + " --save " + dir);
    EXPECT_EQ(r.status, 1) << budget << ": " << r.out;
    EXPECT_NE(r.out.find("topk_decode@fixture_hang  FAIL"), std::string::npos) << budget << ": " << r.out;
    EXPECT_NE(r.out.find("hang: one case ran past the case timeout of 1 s"), std::string::npos) << budget << ": " << r.out;
    EXPECT_NE(r.out.find("(4 times the case timeout), it did not end either"), std::string::npos) << budget << ": " << r.out;
    EXPECT_EQ(r.out.find("PASS"), std::string::npos) << budget << ": " << r.out;
  }
  // The saved case records the case timeout; repro tells the hang in four times it (and a start
  // allowance), as check confirmed it, not after its own limit of 600 s.
  const auto t0 = std::chrono::steady_clock::now();
  const CliResult again = run_mlacheck("repro " + dir + "/topk_decode-fixture_hang.case --plugin " FIXTURE_IMPL_HANG);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(again.status, 1) << again.out;
  EXPECT_NE(again.out.find("FAIL  hang: it ran past 9 s (4 times the case timeout of 1 s it was saved with"),
            std::string::npos)
      << again.out;
  EXPECT_LT(took, 60) << again.out;
}

#ifdef FIXTURE_FAULT
// A kernel that writes to an illegal address kills the CUDA context of its process: check, repro
// and mutants must each report it as a failure with its case, never exit 2.
TEST(PluginCli, AKernelThatFaultsTheContextIsAFailWithItsCase) {
  const std::string dir = ::testing::TempDir() + "plugin_cli_fault";
  const CliResult r = run_mlacheck("check --plugin " FIXTURE_FAULT " --backend cuda --budget 10 --save " + dir);
  if (r.status == 2 && r.out.find("not usable") != std::string::npos) GTEST_SKIP() << "skipped: no GPU";
  ASSERT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("topk_decode@fixture_fault  FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("crashed (cudaErrorIllegalAddress)"), std::string::npos) << r.out;
  const std::string saved = dir + "/topk_decode-fixture_fault.case";
  const CliResult again = run_mlacheck("repro " + saved + " --plugin " FIXTURE_FAULT);
  EXPECT_EQ(again.status, 1) << again.out;
  EXPECT_NE(again.out.find("crashed (cudaErrorIllegalAddress)"), std::string::npos) << again.out;
  EXPECT_EQ(run_mlacheck("repro " + saved + " --impl topk_decode@ref").status, 0);
  const CliResult killed =
      run_mlacheck("mutants --plugin " FIXTURE_FAULT " --only topk_decode@fixture_fault --backend cuda --budget 10");
  EXPECT_EQ(killed.status, 0) << killed.out;
  EXPECT_NE(killed.out.find("killed"), std::string::npos) << killed.out;
  // On the host backend the same write is a segmentation fault: crashed too.
  const CliResult host = run_mlacheck("check --plugin " FIXTURE_FAULT " --budget 5 --save " + dir);
  EXPECT_EQ(host.status, 1) << host.out;
  EXPECT_NE(host.out.find("crashed"), std::string::npos) << host.out;
}
#endif

TEST(PluginCli, FuzzFindsTheBuggyTwin) {
  // A folder of this process's own: two test runs at once (two build trees) must not share it.
  const std::string dir = ::testing::TempDir() + "plugin_cli_fuzz_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);  // from the seeds alone, not an earlier run's corpus
  const auto t0 = std::chrono::steady_clock::now();
  const CliResult r = run_mlacheck("fuzz --target topk_decode --plugin " + kBuggy +
                                   " --impl topk_decode@example_buggy --time 6 --minimize 2 --out " + dir);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (r.out.find("no harness") != std::string::npos) GTEST_SKIP() << "no libFuzzer harnesses in this build";
  EXPECT_EQ(r.status, 1) << r.out;
  // --time holds for triage and minimizing too (6 s and 5%; room for a loaded machine). Before it
  // did, this run took 17 s.
  EXPECT_LT(took, 10.0) << r.out;
  // The twin writes past its rows. Any property of the op may be the first to meet that (which of
  // its distinct crashes are triaged within --time depends on the machine's load: rows_admissible,
  // far_rows, deterministic, ...); each reports the same stray write past a row.
  EXPECT_NE(r.out.find(": guard of topk_indices_buffer:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stray write"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(past the row's"), std::string::npos) << r.out;
}

}  // namespace
