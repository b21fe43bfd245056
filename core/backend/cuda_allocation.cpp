// DeviceAllocation, PinnedHostAllocation and the caches of freed blocks behind them
// (core/backend/cuda_runtime.h), and what a capture's body may not do to them.
#include "core/backend/cuda_runtime.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace mlacheck::cuda {

size_t allocation_size_class(size_t bytes) {
  constexpr size_t kMin = 512, kPow2Max = size_t(64) << 20, kStep = size_t(2) << 20;
  if (bytes <= kMin) return kMin;
  if (bytes > kPow2Max) return (bytes + kStep - 1) / kStep * kStep;
  size_t c = kMin;
  while (c < bytes) c <<= 1;
  return c;
}

namespace {

bool cache_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("MLACHECK_CUDA_CACHE");
    return !(v && std::string(v) == "0");
  }();
  return on;
}

// CaptureBody scopes alive on this thread.
thread_local int capture_bodies = 0;

void (*before_free_hook)(void* base) noexcept = nullptr;

// Freed blocks by size class, up to a total; never destroyed (blocks may be live at exit, and the
// CUDA context may be gone before static destructors run). A block given back may still be in use
// by queued work, as cudaFree would wait for: it waits in `unsynced_` until a take() that finds
// nothing ready synchronizes the device once for all of them (not once per block given back, which
// cost a fuzzed case a device synchronization per allocation).
class BlockCache {
 public:
  BlockCache(size_t limit, cudaError_t (*free_fn)(void*)) : limit_(limit), free_(free_fn) {}
  void* take(size_t size_class) {
    std::lock_guard<std::mutex> lock(mutex_);
    void* p = take_ready(size_class);
    if (p == nullptr && !unsynced_.empty() && capture_bodies == 0) {
      // After a sticky fault the blocks are dropped (the context is lost; nothing more can be done
      // with them). Another error (an earlier launch's, as cudaFree may return; a synchronize refused
      // inside a graph capture) leaves them waiting: they were not seen idle.
      const cudaError_t e = cudaDeviceSynchronize();
      if (e == cudaSuccess) {
        blocks_.insert(unsynced_.begin(), unsynced_.end());
        unsynced_.clear();
        p = take_ready(size_class);
      } else if (is_sticky(e)) {
        for (const auto& b : unsynced_) cached_ -= b.first;
        unsynced_.clear();
      }
    }
    ++(p ? hits_ : misses_);
    return p;
  }
  // False when the cache is full: the caller frees the block.
  bool put(void* p, size_t size_class) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cached_ + size_class > limit_) return false;
    unsynced_.emplace_back(size_class, p);
    cached_ += size_class;
    return true;
  }
  void release_all() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool device = free_ == &cudaFree;
    for (auto& [size, p] : blocks_) {
      if (device && before_free_hook) before_free_hook(p);
      (void)free_(p);
    }
    for (auto& [size, p] : unsynced_) {  // cudaFree waits for the device itself
      if (device && before_free_hook) before_free_hook(p);
      (void)free_(p);
    }
    blocks_.clear();
    unsynced_.clear();
    cached_ = 0;
  }
  void stats(size_t& cached, size_t& hits, size_t& misses) {
    std::lock_guard<std::mutex> lock(mutex_);
    cached = cached_, hits = hits_, misses = misses_;
  }

 private:
  void* take_ready(size_t size_class) {
    // The block freed last (multimap keeps equal keys in insertion order): likeliest still cached.
    const auto range = blocks_.equal_range(size_class);
    if (range.first == range.second) return nullptr;
    const auto it = std::prev(range.second);
    void* p = it->second;
    blocks_.erase(it);
    cached_ -= size_class;
    return p;
  }
  std::mutex mutex_;
  std::multimap<size_t, void*> blocks_;                // ready to hand out
  std::vector<std::pair<size_t, void*>> unsynced_;     // given back since the last synchronize
  size_t cached_ = 0, hits_ = 0, misses_ = 0;
  const size_t limit_;
  cudaError_t (*const free_)(void*);
};

BlockCache& device_cache() {
  static BlockCache* c = new BlockCache(size_t(2) << 30, &cudaFree);
  return *c;
}
BlockCache& pinned_cache() {
  static BlockCache* c = new BlockCache(size_t(512) << 20, &cudaFreeHost);
  return *c;
}

// Runs f with this thread in relaxed stream-capture mode, then restores the mode it had. An
// allocation or free made while some stream is being captured (a buffer's first arm inside
// Device::capture takes page-locked staging) is not part of the graph: it happens at once, which
// the default global mode refuses (cudaErrorStreamCaptureUnsupported, and the capture is lost).
template <class F>
cudaError_t outside_capture(F&& f) {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  const bool exchanged = cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess;
  const cudaError_t e = f();
  if (exchanged) (void)cudaThreadExchangeStreamCaptureMode(&mode);
  return e;
}

