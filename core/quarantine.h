// Memory freed while a captured graph may still hold its address: kept, poisoned and watched
// instead of reused.
//
// A CUDA graph bakes every pointer of its launches in at capture. Scratch that the capturing code
// frees when the call returns (a per-call workspace, TensorRT-LLM #15534 and #16290), or that a
// later eager call replaces (vLLM #42885), goes back to the allocator while the graph still writes
// it at every replay. A caching allocator hands those bytes to the next tensor of that size, and
// the replay corrupts it without a fault: compute-sanitizer sees memory that is allocated, by
// someone else. Whether it shows depends on what the allocator does next.
//
// A Device (kernels/device.h) gives every guarded allocation it makes to its quarantine when the
// owner frees it while a graph captured on that device is alive (a hold() token lives). There the
// memory keeps its address and is never reused; its data is poisoned (NaN for every float of it,
// so a replay that reads it before writing computes NaN) and snapshotted, and writes_since_freed()
// names each kept buffer written since. When the last hold is dropped, everything kept is released.
// What is kept is bounded (max_bytes, oldest released first).
//
// A capture is covered from its start (open_capture()): per-call scratch that the captured call
// allocates and frees before the capture ends is baked into the graph as surely as scratch freed
// after it. Memory freed while a capture is open is kept untouched until the capture closes (the
// device may accept no work of its own then), and poisoned and snapshotted as the capture closes.
//
//   auto q = std::make_shared<Quarantine>();
//   memory->retire_to(q);            // what a Device does for each allocation
//   auto open = q->open_capture();   // what Device::capture holds while the body runs
//   auto hold = q->hold();           // what each captured graph keeps
//   memory.reset();                  // freed after the capture: kept, poisoned
//   graph->replay();                 // writes it
//   q->writes_since_freed();         // {"'scratch' (4096 bytes), freed while ... written: ..."}
//
// Not thread-safe: allocations, frees and checks happen on one thread, as for GuardedMemory.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/guarded_buffer.h"

namespace mlacheck {

class Quarantine : public std::enable_shared_from_this<Quarantine> {
 public:
  static constexpr int64_t kDefaultMaxBytes = int64_t{256} << 20;
  explicit Quarantine(int64_t max_bytes = kDefaultMaxBytes);
  ~Quarantine();
  Quarantine(const Quarantine&) = delete;
  Quarantine& operator=(const Quarantine&) = delete;

  // While any token lives, memory retired to this quarantine is kept when freed. Dropping the last
  // one releases what is kept. The quarantine must be owned by a shared_ptr.
  std::shared_ptr<void> hold();
  bool holding() const { return holds_ > 0; }
  // A hold for the time a capture is open: memory freed meanwhile is kept but not touched until the
  // last such token is dropped, when it is poisoned and armed as keep() does. Take the graph's own
  // hold() before dropping this one, or what was freed during the capture is released with it.
  std::shared_ptr<void> open_capture();
  bool capture_open() const { return open_captures_ > 0; }

  // Takes memory whose owner freed it (GuardedMemory's final classes call this from their
  // destructors, through GuardedMemory::retire): poisons and arms it, then keeps it (while a capture
  // is open, keeps it and does both when the capture closes). Memory that cannot be armed (a device
  // fault) is released instead. Releases the oldest kept memory past max_bytes.
  void keep(std::unique_ptr<GuardedMemory> m) noexcept;

  // One line per kept buffer written since it was freed (or since the last call that reported
  // it), oldest first; each reported buffer is armed again. Empty when none was.
  std::vector<std::string> writes_since_freed();

  size_t kept_count() const { return kept_.size() + freed_in_capture_.size(); }
  int64_t kept_bytes() const { return kept_bytes_; }

 private:
  void release_hold();
  void close_capture();
  // Poisons and arms m, then keeps it within max_bytes; releases it when it cannot be armed.
  void watch(std::unique_ptr<GuardedMemory> m) noexcept;

  int64_t max_bytes_;
  int64_t holds_ = 0;
  int64_t open_captures_ = 0;
  int64_t kept_bytes_ = 0;
  std::deque<std::unique_ptr<GuardedMemory>> kept_;
  std::vector<std::unique_ptr<GuardedMemory>> freed_in_capture_;  // not armed yet
};

}  // namespace mlacheck
