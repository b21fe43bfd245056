// Staging for properties and tests: one guarded allocation on a device, the host bytes it is filled
// from (what the oracle reads) and a view in it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/guarded_buffer.h"
#include "core/reserved_buffer.h"
#include "core/tensor.h"
#include "harness/memory_budget.h"
#include "kernels/device.h"

namespace mlacheck {

// A cap on the bytes Buffers may stage on this host thread, for fuzzing: a case's data is made on
// the host before any of it reaches a device, so a device's allocation budget alone comes too late
// (a fuzzed case spent a second filling 40 MB of q before its upload was refused). Past it, the
// Buffer constructor throws StagingBudgetExceeded. Budgets nest; the innermost one counts.
class StagingBudgetExceeded : public Error {
 public:
  explicit StagingBudgetExceeded(const std::string& what) : Error(what) {}
};
class ScopedStagingBudget {
 public:
  explicit ScopedStagingBudget(int64_t max_bytes) : max_(max_bytes), outer_(current()) { current() = this; }
  ~ScopedStagingBudget() { current() = outer_; }
  ScopedStagingBudget(const ScopedStagingBudget&) = delete;
  ScopedStagingBudget& operator=(const ScopedStagingBudget&) = delete;
  bool exceeded() const { return exceeded_; }
  // Whether a budget is in force on this thread (the fuzzers' own: it then stands in for the case
  // memory budget, harness/memory_budget.h).
  static bool active() { return current() != nullptr; }
  // Counts bytes against the innermost budget of this thread, if any.
  static void charge(const std::string& what, int64_t bytes) {
    ScopedStagingBudget* b = current();
    if (b == nullptr) return;
    b->used_ += bytes;
    if (b->used_ <= b->max_) return;
    b->exceeded_ = true;
    throw StagingBudgetExceeded("staging '" + what + "' takes a case past " + std::to_string(b->max_ >> 20) + " MiB");
  }

 private:
  static ScopedStagingBudget*& current() {
    static thread_local ScopedStagingBudget* innermost = nullptr;
    return innermost;
  }
  int64_t max_, used_ = 0;
  bool exceeded_ = false;
  ScopedStagingBudget* outer_;
};

struct Buffer {
  std::string name;
  View view;
  std::vector<uint8_t> host;  // empty for a reserved buffer (see reserved())
  std::unique_ptr<GuardedMemory> memory;

  Buffer() = default;
  // Room for v at its byte offset and `tail` bytes after it, every byte `fill` until written. The
  // bytes are charged to the staging budget (fuzzing) or else the case memory budget before they
  // are allocated: a case too large for either throws here, having allocated nothing for this buffer.
  Buffer(std::string n, const View& v, int64_t tail, uint8_t fill) : name(std::move(n)), view(v) {
    const int64_t bytes = add_bytes_saturating(std::max(v.byte_span().end, v.byte_offset()), tail);
    charge(bytes);
    host.assign(static_cast<size_t>(bytes), fill);
  }
  // An input of gigabytes of which only the byte ranges `backed` are staged, each `fill` until
  // written: the rest is reserved, not backed, on the host (zero) and on the device (it faults when
  // touched; core/reserved_buffer.h). Only the backed bytes are charged. For a KV cache whose
  // blocks lie past 2^31 or 2^32 bytes. writable: the testbed may declare output views in it (a
  // cache written at far slots; Device::reserve says where that is supported).
  static Buffer reserved(std::string n, const View& v, const std::vector<ByteSpan>& backed, uint8_t fill,
                         bool writable = false) {
    Buffer b;
    b.name = std::move(n);
    b.view = v;
    const int64_t bytes = std::max(v.byte_span().end, v.byte_offset());
    int64_t staged = 0;
    for (const ByteSpan& r : backed) {
      MLA_REQUIRE(r.begin >= 0 && r.begin <= r.end && r.end <= bytes, "buffer '", b.name, "': backed range [", r.begin,
                  ", ", r.end, ") lies outside its ", bytes, " bytes");
      staged += r.size();
    }
    b.charge(staged);
    b.lazy = std::make_unique<LazyBytes>(bytes);
    for (const ByteSpan& r : backed) {
      b.lazy->open(r.begin, r.end);
      std::memset(b.lazy->data() + r.begin, fill, static_cast<size_t>(r.size()));
    }
    b.backed = backed;
    b.writable = writable;
    return b;
  }
  // The host bytes (what the oracle reads) and how many.
  bool is_reserved() const { return lazy != nullptr; }  // Buffer::reserved: only ranges are staged
  uint8_t* bytes() { return lazy ? lazy->data() : host.data(); }
  const uint8_t* bytes() const { return lazy ? lazy->data() : host.data(); }
  int64_t size() const { return lazy ? lazy->size() : static_cast<int64_t>(host.size()); }

  template <class T>
  void put(const std::vector<int64_t>& coords, T value) {
    std::memcpy(bytes() + view.byte_offset_of(coords), &value, sizeof(T));
  }
  template <class T>
  void put(std::initializer_list<int64_t> coords, T value) {
    std::memcpy(bytes() + view.byte_offset_of(coords), &value, sizeof(T));
  }
  HostTensor host_tensor() { return HostTensor(bytes(), view); }
  kernels::DeviceTensor device_tensor() const { return {memory->data(), view}; }
  // A new allocation on the device, the host bytes written into it, queued on the device's stream
  // (GuardedMemory::queue_write): a launch queued there next sees them.
  void upload(kernels::Device& device) {
    memory = lazy ? device.reserve(name, size(), backed, writable) : device.allocate(name, size());
    refill(device.stream());
  }
  // Writes the host bytes into the allocation the buffer already has, queued on stream (null: at once).
  void refill(void* stream) {
    if (lazy) {
      for (const ByteSpan& r : backed) memory->queue_write(r.begin, bytes() + r.begin, r.size(), stream);
    } else {
      memory->queue_write(0, host.data(), size(), stream);
    }
  }
  // Reads the device's bytes back into host (a reserved buffer's backed ranges).
  void download() {
    if (lazy) {
      for (const ByteSpan& r : backed) memory->read(r.begin, bytes() + r.begin, r.size());
      return;
    }
    memory->read(0, host.data(), size());
  }

 private:
  void charge(int64_t bytes) const {
    ScopedStagingBudget::charge(name, bytes);
    if (!ScopedStagingBudget::active()) charge_case_memory(name, bytes);
  }
  std::unique_ptr<LazyBytes> lazy;  // a reserved buffer's host bytes
  std::vector<ByteSpan> backed;     // and the ranges staged
  bool writable = false;            // whether output views may be declared in it
};

// The guarded memory of each buffer, for arm_all and check_all (core/guarded_buffer.h), which arm
// or check a launch's buffers together (on cuda in one pass with one synchronization); the testbed
// (harness/testbed.h) runs every launch through them.
inline std::vector<GuardedMemory*> guarded_memory(const std::vector<Buffer*>& buffers) {
  std::vector<GuardedMemory*> memory;
  memory.reserve(buffers.size());
  for (Buffer* b : buffers) memory.push_back(b->memory.get());
  return memory;
}

}  // namespace mlacheck
