// Tests of core/view.h: queries, the view-returning operations and their errors.
#include "core/view.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace mlacheck {
namespace {

// Runs f, expects mlacheck::Error, and returns its message.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected mlacheck::Error";
  return "";
}

TEST(View, ContiguousHasDenseRowMajorStrides) {
  const View v = View::contiguous(DType::kF32, {2, 3, 4});
  EXPECT_EQ(v.strides(), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(v.numel(), 24);
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_EQ(v.byte_span().begin, 0);
  EXPECT_EQ(v.byte_span().end, 96);
  EXPECT_EQ(v.to_string(), "fp32[2, 3, 4] strides (12, 4, 1)");
}

TEST(View, PaddedRowsAreNotContiguousAndSpanTheirLastRowOnly) {
  // vLLM aligns logits rows to 256 elements: [B*next_n, max_context_len] with a wider row stride.
  const View v = View::padded_rows(DType::kF32, {3, 100}, 256, 64);
  EXPECT_FALSE(v.is_contiguous());
  EXPECT_EQ(v.byte_span().begin, 64);
  EXPECT_EQ(v.byte_span().end, 64 + (2 * 256 + 100) * 4);
  EXPECT_EQ(v.byte_offset_of({1, 5}), 64 + (256 + 5) * 4);
  EXPECT_NE(error_of([] { View::padded_rows(DType::kF32, {3, 100}, 99); }).find("smaller than the dense row"),
            std::string::npos);
}

TEST(View, SizeOneDimsIgnoreTheirStrideForContiguity) {
  EXPECT_TRUE(View(DType::kI32, {4, 1, 8}, {8, 999, 1}).is_contiguous());
  EXPECT_FALSE(View(DType::kI32, {4, 2, 8}, {16, 999, 1}).is_contiguous());
  EXPECT_TRUE(View(DType::kI32, {0, 5}, {77, 3}).is_contiguous());
}

TEST(View, ZeroAndWideStridesAreAllowedNegativeAreNot) {
  const View bcast(DType::kF32, {4, 8}, {0, 1});
  EXPECT_EQ(bcast.byte_span().size(), 32);
  EXPECT_FALSE(bcast.is_contiguous());
  EXPECT_NE(error_of([] { View(DType::kF32, {4}, {-1}); }).find("negative stride -1"), std::string::npos);
  EXPECT_NE(error_of([] { View(DType::kF32, {4, 2}, {1}); }).find("has 2 dims"), std::string::npos);
}

TEST(View, EmptyViewTouchesNothing) {
  const View v(DType::kF32, {3, 0}, {5, 1}, 40);
  EXPECT_EQ(v.numel(), 0);
  EXPECT_TRUE(v.byte_span().empty());
}

TEST(View, SliceSelectTranspose) {
  const View v = View::contiguous(DType::kI32, {4, 6});
  const View s = v.slice(1, 2, 6, 2);  // columns 2 and 4
  EXPECT_EQ(s.shape(), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(s.strides(), (std::vector<int64_t>{6, 2}));
  EXPECT_EQ(s.byte_offset(), 8);
  EXPECT_EQ(s.byte_offset_of({3, 1}), v.byte_offset_of({3, 4}));
  EXPECT_EQ(v.slice(0, -2, -1).shape()[0], 1);  // negative bounds count from the end

  const View row = v.select(0, 2);
  EXPECT_EQ(row.shape(), (std::vector<int64_t>{6}));
  EXPECT_EQ(row.byte_offset(), 2 * 6 * 4);

  const View t = v.transpose(0, 1);
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(t.byte_offset_of({5, 3}), v.byte_offset_of({3, 5}));
  EXPECT_FALSE(t.is_contiguous());
}

TEST(View, OutOfRangeOperationsSayWhatWasGiven) {
  const View v = View::contiguous(DType::kI32, {4, 6});
  // A slice past the end is an error, not a silently shorter view.
  const std::string e = error_of([&] { v.slice(0, 0, 5); });
  EXPECT_NE(e.find("[0, 5) is not within dim 0 of size 4"), std::string::npos) << e;
  EXPECT_NE(e.find("int32[4, 6]"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { v.select(1, 6); }).find("index 6 out of range for dim 1 of size 6"), std::string::npos);
  EXPECT_NE(error_of([&] { v.transpose(0, 2); }).find("dim 2 out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { v.byte_offset_of({4, 0}); }).find("out of range in dim 0"), std::string::npos);
  EXPECT_NE(error_of([&] { v.byte_offset_of({1}); }).find("1 coordinates [1] for a rank-2 view"), std::string::npos);
}

TEST(View, ReshapeOfContiguousSplitsAndMerges) {
  const View v = View::contiguous(DType::kF32, {2, 3, 4}, 16);
  const View r = v.reshape({6, 4});
  EXPECT_EQ(r.strides(), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(r.byte_offset(), 16);
  EXPECT_EQ(v.reshape({2, -1}).shape(), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(v.reshape({24}).strides(), (std::vector<int64_t>{1}));
}

TEST(View, ReshapeKeepsPaddingWhenItDoesNotMergeAcrossIt) {
  // [B, next_n, k] rows padded to a wider stride: splitting the row dim is still a view.
  const View padded = View::padded_rows(DType::kI32, {6, 8}, 10);
  const View r = padded.reshape({2, 3, 8});
  EXPECT_EQ(r.strides(), (std::vector<int64_t>{30, 10, 1}));
  EXPECT_EQ(r.byte_offset_of({1, 2, 7}), padded.byte_offset_of({5, 7}));
}

TEST(View, ReshapeThatCannotBeAViewIsRefusedWithTheReason) {
  // vLLM #42135: context_lens written into a (max_num_seqs, next_n) buffer and sliced
  // [:B, :next_n'] is not contiguous; flattening it cannot be a view.
  const View buffer = View::contiguous(DType::kI32, {8, 4});
  const View sliced = buffer.slice(0, 0, 3).slice(1, 0, 2);
  ASSERT_FALSE(sliced.is_contiguous());
  const std::string e = error_of([&] { sliced.reshape({6}); });
  EXPECT_NE(e.find("cannot be a view"), std::string::npos) << e;
  EXPECT_NE(e.find("int32[3, 2] strides (4, 1)"), std::string::npos) << e;
  EXPECT_NE(e.find("stride[0] = 4, a merge needs 2"), std::string::npos) << e;
  // A transposed view cannot be flattened either.
  EXPECT_NE(error_of([] { View::contiguous(DType::kF32, {3, 5}).transpose(0, 1).reshape({15}); }).find("cannot be a view"),
            std::string::npos);
}

TEST(View, ReshapeWithTheWrongCountIsRefused) {
  const View v = View::contiguous(DType::kI32, {4, 6});
  EXPECT_NE(error_of([&] { v.reshape({5, 5}); }).find("25 elements requested, the view has 24"), std::string::npos);
  // reshape(batch, -1, k) with a count that does not divide: the -1 cannot be filled.
  EXPECT_NE(error_of([&] { v.reshape({5, -1}); }).find("cannot fill the -1"), std::string::npos);
  EXPECT_NE(error_of([&] { v.reshape({-1, -1}); }).find("more than one -1"), std::string::npos);
}

TEST(View, CoordsOfByteNameRowsColumnsAndPadding) {
  const View v = View::padded_rows(DType::kF32, {8, 128}, 256, 1024);
  EXPECT_EQ(v.coords_of_byte(1024 + (3 * 256 + 5) * 4 + 2), (std::vector<int64_t>{3, 5}));
  // One element past the last column of row 7 is in that row's padding.
  EXPECT_EQ(v.coords_of_byte(v.byte_offset_of({7, 127}) + 4), (std::vector<int64_t>{7, 128}));
  // The first byte after the view's last row.
  EXPECT_EQ(v.coords_of_byte(1024 + 8 * 256 * 4), (std::vector<int64_t>{8, 0}));
  // A byte before the view gives a negative row.
  EXPECT_EQ(v.coords_of_byte(1020), (std::vector<int64_t>{-1, 255}));
}

TEST(View, ForEachVisitsEveryElementInRowMajorOrder) {
  const View v = View::contiguous(DType::kF32, {3, 4}).transpose(0, 1);  // [4, 3] strides (1, 4)
  std::vector<int64_t> offsets;
  v.for_each_byte_offset([&](int64_t b) { offsets.push_back(b); });
  std::vector<int64_t> by_index;
  v.for_each_index([&](const std::vector<int64_t>& i) { by_index.push_back(v.byte_offset_of(i)); });
  EXPECT_EQ(offsets, by_index);
  EXPECT_EQ(offsets.size(), 12u);
  EXPECT_EQ(offsets[1], 16);  // [0, 1] is 4 elements on
}

}  // namespace
}  // namespace mlacheck
