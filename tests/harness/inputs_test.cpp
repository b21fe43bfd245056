// Tests of the budgets on inputs: harness/memory_budget.h (a case's buffers refused past the
// budget, before they are allocated, with the figures) and harness/input_file.h (only regular
// files, never more than the limit, the type and size checked before reading).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <limits>
#include <string>

#include "core/error.h"
#include "harness/input_file.h"
#include "harness/memory_budget.h"
#include "harness/staged_buffer.h"

namespace mlacheck {
namespace {

// The one-line message of the exception f throws, or "" when it throws none.
template <class F>
std::string message_of(F f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// Sets the process-wide budget for one test, and restores the default after.
struct BudgetOf {
  explicit BudgetOf(int64_t bytes) { set_case_memory_budget_bytes(bytes); }
  ~BudgetOf() { set_case_memory_budget_bytes(0); }
};

TEST(MemoryBudget, TheDefaultIsAFractionOfPhysicalMemoryWithinItsBounds) {
  const int64_t physical = physical_memory_bytes();
  ASSERT_GT(physical, 0);
  const int64_t d = default_case_memory_budget_bytes();
  EXPECT_GE(d, kMinCaseMemoryBudget);
  EXPECT_LE(d, kMaxDefaultCaseMemoryBudget);
  EXPECT_LE(d, std::max(physical / kDefaultCaseMemoryDivisor, kMinCaseMemoryBudget));
  EXPECT_EQ(case_memory_budget_bytes(), d);
  {
    const BudgetOf b(int64_t{5} << 30);  // --max-mb may go past the default's cap
    EXPECT_EQ(case_memory_budget_bytes(), int64_t{5} << 30);
  }
  EXPECT_EQ(case_memory_budget_bytes(), d);
  set_case_memory_budget_bytes(-3);  // <= 0: the default
  EXPECT_EQ(case_memory_budget_bytes(), d);
}

TEST(MemoryBudget, ByteArithmeticSaturatesInsteadOfOverflowing) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(add_bytes_saturating(kMax, 1), kMax);
  EXPECT_EQ(add_bytes_saturating(3, -5), 3);
  EXPECT_EQ(mul_bytes_saturating(int64_t{1} << 40, int64_t{1} << 40), kMax);
  EXPECT_EQ(mul_bytes_saturating(-1, 8), 0);
  EXPECT_EQ(mul_bytes_saturating(6, 7), 42);
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(int64_t{3} << 19), "1.5 MiB");
  EXPECT_EQ(format_bytes(int64_t{2} << 30), "2.0 GiB");
}

// A top-k case of 4096 x 32768 float logits (512 MiB) is refused by a 2 GiB budget when its
// logits buffer is declared, before a byte of it is allocated, and the message gives the figures.
TEST(MemoryBudget, ABufferPastTheBudgetIsRefusedBeforeItIsAllocated) {
  const BudgetOf b(int64_t{2} << 30);
  const ScopedCaseMemory scope;
  const Buffer small("seq_lens", View::contiguous(DType::kI32, {4096}), 8, 0);
  EXPECT_EQ(scope.used(), (4096 * 4 + 8) * kCaseMemoryCopies);
  const auto start = std::chrono::steady_clock::now();
  const std::string e =
      message_of([] { const Buffer big("logits", View::contiguous(DType::kF32, {4096, 32768}), 12, 0); });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.5);
  EXPECT_EQ(e, "the case needs at least 3.5 GiB of memory (buffer 'logits' stages 512.0 MiB, held up to 7 times while a "
               "case runs), over the memory budget of 2.0 GiB (--max-mb raises it)");
  EXPECT_EQ(scope.used(), (4096 * 4 + 8) * kCaseMemoryCopies);  // the refused buffer is not counted
  // The thrown type is not an mlacheck::Error: a runner must not take it for the implementation's.
  EXPECT_THROW(Buffer("logits", View::contiguous(DType::kF32, {4096, 32768}), 0, 0), CaseMemoryExceeded);
  try {
    Buffer("logits", View::contiguous(DType::kF32, {4096, 32768}), 0, 0);
  } catch (const Error&) {
    ADD_FAILURE() << "CaseMemoryExceeded is an mlacheck::Error";
  } catch (const CaseMemoryExceeded&) {
  }
}

