// Tests of oracle/oracle_tensor.h: row-major storage, its HostTensor view, and loading strided views.
#include "oracle/oracle_tensor.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/fp16.h"

namespace mlacheck::oracle {
namespace {

TEST(OracleTensor, RowMajorOffsetsAndTheirView) {
  OracleTensor t({2, 3, 4}, 1.5);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.offset({1, 2, 3}), 23);
  EXPECT_EQ(t.offset({1, 0, 2}), 14);
  t.at({1, 0, 2}) = -4;
  EXPECT_EQ(t.values[14], -4);
  const HostTensor h = t.tensor();
  EXPECT_EQ(h.view.to_string(), View::contiguous(DType::kF64, {2, 3, 4}).to_string());
  EXPECT_EQ(h.load({1, 0, 2}), -4);
  EXPECT_EQ(h.load({0, 0, 0}), 1.5);
  EXPECT_THROW(t.offset({2, 0, 0}), Error);
  EXPECT_THROW(t.offset({0, 0}), Error);
  EXPECT_THROW(OracleTensor({2, -1}), Error);
}

TEST(OracleTensor, LoadReadsAStridedOffsetViewInRowMajorOrder) {
  // A bf16 [2, 3] view with row stride 5, one element in, inside a 12-element buffer.
  std::vector<uint16_t> buf(12, float_to_bf16(99.0f));
  const View v(DType::kBF16, {2, 3}, {5, 1}, 2);
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) buf[static_cast<size_t>(1 + 5 * r + c)] = float_to_bf16(float(10 * r + c) + 0.5f);
  }
  const OracleTensor t = load(HostTensor(buf.data(), v));
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.values, (std::vector<double>{0.5, 1.5, 2.5, 10.5, 11.5, 12.5}));
  // A transposed view loads in its own row-major order.
  const OracleTensor tt = load(HostTensor(buf.data(), v.transpose(0, 1)));
  EXPECT_EQ(tt.values, (std::vector<double>{0.5, 10.5, 1.5, 11.5, 2.5, 12.5}));
}

}  // namespace
}  // namespace mlacheck::oracle
