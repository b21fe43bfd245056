// The CUDA runtime wrappers: error classification, RAII handles, graph capture and the device probe.
#include "core/backend/cuda_runtime.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

// Under AddressSanitizer, its shadow-gap protection takes the address range the CUDA driver maps
// device memory into: every allocation then fails as "out of memory". Every program that links
// the CUDA runtime wrappers (mlacheck, the harnesses, the GPU tests) gets these defaults, which
// ASAN_OPTIONS still overrides; the CUDA runtime's own allocations are not leaks. They are the
// read fence's defaults (core/read_fence.cpp, which defines __asan_default_options) with these
// added; the anchor links that file into every program that links this one.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MLA_CUDA_UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(MLA_CUDA_UNDER_ASAN)
extern "C" const char* mlacheck_asan_options() {
  return "halt_on_error=0:suppress_equal_pcs=0:protect_shadow_gap=0:detect_leaks=0";
}
extern "C" int mlacheck_read_fence_anchor;
__attribute__((used)) static int* const read_fence_anchor = &mlacheck_read_fence_anchor;
#endif

namespace mlacheck::cuda {

bool is_sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorECCUncorrectable:
    case cudaErrorContained:
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorMpsClientTerminated:
    case cudaErrorExternalDevice:
      return true;
    default:
      return false;
  }
}

bool is_sticky_fault(const std::exception& e) { return dynamic_cast<const StickyFault*>(&e) != nullptr; }

std::string error_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  if (is_sticky(e)) {
    throw StickyFault(std::string(what) + ": " + error_text(e) +
                          "; the CUDA context is lost, this process can run no more CUDA work",
                      e);
  }
  // The runtime also keeps a recoverable error as its "last error"; clear it so the next
  // check_launch reports only what its own launch did.
  (void)cudaGetLastError();
  throw LaunchError(std::string(what) + ": " + error_text(e), e);
}

void check_launch(const char* kernel_name) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return;
  check(e, (std::string("launch of '") + kernel_name + "'").c_str());
}

// ---- Stream ----

Stream::Stream() { check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"); }
Stream::~Stream() {
  // Destroying cannot report a failure; after a sticky fault it fails anyway.
  if (stream_) (void)cudaStreamDestroy(stream_);
}
Stream::Stream(Stream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}
Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (stream_) (void)cudaStreamDestroy(stream_);
    stream_ = std::exchange(o.stream_, nullptr);
  }
  return *this;
}
void Stream::synchronize() const { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

// ---- Event ----

Event::Event() { check(cudaEventCreate(&event_), "cudaEventCreate"); }
Event::~Event() {
  if (event_) (void)cudaEventDestroy(event_);
}
Event::Event(Event&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (event_) (void)cudaEventDestroy(event_);
    event_ = std::exchange(o.event_, nullptr);
  }
  return *this;
}
void Event::record(Stream& s) { record(s.get()); }
void Event::record(cudaStream_t s) { check(cudaEventRecord(event_, s), "cudaEventRecord"); }
void Event::synchronize() const { check(cudaEventSynchronize(event_), "cudaEventSynchronize"); }
float Event::elapsed_ms(const Event& start, const Event& stop) {
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start.event_, stop.event_), "cudaEventElapsedTime");
  return ms;
}

// ---- DeviceAllocation, PinnedHostAllocation and their caches ----

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

// Graph::capture bodies running on this thread: the caches do not synchronize the device for a
// block while one runs (a capturing stream may not be synchronized; the capture would be lost).
thread_local int capture_bodies = 0;

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
    for (auto& [size, p] : blocks_) (void)free_(p);
    for (auto& [size, p] : unsynced_) (void)free_(p);  // cudaFree waits for the device itself
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

DeviceAllocation::DeviceAllocation(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  try {
    ptr_ = acquire(device_cache(), bytes, capacity_, [](void** p, size_t n) { return cudaMalloc(p, n); },
                   "cudaMalloc");
  } catch (...) {
    bytes_ = 0;
    throw;
  }
  note_live(ptr_, capacity_, true);
}
DeviceAllocation::~DeviceAllocation() { reset(); }
DeviceAllocation::DeviceAllocation(DeviceAllocation&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)),
      capacity_(std::exchange(o.capacity_, 0)) {}
DeviceAllocation& DeviceAllocation::operator=(DeviceAllocation&& o) noexcept {
  if (this != &o) {
    reset();
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    capacity_ = std::exchange(o.capacity_, 0);
  }
  return *this;
}
void DeviceAllocation::reset() noexcept {
  note_live(ptr_, capacity_, false);
  release(device_cache(), ptr_, capacity_, &cudaFree);
  ptr_ = nullptr;
  bytes_ = capacity_ = 0;
}