TEST(MemoryBudget, BuffersAddUpWithinAScopeAndNothingIsCheckedWithout) {
  const BudgetOf b(int64_t{1} << 20);  // 1 MiB: 1 MiB / 7 staged bytes
  const View v = View::contiguous(DType::kU8, {100000});
  {
    const ScopedCaseMemory scope;
    EXPECT_EQ(scope.budget(), int64_t{1} << 20);
    const Buffer one("a", v, 0, 0);
    EXPECT_NE(message_of([&] { const Buffer two("b", v, 0, 0); }).find("buffer 'b'"), std::string::npos);
    {
      const ScopedCaseMemory inner(int64_t{2} << 20);  // the innermost scope counts
      const Buffer two("b", v, 0, 0);
      EXPECT_EQ(inner.used(), 100000 * kCaseMemoryCopies);
    }
    EXPECT_EQ(scope.used(), 100000 * kCaseMemoryCopies);
    // The fuzzers' staging budget stands in for it while one is in force.
    const ScopedStagingBudget staging(int64_t{1} << 30);
    const Buffer c("c", View::contiguous(DType::kU8, {200000}), 0, 0);
  }
  // Without a scope (the suites' generated cases) nothing is checked.
  const Buffer big("c", View::contiguous(DType::kU8, {1 << 20}), 0, 0);
  EXPECT_EQ(ScopedCaseMemory::innermost(), nullptr);
}

std::string temp_path(const std::string& name) {
  const std::string p = ::testing::TempDir() + "inputs_test_" + name;
  ::unlink(p.c_str());
  return p;
}

TEST(InputFile, ARegularFileIsReadWhole) {
  const std::string p = temp_path("ok");
  std::ofstream(p, std::ios::binary) << std::string("property x\n\0k 1\n", 16);
  EXPECT_EQ(read_input_file(p), std::string("property x\n\0k 1\n", 16));
  const std::string empty = temp_path("empty");
  std::ofstream(empty).close();
  EXPECT_EQ(read_input_file(empty), "");
}

TEST(InputFile, SpecialFilesAreRefusedByTypeBeforeAnyRead) {
  const std::string fifo = temp_path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string sock = temp_path("sock");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(sock.size(), sizeof addr.sun_path);
  sock.copy(addr.sun_path, sock.size());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"/dev/zero", "/dev/zero: a character device, not a regular file"},
      {"/dev/null", "/dev/null: a character device, not a regular file"},
      {fifo, fifo + ": a FIFO (named pipe), not a regular file"},
      {sock, sock + ": a socket, not a regular file"},
      {::testing::TempDir(), ::testing::TempDir() + ": a directory, not a regular file (repro --all DIR runs a folder's .case files)"},
      {"/nonexistent/x.case", "/nonexistent/x.case: No such file or directory"},
      {"", "an empty file name"},
  };
  for (const auto& [path, want] : refused) {
    const auto start = std::chrono::steady_clock::now();
    const std::string p = path;
    EXPECT_EQ(message_of([&] { read_input_file(p); }), want);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0) << path;
  }
  ::close(fd);
}

TEST(InputFile, AFileOverTheLimitIsToldWithItsSize) {
  const std::string p = temp_path("big");
  std::ofstream(p, std::ios::binary) << std::string(5000000, 'x');
  EXPECT_EQ(message_of([&] { read_input_file(p); }),
            p + ": 4.8 MiB (5000000 bytes), over the 4.0 MiB limit of an input file");
  EXPECT_EQ(message_of([&] { read_input_file(p, 100); }), p + ": 4.8 MiB (5000000 bytes), over the 100 B limit of an input file");
  EXPECT_EQ(read_input_file(p, 5000000).size(), 5000000u);
  // A file whose size says 0 but that holds more (as /proc's do) is read only up to the limit.
  if (::access("/proc/self/status", R_OK) == 0) {
    EXPECT_NE(message_of([] { read_input_file("/proc/self/status", 16); }).find("more than 16 B"), std::string::npos);
  }
}

}  // namespace
}  // namespace mlacheck
