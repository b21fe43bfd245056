// The pool of mapped host slots (core/backend/cuda_mapped_slot.h).
#include "core/backend/cuda_mapped_slot.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "core/backend/cuda_runtime.h"

namespace mlacheck::cuda {
namespace {

class SlotPool {
 public:
  static SlotPool& get() {
    static SlotPool* pool = new SlotPool;  // never destroyed: see the header
    return *pool;
  }
  int take() {
    std::lock_guard<std::mutex> lock(m_);
    if (free_.empty()) grow();
    const int i = free_.back();
    free_.pop_back();
    return i;
  }
  void give(int i) {
    std::lock_guard<std::mutex> lock(m_);
    free_.push_back(i);
  }
  void* at(int i, bool device) {
    std::lock_guard<std::mutex> lock(m_);
    const auto& c = chunks_[static_cast<size_t>(i / MappedSlot::kSlotsPerChunk)];
    return (device ? c.second : c.first) + static_cast<size_t>(i % MappedSlot::kSlotsPerChunk) * MappedSlot::kSlotBytes;
  }

 private:
  void grow() {
    constexpr size_t bytes = MappedSlot::kSlotBytes * MappedSlot::kSlotsPerChunk;
    void* p = nullptr;
    check(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable), "mapped slots: cudaHostAlloc");
    std::memset(p, 0, bytes);
    void* d = nullptr;
    check(cudaHostGetDevicePointer(&d, p, 0), "mapped slots: cudaHostGetDevicePointer");
    const int base = static_cast<int>(chunks_.size()) * MappedSlot::kSlotsPerChunk;
    chunks_.emplace_back(static_cast<uint8_t*>(p), static_cast<uint8_t*>(d));
    for (int i = MappedSlot::kSlotsPerChunk - 1; i >= 0; --i) free_.push_back(base + i);
  }
  std::mutex m_;
  std::vector<std::pair<uint8_t*, uint8_t*>> chunks_;  // host, device
  std::vector<int> free_;
};

}  // namespace

MappedSlot::MappedSlot() : index_(SlotPool::get().take()) {}
MappedSlot::~MappedSlot() {
  if (index_ >= 0) SlotPool::get().give(index_);
}
MappedSlot::MappedSlot(MappedSlot&& o) noexcept : index_(std::exchange(o.index_, -1)) {}
MappedSlot& MappedSlot::operator=(MappedSlot&& o) noexcept {
  if (this != &o) {
    if (index_ >= 0) SlotPool::get().give(index_);
    index_ = std::exchange(o.index_, -1);
  }
  return *this;
}
void* MappedSlot::host() const { return index_ < 0 ? nullptr : SlotPool::get().at(index_, false); }
void* MappedSlot::device() const { return index_ < 0 ? nullptr : SlotPool::get().at(index_, true); }

}  // namespace mlacheck::cuda
