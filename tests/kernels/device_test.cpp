// Tests of kernels/device.h: the host device, and clear refusals for backends that cannot run here.
#include "kernels/device.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace mlacheck::kernels {
namespace {

TEST(Device, HostDeviceGivesGuardedHostMemory) {
  const auto d = make_device(Backend::kHost);
  EXPECT_EQ(d->backend(), Backend::kHost);
  EXPECT_EQ(d->stream(), nullptr);
  auto buf = d->allocate("x", 64);
  EXPECT_FALSE(buf->on_device());
  EXPECT_EQ(buf->size(), 64);
  const int32_t v = 7;
  buf->write(4, &v, 4);
  const DeviceTensor t{buf->data(), View::contiguous(DType::kI32, {2}, 4)};
  EXPECT_EQ(*t.data<int32_t>(), 7);
  d->synchronize();
  EXPECT_TRUE(device_usable(Backend::kHost));
}

TEST(Device, HipIsRefusedWithOneLine) {
  std::string why;
  EXPECT_FALSE(device_usable(Backend::kHip, &why));
  EXPECT_NE(why.find("hip"), std::string::npos) << why;
  EXPECT_THROW(make_device(Backend::kHip), Error);
}

TEST(Device, CudaRunsOrSaysWhyNot) {
  std::string why;
  if (!device_usable(Backend::kCuda, &why)) {
    EXPECT_NE(why.find("cuda: not usable"), std::string::npos) << why;
    try {
      make_device(Backend::kCuda);
      ADD_FAILURE() << "make_device(cuda) succeeded although " << why;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
    }
    GTEST_SKIP() << "skipped: no GPU (" << why << ")";
  }
  const auto d = make_device(Backend::kCuda);
  auto buf = d->allocate("x", 64);
  EXPECT_TRUE(buf->on_device());
  d->synchronize();
}

}  // namespace
}  // namespace mlacheck::kernels
