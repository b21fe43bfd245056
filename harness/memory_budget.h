// The memory budget of one case: the most memory a case's staged buffers may hold while it runs. A
// Buffer (harness/staged_buffer.h) charges its bytes before it allocates them, so a case past the
// budget is refused with the figure instead of growing past gigabytes. The command line sets the
// budget from --max-mb; by default it is a quarter of the machine's physical memory, at most 2 GiB.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace mlacheck {

// The default budget: physical memory / kDefaultCaseMemoryDivisor, within
// [kMinCaseMemoryBudget, kMaxDefaultCaseMemoryBudget] (--max-mb goes past the cap).
constexpr int64_t kDefaultCaseMemoryDivisor = 4;
constexpr int64_t kMinCaseMemoryBudget = int64_t{64} << 20;          // 64 MiB
constexpr int64_t kMaxDefaultCaseMemoryBudget = int64_t{2} << 30;    // 2 GiB
// A staged byte is held up to about this many times while a case runs: the host bytes the oracle
// reads, the device allocation, the snapshot arming takes of it, and the generator's and oracle's
// own copies of the data. Measured (mlacheck repro, host): a top-k case of 127 x 2^20 logits
// (508 MiB staged) peaks at 1.6 GB resident with rows of 7 values and 3.2 GB with full rows.
constexpr int64_t kCaseMemoryCopies = 7;

// Bytes of physical memory on this machine; 0 when the system does not say.
int64_t physical_memory_bytes();
// The default budget (see above; 2 GiB when the machine's memory is unknown).
int64_t default_case_memory_budget_bytes();

// The budget every case is checked against, process-wide. Set it before cases run (the command
// line does, from --max-mb); a value <= 0 restores the default.
void set_case_memory_budget_bytes(int64_t bytes);
int64_t case_memory_budget_bytes();

// A case past the budget. Not an mlacheck::Error on purpose: a runner takes an Error thrown while a
// case runs for the implementation's refusal (a verdict), and this is the case's own size, found
// before anything ran. Runners catch it and report it as bad input (exit 2).
class CaseMemoryExceeded : public std::runtime_error {
 public:
  explicit CaseMemoryExceeded(const std::string& what) : std::runtime_error(what) {}
};

// One case's tally: while one is alive on a thread, charge_case_memory adds to it and refuses the
// buffer that takes the total past the budget. Scopes nest; the innermost one counts.
class ScopedCaseMemory {
 public:
  explicit ScopedCaseMemory(int64_t budget_bytes = case_memory_budget_bytes());
  ~ScopedCaseMemory();
  ScopedCaseMemory(const ScopedCaseMemory&) = delete;
  ScopedCaseMemory& operator=(const ScopedCaseMemory&) = delete;
  int64_t used() const { return used_; }      // bytes charged so far (staged bytes x copies)
  int64_t budget() const { return budget_; }
  static ScopedCaseMemory* innermost();

 private:
  friend void charge_case_memory(const std::string& what, int64_t staged_bytes);
  int64_t budget_, used_ = 0;
  ScopedCaseMemory* outer_;
};

// Charges staged_bytes (held kCaseMemoryCopies times) for the buffer `what`, before it is allocated,
// to the innermost ScopedCaseMemory of this thread; with none, nothing is checked (the test suites'
// own generated cases, production sizes on a GPU included, run unbudgeted: the budget is for cases
// a user or a file supplies, and their runners open a scope). Throws CaseMemoryExceeded with the
// figures: "the case needs at least 3.5 GiB of memory (buffer 'logits'
// stages 508.0 MiB, held up to 7 times while a case runs), over the memory budget of 2.0 GiB
// (--max-mb raises it)".
void charge_case_memory(const std::string& what, int64_t staged_bytes);

// "1.5 GiB", "12.0 MiB", "512 B": a byte count as people read it.
std::string format_bytes(int64_t bytes);

// a + b for byte counts, or INT64_MAX when it would pass it; negative terms count as 0.
int64_t add_bytes_saturating(int64_t a, int64_t b);
// a * b for byte counts, or INT64_MAX when it would pass it; a term <= 0 gives 0.
int64_t mul_bytes_saturating(int64_t a, int64_t b);

}  // namespace mlacheck
