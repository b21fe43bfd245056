// Tests of core/poison.h: output poison per dtype, input poisoning past row lengths, all-zero check.
#include "core/poison.h"

#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

namespace mlacheck {
namespace {

TEST(Poison, OutputPoisonIsNaNForFloatsAndAnInvalidIndexForIntegers) {
  alignas(8) uint8_t mem[64];
  const DType floats[] = {DType::kF64, DType::kF32, DType::kBF16, DType::kF16, DType::kFP8E4M3,
                          DType::kFP8E5M2, DType::kUE8M0};
  for (DType t : floats) {
    std::memset(mem, 0, sizeof mem);
    HostTensor x(mem, View::contiguous(t, {4}));
    poison_output(x);
    for (int64_t i = 0; i < 4; ++i) EXPECT_TRUE(std::isnan(x.load({i}))) << dtype_name(t);
    EXPECT_TRUE(is_output_poison(t, x.element({3})));
  }
  std::memset(mem, 0, sizeof mem);
  HostTensor idx(mem, View::contiguous(DType::kI32, {4}));
  poison_output(idx);
  const int32_t p = idx.at<int32_t>({2});
  EXPECT_LT(p, -1);  // never a valid index, and not the -1 of "no token"
  EXPECT_TRUE(is_output_poison(DType::kI32, idx.element({2})));
  idx.at<int32_t>({2}) = -1;
  EXPECT_FALSE(is_output_poison(DType::kI32, idx.element({2})));
}

TEST(Poison, AVerdictNamesTheIntegerPoisonForWhatItIs) {
  EXPECT_EQ(int32_text(-1515870811), "-1515870811 (0xA5A5A5A5, the output's poison: an element never written)");
  EXPECT_EQ(int32_text(-1), "-1");
  EXPECT_EQ(int32_text(0), "0");
  EXPECT_EQ(int32_text(-1515870810), "-1515870810");
}

// The note a widened comparison's verdict gets: the elements of the view still holding the poison.
TEST(Poison, TheUnwrittenNoteCountsTheElementsStillHoldingThePoison) {
  std::vector<uint16_t> mem(8, 0x3F80);  // bf16 1.0
  const HostTensor t(mem.data(), View::padded_rows(DType::kBF16, {2, 3}, 4));
  EXPECT_EQ(unwritten_note(t), "");
  poison_output(t);
  EXPECT_EQ(unwritten_note(t), " (6 of 6 elements hold the output poison: never written)");
  mem[1] = 0x7FC0;  // a NaN the kernel wrote is not the poison
  EXPECT_EQ(unwritten_note(t), " (5 of 6 elements hold the output poison: never written)");
}

TEST(Poison, OutputPoisonTouchesOnlyTheViewsElements) {
  std::vector<float> mem(12, 1.0f);
  poison_output(HostTensor(mem.data(), View::padded_rows(DType::kF32, {3, 2}, 4)));
  for (int i = 0; i < 12; ++i) EXPECT_EQ(std::isnan(mem[i]), i % 4 < 2) << i;
}

TEST(Poison, FillPastLengthsPoisonsExactlyTheTail) {
  std::vector<float> mem(4 * 8, 0.0f);
  HostTensor t(mem.data(), View::padded_rows(DType::kF32, {3, 6}, 8));
  fill_past_lengths(t, {2, 0, 9}, -INFINITY);
  for (int64_t c = 0; c < 6; ++c) {
    EXPECT_EQ(std::isinf(t.load({0, c})), c >= 2) << c;
    EXPECT_TRUE(std::isinf(t.load({1, c})));  // length 0: the whole row
    EXPECT_FALSE(std::isinf(t.load({2, c})));  // longer than the row: nothing
  }
  EXPECT_EQ(mem[6], 0.0f);  // row padding untouched
  EXPECT_THROW(fill_past_lengths(t, {1, 2}, 0.0), Error);
}

TEST(Poison, AllZeroSeesTheFirstNonZeroAndIgnoresSignedZero) {
  std::vector<float> mem(8, 0.0f);
  HostTensor t(mem.data(), View::contiguous(DType::kF32, {8}));
  EXPECT_TRUE(all_zero(t));
  mem[3] = -0.0f;
  EXPECT_TRUE(all_zero(t));
  mem[7] = NAN;
  EXPECT_FALSE(all_zero(t));
  mem[7] = 0;
  mem[5] = 1e-30f;
  EXPECT_FALSE(all_zero(t));
}

}  // namespace
}  // namespace mlacheck
