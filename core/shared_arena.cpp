// The shared arena (core/shared_arena.h): one memfd per process, reserved at 64 GiB of address
// space and backed only where touched, carved best-fit into page-aligned blocks.
#include "core/shared_arena.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <mutex>

namespace mlacheck::shared_arena {
namespace {

constexpr int64_t kPage = 4096;
constexpr int64_t kReserve = int64_t{64} << 30;

struct State {
  std::mutex mutex;
  pid_t enabling_pid = 0;  // 0: off
  bool here = false;       // enable_here(): on in every process
  pid_t owner = 0;         // the process the arena below belongs to
  Arena arena;
  std::map<int64_t, int64_t> free_by_offset;    // offset -> bytes
  std::multimap<int64_t, int64_t> free_by_size;  // bytes -> offset
  std::map<int64_t, int64_t> used;               // offset -> bytes
};
State& state() {
  static auto* s = new State;  // never destroyed: buffers may be freed at exit
  return *s;
}

void add_free(State& s, int64_t offset, int64_t bytes) {
  // Coalesce with the neighbours.
  auto next = s.free_by_offset.lower_bound(offset);
  if (next != s.free_by_offset.end() && next->first == offset + bytes) {
    bytes += next->second;
    for (auto it = s.free_by_size.find(next->second); it != s.free_by_size.end(); ++it) {
      if (it->second == next->first) {
        s.free_by_size.erase(it);
        break;
      }
    }
    next = s.free_by_offset.erase(next);
  }
  if (next != s.free_by_offset.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      for (auto it = s.free_by_size.find(prev->second); it != s.free_by_size.end(); ++it) {
        if (it->second == prev->first) {
          s.free_by_size.erase(it);
          break;
        }
      }
      offset = prev->first, bytes += prev->second;
      s.free_by_offset.erase(prev);
    }
  }
  s.free_by_offset[offset] = bytes;
  s.free_by_size.emplace(bytes, offset);
}

// Makes this process's arena when it has none (or only one inherited from its parent).
bool ensure(State& s) {
  if (s.owner == getpid() && s.arena.fd >= 0) return true;
  // An inherited arena stays mapped (its buffers belong to the parent) but is never used here.
  s.arena = Arena{};
  s.free_by_offset.clear(), s.free_by_size.clear(), s.used.clear();
  const int fd = memfd_create("mlacheck-guarded-buffers", MFD_CLOEXEC);
  if (fd < 0) return false;
  if (ftruncate(fd, kReserve) != 0) {
    close(fd);
    return false;
  }
  void* p = mmap(nullptr, static_cast<size_t>(kReserve), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return false;
  }
  s.owner = getpid();
  s.arena = Arena{fd, static_cast<uint8_t*>(p), kReserve};
  add_free(s, 0, kReserve);
  return true;
}

}  // namespace

void enable_for_children() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.enabling_pid == 0) s.enabling_pid = getpid();
}

void enable_here() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.here = true;
}

bool active() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.here || (s.enabling_pid != 0 && s.enabling_pid != getpid());
}

uint8_t* allocate(int64_t bytes) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!ensure(s) || bytes < 0) return nullptr;
  bytes = std::max<int64_t>(kPage, (bytes + kPage - 1) / kPage * kPage);
  const auto fit = s.free_by_size.lower_bound(bytes);
  if (fit == s.free_by_size.end()) return nullptr;
  const int64_t offset = fit->second, have = fit->first;
  s.free_by_size.erase(fit);
  s.free_by_offset.erase(offset);
  if (have > bytes) add_free(s, offset + bytes, have - bytes);
  s.used[offset] = bytes;
  return s.arena.base + offset;
}

void release(uint8_t* p) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (p == nullptr || s.owner != getpid() || p < s.arena.base || p >= s.arena.base + s.arena.bytes) return;
  const int64_t offset = p - s.arena.base;
  const auto it = s.used.find(offset);
  if (it == s.used.end()) return;
  const int64_t bytes = it->second;
  s.used.erase(it);
  // Give large blocks' pages back to the system; small ones wait for reuse.
  if (bytes >= (int64_t{1} << 20)) fallocate(s.arena.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, bytes);
  add_free(s, offset, bytes);
}

void discard(uint8_t* p, int64_t bytes) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (p == nullptr || s.owner != getpid() || p < s.arena.base || p + bytes > s.arena.base + s.arena.bytes) return;
  fallocate(s.arena.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, p - s.arena.base, bytes);
}

bool allocation_of(const uint8_t* p, int64_t* offset, int64_t* bytes) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (p == nullptr || s.owner != getpid() || p < s.arena.base || p >= s.arena.base + s.arena.bytes) return false;
  const int64_t at = p - s.arena.base;
  auto it = s.used.upper_bound(at);
  if (it == s.used.begin()) return false;
  --it;
  if (at >= it->first + it->second) return false;
  *offset = it->first, *bytes = it->second;
  return true;
}

Arena current() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.owner == getpid() ? s.arena : Arena{};
}

}  // namespace mlacheck::shared_arena
