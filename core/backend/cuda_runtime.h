// The CUDA runtime wrapped for mlacheck: launch errors vs sticky faults, streams, events, allocations, graphs, the device probe.
//
// Plain C++ over the CUDA runtime API (no kernels here), so any translation unit may include it.
//
// Two kinds of failure matter to a checker, and they need different handling:
//  - a LaunchError (bad launch configuration, out of resources or memory, an invalid argument, a
//    call not allowed during graph capture): that call failed, the context is fine, and the next
//    case can run in the same process;
//  - a StickyFault (an illegal address, a misaligned access, a trap, an assert, a timeout, an
//    uncorrectable ECC error): the CUDA context is dead, every later call in this process returns
//    the same error, and only a new process can run CUDA again. Run checks that may fault this way
//    through run_isolated (core/backend/isolate.h) so the fault becomes a verdict, not a dead run.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"

namespace mlacheck::cuda {

// A CUDA call or launch failed and the context is still usable.
class LaunchError : public mlacheck::Error {
 public:
  LaunchError(const std::string& what, cudaError_t code) : Error(what), code_(code) {}
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

// The device faulted and the CUDA context is lost for the rest of this process (a ContextLost whose
// fault is the error's name).
class StickyFault : public mlacheck::ContextLost {
 public:
  StickyFault(const std::string& what, cudaError_t code) : ContextLost(what, cudaGetErrorName(code)), code_(code) {}
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

// True for the errors after which the process can run no more CUDA work (the runtime's
// documentation says "the process must be terminated and relaunched" for each).
bool is_sticky(cudaError_t e);

// For IsolationOptions::is_sticky: true when e is a StickyFault.
bool is_sticky_fault(const std::exception& e);

// "cudaErrorIllegalAddress (an illegal memory access was encountered)".
std::string error_text(cudaError_t e);

// Does nothing on cudaSuccess; otherwise throws StickyFault or LaunchError with the one-line
// message "<what>: <error name> (<error string>)". A recoverable error is also cleared from the
// runtime's last-error slot, so a later check_launch does not blame its kernel for it.
void check(cudaError_t e, const char* what);

// Call right after a launch: reports a bad launch (cudaGetLastError) as a LaunchError naming the
// kernel, and a fault already detected on the device as a StickyFault. A fault the kernel itself
// causes shows at the next synchronization (Stream::synchronize, copy_to_host, ...), not here.
void check_launch(const char* kernel_name);

// A non-blocking stream: it does not wait for, nor hold up, work on the legacy default stream.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(Stream&& o) noexcept;
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  // Waits for the stream's work; a fault in it is thrown here (StickyFault).
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

// A timing event.
class Event {
 public:
  Event();
  ~Event();
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }
  void record(Stream& s);
  void record(cudaStream_t s);  // 0: the legacy default stream
  void synchronize() const;
  // Milliseconds between two recorded, completed events (about 0.5 µs resolution).
  static float elapsed_ms(const Event& start, const Event& stop);

 private:
  cudaEvent_t event_ = nullptr;
};

// Bytes from cudaMalloc, given back on destruction; move-only. Zero bytes holds no allocation.
// Freed blocks are kept in a process-wide cache by size class and handed out again (a guarded
// buffer takes four allocations, and cudaMalloc/cudaFree of them dominated a small fuzz case);
// giving one back synchronizes the device first, as cudaFree does, so reuse never races with work
// still in flight. MLACHECK_CUDA_CACHE=0 turns the cache off (every block from cudaMalloc, back to
// cudaFree), e.g. under compute-sanitizer, whose use-after-free reports a cache would hide.
namespace detail {
// What DeviceAllocation and PinnedHostAllocation share: a block from one of the allocation caches
// (cuda_allocation.cpp), the bytes asked for and the size class it came from; move-only, the block
// handed back to its cache on destruction or when moved over.
class CachedBlock {
 public:
  size_t bytes() const { return bytes_; }

 protected:
  // Moved and destroyed only as the class that owns it, so a block never reaches another kind's
  // cache through a reference to this base.
  CachedBlock(CachedBlock&& o) noexcept;
  CachedBlock& operator=(CachedBlock&& o) noexcept;
  CachedBlock(const CachedBlock&) = delete;
  CachedBlock& operator=(const CachedBlock&) = delete;
  ~CachedBlock() { reset(); }

  using GiveBack = void (*)(void* p, size_t capacity) noexcept;
  explicit CachedBlock(GiveBack give_back) : give_back_(give_back) {}
  void reset() noexcept;

  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  size_t capacity_ = 0;  // the size class it came from

 private:
  GiveBack give_back_;
};
}  // namespace detail

class DeviceAllocation : public detail::CachedBlock {
 public:
  DeviceAllocation();
  explicit DeviceAllocation(size_t bytes);

