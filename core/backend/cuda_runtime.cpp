// The CUDA runtime wrappers: error classification, RAII handles, copies, graph capture and the
// device probe (the allocations and their caches: cuda_allocation.cpp).
#include "core/backend/cuda_runtime.h"

#include <algorithm>
#include <cstring>
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

RelaxedCaptureMode::RelaxedCaptureMode() : saved_(cudaStreamCaptureModeRelaxed) {
  exchanged_ = cudaThreadExchangeStreamCaptureMode(&saved_) == cudaSuccess;
}
RelaxedCaptureMode::~RelaxedCaptureMode() {
  if (exchanged_) (void)cudaThreadExchangeStreamCaptureMode(&saved_);
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
    const CaptureBody inside;
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
