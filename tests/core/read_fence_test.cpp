// Tests of the read fence (core/read_fence.h). Under AddressSanitizer (the sanitizer build, which CI
// runs) reads outside the declared views are reported with their buffer, view and coordinates; in
// other builds a fence must do nothing at all, which the last test checks.
#include "core/read_fence.h"

#include <gtest/gtest.h>

#include "core/guarded_buffer.h"

namespace mlacheck {
namespace {

#define SKIP_WITHOUT_FENCES() \
  if (!ReadFence::available()) GTEST_SKIP() << "skipped: not an AddressSanitizer build (the sanitizer build runs it)"

// A read the compiler must keep.
__attribute__((noinline)) int32_t read_i32(const void* p) { return *static_cast<const volatile int32_t*>(p); }
__attribute__((noinline)) uint8_t read_u8(const void* p) { return *static_cast<const volatile uint8_t*>(p); }
__attribute__((noinline)) void write_i32(void* p, int32_t v) { *static_cast<volatile int32_t*>(p) = v; }

// Four rows of 6 int32 each 8 apart: the row padding is 8 bytes, a whole granule.
struct Fenced : ::testing::Test {
  GuardedBuffer buf{"lens", 4 * 8 * 4};
  View rows = View(DType::kI32, {4, 6}, {8, 1}, 0);
  // Element (r, c) of the rows' stride, c past the view's 6 columns included.
  int32_t* at(int64_t r, int64_t c) { return reinterpret_cast<int32_t*>(buf.data()) + r * 8 + c; }
};

TEST_F(Fenced, ReadsInsideTheViewsAreNotReported) {
  SKIP_WITHOUT_FENCES();
  ReadFence fence;
  fence.add(buf, {{"rows", rows}});
  fence.arm();
  int64_t sum = 0;
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 6; ++c) sum += read_i32(at(r, c));
  }
  EXPECT_EQ(fence.disarm(), std::nullopt) << sum;
}

TEST_F(Fenced, AReadInTheRowPaddingIsReportedWithItsRowAndColumn) {
  SKIP_WITHOUT_FENCES();
  ReadFence fence;
  fence.add(buf, {{"rows", rows}});
  fence.arm();
  read_i32(at(1, 6));  // the first padding element of row 1
  const std::optional<StrayAccess> a = fence.disarm();
  ASSERT_TRUE(a.has_value());
  EXPECT_FALSE(a->write);
  EXPECT_EQ(a->bytes, 4);
  EXPECT_EQ(a->offset, (8 + 6) * 4);
  EXPECT_EQ(a->region, StrayRegion::kBetweenViews);
  EXPECT_EQ(a->nearest_view, "rows");
  EXPECT_EQ(a->coords, (std::vector<int64_t>{1, 6}));
  EXPECT_EQ(a->describe(),
            "buffer 'lens': read of 4 bytes at byte 56, inside the allocation, outside every view of the launch; "
            "nearest view 'rows' int32[4, 6] strides (8, 1) at row 1, column 6 (past the row's 6 columns, in its padding)");
}

TEST_F(Fenced, ReadsPastEitherEndOfTheAllocationAreInItsRedZones) {
  SKIP_WITHOUT_FENCES();
  for (const int64_t off : {int64_t(-4), buf.size()}) {
    ReadFence fence;
    fence.add(buf, {{"rows", rows}});
    fence.arm();
    read_i32(buf.data() + off);
    const std::optional<StrayAccess> a = fence.disarm();
    ASSERT_TRUE(a.has_value()) << off;
    EXPECT_EQ(a->offset, off);
    EXPECT_EQ(a->region, off < 0 ? StrayRegion::kBeforeAllocation : StrayRegion::kAfterAllocation);
  }
}

TEST_F(Fenced, TheFirstAccessIsKeptAndTheFenceIsLiftedAfterIt) {
  SKIP_WITHOUT_FENCES();
  ReadFence fence;
  fence.add(buf, {{"rows", rows}});
  fence.arm();
  read_i32(at(2, 7));
  read_i32(at(0, 6));  // no second report: the fence is down for the rest of the launch
  const std::optional<StrayAccess> a = fence.disarm();
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->coords, (std::vector<int64_t>{2, 7}));
  // Disarmed: every byte is readable again, and a new fence starts afresh.
  read_i32(at(3, 7));
  ReadFence again;
  again.add(buf, {{"rows", rows}});
  again.arm();
  read_i32(at(3, 6));
  const std::optional<StrayAccess> b = again.disarm();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->coords, (std::vector<int64_t>{3, 6}));
}