  void* get() const { return ptr_; }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
};

// The DeviceAllocation holding p, exported for another process (cudaIpcGetMemHandle): its first
// byte, its size and the handle in hex. False, with *why, for an address outside every live one.
struct IpcBlock {
  void* base = nullptr;
  size_t bytes = 0;
  std::string handle;  // 128 hex digits
};
bool ipc_block_of(const void* p, IpcBlock* out, std::string* why);
// Called with a DeviceAllocation's first byte just before it is freed (cudaFree: the cache is full,
// or emptied), never when it only goes back to the cache: another process that opened its IPC handle
// must close it first ("calling cudaFree on an exported memory region before calling
// cudaIpcCloseMemHandle in the importing context will result in undefined behavior", the CUDA
// runtime's reference). One hook (the Python worker's lender); noexcept by contract.
void set_before_free(void (*hook)(void* base) noexcept);

// Page-locked host bytes from cudaMallocHost, given back on destruction (to a cache like
// DeviceAllocation's); move-only. Copies between them and the device run at full link speed and
// without a staging copy.
class PinnedHostAllocation : public detail::CachedBlock {
 public:
  PinnedHostAllocation();
  explicit PinnedHostAllocation(size_t bytes);

  uint8_t* data() const { return static_cast<uint8_t*>(ptr_); }
};

// What the allocation caches hold and have served (for tests and benchmarks).
struct AllocationCacheStats {
  size_t device_cached_bytes = 0, device_hits = 0, device_misses = 0;
  size_t pinned_cached_bytes = 0, pinned_hits = 0, pinned_misses = 0;
};
AllocationCacheStats allocation_cache_stats();
// Frees every cached block (device and pinned); a failed cudaMalloc does this and retries.
void release_cached_allocations() noexcept;
// The size class of a request: the next power of two from 512 bytes up to 64 MiB, then 2 MiB steps.
size_t allocation_size_class(size_t bytes);

// Alive while Graph::capture runs its body on this thread: the allocation caches then take no
// block that would need the device synchronized first (a capturing stream may not be: the capture
// would be lost), and they allocate and free in relaxed capture mode, outside the graph.
class CaptureBody {
 public:
  CaptureBody();
  ~CaptureBody();
  CaptureBody(const CaptureBody&) = delete;
  CaptureBody& operator=(const CaptureBody&) = delete;
};

// This thread in relaxed stream-capture mode for the scope, then back to the mode it had: work
// that must happen now, outside a capture open on this thread (a guarded buffer allocated inside
// the captured body fills and waits for its storage on the legacy stream), which the capture's own
// mode would refuse (cudaErrorStreamCaptureUnsupported, and the capture would be lost).
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode();
  ~RelaxedCaptureMode();
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  cudaStreamCaptureMode saved_;
  bool exchanged_ = false;
};

// Whether stream is capturing a graph (work queued there now runs only at each replay); false for
// the null stream.
bool capturing(cudaStream_t stream);

// Synchronous copies and fill (legacy default stream): each returns once the bytes are in place,
// so work launched afterwards on any stream sees them (a bare cudaMemcpy from pageable memory may
// return before its last DMA lands). A fault of earlier work on that stream is thrown here. They
// do not wait for non-blocking streams: synchronize those first. Up to 1 MiB goes through a
// page-locked staging buffer of the calling thread. what: the error's context.
void copy_to_device(void* device_dst, const void* host_src, size_t bytes, const char* what = "copy_to_device");
void copy_to_host(void* host_dst, const void* device_src, size_t bytes, const char* what = "copy_to_host");
void memset_device(void* device_dst, int value, size_t bytes);
// Several copy_to_host at once: every copy queued, one synchronization (up to 8 MiB in all through
// the staging buffer; more, one copy_to_host each).
struct HostCopy {
  void* host;
  const void* device;
  size_t bytes;
};
void copy_many_to_host(const std::vector<HostCopy>& copies, const char* what = "copy_many_to_host");

// A captured sequence of work on a stream, instantiated and replayable.
class Graph {
 public:
  // Waits for the work already on s, then captures what body enqueues on s (thread-local capture
  // mode: other threads may go on using CUDA) and instantiates it. The body must only enqueue work on the stream it is given: a
  // synchronizing call inside it (cudaMemcpy, cudaStreamSynchronize, cudaMalloc...) invalidates the
  // capture and is reported as a LaunchError that says so. On any error, capture is ended first, so
  // the stream is usable again.
  static Graph capture(Stream& s, const std::function<void(cudaStream_t)>& body);

  Graph() = default;
  ~Graph();
  Graph(Graph&& o) noexcept;
  Graph& operator=(Graph&& o) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Enqueues the whole sequence on s. Kernel arguments are those captured (pointers included):
  // change what the buffers hold, not which buffers, between replays.
  void replay(Stream& s);
  // Nodes in the captured graph (one per kernel launch, copy or memset).
  size_t node_count() const { return nodes_; }

 private:
  void reset() noexcept;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  size_t nodes_ = 0;
};

// What probe_device found about device 0.
struct DeviceInfo {
  bool usable = false;
  std::string why_not;  // when !usable: "no GPU (cudaErrorNoDevice)", "no usable driver (...)"
  std::string name;     // "NVIDIA H200"
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  int64_t global_bytes = 0;
};

// Asks the runtime for device 0 and creates its context, so "usable" means CUDA work can run.
// Never throws. It initialises CUDA in this process: a process that will fork children to run
// CUDA (run_isolated) must fork them before calling this, or probe inside the child.
DeviceInfo probe_device();

}  // namespace mlacheck::cuda