PinnedHostAllocation::PinnedHostAllocation(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  try {
    ptr_ = acquire(pinned_cache(), bytes, capacity_, [](void** p, size_t n) { return cudaMallocHost(p, n); },
                   "cudaMallocHost");
  } catch (...) {
    bytes_ = 0;
    throw;
  }
}
PinnedHostAllocation::~PinnedHostAllocation() { reset(); }
PinnedHostAllocation::PinnedHostAllocation(PinnedHostAllocation&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)),
      capacity_(std::exchange(o.capacity_, 0)) {}
PinnedHostAllocation& PinnedHostAllocation::operator=(PinnedHostAllocation&& o) noexcept {
  if (this != &o) {
    reset();
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    capacity_ = std::exchange(o.capacity_, 0);
  }
  return *this;
}
void PinnedHostAllocation::reset() noexcept {
  release(pinned_cache(), ptr_, capacity_, &cudaFreeHost);
  ptr_ = nullptr;
  bytes_ = capacity_ = 0;
}

bool capturing(cudaStream_t stream) {
  if (stream == nullptr) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(stream, &status), "cudaStreamIsCapturing");
  return status != cudaStreamCaptureStatusNone;
}

namespace {

// Copies of up to this many bytes go through a page-locked staging buffer of the calling thread:
// from pageable memory the driver stages them itself, and a small cudaMemcpy costs about twice
// the staged copy (`guard_check_bench`, staging). Larger ones stay one pageable cudaMemcpy, which
// pipelines its own staging.
constexpr size_t kStagedCopyBytes = size_t(1) << 20;

uint8_t* copy_staging(size_t bytes) {
  thread_local PinnedHostAllocation staging;
  if (staging.bytes() < bytes) staging = PinnedHostAllocation(std::max<size_t>(bytes, 64 << 10));
  return staging.data();
}

}  // namespace

void copy_to_device(void* device_dst, const void* host_src, size_t bytes, const char* what) {
  if (bytes == 0) return;
  if (bytes <= kStagedCopyBytes) {
    uint8_t* staging = copy_staging(bytes);
    std::memcpy(staging, host_src, bytes);
    check(cudaMemcpyAsync(device_dst, staging, bytes, cudaMemcpyHostToDevice, cudaStreamLegacy),
          what);
  } else {
    check(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice), what);
  }
  // From pageable memory cudaMemcpy returns once the bytes are staged, possibly before the last DMA
  // lands, and the staged copy is queued: either way a kernel then launched on a non-blocking
  // stream could read the old bytes (and the staging buffer is reused).
  check(cudaStreamSynchronize(cudaStreamLegacy), what);
}
void copy_to_host(void* host_dst, const void* device_src, size_t bytes, const char* what) {
  if (bytes == 0) return;
  if (bytes <= kStagedCopyBytes) {
    uint8_t* staging = copy_staging(bytes);
    check(cudaMemcpyAsync(staging, device_src, bytes, cudaMemcpyDeviceToHost, cudaStreamLegacy),
          what);
    check(cudaStreamSynchronize(cudaStreamLegacy), what);
    std::memcpy(host_dst, staging, bytes);
    return;
  }
  check(cudaMemcpy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost), what);
}
void copy_many_to_host(const std::vector<HostCopy>& copies, const char* what) {
  constexpr size_t kMostStaged = size_t(8) << 20;
  size_t total = 0;
  for (const HostCopy& c : copies) total += c.bytes;
  if (total > kMostStaged) {
    for (const HostCopy& c : copies) copy_to_host(c.host, c.device, c.bytes, what);
    return;
  }
  if (total == 0) return;
  uint8_t* staging = copy_staging(total);
  size_t at = 0;
  for (const HostCopy& c : copies) {
    if (c.bytes > 0) check(cudaMemcpyAsync(staging + at, c.device, c.bytes, cudaMemcpyDeviceToHost, cudaStreamLegacy), what);
    at += c.bytes;
  }
  check(cudaStreamSynchronize(cudaStreamLegacy), what);
  at = 0;
  for (const HostCopy& c : copies) {
    if (c.bytes > 0) std::memcpy(c.host, staging + at, c.bytes);
    at += c.bytes;
  }
}
void memset_device(void* device_dst, int value, size_t bytes) {
  if (bytes == 0) return;
  check(cudaMemset(device_dst, value, bytes), "memset_device (cudaMemset)");
  // cudaMemset may return before the fill is done; wait so "synchronous" holds.
  check(cudaDeviceSynchronize(), "memset_device (cudaDeviceSynchronize)");
}

// ---- Graph ----

namespace {

bool is_capture_error(cudaError_t e) {
  return e == cudaErrorStreamCaptureInvalidated || e == cudaErrorStreamCaptureUnsupported ||
         e == cudaErrorStreamCaptureImplicit || e == cudaErrorStreamCaptureWrongThread ||
         e == cudaErrorStreamCaptureIsolation || e == cudaErrorStreamCaptureUnjoined;
}

constexpr const char* kCaptureHint =
    "; a call inside the captured body is not allowed during capture (a synchronizing call such as "
    "cudaMemcpy, cudaMalloc or cudaStreamSynchronize, or work on another stream) and invalidated it";

}  // namespace

