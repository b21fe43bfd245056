// Tests of core/dtype.h: names, sizes and parsing round-trip for every dtype.
#include "core/dtype.h"

#include <gtest/gtest.h>

namespace mlacheck {
namespace {

TEST(DType, NamesRoundTripAndSizesMatchStorage) {
  const DType all[] = {DType::kF64, DType::kF32, DType::kBF16, DType::kF16, DType::kFP8E4M3,
                       DType::kFP8E5M2, DType::kUE8M0, DType::kI64, DType::kI32, DType::kU8};
  const size_t sizes[] = {8, 4, 2, 2, 1, 1, 1, 8, 4, 1};
  for (size_t i = 0; i < std::size(all); ++i) {
    EXPECT_EQ(parse_dtype(dtype_name(all[i])), all[i]) << dtype_name(all[i]);
    EXPECT_EQ(dtype_size(all[i]), sizes[i]) << dtype_name(all[i]);
  }
  EXPECT_EQ(dtype_size(dtype_of<float>::value), sizeof(float));
  EXPECT_EQ(dtype_size(dtype_of<int32_t>::value), sizeof(int32_t));
}

TEST(DType, UnknownNameIsRejected) {
  EXPECT_FALSE(parse_dtype("float32").has_value());
  EXPECT_FALSE(parse_dtype("").has_value());
}

TEST(DType, FloatnessSeparatesIndicesFromValues) {
  EXPECT_TRUE(dtype_is_float(DType::kFP8E4M3));
  EXPECT_TRUE(dtype_is_float(DType::kUE8M0));
  EXPECT_FALSE(dtype_is_float(DType::kI32));
  EXPECT_FALSE(dtype_is_float(DType::kU8));
}

}  // namespace
}  // namespace mlacheck
