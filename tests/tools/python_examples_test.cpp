// The Python examples and the corpus through them, and fuzz --python, through the command line
// (the --python tests of check, repro and mutants: python_cli_test.cpp): the stateful and Triton
// examples pass or fail as their docstrings say, seed and regression cases end on the torch
// examples as on the reference, and libFuzzer's harness finds a buggy Triton kernel on the host.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "tests/tools/python_cli_support.h"

namespace {

using mlacheck::test::CliResult;
using mlacheck::test::run_mlacheck;
using namespace mlacheck::test::python_cli;

// The Python path and the C++ path give the same verdict on the same case file: a seed case of
// each top-k decode property (-0) and every top-k regression, run through repro on topk_decode@ref
// and on the torch example, each side one `repro --all` (one Python worker for every file; two
// starts per file before, and the whole seed folder took 77 s beside other tests): the build without sanitizers runs it, as it runs the
// stateful examples' (SameVerdict below); the sanitizer build runs the bridge in every other test.
TEST(PythonCorpus, SeedAndRegressionCasesOfTopkDecodeHaveTheSameVerdictOnTheTorchExampleAsOnTheReference) {
#ifdef MLACHECK_SANITIZER_BUILD
  GTEST_SKIP() << "skipped: a sanitizer build (the build without sanitizers runs it)";
#endif
  SKIP_WITHOUT_TORCH();
  const auto ref = repro_each("topk_decode", topk_regression, "--impl topk_decode@ref");
  const auto py = repro_each("topk_decode", topk_regression, "--python " + kGood + " --impl topk_decode@py");
  int compared = 0;
  for (const auto& [file, ending] : ref) {
    if (has(ending, "mlacheck repro: ")) continue;  // a regression of another op (its property takes no top-k impl)
    ASSERT_TRUE(py.count(file)) << file;
    if (has(py.at(file), "runs on topk_decode@ref only")) continue;  // the ref kernel's own paths
    EXPECT_EQ(py.at(file).substr(0, 4), ending.substr(0, 4)) << file << "\nref: " << ending << "\npython: " << py.at(file);
    ++compared;
  }
  EXPECT_GE(compared, 7) << "a seed case of each property any implementation runs, and the regressions";
}

// The same for the stateful ops: a seed case of each property (-0) and every regression of the op,
// run through repro on OP@ref and on the torch example, end the same way (the whole seed folder
// took 84 s for decode_metadata beside other tests: two Python starts per case file; now one
// `repro --all` each, one Python worker for every file).
class SameVerdict : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(SameVerdict, SeedAndRegressionCasesOfTheOpEndAsOnTheReference) {
#ifdef MLACHECK_SANITIZER_BUILD
  GTEST_SKIP() << "skipped: a sanitizer build (the build without sanitizers runs it)";
#endif
  SKIP_WITHOUT_TORCH();
  const std::string op = GetParam().first, spec = kSource + "/examples/python/" + GetParam().second;
  const auto ref = repro_each(op, any_regression, "--impl " + op + "@ref");
  const auto py = repro_each(op, any_regression, "--python " + spec + " --impl " + op + "@py");
  int compared = 0;
  for (const auto& [file, ending] : ref) {
    if (has(ending, "mlacheck repro: ")) continue;  // a case of another op
    ASSERT_TRUE(py.count(file)) << file;
    if (has(py.at(file), "@ref only")) continue;  // the ref kernel's own paths
    EXPECT_EQ(py.at(file).substr(0, 4), ending.substr(0, 4)) << file << "\nref: " << ending << "\npython: " << py.at(file);
    ++compared;
  }
  EXPECT_GE(compared, 6) << op;
}

INSTANTIATE_TEST_SUITE_P(Stateful, SameVerdict,
                         ::testing::Values(std::make_pair("decode_metadata", "decode_metadata_torch.py:decode_metadata"),
                                           std::make_pair("indexer_decode_step",
                                                          "indexer_decode_step_torch.py:indexer_decode_step"),
                                           std::make_pair("mla_decode_impl", "mla_decode_impl_torch.py:mla_decode_impl")),
                         [](const auto& info) { return std::string(info.param.first); });

// The stateful examples on the host: each correct one passes its op's whole suite, and each buggy
// twin fails with the verdict its docstring promises.
struct Example {
  const char* file;
  const char* callable;
  bool passes;
  const char* verdict;  // text the FAIL row holds
};
// Checks example e for budget seconds: PASS, or FAIL with its verdict and the case saved.
CliResult expect_example(const Example& e, const std::string& budget) {
  const std::string dir = ::testing::TempDir() + "python_example_" + e.file;
  std::filesystem::remove_all(dir);
  // A twin's first failure is what is asked (--fail-fast: its other properties would run to the budget);
  // an example that passes runs the property suite and the regressions, not the budget (--no-fuzz).
  const CliResult r = run_mlacheck("check --python " + kSource + "/examples/python/" + e.file + ":" + e.callable +
                                   " --budget " + budget + (e.passes ? " --no-fuzz" : " --fail-fast --no-shrink") +
                                   " --save " + dir);
  if (e.passes) {
    // PASS; or, on a machine loaded enough that a short budget leaves a property without a case
    // (an interpreted Triton call predicted past the case timeout's half is not run), PARTIAL with
    // that reason: never a FAIL, and never PASS for the property that did not run.
    // The row starts with "<op>@py"; its result follows the padding that aligns the column.
    const auto row_says = [&](const std::string& result) {
      const std::string head = "\n" + std::string(e.callable) + "@py ";
      const size_t at = r.out.find(head);
      if (at == std::string::npos) return false;
      const size_t word = r.out.find_first_not_of(' ', at + head.size());
      return word != std::string::npos && r.out.compare(word, result.size(), result) == 0;
    };
    const bool partial = r.status == 1 && row_says("PARTIAL") && !has(r.out, "  FAIL  ") &&
                         (has(r.out, "(the budget ended first") || has(r.out, "beyond the Triton interpreter's reach"));
    EXPECT_TRUE((r.status == 0 && row_says("PASS")) || partial) << r.out;
  } else {
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_TRUE(has(r.out, "@py  FAIL")) << r.out;
    EXPECT_TRUE(has(r.out, e.verdict)) << r.out;
    EXPECT_TRUE(std::filesystem::exists(dir)) << r.out;  // the case saved
  }
  return r;
}

class PythonExamples : public ::testing::TestWithParam<Example> {};

TEST_P(PythonExamples, PassOrFailAsTheirDocstringsSay) {
  SKIP_WITHOUT_TORCH();
  expect_example(GetParam(), "6");
}

INSTANTIATE_TEST_SUITE_P(
    Stateful, PythonExamples,
    ::testing::Values(
        Example{"decode_metadata_torch.py", "decode_metadata", true, ""},
        Example{"decode_metadata_torch_buggy.py", "decode_metadata", false, "took the uniform path, want general"},
        Example{"indexer_decode_step_torch.py", "indexer_decode_step", true, ""},
        Example{"indexer_decode_step_torch_buggy.py", "indexer_decode_step", false,
                "nearest output view 'decode rows'"},
        Example{"mla_decode_impl_torch.py", "mla_decode_impl", true, ""},
        Example{"mla_decode_impl_torch_buggy.py", "mla_decode_impl", false, "replay"}),
    [](const ::testing::TestParamInfo<Example>& info) {
      std::string name = info.param.file;
      name = name.substr(0, name.size() - 3);
      for (char& c : name) c = c == '_' ? 'x' : c;
      return name;
    });

// The Triton examples on the host: their kernels run in Triton's interpreter on CPU tensors that
// alias the guarded buffers (docs/python.md, "Triton on the host"). Each correct one passes its op's
// suite; executed in every CI run, never skipped where the project's environment (scripts/pyenv.sh)
// is. Their buggy twins are the kill matrix's Triton variants: ctest's mutants.triton (the build
// without sanitizers) runs them, each killed with the verdict its docstring says.
class PythonTritonExamples : public ::testing::TestWithParam<Example> {};

TEST_P(PythonTritonExamples, PassOrFailInTheInterpreterAsTheirDocstringsSay) {
  SKIP_WITHOUT_TRITON();
  const CliResult r = expect_example(GetParam(), "12");
  EXPECT_FALSE(has(r.out, "hang: ")) << r.out;  // a slow interpreter is not a hang (at most a slow case)
}

INSTANTIATE_TEST_SUITE_P(
    Interpreted, PythonTritonExamples,
    ::testing::Values(
        Example{"topk_triton.py", "topk_decode", true, ""},
        Example{"decode_metadata_triton.py", "decode_metadata", true, ""},
        Example{"mla_decode_impl_triton.py", "mla_decode_impl", true, ""},
        Example{"mla_decode_triton.py", "mla_decode", true, ""}),
    [](const ::testing::TestParamInfo<Example>& info) {
      std::string name = info.param.file;
      name = name.substr(0, name.size() - 3);
      for (char& c : name) c = c == '_' ? 'x' : c;
      return name;
    });

// ---- mlacheck fuzz --python: libFuzzer's harness on a Python callable (the sanitizer build, where
// the harnesses are built with clang) -----------------------------------------------------------
#ifdef MLACHECK_FUZZ_HARNESS_DIR
const std::string kHarnesses = MLACHECK_FUZZ_HARNESS_DIR;

// A Triton kernel with a store one row past its output, fuzzed on the host in the interpreter: found,
// its case written with the --python flag that reproduces it, and repro of that case fails again.
TEST(PythonFuzz, ABuggyTritonKernelIsFoundOnTheHostWithACaseThatReproduces) {
  SKIP_WITHOUT_TRITON();
  const std::string dir = ::testing::TempDir() + "python_fuzz_buggy";
  std::filesystem::remove_all(dir);
  const std::string spec = kSource + "/examples/python/topk_triton_buggy.py:topk_decode";
  // --runs: libFuzzer stops at the first crash (a timed campaign goes on to its end).
  // Run from a folder of its own: replaying the crashing input leaves nothing in the caller's working
  // directory (it left libFuzzer's crash-<sha1> file there before).
  const std::string cwd = dir + "-cwd";
  std::filesystem::remove_all(cwd);
  std::filesystem::create_directories(cwd);
  const CliResult r = run_mlacheck("fuzz --target topk_decode --python " + spec + " --runs 200 --minimize 0 --out " + dir,
                                   "--chdir=" + cwd);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_TRUE(std::filesystem::is_empty(cwd)) << "left in the working directory: "
                                              << std::filesystem::directory_iterator(cwd)->path() << "\n" << r.out;
  EXPECT_TRUE(has(r.out, "fuzz topk_decode (topk_decode@py on host)")) << r.out;
  EXPECT_TRUE(has(r.out, "repro: mlacheck repro " + dir + "/cases/")) << r.out;
  std::string case_file;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/cases")) case_file = e.path().string();
  ASSERT_FALSE(case_file.empty()) << r.out;
  const CliResult again = run_mlacheck("repro " + case_file + " --python " + spec);
  EXPECT_EQ(again.status, 1) << again.out;
  EXPECT_TRUE(has(again.out, "FAIL")) << again.out;
}

// The correct torch top-k: inputs run, nothing found, the corpus kept.
TEST(PythonFuzz, TheCorrectCallableRunsInputsAndFindsNothing) {
  SKIP_WITHOUT_TORCH();
  const std::string dir = ::testing::TempDir() + "python_fuzz_good";
  std::filesystem::remove_all(dir);
  CliResult r = run_mlacheck("fuzz --target topk_decode --python " + kGood + " --time 12 --out " + dir);
  if (has(r.out, "NO RUN")) {
    // A loaded machine can spend 12 s on the worker's start and the seed cases (0 inputs run, an
    // honest NO RUN, in CI's parallel sanitizer run on 2026-12-07): then a longer campaign decides.
    std::filesystem::remove_all(dir);
    r = run_mlacheck("fuzz --target topk_decode --python " + kGood + " --time 60 --out " + dir);
  }
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "0 distinct crash(es)")) << r.out;
  EXPECT_FALSE(has(r.out, "NO RUN")) << r.out;
  EXPECT_FALSE(has(r.out, "fuzz topk_decode: 0 inputs run")) << r.out;
}