TEST_F(Fenced, AWriteOutsideTheViewsIsRecordedAsAWrite) {
  SKIP_WITHOUT_FENCES();
  ReadFence fence;
  fence.add(buf, {{"rows", rows}});
  fence.arm();
  write_i32(at(3, 6), 7);
  const std::optional<StrayAccess> a = fence.disarm();
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->write);
  EXPECT_NE(a->describe().find("write of 4 bytes"), std::string::npos) << a->describe();
}

TEST_F(Fenced, EachMemoryHasItsOwnViewsAndTheNearestOneIsNamed) {
  SKIP_WITHOUT_FENCES();
  GuardedBuffer table("block_table", 64);
  ReadFence fence;
  fence.add(buf, {{"rows", rows}});
  // Two views of the table: [0, 16) and [32, 48) bytes; byte 40 is in the second, 28 between them.
  fence.add(table, {{"first", View::contiguous(DType::kI32, {4})}, {"second", View::contiguous(DType::kI32, {4}, 32)}});
  fence.arm();
  read_i32(table.data() + 40);
  read_i32(at(0, 0));
  EXPECT_EQ(fence.disarm(), std::nullopt);
  fence.arm();
  read_i32(table.data() + 28);
  const std::optional<StrayAccess> a = fence.disarm();
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->buffer, "block_table");
  EXPECT_EQ(a->nearest_view, "second");
  EXPECT_EQ(a->coords, (std::vector<int64_t>{-1}));
}

// AddressSanitizer's granule is 8 bytes and opens only as a prefix: a view element that begins in
// the middle of a granule opens the granule's leading bytes too. This pins the imprecision the
// header states, so that a change to it is seen.
TEST_F(Fenced, AGapOfLessThanAGranuleBeforeAnElementIsNotFenced) {
  SKIP_WITHOUT_FENCES();
  GuardedBuffer b("odd", 64);
  ReadFence fence;
  fence.add(b, {{"tail", View::contiguous(DType::kI32, {1}, 4)}});  // bytes [4, 8) of the first granule
  fence.arm();
  read_u8(b.data() + 0);  // before the view, in its granule: open
  EXPECT_EQ(fence.disarm(), std::nullopt);
  fence.arm();
  read_u8(b.data() + 8);  // the next granule: fenced
  ASSERT_TRUE(fence.disarm().has_value());
}

// The runs a fence opens: every view's elements, merged where they touch, clipped to the allocation,
// each with the first view it came from.
TEST(ReadFence, RunsMergeTheViewsElements) {
  const std::vector<NamedView> views = {{"rows", View(DType::kI32, {2, 2}, {4, 1}, 0)},
                                        {"tail", View::contiguous(DType::kI32, {2}, 8)},
                                        {"past", View::contiguous(DType::kI32, {4}, 28)}};
  const std::vector<FenceRun> runs = fence_runs(views, 36);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].begin, 0);  // row 0, the tail, row 1
  EXPECT_EQ(runs[0].end, 24);
  EXPECT_EQ(runs[0].view, 0u);
  EXPECT_EQ(runs[1].begin, 28);  // clipped at the allocation's 36 bytes
  EXPECT_EQ(runs[1].end, 36);
  EXPECT_EQ(runs[1].view, 2u);
}

TEST(ReadFence, WithoutAddressSanitizerAFenceDoesNothing) {
  if (ReadFence::available()) GTEST_SKIP() << "skipped: an AddressSanitizer build (the fence is tested above)";
  GuardedBuffer b("x", 16);
  ReadFence fence;
  fence.add(b, {{"x", View::contiguous(DType::kI32, {1})}});
  fence.arm();
  read_i32(b.data() + 8);
  EXPECT_EQ(fence.disarm(), std::nullopt);
}

TEST(ReadFence, ArmingTwiceIsAnError) {
  GuardedBuffer b("x", 16);
  ReadFence fence;
  fence.add(b, {{"x", View::contiguous(DType::kI32, {1})}});
  fence.arm();
  EXPECT_THROW(fence.arm(), Error);
  fence.disarm();
}

}  // namespace
}  // namespace mlacheck