Graph Graph::capture(Stream& s, const std::function<void(cudaStream_t)>& body) {
  // A capture starts on a drained stream: work queued before it (a buffer's first fill, a queued
  // write) is done, and nothing inside the body has to wait for it, which it could not.
  s.synchronize();
  check(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeThreadLocal), "graph capture: cudaStreamBeginCapture");
  // Ends the capture, whatever state it is in, and drops what was captured, so the stream is
  // usable again.
  auto abandon = [&s] {
    cudaGraph_t partial = nullptr;
    (void)cudaStreamEndCapture(s.get(), &partial);
    if (partial) (void)cudaGraphDestroy(partial);
    (void)cudaGetLastError();
  };
  try {
    ++capture_bodies;
    struct Leave {
      ~Leave() { --capture_bodies; }
    } leave;
    body(s.get());
  } catch (const StickyFault&) {
    throw;  // nothing can be cleaned up in a dead context
  } catch (const LaunchError& e) {
    abandon();
    throw LaunchError(std::string("graph capture: the body failed: ") + e.what() +
                          (is_capture_error(e.code()) ? kCaptureHint : ""),
                      e.code());
  } catch (...) {
    abandon();
    throw;
  }
  Graph g;
  const cudaError_t end = cudaStreamEndCapture(s.get(), &g.graph_);
  if (is_capture_error(end)) {
    // The body ignored the failing call's error; the capture it invalidated says so now.
    if (g.graph_) (void)cudaGraphDestroy(std::exchange(g.graph_, nullptr));
    (void)cudaGetLastError();
    throw LaunchError("graph capture: cudaStreamEndCapture: " + error_text(end) + kCaptureHint, end);
  }
  check(end, "graph capture: cudaStreamEndCapture");
  check(cudaGraphGetNodes(g.graph_, nullptr, &g.nodes_), "graph capture: cudaGraphGetNodes");
  check(cudaGraphInstantiate(&g.exec_, g.graph_, 0), "graph capture: cudaGraphInstantiate");
  return g;
}

Graph::~Graph() { reset(); }
Graph::Graph(Graph&& o) noexcept
    : graph_(std::exchange(o.graph_, nullptr)), exec_(std::exchange(o.exec_, nullptr)), nodes_(std::exchange(o.nodes_, 0)) {}
Graph& Graph::operator=(Graph&& o) noexcept {
  if (this != &o) {
    reset();
    graph_ = std::exchange(o.graph_, nullptr);
    exec_ = std::exchange(o.exec_, nullptr);
    nodes_ = std::exchange(o.nodes_, 0);
  }
  return *this;
}
void Graph::reset() noexcept {
  if (exec_) (void)cudaGraphExecDestroy(exec_);
  if (graph_) (void)cudaGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
  nodes_ = 0;
}
void Graph::replay(Stream& s) {
  MLA_REQUIRE(exec_ != nullptr, "graph replay: this graph holds no captured work (moved from or never captured)");
  check(cudaGraphLaunch(exec_, s.get()), "graph replay: cudaGraphLaunch");
}

// ---- probe ----

namespace {

// The errors that mean the driver (not the GPU) is missing or cannot serve this runtime.
bool is_driver_problem(cudaError_t e) {
  switch (e) {
    case cudaErrorInsufficientDriver:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorInitializationError:
    case cudaErrorSystemNotReady:
      return true;
    default:
      return false;
  }
}

std::string why_unusable(cudaError_t e) {
  if (e == cudaErrorNoDevice) return std::string("no GPU (") + cudaGetErrorName(e) + ")";
  if (is_driver_problem(e)) return "no usable driver (" + std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e) + ")";
  return "CUDA unusable (" + std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e) + ")";
}

}  // namespace

DeviceInfo probe_device() {
  DeviceInfo info;
  try {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaSuccess && count == 0) e = cudaErrorNoDevice;
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      info.why_not = why_unusable(e);
      return info;
    }
    cudaDeviceProp p{};
    e = cudaGetDeviceProperties(&p, 0);
    if (e == cudaSuccess) {
      info.name = p.name;
      info.sm_count = p.multiProcessorCount;
      info.cc_major = p.major;
      info.cc_minor = p.minor;
      info.global_bytes = static_cast<int64_t>(p.totalGlobalMem);
      // Creating the context is what fails on a device that is busy, prohibited or broken.
      e = cudaSetDevice(0);
      if (e == cudaSuccess) e = cudaFree(nullptr);
    }
    if (e != cudaSuccess) {
      if (!is_sticky(e)) (void)cudaGetLastError();
      info.why_not = why_unusable(e);
      return info;
    }
    info.usable = true;
  } catch (...) {
    // Only std::string can throw here (bad_alloc); an unusable answer is the safe one.
    info.usable = false;
    if (info.why_not.empty()) info.why_not = "CUDA probe failed";
  }
  return info;
}

}  // namespace mlacheck::cuda