// A campaign that runs no input (a callable of 3 s a call, 2 s in all) is NO RUN, exit 1, never clean.
TEST(PythonFuzz, ACampaignThatRunsNoInputIsNoRun) {
  SKIP_WITHOUT_TORCH();
  const std::string dir = ::testing::TempDir() + "python_fuzz_slow";
  std::filesystem::remove_all(dir);
  const CliResult r =
      run_mlacheck("fuzz --target topk_decode --python " + kFixtures + "topk_slow.py:topk_decode --time 2 --out " + dir);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_TRUE(has(r.out, "fuzz topk_decode: NO RUN: no input was run to its end")) << r.out;
}

// A callable of another op than the target's is one line, exit 2.
TEST(PythonFuzz, ACallableOfAnotherOpThanTheTargetsIsOneLine) {
  SKIP_WITHOUT_TORCH();
  const CliResult r = run_mlacheck("fuzz --target mla_decode --python " + kGood + " --time 5 --out " +
                                   ::testing::TempDir() + "python_fuzz_other");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(lines(r.out), 1) << r.out;
  EXPECT_TRUE(has(r.out, "--python gives no callable of mla_decode")) << r.out;
}

// Regression: a process whose first interpreted call the cost model skipped (too large for the
// fuzzing budget of a case) had taken the host arena's file into that unsent message, so its next
// call named a block the worker was never lent ("raised KeyError: 0"); found fuzzing the correct
// Triton top-k. The harness is run directly on two inputs, with measurements that skip the first.
TEST(PythonFuzz, ACallSkippedAsTooLargeLeavesTheArenaForTheNextCall) {
  SKIP_WITHOUT_TRITON();
  const std::string dir = ::testing::TempDir() + "python_fuzz_skip";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ASSERT_EQ(run_mlacheck("encode " + kSource + "/corpus/topk_decode/far_rows-2.case " + dir + "/1-large.bin").status, 0);
  ASSERT_EQ(run_mlacheck("encode " + kSource + "/corpus/topk_decode/rows_admissible-0.case " + dir + "/2-small.bin").status, 0);
  // 1 ms an element past a call of 1 ms: about 12 s for the large case (past the 5 s budget of a
  // case), 0.03 s for the small one.
  { std::FILE* f = std::fopen((dir + "/cost.topk_decode").c_str(), "w"); std::fputs("0.001 100 0.001 100\n", f); std::fclose(f); }
  const std::string loaded = "examples/python/topk_triton.py:topk_decode\x1etopk_decode\x1e";
  const std::string cmd = "cd " + kSource + " && MLACHECK_PYTHON_LOADED=\"$(printf '" + loaded + "')\" MLACHECK_IMPL=topk_decode@py "
                          "MLACHECK_FUZZ_MAX_MS=5000 MLACHECK_FUZZ_COST_FILE=" + dir + "/cost " + kHarnesses +
                          "/topk_decode_fuzzer " + dir + "/1-large.bin " + dir + "/2-small.bin > " + dir + "/log 2>&1";
  const int st = std::system(cmd.c_str());
  std::string log;
  if (std::FILE* f = std::fopen((dir + "/log").c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) log.append(buf, n);
    std::fclose(f);
  }
  EXPECT_EQ(st, 0) << log;
  EXPECT_TRUE(has(log, "1 inputs run")) << log;  // the small case ran
  EXPECT_TRUE(has(log, "skipped as too large")) << log;
  EXPECT_FALSE(has(log, "KeyError")) << log;
}
#endif

}  // namespace
