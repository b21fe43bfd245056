// Fiber stacks for the host backend (mmap'd, a guard page below, pooled across launches) and the
// AddressSanitizer annotations every fiber switch needs. Internal to host_executor.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace mlacheck::simt::host::detail {

// Usable bytes per fiber stack when the options say 0: 64 KiB, or 256 KiB under ASan, whose
// instrumented frames are several times larger.
std::size_t default_stack_bytes();

struct Stack {
  uint8_t* base = nullptr;  // the guard page
  std::size_t bytes = 0;    // usable bytes above it
  void* top() const { return base + page_size() + bytes; }
  void* bottom() const { return base + page_size(); }
  static std::size_t page_size();
};

// Process-wide and thread-safe; stacks are never unmapped (one may be in use at exit).
class StackPool {
 public:
  static StackPool& instance();
  // n stacks of `bytes` usable bytes each, under one lock.
  void take(std::size_t n, std::size_t bytes, std::vector<Stack>& out);
  // `unwound_normally`: every fiber on these stacks returned from each of its frames, so ASan's
  // epilogues already cleared their red zones; otherwise (a fault abandoned the block) the stacks'
  // shadow is cleared here, so the next fiber does not inherit stale red zones. Clearing a whole
  // 256 KiB stack per GPU thread cost a quarter of a small fuzz case's time.
  void give_back(const std::vector<Stack>& stacks, std::size_t bytes, bool unwound_normally);
  // Clears the ASan shadow of n stacks whose fibers were abandoned (a no-op without ASan).
  static void clear_shadow(const Stack* stacks, std::size_t n);

 private:
  static Stack map(std::size_t bytes);
  std::mutex mutex_;
  std::map<std::size_t, std::vector<Stack>> free_;
};

// Tell ASan which stack is live around a switch (no-ops without ASan); see
// <sanitizer/common_interface_defs.h> for the protocol.
void asan_start_switch(void** fake_stack, const void* bottom, std::size_t size);
void asan_finish_switch(void* fake_stack, const void** bottom_old, std::size_t* size_old);

}  // namespace mlacheck::simt::host::detail
