// The host and cuda devices behind kernels/device.h.
#include "kernels/device.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/backend/host_executor.h"
#include "core/contract.h"
#include "core/error.h"
#include "core/quarantine.h"
#include "core/reserved_buffer.h"

#if defined(MLACHECK_HAVE_CUDA)
#include "core/backend/cuda_guarded_buffer.h"
#include "core/backend/cuda_reserved_buffer.h"
#include "core/backend/cuda_runtime.h"
#endif

namespace mlacheck::kernels {

DeviceGraph::~DeviceGraph() = default;

bool guards_enabled() {
  const char* v = std::getenv("MLACHECK_GUARDS");
  return v == nullptr || std::string(v) != "0";
}

namespace {

// Memory without guards (MLACHECK_GUARDS=0): an allocation of exactly the bytes asked for, no red
// zones, outputs not poisoned, and a check that sees nothing. The production memory layout: what
// an engine's preallocated buffers are, for a plain run, a timing, or a run under compute-sanitizer.
class PlainHostMemory final : public GuardedMemory {
 public:
  PlainHostMemory(std::string name, int64_t bytes)
      : GuardedMemory(std::move(name), bytes, kDefaultRedZone), bytes_(static_cast<size_t>(bytes > 0 ? bytes : 1)) {}
  uint8_t* data() override { return bytes_.data(); }
  bool on_device() const override { return false; }
  void write(int64_t offset, const void* src, int64_t bytes) override {
    require_inside(offset, bytes, "write");
    if (bytes > 0) std::memcpy(bytes_.data() + offset, src, static_cast<size_t>(bytes));
  }
  void read(int64_t offset, void* dst, int64_t bytes) const override {
    require_inside(offset, bytes, "read");
    if (bytes > 0) std::memcpy(dst, bytes_.data() + offset, static_cast<size_t>(bytes));
  }
  void arm() override { armed_ = true; }
  GuardReport check() const override { return {}; }

 private:
  std::vector<uint8_t> bytes_;
};

// What the host and CUDA devices share: whether guards are on, and the quarantine that keeps freed
// device memory armed (so a kernel's write to it after the free is seen) and held by captured graphs.
class QuarantinedDevice : public Device {
 public:
  std::shared_ptr<void> hold_freed_memory() override { return quarantine_ ? quarantine_->hold() : nullptr; }
  std::vector<std::string> writes_to_freed_memory() override {
    return quarantine_ ? quarantine_->writes_since_freed() : std::vector<std::string>{};
  }

 protected:
  // Opened before a capture's body runs: scratch freed inside the body is the graph's too. Closed
  // after the graph's hold is taken, so what the body freed is armed, and kept.
  std::shared_ptr<void> open_capture() { return quarantine_ ? quarantine_->open_capture() : nullptr; }
  bool guards_ = guards_enabled();
  std::shared_ptr<Quarantine> quarantine_ = guards_ ? std::make_shared<Quarantine>() : nullptr;
};

class HostGraph final : public DeviceGraph {
 public:
  explicit HostGraph(simt::host::Graph g) : graph_(std::move(g)) {}
  void replay() override { graph_.replay(); }
  size_t launch_count() const override { return graph_.launch_count(); }

 private:
  simt::host::Graph graph_;
};

class HostDevice final : public QuarantinedDevice {
 public:
  Backend backend() const override { return Backend::kHost; }
  std::unique_ptr<GuardedMemory> allocate(const std::string& name, int64_t bytes) override {
    if (!guards_) return std::make_unique<PlainHostMemory>(name, bytes);
    auto m = std::make_unique<GuardedBuffer>(name, bytes);
    m->retire_to(quarantine_);
    return m;
  }
  // With or without guards: a reserved allocation's checks cost only its backed pages.
  std::unique_ptr<GuardedMemory> reserve(const std::string& name, int64_t bytes, const std::vector<ByteSpan>& backed,
                                         bool writable) override {
    return std::make_unique<ReservedBuffer>(name, bytes, backed, GuardedMemory::kDefaultRedZone, writable);
  }
  // Launches on a stream that is not capturing run at once.
  void* stream() const override { return &stream_; }
  void synchronize() override {}
  int64_t multiprocessors() const override { return 16; }
  std::unique_ptr<DeviceGraph> capture(const std::function<void()>& body) override {
    auto open = open_capture();  // scratch freed inside body is the graph's too
    stream_.begin_capture();
    try {
      body();
    } catch (...) {
      stream_.end_capture();
      throw;
    }
    auto graph = std::make_unique<HostGraph>(stream_.end_capture());
    graph->hold_freed_memory(hold_freed_memory());
    return graph;  // `open` closes after the graph's hold is taken: what body freed is armed, and kept
  }

