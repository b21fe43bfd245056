// The memory budget of a case (harness/memory_budget.h).
#include "harness/memory_budget.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <limits>

namespace mlacheck {
namespace {

std::atomic<int64_t>& budget_slot() {
  static std::atomic<int64_t> slot{0};  // 0: the default
  return slot;
}

ScopedCaseMemory*& innermost_slot() {
  static thread_local ScopedCaseMemory* innermost = nullptr;
  return innermost;
}

}  // namespace

int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return mul_bytes_saturating(pages, page);
}

int64_t default_case_memory_budget_bytes() {
  const int64_t physical = physical_memory_bytes();
  if (physical <= 0) return kMaxDefaultCaseMemoryBudget;
  return std::clamp(physical / kDefaultCaseMemoryDivisor, kMinCaseMemoryBudget, kMaxDefaultCaseMemoryBudget);
}

void set_case_memory_budget_bytes(int64_t bytes) { budget_slot().store(bytes > 0 ? bytes : 0); }

int64_t case_memory_budget_bytes() {
  const int64_t set = budget_slot().load();
  return set > 0 ? set : default_case_memory_budget_bytes();
}

ScopedCaseMemory::ScopedCaseMemory(int64_t budget_bytes) : budget_(budget_bytes), outer_(innermost_slot()) {
  innermost_slot() = this;
}
ScopedCaseMemory::~ScopedCaseMemory() { innermost_slot() = outer_; }
ScopedCaseMemory* ScopedCaseMemory::innermost() { return innermost_slot(); }

void charge_case_memory(const std::string& what, int64_t staged_bytes) {
  ScopedCaseMemory* scope = innermost_slot();
  if (scope == nullptr) return;
  const int64_t budget = scope->budget_;
  const int64_t total = add_bytes_saturating(scope->used_, mul_bytes_saturating(staged_bytes, kCaseMemoryCopies));
  if (total <= budget) {
    scope->used_ = total;
    return;
  }
  throw CaseMemoryExceeded("the case needs at least " + format_bytes(total) + " of memory (buffer '" + what +
                           "' stages " + format_bytes(staged_bytes) + ", held up to " +
                           std::to_string(kCaseMemoryCopies) + " times while a case runs), over the memory budget of " +
                           format_bytes(budget) + " (--max-mb raises it)");
}

std::string format_bytes(int64_t bytes) {
  char text[64];
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) {
    std::snprintf(text, sizeof text, "%lld B", static_cast<long long>(bytes));
  } else if (bytes < (int64_t{1} << 20)) {
    std::snprintf(text, sizeof text, "%.1f KiB", b / 1024.0);
  } else if (bytes < (int64_t{1} << 30)) {
    std::snprintf(text, sizeof text, "%.1f MiB", b / (1024.0 * 1024.0));
  } else {
    std::snprintf(text, sizeof text, "%.1f GiB", b / (1024.0 * 1024.0 * 1024.0));
  }
  return text;
}

int64_t add_bytes_saturating(int64_t a, int64_t b) {
  a = std::max<int64_t>(a, 0), b = std::max<int64_t>(b, 0);
  if (a > std::numeric_limits<int64_t>::max() - b) return std::numeric_limits<int64_t>::max();
  return a + b;
}

int64_t mul_bytes_saturating(int64_t a, int64_t b) {
  if (a <= 0 || b <= 0) return 0;
  if (a > std::numeric_limits<int64_t>::max() / b) return std::numeric_limits<int64_t>::max();
  return a * b;
}

}  // namespace mlacheck
