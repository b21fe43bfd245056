// Fiber stacks and ASan switch annotations for the host backend.
#include "core/backend/fiber_stack.h"

#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define MLA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MLA_ASAN 1
#endif
#endif
#if defined(MLA_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace mlacheck::simt::host::detail {

std::size_t default_stack_bytes() {
#if defined(MLA_ASAN)
  return 256 * 1024;
#else
  return 64 * 1024;
#endif
}

std::size_t Stack::page_size() {
  static const std::size_t p = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

StackPool& StackPool::instance() {
  static StackPool* pool = new StackPool;  // never destroyed: stacks may be in use at exit
  return *pool;
}

void StackPool::take(std::size_t n, std::size_t bytes, std::vector<Stack>& out) {
  out.clear();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<Stack>& free = free_[bytes];
    while (out.size() < n && !free.empty()) {
      out.push_back(free.back());
      free.pop_back();
    }
  }
  while (out.size() < n) out.push_back(map(bytes));
}

void StackPool::clear_shadow(const Stack* stacks, std::size_t n) {
#if defined(MLA_ASAN)
  for (std::size_t i = 0; i < n; ++i) ASAN_UNPOISON_MEMORY_REGION(stacks[i].bottom(), stacks[i].bytes);
#else
  (void)stacks, (void)n;
#endif
}

void StackPool::give_back(const std::vector<Stack>& stacks, std::size_t bytes, bool unwound_normally) {
  if (stacks.empty()) return;
  // The next fiber on a stack must not inherit the red zones of this one's frames.
  if (!unwound_normally) clear_shadow(stacks.data(), stacks.size());
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Stack>& free = free_[bytes];
  free.insert(free.end(), stacks.begin(), stacks.end());
}

Stack StackPool::map(std::size_t bytes) {
  const std::size_t page = Stack::page_size();
  bytes = (bytes + page - 1) / page * page;
  void* p = mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  MLA_REQUIRE(p != MAP_FAILED, "host backend: cannot map a ", bytes, "-byte fiber stack");
  mprotect(p, page, PROT_NONE);  // a stack overflow faults instead of corrupting its neighbour
  return Stack{static_cast<uint8_t*>(p), bytes};
}

void asan_start_switch(void** fake_stack, const void* bottom, std::size_t size) {
#if defined(MLA_ASAN)
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
#else
  (void)fake_stack, (void)bottom, (void)size;
#endif
}

void asan_finish_switch(void* fake_stack, const void** bottom_old, std::size_t* size_old) {
#if defined(MLA_ASAN)
  __sanitizer_finish_switch_fiber(fake_stack, bottom_old, size_old);
#else
  (void)fake_stack, (void)bottom_old, (void)size_old;
#endif
}

}  // namespace mlacheck::simt::host::detail