 private:
  mutable simt::host::Stream stream_;
};

#if defined(MLACHECK_HAVE_CUDA)
class CudaDevice final : public QuarantinedDevice {
 public:
  Backend backend() const override { return Backend::kCuda; }
  std::unique_ptr<GuardedMemory> allocate(const std::string& name, int64_t bytes) override {
    if (!guards_) return std::make_unique<PlainDeviceMemory>(name, bytes);
    // Its first fill queued on the device's stream, as the writes and the arm that follow are.
    auto m = std::make_unique<DeviceGuardedBuffer>(name, bytes, GuardedMemory::kDefaultRedZone, stream_.get());
    m->retire_to(quarantine_);
    return m;
  }
  // A reserved virtual range, physical granules only where the case stages bytes.
  std::unique_ptr<GuardedMemory> reserve(const std::string& name, int64_t bytes, const std::vector<ByteSpan>& backed,
                                         bool writable) override {
    return std::make_unique<DeviceReservedBuffer>(name, bytes, backed, GuardedMemory::kDefaultRedZone, writable);
  }
  void* stream() const override { return stream_.get(); }
  void synchronize() override { stream_.synchronize(); }
  int64_t multiprocessors() const override { return sm_count_; }
  std::unique_ptr<DeviceGraph> capture(const std::function<void()>& body) override {
    auto open = open_capture();  // scratch freed inside body is the graph's too
    auto graph = std::make_unique<CudaGraph>(cuda::Graph::capture(stream_, [&](cudaStream_t) { body(); }), stream_);
    graph->hold_freed_memory(hold_freed_memory());
    return graph;  // `open` closes after the graph's hold is taken: what body freed is armed, and kept
  }

 private:
  class CudaGraph final : public DeviceGraph {
   public:
    CudaGraph(cuda::Graph g, cuda::Stream& s) : graph_(std::move(g)), stream_(s) {}
    void replay() override { graph_.replay(stream_); }
    size_t launch_count() const override { return graph_.node_count(); }

   private:
    cuda::Graph graph_;
    cuda::Stream& stream_;
  };
  // Device memory without guards (see PlainHostMemory).
  class PlainDeviceMemory final : public GuardedMemory {
   public:
    PlainDeviceMemory(std::string name, int64_t bytes)
        : GuardedMemory(std::move(name), bytes, kDefaultRedZone), memory_(static_cast<size_t>(bytes > 0 ? bytes : 1)) {}
    uint8_t* data() override { return memory_.as<uint8_t>(); }
    bool on_device() const override { return true; }
    void write(int64_t offset, const void* src, int64_t bytes) override {
      require_inside(offset, bytes, "write");
      if (bytes == 0) return;
      cuda::check(cudaMemcpy(memory_.as<uint8_t>() + offset, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice),
                  "plain device memory: write");
      cuda::check(cudaStreamSynchronize(cudaStreamLegacy), "plain device memory: write");
    }
    void read(int64_t offset, void* dst, int64_t bytes) const override {
      require_inside(offset, bytes, "read");
      if (bytes == 0) return;
      cuda::check(cudaMemcpy(dst, memory_.as<uint8_t>() + offset, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost),
                  "plain device memory: read");
    }
    void arm() override { armed_ = true; }
    GuardReport check() const override {
      cuda::check(cudaDeviceSynchronize(), "plain device memory: check");  // a fault still surfaces here
      return {};
    }

   private:
    cuda::DeviceAllocation memory_;
  };

  cuda::Stream stream_;
  int64_t sm_count_ = cuda::probe_device().sm_count;
};
#endif

}  // namespace

Device::~Device() = default;

std::unique_ptr<GuardedMemory> Device::reserve(const std::string& name, int64_t bytes, const std::vector<ByteSpan>& backed,
                                              bool writable) {
  (void)bytes, (void)backed, (void)writable;
  // Not a finding and not the command's trouble: the case is reported as not run (it lies outside
  // what this backend can stage), as a case outside an implementation's contract is.
  throw OutsideContract(std::string(backend_name(backend())) + ": cannot reserve memory for '" + name +
                        "' (memory backed only where a case writes it)");
}

bool mps_daemon_running() {
  const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::path(dir != nullptr && *dir ? dir : "/tmp/nvidia-mps") / "control", ec);
}

bool device_usable(Backend b, std::string* why) {
  for (const BackendStatus& s : backend_statuses()) {
    if (s.backend != b) continue;
    if (b == Backend::kHip && s.usable) {
      if (why) *why = "hip: kernels are compile-checked only; no HIP runtime in this build";
      return false;
    }
    if (!s.usable && why) *why = std::string(backend_name(b)) + ": not usable: " + s.detail;
    return s.usable;
  }
  if (why) *why = std::string(backend_name(b)) + ": unknown backend";
  return false;
}

std::unique_ptr<Device> make_device(Backend b) {
  if (b == Backend::kHost) return std::make_unique<HostDevice>();
  std::string why;
  MLA_REQUIRE(device_usable(b, &why), why);
#if defined(MLACHECK_HAVE_CUDA)
  if (b == Backend::kCuda) return std::make_unique<CudaDevice>();
#endif
  throw Error(std::string(backend_name(b)) + ": not built into this binary");
}

}  // namespace mlacheck::kernels
