// Tests of core/backend/isolate.h: each way a child can end becomes the right outcome, and failing cases are saved.
#include "core/backend/isolate.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/reserved_buffer.h"
#include "tests/support/asan.h"

namespace mlacheck {
namespace {

// A fresh folder for saved cases, removed with its files at the end of the test.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/mlacheck_isolate_XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    if (p == nullptr) throw std::runtime_error("mkdtemp failed");
    path = p;
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// An exception type standing in for cuda::StickyFault, so this test needs no CUDA.
struct FakeStickyFault : Error {
  using Error::Error;
};

TEST(RunIsolated, APassingCheckPassesAndSavesNothing) {
  TempDir dir;
  IsolationOptions opts;
  opts.save_dir = dir.path;
  opts.case_text = "seed 1\n";
  const IsolatedOutcome o = run_isolated([] { return std::string(); }, opts);
  EXPECT_EQ(o.kind, IsolatedOutcome::kPassed) << o.message;
  EXPECT_TRUE(o.passed());
  EXPECT_EQ(o.message, "");
  EXPECT_EQ(o.saved_case_path, "");
}

TEST(RunIsolated, AVerdictComesBackAsAViolationAndTheCaseIsSaved) {
  TempDir dir;
  IsolationOptions opts;
  opts.save_dir = dir.path;
  opts.case_name = "topk_row_3";
  opts.case_text = "op topk_decode\nrows 4\n";
  const IsolatedOutcome o = run_isolated([] { return std::string("row 3: index 17 appears twice"); }, opts);
  EXPECT_EQ(o.kind, IsolatedOutcome::kViolation);
  EXPECT_EQ(o.message, "row 3: index 17 appears twice");
  EXPECT_EQ(o.saved_case_path, dir.path + "/topk_row_3.case");
  EXPECT_EQ(read_file(o.saved_case_path), opts.case_text);
}

TEST(RunIsolated, AnMlacheckErrorInTheChildIsAViolationNamedAsAnError) {
  const IsolatedOutcome o = run_isolated(
      []() -> std::string { throw Error("view fp32[4] reaches byte 80 of a 64-byte buffer"); }, IsolationOptions{});
  EXPECT_EQ(o.kind, IsolatedOutcome::kViolation);
  EXPECT_EQ(o.message, "error: view fp32[4] reaches byte 80 of a 64-byte buffer");
}

TEST(RunIsolated, ASegfaultIsACrashNamingTheSignalAndTheCaseIsSaved) {
  TempDir dir;
  IsolationOptions opts;
  opts.save_dir = dir.path;
  opts.case_text = "op sparse_mla_decode\nbatch 2\n";
  const IsolatedOutcome o = run_isolated(
      []() -> std::string {
        // Default action, so a sanitizer's handler (asan preset) does not turn it into exit(1).
        std::signal(SIGSEGV, SIG_DFL);
        std::raise(SIGSEGV);
        return "not reached";
      },
      opts);
  EXPECT_EQ(o.kind, IsolatedOutcome::kCrashed);
  EXPECT_EQ(o.message, "child died by signal 11 (Segmentation fault)");
  ASSERT_FALSE(o.saved_case_path.empty());
  // Named by a hash of the text when no name is given.
  EXPECT_EQ(o.saved_case_path.rfind(dir.path + "/", 0), 0u) << o.saved_case_path;
  EXPECT_EQ(o.saved_case_path.size(), dir.path.size() + 1 + 16 + 5) << o.saved_case_path;
  EXPECT_EQ(read_file(o.saved_case_path), opts.case_text);
}

// A write that wrapped to 32 bits lands in a reserved buffer's margin (core/reserved_buffer.h):
// the crash names the buffer and where the address lies. An AddressSanitizer build may keep its own
// handler for the fault; it is still a crash.
TEST(RunIsolated, AFaultInReservedMemoryNamesTheBufferAndWhere) {
  const auto fault_at = [](int64_t offset) {
    return run_isolated(
        [offset]() -> std::string {
          ReservedBuffer kv("kv_cache", int64_t{3} << 30, {{0, 4096}});
          volatile uint8_t* p = kv.data() + offset;
          *p = 1;
          return "not reached";
        },
        IsolationOptions{});
  };
  const IsolatedOutcome before = fault_at(-(int64_t{2} << 30));
  EXPECT_EQ(before.kind, IsolatedOutcome::kCrashed);
  const IsolatedOutcome inside = fault_at(int64_t{1} << 30);
  EXPECT_EQ(inside.kind, IsolatedOutcome::kCrashed);
#if !defined(MLA_TEST_ASAN)
  EXPECT_EQ(before.message,
            "child died by signal 11 (Segmentation fault): a write to reserved 'kv_cache': 2147483648 bytes before its "
            "data, in its reserved margin, where an offset wrapped to 32 bits lands");
  EXPECT_EQ(inside.message,
            "child died by signal 11 (Segmentation fault): a write to reserved 'kv_cache': byte 1073741824 of its data, "
            "in a page the case did not stage");
#endif
  // A wild pointer elsewhere says so.
  const IsolatedOutcome wild = run_isolated(
      []() -> std::string {
        volatile uintptr_t address = 16;  // volatile: not a constant the compiler can see through
        *reinterpret_cast<volatile uint8_t*>(address) = 1;
        return "not reached";
      },
      IsolationOptions{});
  EXPECT_EQ(wild.kind, IsolatedOutcome::kCrashed);
#if !defined(MLA_TEST_ASAN)
  EXPECT_EQ(wild.message, "child died by signal 11 (Segmentation fault): a write to an address in no memory mlacheck "
                          "reserved");
#endif
}

TEST(RunIsolated, AnExitWithoutAVerdictIsACrash) {
  const IsolatedOutcome o = run_isolated([]() -> std::string { ::_exit(3); }, IsolationOptions{});
  EXPECT_EQ(o.kind, IsolatedOutcome::kCrashed);
  EXPECT_NE(o.message.find("exited with status 3 without a verdict"), std::string::npos) << o.message;
}

TEST(RunIsolated, AForeignExceptionIsACrashNotAVerdict) {
  const IsolatedOutcome o = run_isolated([]() -> std::string { throw std::out_of_range("vector::at"); }, IsolationOptions{});
  EXPECT_EQ(o.kind, IsolatedOutcome::kCrashed);
  EXPECT_EQ(o.message, "uncaught exception: vector::at");
}

TEST(RunIsolated, AHangIsKilledAtTheTimeout) {
  TempDir dir;
  IsolationOptions opts;
  opts.timeout_seconds = 0.3;
  opts.save_dir = dir.path;
  opts.case_name = "hang";
  opts.case_text = "spin\n";
  const auto start = std::chrono::steady_clock::now();
  const IsolatedOutcome o = run_isolated(
      [] {
        std::this_thread::sleep_for(std::chrono::seconds(30));
        return std::string();
      },
      opts);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(o.kind, IsolatedOutcome::kTimedOut);
  EXPECT_EQ(o.message, "child ran past the 0.3 s timeout and was killed");
  EXPECT_GE(seconds, 0.3);
  EXPECT_LT(seconds, 5.0);
  EXPECT_EQ(o.saved_case_path, dir.path + "/hang.case");
}

TEST(RunIsolated, TheWatchdogKillsTheChildWithItsLine) {
  IsolationOptions opts;
  opts.timeout_seconds = 30;
  int asked = 0;
  const auto start = std::chrono::steady_clock::now();
  opts.watchdog = [&]() -> std::string { return ++asked >= 2 ? "stuck on case 7\nsecond line" : ""; };
  const IsolatedOutcome o = run_isolated(
      [] {
        std::this_thread::sleep_for(std::chrono::seconds(30));
        return std::string();
      },
      opts);
  EXPECT_EQ(o.kind, IsolatedOutcome::kTimedOut);
  EXPECT_EQ(o.message, "stuck on case 7 second line");
  EXPECT_GE(asked, 2);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
  // A watchdog that never answers leaves a quick child alone.
  opts.watchdog = []() -> std::string { return ""; };
  EXPECT_EQ(run_isolated([] { return std::string("a verdict"); }, opts).message, "a verdict");
}

TEST(RunIsolated, TheHookClassifiesStickyFaults) {
  IsolationOptions opts;
  opts.is_sticky = [](const std::exception& e) { return dynamic_cast<const FakeStickyFault*>(&e) != nullptr; };
  const IsolatedOutcome sticky = run_isolated(
      []() -> std::string { throw FakeStickyFault("cudaErrorIllegalAddress (an illegal memory access was encountered)"); },
      opts);
  EXPECT_EQ(sticky.kind, IsolatedOutcome::kStickyFault);
  EXPECT_EQ(sticky.message, "cudaErrorIllegalAddress (an illegal memory access was encountered)");
  // Other errors stay violations under the same hook; without a hook nothing is sticky.
  const IsolatedOutcome other = run_isolated([]() -> std::string { throw Error("bad view"); }, opts);
  EXPECT_EQ(other.kind, IsolatedOutcome::kViolation);
  const IsolatedOutcome no_hook =
      run_isolated([]() -> std::string { throw FakeStickyFault("lost"); }, IsolationOptions{});
  EXPECT_EQ(no_hook.kind, IsolatedOutcome::kViolation);
  EXPECT_EQ(no_hook.message, "error: lost");
}

TEST(RunIsolated, AMultiLineVerdictArrivesAsOneLine) {
  const IsolatedOutcome o = run_isolated([] { return std::string("first\nsecond\n"); }, IsolationOptions{});
  EXPECT_EQ(o.kind, IsolatedOutcome::kViolation);
  EXPECT_EQ(o.message, "first second");
}

TEST(RunIsolated, BadOptionsAreRefusedBeforeAnythingRuns) {
  TempDir dir;
  const std::string marker = dir.path + "/ran";
  // Leaves a file behind if a child ran it.
  auto check = [&marker] {
    std::ofstream(marker) << "ran";
    return std::string();
  };
  IsolationOptions missing;
  missing.case_text = "x";
  missing.save_dir = "/nonexistent/mlacheck_cases";
  try {
    run_isolated(check, missing);
    FAIL() << "no error for a save folder that does not exist";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'/nonexistent/mlacheck_cases', does not exist or is not a folder"),
              std::string::npos)
        << e.what();
  }
  IsolationOptions zero;
  zero.timeout_seconds = 0;
  EXPECT_THROW(run_isolated(check, zero), Error);
  IsolationOptions slash;
  slash.case_text = "x";
  slash.save_dir = dir.path;
  slash.case_name = "a/b";
  EXPECT_THROW(run_isolated(check, slash), Error);
  EXPECT_THROW(run_isolated(nullptr, IsolationOptions{}), Error);
  EXPECT_FALSE(std::ifstream(marker).good()) << "a check ran despite bad options";
  // Without case text nothing is saved, so the folder is not checked.
  IsolationOptions no_case;
  no_case.save_dir = "/nonexistent/mlacheck_cases";
  EXPECT_EQ(run_isolated([] { return std::string("bad"); }, no_case).kind, IsolatedOutcome::kViolation);
}

TEST(RunIsolated, TheChildsStateDoesNotLeakIntoTheParent) {
  int counter = 0;
  const IsolatedOutcome o = run_isolated(
      [&counter] {
        counter = 42;
        return std::string();
      },
      IsolationOptions{});
  EXPECT_EQ(o.kind, IsolatedOutcome::kPassed);
  EXPECT_EQ(counter, 0);
}

}  // namespace
}  // namespace mlacheck