// A block of at least `bytes` from `cache`, else from `alloc` (retried once with the caches
// emptied); its size class in `capacity`. Throws through check() with `what` on failure.
template <class Alloc>
void* acquire(BlockCache& cache, size_t bytes, size_t& capacity, Alloc alloc, const char* what) {
  const bool cached = cache_enabled();
  capacity = cached ? allocation_size_class(bytes) : bytes;
  if (cached) {
    if (void* p = cache.take(capacity)) return p;
  }
  void* p = nullptr;
  cudaError_t e = outside_capture([&] { return alloc(&p, capacity); });
  if (e == cudaErrorMemoryAllocation && cached) {
    (void)cudaGetLastError();
    release_cached_allocations();
    e = outside_capture([&] { return alloc(&p, capacity); });
  }
  if (e != cudaSuccess) {
    capacity = 0;
    check(e, (std::string(what) + " of " + std::to_string(bytes) + " bytes").c_str());
  }
  return p;
}

// Gives a block back: to the cache, which hands it out again only after the device was idle once
// since (as cudaFree would wait), else frees it.
void release(BlockCache& cache, void* p, size_t capacity, cudaError_t (*free_fn)(void*)) noexcept {
  if (!p) return;
  if (cache_enabled() && cache.put(p, capacity)) return;
  if (free_fn == &cudaFree && before_free_hook) before_free_hook(p);
  (void)outside_capture([&] { return free_fn(p); });
}

// The live DeviceAllocations by address (their capacity), for ipc_block_of.
std::mutex& live_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::map<uintptr_t, size_t>& live_allocations() {
  static auto* m = new std::map<uintptr_t, size_t>;  // never destroyed: allocations may die at exit
  return *m;
}
void note_live(void* p, size_t capacity, bool live) noexcept {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(live_mutex());
  try {
    if (live) {
      live_allocations()[reinterpret_cast<uintptr_t>(p)] = capacity;
    } else {
      live_allocations().erase(reinterpret_cast<uintptr_t>(p));
    }
  } catch (...) {
  }
}

}  // namespace

void set_before_free(void (*hook)(void* base) noexcept) { before_free_hook = hook; }

bool ipc_block_of(const void* p, IpcBlock* out, std::string* why) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  {
    std::lock_guard<std::mutex> lock(live_mutex());
    auto it = live_allocations().upper_bound(at);
    if (it == live_allocations().begin()) {
      *why = "not in a device allocation of mlacheck's";
      return false;
    }
    --it;
    if (at >= it->first + it->second) {
      *why = "not in a device allocation of mlacheck's";
      return false;
    }
    out->base = reinterpret_cast<void*>(it->first);
    out->bytes = it->second;
  }
  cudaIpcMemHandle_t h;
  const cudaError_t e = cudaIpcGetMemHandle(&h, out->base);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    *why = std::string("cudaIpcGetMemHandle: ") + cudaGetErrorName(e);
    return false;
  }
  static const char* hex = "0123456789abcdef";
  out->handle.clear();
  for (size_t i = 0; i < sizeof h.reserved; ++i) {
    const auto b = static_cast<unsigned char>(h.reserved[i]);
    out->handle += hex[b >> 4];
    out->handle += hex[b & 15];
  }
  return true;
}

AllocationCacheStats allocation_cache_stats() {
  AllocationCacheStats s;
  device_cache().stats(s.device_cached_bytes, s.device_hits, s.device_misses);
  pinned_cache().stats(s.pinned_cached_bytes, s.pinned_hits, s.pinned_misses);
  return s;
}

void release_cached_allocations() noexcept {
  device_cache().release_all();
  pinned_cache().release_all();
}

namespace detail {
CachedBlock::CachedBlock(CachedBlock&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)),
      capacity_(std::exchange(o.capacity_, 0)), give_back_(o.give_back_) {}
CachedBlock& CachedBlock::operator=(CachedBlock&& o) noexcept {
  if (this != &o) {
    reset();
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    capacity_ = std::exchange(o.capacity_, 0);
  }
  return *this;
}
void CachedBlock::reset() noexcept {
  if (ptr_ != nullptr) give_back_(ptr_, capacity_);
  ptr_ = nullptr;
  bytes_ = capacity_ = 0;
}
}  // namespace detail

namespace {
void give_back_device(void* p, size_t capacity) noexcept {
  note_live(p, capacity, false);
  release(device_cache(), p, capacity, &cudaFree);
}
void give_back_pinned(void* p, size_t capacity) noexcept { release(pinned_cache(), p, capacity, &cudaFreeHost); }
}  // namespace

DeviceAllocation::DeviceAllocation() : CachedBlock(&give_back_device) {}
DeviceAllocation::DeviceAllocation(size_t bytes) : CachedBlock(&give_back_device) {
  if (bytes == 0) return;
  ptr_ = acquire(device_cache(), bytes, capacity_, [](void** p, size_t n) { return cudaMalloc(p, n); }, "cudaMalloc");
  bytes_ = bytes;
  note_live(ptr_, capacity_, true);
}

PinnedHostAllocation::PinnedHostAllocation() : CachedBlock(&give_back_pinned) {}
PinnedHostAllocation::PinnedHostAllocation(size_t bytes) : CachedBlock(&give_back_pinned) {
  if (bytes == 0) return;
  ptr_ = acquire(pinned_cache(), bytes, capacity_, [](void** p, size_t n) { return cudaMallocHost(p, n); },
                 "cudaMallocHost");
  bytes_ = bytes;
}

CaptureBody::CaptureBody() { ++capture_bodies; }
CaptureBody::~CaptureBody() { --capture_bodies; }

}  // namespace mlacheck::cuda
