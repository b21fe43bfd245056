// Tests of core/tensor.h: binding views to memory, typed and decoded element access.
#include "core/tensor.h"

#include <cmath>

#include <gtest/gtest.h>

#include "core/fp8.h"

namespace mlacheck {
namespace {

TEST(HostTensor, BindRefusesAViewPastTheBuffer) {
  std::vector<uint8_t> mem(64);
  EXPECT_NO_THROW(HostTensor::bind(mem.data(), 64, View::contiguous(DType::kF32, {16})));
  try {
    HostTensor::bind(mem.data(), 64, View::contiguous(DType::kF32, {16}, 4));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("touches bytes [4, 68) but the buffer has 64 bytes"), std::string::npos)
        << e.what();
  }
}

TEST(HostTensor, TypedAccessFollowsStridesAndChecksDtype) {
  std::vector<int32_t> mem(20, 0);
  HostTensor t(mem.data(), View(DType::kI32, {2, 3}, {10, 2}, 4));
  t.at<int32_t>({1, 2}) = 7;
  EXPECT_EQ(mem[1 + 10 + 4], 7);
  EXPECT_THROW(t.at<float>({0, 0}), Error);
  EXPECT_THROW(t.at<int32_t>({2, 0}), Error);
}

TEST(HostTensor, LoadAndStoreDecodeEveryDtype) {
  alignas(8) uint8_t mem[8] = {};
  const struct {
    DType t;
    double v;
  } cases[] = {{DType::kF64, 0.1}, {DType::kF32, -1.5}, {DType::kBF16, 3.0}, {DType::kF16, -0.25},
               {DType::kFP8E4M3, 448}, {DType::kFP8E5M2, -57344}, {DType::kUE8M0, 0.125},
               {DType::kI64, -5}, {DType::kI32, 123456}, {DType::kU8, 200}};
  for (const auto& c : cases) {
    store_element(c.t, mem, c.v);
    EXPECT_EQ(load_element(c.t, mem), c.v) << dtype_name(c.t);
  }
  // Stores round through float and then the format's encoder: 1000 saturates in e4m3.
  store_element(DType::kFP8E4M3, mem, 1000.0);
  EXPECT_EQ(mem[0], 0x7E);
  EXPECT_THROW(store_element(DType::kI32, mem, 3e9), Error);
  EXPECT_THROW(store_element(DType::kI32, mem, NAN), Error);
  EXPECT_THROW(store_element(DType::kU8, mem, -1), Error);
}

}  // namespace
}  // namespace mlacheck
