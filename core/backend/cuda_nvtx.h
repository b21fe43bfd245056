// NVTX memory regions for compute-sanitizer: a guarded device allocation registered as a
// sub-allocator heap whose only regions are a launch's views, so that memcheck reports an access
// to any other byte of it (a read past a view inside the allocation, which plain memcheck cannot
// see), naming the region nearest to it.
//
// The NVTX calls do nothing unless a tool is attached (compute-sanitizer is one), and they are made
// only when device fences are on (core/read_fence.h, MLACHECK_DEVICE_FENCE=1, which `--sanitize
// memcheck` sets). nvtx3 is header-only and ships with the CUDA toolkit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mlacheck::cuda {

struct NvtxRegion {
  const void* begin;
  std::size_t bytes;
  std::string name;
};

// An allocation registered as a heap for its lifetime, its regions replaced launch by launch. (A
// heap unregistered is, to memcheck, memory no longer allocated: the guards' own kernels would then
// be reported. So between launches its one region is the whole allocation.)
class NvtxHeap {
 public:
  NvtxHeap() = default;
  NvtxHeap(NvtxHeap&& o) noexcept : heap_(o.heap_), begin_(o.begin_), bytes_(o.bytes_) { o.heap_ = nullptr; }
  NvtxHeap& operator=(NvtxHeap&& o) noexcept;
  ~NvtxHeap();
  // Only these regions of [begin, begin + bytes) may be touched (the heap is registered on first use).
  void fence(const void* begin, std::size_t bytes, const std::vector<NvtxRegion>& regions);
  // The whole allocation may be touched again.
  void lift(const std::string& name);

 private:
  void* heap_ = nullptr;
  const void* begin_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace mlacheck::cuda
