// The host and cuda devices behind kernels/device.h.
#include "kernels/device.h"

#include "core/error.h"

#if defined(MLACHECK_HAVE_CUDA)
#include "core/backend/cuda_guarded_buffer.h"
#include "core/backend/cuda_runtime.h"
#endif

namespace mlacheck::kernels {
namespace {

class HostDevice final : public Device {
 public:
  Backend backend() const override { return Backend::kHost; }
  std::unique_ptr<GuardedMemory> allocate(const std::string& name, int64_t bytes) override {
    return std::make_unique<GuardedBuffer>(name, bytes);
  }
  void* stream() const override { return nullptr; }  // launches run at once
  void synchronize() override {}
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

 private:
  cuda::Stream stream_;
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
