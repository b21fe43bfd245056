// The host and cuda devices behind kernels/device.h.
#include "kernels/device.h"

#include "core/backend/host_executor.h"
#include "core/error.h"

#if defined(MLACHECK_HAVE_CUDA)
#include "core/backend/cuda_guarded_buffer.h"
#include "core/backend/cuda_runtime.h"
#endif

namespace mlacheck::kernels {

DeviceGraph::~DeviceGraph() = default;

namespace {

class HostGraph final : public DeviceGraph {
 public:
  explicit HostGraph(simt::host::Graph g) : graph_(std::move(g)) {}
  void replay() override { graph_.replay(); }
  size_t launch_count() const override { return graph_.launch_count(); }

 private:
  simt::host::Graph graph_;
};

class HostDevice final : public Device {
 public:
  Backend backend() const override { return Backend::kHost; }
  std::unique_ptr<GuardedMemory> allocate(const std::string& name, int64_t bytes) override {
    return std::make_unique<GuardedBuffer>(name, bytes);
  }
  // Launches on a stream that is not capturing run at once.
  void* stream() const override { return &stream_; }
  void synchronize() override {}
  int64_t multiprocessors() const override { return 16; }
  std::unique_ptr<DeviceGraph> capture(const std::function<void()>& body) override {
    stream_.begin_capture();
    try {
      body();
    } catch (...) {
      stream_.end_capture();
      throw;
    }
    return std::make_unique<HostGraph>(stream_.end_capture());
  }

 private:
  mutable simt::host::Stream stream_;
};

#if defined(MLACHECK_HAVE_CUDA)
class CudaDevice final : public Device {
 public:
  Backend backend() const override { return Backend::kCuda; }
  std::unique_ptr<GuardedMemory> allocate(const std::string& name, int64_t bytes) override {
    return std::make_unique<DeviceGuardedBuffer>(name, bytes);
  }
  void* stream() const override { return stream_.get(); }
  void synchronize() override { stream_.synchronize(); }
  int64_t multiprocessors() const override { return sm_count_; }
  std::unique_ptr<DeviceGraph> capture(const std::function<void()>& body) override {
    return std::make_unique<CudaGraph>(cuda::Graph::capture(stream_, [&](cudaStream_t) { body(); }), stream_);
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
  cuda::Stream stream_;
  int64_t sm_count_ = cuda::probe_device().sm_count;
};
#endif

}  // namespace

Device::~Device() = default;

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
