// Tests of the mlacheck command: each subcommand's output and exit status, and one-line errors.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

namespace {

struct CliResult {
  int status;
  std::string out;  // stdout and stderr together
};

CliResult run_mlacheck(const std::string& args) {
  const std::string cmd = std::string(MLACHECK_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  CliResult r{-1, ""};
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(MlacheckCli, HelpListsTheCommands) {
  const CliResult r = run_mlacheck("--help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("list"), std::string::npos);
  EXPECT_NE(r.out.find("selfcheck"), std::string::npos);
}

TEST(MlacheckCli, ListShowsEverySpecOpAndTheTolerances) {
  const CliResult r = run_mlacheck("list");
  EXPECT_EQ(r.status, 0);
  for (const char* op : {"decode_metadata", "paged_mqa_logits", "topk_decode", "sparse_mla_decode", "mla_decode_impl"}) {
    EXPECT_NE(r.out.find(op), std::string::npos) << op;
  }
  EXPECT_NE(r.out.find("paged_mqa_logits.logits"), std::string::npos);
}

TEST(MlacheckCli, ListShowsTheRegisteredImplementations) {
  const CliResult r = run_mlacheck("list");
  const size_t at = r.out.find("implementations");
  ASSERT_NE(at, std::string::npos) << r.out;
  for (const char* impl : {"decode_metadata@ref", "paged_mqa_logits@ref", "mqa_logits@ref", "topk_decode@ref", "topk_prefill@ref",
                           "pack_decode@ref", "unpack_decode@ref", "topk_to_global@ref"}) {
    EXPECT_NE(r.out.find(std::string("\n  ") + impl + " ", at), std::string::npos) << impl;
  }
}

// The line of `mlacheck list` that starts with "  <name> ", or "".
std::string backend_line(const std::string& out, const std::string& name) {
  const size_t at = out.find("\n  " + name + " ");
  if (at == std::string::npos) return "";
  return out.substr(at + 1, out.find('\n', at + 1) - at - 1);
}

TEST(MlacheckCli, ListShowsTheBackendsFirstWithTheirStatus) {
  const CliResult r = run_mlacheck("list");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.rfind("backends:\n", 0), 0u) << r.out;
  const std::string host = backend_line(r.out, "host");
  EXPECT_NE(host.find(" usable "), std::string::npos) << host;
  EXPECT_NE(host.find("CPU fibers"), std::string::npos) << host;
  // cuda: "not built (...)" without nvcc; with it, the device ("NVIDIA H200, 132 SMs, sm_90") or
  // why not, naming the runtime's error ("no usable driver (cudaErrorInsufficientDriver: ...)").
  const std::string cuda = backend_line(r.out, "cuda");
  ASSERT_FALSE(cuda.empty()) << r.out;
  const bool not_built = cuda.find("not usable  not built") != std::string::npos;
  const bool unusable_with_reason = cuda.find("not usable  ") != std::string::npos && cuda.find("cudaError") != std::string::npos;
  const bool usable_device = cuda.find(" usable ") != std::string::npos && cuda.find(" SMs, sm_") != std::string::npos;
  EXPECT_TRUE(not_built || unusable_with_reason || usable_device) << cuda;
  const std::string hip = backend_line(r.out, "hip");
  EXPECT_NE(hip.find("not usable"), std::string::npos) << hip;
  EXPECT_NE(hip.find("gfx90a"), std::string::npos) << hip;
  // The ops still follow.
  EXPECT_LT(r.out.find("backends:"), r.out.find("ops (SPEC.md):"));
}

TEST(MlacheckCli, SelfcheckPassesAndSummarises) {
  const CliResult r = run_mlacheck("selfcheck --samples 200");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("7 passed, 0 failed"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
}

TEST(MlacheckCli, ListShowsThePropertiesACaseFileCanName) {
  const CliResult r = run_mlacheck("list");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("properties (a case file names one; mlacheck repro runs it):"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("indexer_decode_step.equals_oracle"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("indexer_decode_step.permutation_commutes"), std::string::npos) << r.out;
}

TEST(MlacheckCli, BadUsageIsOneLineAndExitTwo) {
  for (const char* args : {"", "frobnicate", "list extra", "selfcheck --seed", "selfcheck --samples x",
                           "selfcheck --samples 0", "selfcheck --bogus", "repro", "repro /nonexistent.case",
                           "repro a.case --bogus", "repro /dev/null"}) {
    const CliResult r = run_mlacheck(args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.out;
    EXPECT_EQ(lines(r.out), 1) << args << ": " << r.out;
    EXPECT_EQ(r.out.rfind("mlacheck: ", 0), 0u) << r.out;
  }
}

}  // namespace
