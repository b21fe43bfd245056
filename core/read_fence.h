// Read bounds for host launches: under AddressSanitizer, every byte of a guarded host allocation
// (red zones included) that lies in none of the launch's views is made unaddressable while the
// launch runs, so a kernel that *reads* past a view is caught even when the bytes it read never
// change its result.
//
// The guards (core/guarded_buffer.h) see writes: a byte that changed. A read leaves nothing behind.
// DeepGEMM's scheduler read context_lens[batch_size] when there was less work than SMs; a metadata
// kernel read past its lengths during graph capture; a block-table load ran past the row's blocks.
// Each stayed inside its allocation, so a memory checker was blind to it, and the value read only
// sometimes mattered. A fence catches the read itself:
//
//   ReadFence fence;
//   fence.add(logits_memory, {{"logits", logits_view}});   // the bytes the launch may touch
//   fence.add(out_memory, {{"out", out_view}});
//   fence.arm();
//   launch(...);
//   std::optional<StrayAccess> a = fence.disarm();       // the first access outside every view
//
// The first fenced access is recorded with its buffer, nearest view and coordinates, and the fence
// is lifted at once (one AddressSanitizer report per launch, however many threads repeat it). A
// read up to 64 KiB past an allocation's red zones, into memory AddressSanitizer knows is not to be
// read, is recorded too, against the nearest fenced allocation; a write there, or any error farther
// away, ends the program as before.
//
// Precision is AddressSanitizer's: an 8-byte granule can be made addressable only as a prefix, so a
// view's bytes that begin inside a granule leave that granule's leading bytes open (a gap of fewer
// than 8 bytes before a view element is not fenced). Elements of 4 bytes and more in rows whose
// padding is a multiple of 8 bytes are fenced exactly.
//
// Without AddressSanitizer (the Release build) available() is false and a fence does nothing. The
// sanitizer build must run with halt_on_error=0, so that the program goes on after a fenced access;
// programs that link this file get that default (and suppress_equal_pcs=0, so every launch's first
// fenced access is reported, not only the first at each program counter). An AddressSanitizer error
// anywhere else still ends the program, as before, with its report.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/guarded_buffer.h"

namespace mlacheck {

struct StrayAccess {
  bool write = false;
  int64_t bytes = 0;  // the access's size
  std::string buffer;
  StrayRegion region = StrayRegion::kBetweenViews;
  int64_t offset = 0;  // of the access's first byte, from the allocation's data start
  int64_t allocation_bytes = 0, red_zone = 0;  // of the allocation it lies in, or lies nearest to
  // The nearest view of the launch (input or output) and the byte's coordinates in it.
  std::string nearest_view;
  View view;
  std::vector<int64_t> coords;
  std::string describe() const;  // one line
};

// The bytes a launch may touch of an allocation of `bytes`: the views' elements merged into runs
// [begin, end) in increasing order, each with the index of the first view it came from.
struct FenceRun {
  int64_t begin, end;
  std::size_t view;
};
std::vector<FenceRun> fence_runs(const std::vector<NamedView>& views, int64_t bytes);

class ReadFence {
 public:
  // Whether fences work in this build (it was compiled with AddressSanitizer) and are on
  // (MLACHECK_READ_FENCE=0 turns them off, to measure what they cost).
  static bool available();
  // Whether device memory is fenced too (GuardedMemory::fence_views: on cuda, NVTX memory regions
  // that compute-sanitizer's memcheck enforces): MLACHECK_DEVICE_FENCE=1 in the environment, which
  // `--sanitize memcheck` sets. Without a tool attached the regions cost little and do nothing.
  static bool device_fences();

  ReadFence() = default;
  ~ReadFence();
  ReadFence(const ReadFence&) = delete;
  ReadFence& operator=(const ReadFence&) = delete;

  // The launch may touch these views of memory and nothing else of it. Device memory is handed to
  // its own fence_views when device_fences() (a host fence cannot see a device's reads), else
  // ignored; a memory added twice keeps the union of its views. Reserved memory
  // (core/reserved_buffer.h) is left alone: touching its unbacked pages faults already.
  void add(GuardedMemory& memory, const std::vector<NamedView>& views);
  // Fences every added memory. At most one fence is armed at a time in a process.
  void arm();
  // Lifts the fence and returns the first access it saw, if any.
  std::optional<StrayAccess> disarm();

 private:
  struct Entry {
    GuardedMemory* memory;
    std::vector<NamedView> views;
  };
  std::vector<Entry> entries_;
  std::vector<Entry> device_;  // fenced through GuardedMemory::fence_views
  bool armed_ = false;
  bool fenced_ = false;  // armed with memory to fence, in a build that can
  bool device_armed_ = false;
};

}  // namespace mlacheck
