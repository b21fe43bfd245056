// Tests of core/reserved_buffer.h: backed pages rounded and merged, bytes staged only where backed,
// a stray write inside a backed page and an access to an unbacked page (in the allocation, or in
// the margin where an offset wrapped to 32 bits lands) reported, a write to an unbacked page a
// fault, input-only unless made writable (output views in backed pages), and the same in a
// process whose memory lives in the shared arena.
#include "core/reserved_buffer.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/shared_arena.h"
#include "tests/support/in_child.h"

namespace mlacheck {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

using test_support::in_child;

// Reads a byte the compiler may not drop.
uint8_t touch(const uint8_t* p) { return *static_cast<const volatile uint8_t*>(p); }

TEST(BackedPages, RoundsOutMergesAndAddsTheRedZones) {
  const std::vector<ByteSpan> pages = backed_pages({{5000, 5001}, {8190, 9000}, {100000, 100001}}, 200000, 256, 4096);
  ASSERT_EQ(pages.size(), 4u);
  EXPECT_EQ(pages[0].begin, -4096);  // the leading red zone's page
  EXPECT_EQ(pages[0].end, 0);
  EXPECT_EQ(pages[1].begin, 4096);  // 5000 and 8190..9000 share pages 1 and 2
  EXPECT_EQ(pages[1].end, 12288);
  EXPECT_EQ(pages[2].begin, 98304);
  EXPECT_EQ(pages[3].begin, 196608);  // the trailing red zone's page
  EXPECT_EQ(pages[3].end, 200704);
  EXPECT_THROW(backed_pages({{10, 300000}}, 200000, 256, 4096), Error);
}

TEST(BackedPages, InsideBackedNeedsOneSpanToHoldTheWholeRange) {
  const std::vector<ByteSpan> spans = {{-4096, 0}, {4096, 12288}};
  EXPECT_TRUE(inside_backed(spans, 4096, 8192));
  EXPECT_TRUE(inside_backed(spans, -10, 10));
  EXPECT_TRUE(inside_backed(spans, 100, 0));  // nothing to hold
  EXPECT_FALSE(inside_backed(spans, 12280, 16));
  EXPECT_FALSE(inside_backed(spans, -1, 2));  // spans 0 .. 4096 is not backed
}

TEST(ReservedBuffer, EightGibCostTheirBackedPagesOnly) {
  const int64_t far = 5 * kGiB + 12345;
  ReservedBuffer kv("kv", 8 * kGiB, {{far, far + 100}, {7, 9}});
  std::vector<uint8_t> bytes(100, 0x3C);
  kv.write(far, bytes.data(), 100);
  std::vector<uint8_t> back(100);
  kv.read(far, back.data(), 100);
  EXPECT_EQ(back, bytes);
  EXPECT_THROW(kv.write(3 * kGiB, bytes.data(), 1), Error);  // not backed
  EXPECT_THROW(kv.read(far + 5000, back.data(), 1), Error);
  kv.arm();
  EXPECT_TRUE(kv.check().ok()) << kv.check().describe();
  EXPECT_TRUE(kv.unbacked_pages_touched().empty());
}

TEST(ReservedBuffer, AStrayWriteInsideABackedPageIsReported) {
  ReservedBuffer kv("kv", 3 * kGiB, {{2 * kGiB + 64, 2 * kGiB + 128}});
  kv.arm();
  kv.data()[2 * kGiB + 200] ^= 1;  // backed (the same page), but the launch may not write it
  const GuardReport r = kv.check();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.stray_bytes, 1);
  EXPECT_EQ(r.first.offset, 2 * kGiB + 200);
  EXPECT_FALSE(r.first.unbacked_access);
}

TEST(ReservedBuffer, ReadsOfUnbackedPagesAreZeroAndReportedWithTheirPage) {
  ReservedBuffer kv("kv", 3 * kGiB, {{2 * kGiB, 2 * kGiB + 4096}});
  kv.arm();
  EXPECT_EQ(touch(kv.data() + kGiB + 10), 0);  // inside the allocation, unbacked
  GuardReport r = kv.check();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.first.unbacked_access);
  EXPECT_EQ(r.first.offset, kGiB);
  EXPECT_EQ(r.first.region, StrayRegion::kBetweenViews);
  EXPECT_NE(r.describe().find("an access to unbacked memory in the page at byte 1073741824"), std::string::npos)
      << r.describe();
  // Arming again forgets the page; a launch that reads nothing unbacked then passes.
  kv.arm();
  EXPECT_TRUE(kv.check().ok()) << kv.check().describe();

  // 2 GiB + 4 KiB read as an int32 offset: 4 GiB before its place, in the leading margin.
  const int64_t wrapped = static_cast<int32_t>(static_cast<uint32_t>(2 * kGiB + 4096));
  ASSERT_LT(wrapped, 0);
  EXPECT_EQ(touch(kv.data() + wrapped), 0);
  r = kv.check();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.first.region, StrayRegion::kBeforeAllocation);
  EXPECT_NE(r.describe().find("GiB before the allocation (where an offset wrapped to 32 bits lands)"), std::string::npos)
      << r.describe();
}

// In a process whose memory is private the write faults. A child of a process that enabled the
// shared arena (the SharedArena tests do, when they run in this process first) stores the buffer
// there, writable: check() reports the write instead (status 2 here).
TEST(ReservedBuffer, AWriteToAnUnbackedPageFaults) {
  const int status = in_child([] {
    ReservedBuffer kv("kv", 3 * kGiB, {{0, 64}});
    kv.arm();
    kv.data()[2 * kGiB] = 1;
    if (shared_arena::active() && !kv.check().ok()) _exit(2);
    return true;  // the write went through unseen
  });
  // SIGSEGV, or under AddressSanitizer its report and an abort; or the arena's report.
  EXPECT_NE(status, 0) << "the write to an unbacked page went through";
  EXPECT_NE(status, 1);
}

