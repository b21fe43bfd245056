// Tests of tools/fuzz_log.h: libFuzzer's status lines, its artifacts, and the triage of a failing
// input's output into a key and a summary.
#include "tools/fuzz_log.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace mlacheck {
namespace {

namespace fs = std::filesystem;

TEST(FuzzLog, TheLastStatusLineGivesTheNumbers) {
  const std::string log =
      "INFO: Seed: 1\n#2\tINITED cov: 10 ft: 11 corp: 3/120b exec/s: 0 rss: 40Mb\n"
      "#4096\tpulse  cov: 377 ft: 420 corp: 31/2047b lim: 64 exec/s: 2048 rss: 90Mb\nDone\n";
  const FuzzStats s = parse_fuzz_stats(log);
  EXPECT_EQ(s.execs, 4096);
  EXPECT_EQ(s.cov, 377);
  EXPECT_EQ(s.ft, 420);
  EXPECT_EQ(s.corpus, 31);
  EXPECT_EQ(s.exec_per_s, 2048);
  // Fork mode's lines say "exec/s N" without the colon; no status line gives zeros.
  EXPECT_EQ(parse_fuzz_stats("#900: cov: 5 ft: 6 corp: 7 exec/s 8 oom/timeout/crash: 0/0/0\n").exec_per_s, 8);
  EXPECT_EQ(parse_fuzz_stats("nothing here\n").execs, 0);
}

TEST(FuzzLog, ArtifactsOfFailingInputsAreListedAndSlowUnitsAreNot) {
  const fs::path dir = fs::path(::testing::TempDir()) / "fuzz_log_artifacts";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* n : {"timeout-b", "crash-a", "slow-unit-c", "oom-d", "leak-e", "min-f", "notes.txt"}) {
    std::ofstream(dir / n) << "x";
  }
  std::vector<std::string> names;
  for (const fs::path& p : crash_files(dir)) names.push_back(p.filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{"crash-a", "leak-e", "oom-d", "timeout-b"}));
  EXPECT_TRUE(crash_files(dir / "missing").empty());
}

TEST(FuzzLog, AViolationIsKeyedByItsPropertyAndVerdictWithoutNumbers) {
  const auto log = [](const std::string& row) {
    return "noise\n==mlacheck== violation: topk_decode.rows_admissible on topk_decode@mine (host)\n"
           "==mlacheck== verdict: row " + row + " position 3: index 9 is out of [0, 7)\nmore noise\n";
  };
  const Triage a = triage_output(log("4")), b = triage_output(log("11"));
  EXPECT_EQ(a.property, "topk_decode.rows_admissible");
  EXPECT_EQ(a.summary, "topk_decode.rows_admissible: row 4 position 3: index 9 is out of [0, 7)");
  EXPECT_EQ(a.key, b.key);  // the same failure in another row is the same crash
  EXPECT_EQ(without_numbers("row 12 of 3, 0x7f"), "row # of #, #x#f");
}

TEST(FuzzLog, ASanitizerReportIsKeyedByItsKindAndProjectFrames) {
  const std::string log =
      "==1==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x6020 at pc 0x55 bp 0x7f\n"
      "    #0 0x55 in __asan_memcpy (/x+0x1)\n"
      "    #1 0x56 in mlacheck::kernels::pack_rows(int) /src/kernels/pack.cpp:10\n"
      "    #2 0x57 in std::function<void()>::operator() /usr/include/c++/12/bits/std_function.h:591\n"
      "    #3 0x58 in mlacheck::run_case() /src/properties/run.cpp:20\n"
      "    #4 0x59 in main /src/fuzz/main.cpp:3\n";
  const Triage t = triage_output(log);
  EXPECT_EQ(t.property, "");
  EXPECT_NE(t.summary.find("ERROR: AddressSanitizer: heap-buffer-overflow"), std::string::npos) << t.summary;
  EXPECT_NE(t.summary.find("mlacheck::kernels::pack_rows(int) < mlacheck::run_case() < main"), std::string::npos)
      << t.summary;
  EXPECT_EQ(t.key.find("0x6020"), std::string::npos) << t.key;  // addresses do not split one bug in two
}

TEST(FuzzLog, TheHexKeyIsTwelveStableHexDigits) {
  const std::string k = hex_key("topk_decode.rows_admissible: row # position #");
  EXPECT_EQ(k.size(), 12u);
  EXPECT_EQ(k.find_first_not_of("0123456789abcdef"), std::string::npos) << k;
  EXPECT_EQ(k, hex_key("topk_decode.rows_admissible: row # position #"));
  EXPECT_NE(k, hex_key("topk_decode.rows_admissible: row # position #!"));
}

}  // namespace
}  // namespace mlacheck
