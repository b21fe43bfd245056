// A slot of mapped host memory (cudaHostAllocMapped): a kernel writes a small result there, and the
// host reads it after synchronizing, with no copy queued. The guarded buffers' check kernels leave
// their tallies in one (core/backend/cuda_guarded_buffer.h).
//
// Slots come from a pool the process keeps: chunks of kSlotsPerChunk slots of kSlotBytes each,
// allocated as needed and never freed (freeing them at exit could run after the CUDA runtime has
// shut down). An owner holds its slot for its life and gives it back on destruction; move-only.
#pragma once

#include <cstddef>

namespace mlacheck::cuda {

class MappedSlot {
 public:
  static constexpr std::size_t kSlotBytes = 64;  // 16-byte aligned
  static constexpr int kSlotsPerChunk = 256;

  MappedSlot();  // takes a free slot (allocating a chunk when none is left); throws LaunchError
  ~MappedSlot();
  MappedSlot(MappedSlot&& o) noexcept;
  MappedSlot& operator=(MappedSlot&& o) noexcept;
  MappedSlot(const MappedSlot&) = delete;
  MappedSlot& operator=(const MappedSlot&) = delete;

  // The slot's kSlotBytes as the host sees them and as a kernel addresses them (null when moved from).
  void* host() const;
  void* device() const;
  int index() const { return index_; }  // counts across chunks; -1 when moved from

 private:
  int index_ = -1;
};

}  // namespace mlacheck::cuda