// What a fault handler says of an address (describe_reserved_address): the buffer, and where the
// address lies from its data; nothing for an address outside every live reservation.
TEST(ReservedBuffer, AnAddressIsDescribedByTheReservationHoldingIt) {
  char line[400];
  const void* outside = nullptr;
  {
    ReservedBuffer kv("kv_cache", int64_t{3} << 30, {{0, 4096}});
    uint8_t* d = kv.data();
    ASSERT_TRUE(describe_reserved_address(d - (int64_t{2} << 30), line, sizeof line));
    EXPECT_STREQ(line, "reserved 'kv_cache': 2147483648 bytes before its data, in its reserved margin, where an offset "
                       "wrapped to 32 bits lands");
    ASSERT_TRUE(describe_reserved_address(d + (int64_t{1} << 30), line, sizeof line));
    EXPECT_STREQ(line, "reserved 'kv_cache': byte 1073741824 of its data, in a page the case did not stage");
    ASSERT_TRUE(describe_reserved_address(d + (int64_t{3} << 30) + 100, line, sizeof line));
    EXPECT_STREQ(line, "reserved 'kv_cache': 100 bytes past its end, in its reserved margin");
    // A short buffer gets a cut, terminated line.
    char short_line[12];
    ASSERT_TRUE(describe_reserved_address(d, short_line, sizeof short_line));
    EXPECT_STREQ(short_line, "reserved 'k");
    outside = d;
  }
  EXPECT_FALSE(describe_reserved_address(outside, line, sizeof line)) << "the buffer is gone: " << line;
  int local = 0;
  EXPECT_FALSE(describe_reserved_address(&local, line, sizeof line));
}

TEST(ReservedBuffer, IsInputOnlyUnlessMadeWritable) {
  ReservedBuffer kv("kv", 1 << 20, {{0, 64}});
  EXPECT_THROW(kv.declare_output("out", View::contiguous(DType::kU8, {16})), Error);
}

// Writable: output views inside the backed pages, 5 GiB in, are poisoned on arm() and may change;
// every other backed byte may not, and a view reaching an unbacked page is refused on arm().
TEST(ReservedBuffer, AWritableOneTakesOutputViewsInsideItsBackedPages) {
  const int64_t far = 5 * kGiB + 100;
  ReservedBuffer kv("kv", 6 * kGiB, {{far, far + 600}}, GuardedMemory::kDefaultRedZone, /*writable=*/true);
  kv.declare_output("slot codes", View::contiguous(DType::kU8, {64}, far + 8));
  kv.declare_output("slot scale", View::contiguous(DType::kF32, {1}, far + 520));
  EXPECT_THROW(kv.declare_output("overlap", View::contiguous(DType::kU8, {4}, far + 60)), Error);
  kv.arm();
  float scale = 0;
  std::memcpy(&scale, kv.data() + far + 520, 4);
  EXPECT_TRUE(std::isnan(scale));  // poisoned
  std::memset(kv.data() + far + 8, 0x11, 64);
  scale = 2.0f;
  std::memcpy(kv.data() + far + 520, &scale, 4);
  EXPECT_TRUE(kv.check().ok()) << kv.check().describe();
  kv.data()[far + 72] ^= 1;  // one past the codes
  const GuardReport r = kv.check();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.stray_bytes, 1);
  EXPECT_EQ(r.first.offset, far + 72);
  EXPECT_EQ(r.first.nearest_view, "slot codes");

  ReservedBuffer outside("kv", 6 * kGiB, {{far, far + 600}}, GuardedMemory::kDefaultRedZone, true);
  outside.declare_output("codes", View::contiguous(DType::kU8, {64}, far + 8192));  // past the backed page
  try {
    outside.arm();
    ADD_FAILURE() << "an output view outside the backed pages was armed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside the backed pages"), std::string::npos) << e.what();
  }
}

TEST(ReservedBuffer, InTheSharedArenaAPageReadOrWrittenIsReported) {
  shared_arena::enable_for_children();
  EXPECT_EQ(in_child([] {
              ReservedBuffer kv("kv", 5 * kGiB, {{4 * kGiB, 4 * kGiB + 64}});
              const shared_arena::Arena arena = shared_arena::current();
              if (kv.data() < arena.base || kv.data() >= arena.base + arena.bytes) return false;
              uint8_t b = 0x42;
              kv.write(4 * kGiB + 8, &b, 1);
              kv.arm();
              if (!kv.check().ok()) return false;
              // A read of an unbacked page brings in a page of the arena's file: reported.
              const uint8_t read = *static_cast<volatile uint8_t*>(kv.data() + 2 * kGiB + 5);
              GuardReport r = kv.check();
              if (read != 0 || r.ok() || !r.first.unbacked_access || r.first.offset != 2 * kGiB) return false;
              kv.arm();  // gives the page back
              if (!kv.check().ok()) return false;
              kv.data()[3 * kGiB] = 1;  // writable in the arena: seen as a touched page
              r = kv.check();
              return !r.ok() && r.first.unbacked_access && r.first.offset == 3 * kGiB;
            }),
            0);
}

}  // namespace
}  // namespace mlacheck
