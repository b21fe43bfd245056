// Tests of core/guarded_buffer.h: each stray write is reported with its region and coordinates.
#include "core/guarded_buffer.h"

#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/poison.h"

namespace mlacheck {
namespace {

// A buffer laid out like vLLM's: a [rows, cols] fp32 output with padded rows, inside a larger
// allocation that also holds other data.
struct Fixture {
  static constexpr int64_t kRows = 4, kCols = 6, kStride = 8, kOffset = 64;
  GuardedBuffer buf{"logits", 512};
  View out = View::padded_rows(DType::kF32, {kRows, kCols}, kStride, kOffset);
  Fixture() {
    buf.declare_output("out", out);
    buf.arm();
  }
  // Writes every element of the view, as a correct kernel would.
  void write_all() {
    HostTensor t = buf.tensor(out);
    out.for_each_index([&](const std::vector<int64_t>& i) { t.at<float>(i) = 1.0f; });
  }
};

TEST(GuardedBuffer, CorrectKernelPasses) {
  Fixture f;
  f.write_all();
  const GuardReport r = f.buf.check();
  EXPECT_TRUE(r.ok()) << r.describe();
}

TEST(GuardedBuffer, ArmPoisonsTheOutputs) {
  Fixture f;
  HostTensor t = f.buf.tensor(f.out);
  EXPECT_TRUE(std::isnan(t.load({0, 0})));
  EXPECT_TRUE(std::isnan(t.load({3, 5})));
}

TEST(GuardedBuffer, WriteOneBytePastTheLastColumnIsInTheRowPadding) {
  Fixture f;
  f.write_all();
  f.buf.data()[f.out.byte_offset_of({2, 5}) + 4] ^= 0xFF;  // first byte after row 2's last element
  const GuardReport r = f.buf.check();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.stray_bytes, 1);
  EXPECT_EQ(r.first.region, StrayRegion::kBetweenViews);
  EXPECT_EQ(r.first.nearest_view, "out");
  EXPECT_EQ(r.first.coords, (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(r.first.offset, Fixture::kOffset + (2 * Fixture::kStride + 6) * 4);
  EXPECT_NE(r.describe().find("row 2, column 6 (past the row's 6 columns, in its padding)"), std::string::npos)
      << r.describe();
}

TEST(GuardedBuffer, WriteOneRowPastTheViewIsReportedAsSuch) {
  // vLLM #42072: the view has num_decode_tokens rows, the kernel writes num_padded_tokens.
  Fixture f;
  f.write_all();
  float* past = reinterpret_cast<float*>(f.buf.data() + Fixture::kOffset + Fixture::kRows * Fixture::kStride * 4);
  past[0] = 1.0f;
  const GuardReport r = f.buf.check();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.first.coords, (std::vector<int64_t>{4, 0}));
  EXPECT_NE(r.describe().find("row 4, column 0 (past the view's 4 rows)"), std::string::npos) << r.describe();
}

TEST(GuardedBuffer, WriteBetweenTwoViewsNamesTheNearerOne) {
  GuardedBuffer buf("topk_indices_buffer", 1024);
  const View decode = View::contiguous(DType::kI32, {4, 16});        // bytes [0, 256)
  const View prefill = View::contiguous(DType::kI32, {4, 16}, 512);  // bytes [512, 768)
  buf.declare_output("decode_rows", decode);
  buf.declare_output("prefill_rows", prefill);
  buf.arm();
  buf.data()[500] = 0;  // 12 bytes before prefill_rows
  const GuardReport r = buf.check();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.first.region, StrayRegion::kBetweenViews);
  EXPECT_EQ(r.first.offset, 500);
  EXPECT_EQ(r.first.nearest_view, "prefill_rows");
  EXPECT_EQ(r.first.coords, (std::vector<int64_t>{-1, 13}));
  EXPECT_NE(r.describe().find("before the view's first row"), std::string::npos) << r.describe();
}

TEST(GuardedBuffer, WritesIntoBothRedZonesAreReported) {
  Fixture f;
  f.write_all();
  f.buf.data()[-1] = static_cast<uint8_t>(~GuardedBuffer::red_zone_byte(-1));
  f.buf.data()[f.buf.size() + 255] = static_cast<uint8_t>(~GuardedBuffer::red_zone_byte(f.buf.size() + 255));
  const GuardReport r = f.buf.check();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.stray_bytes, 2);
  EXPECT_EQ(r.first.region, StrayRegion::kBeforeAllocation);
  EXPECT_EQ(r.first.offset, -1);
  EXPECT_EQ(r.last_offset, f.buf.size() + 255);
  EXPECT_NE(r.describe().find("leading red zone"), std::string::npos);
}

TEST(GuardedBuffer, WriteJustPastTheAllocationIsInTheTrailingRedZone) {
  GuardedBuffer buf("out", 64);
  const View v = View::contiguous(DType::kF32, {16});
  buf.declare_output("out", v);
  buf.arm();
  std::memset(buf.data(), 0, 68);  // one element too many
  const GuardReport r = buf.check();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.first.region, StrayRegion::kAfterAllocation);
  EXPECT_EQ(r.first.offset, 64);
  EXPECT_EQ(r.first.coords, (std::vector<int64_t>{16}));
}

TEST(GuardedBuffer, InputsWrittenBeforeArmMustStayUnchanged) {
  GuardedBuffer buf("kv", 256);
  HostTensor in = buf.tensor(View::contiguous(DType::kF32, {16}));
  fill(in, 2.0);
  buf.declare_output("out", View::contiguous(DType::kF32, {16}, 128));
  buf.arm();
  EXPECT_EQ(in.load({15}), 2.0);
  in.store({15}, 3.0);  // a kernel that writes its input
  const GuardReport r = buf.check();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.first.offset, 62);  // the first differing byte of element 15
}

// Byte views that start and end inside one 8-byte word: the check compares words, and a changed
// byte beside an output byte of the same word must still be counted, and only it.
TEST(GuardedBuffer, StrayBytesInsideAWordWithOutputBytesAreEachCounted) {
  GuardedBuffer buf("bytes", 64);
  buf.declare_output("a", View::contiguous(DType::kU8, {3}, 9));   // bytes 9..11
  buf.declare_output("b", View::padded_rows(DType::kU8, {2, 1}, 3, 13));  // bytes 13 and 16
  buf.arm();
  for (int64_t b : {9, 10, 11, 13, 16}) buf.data()[b] ^= 0x5A;
  EXPECT_TRUE(buf.check().ok()) << buf.check().describe();
  for (int64_t b : {8, 12, 14, 15}) buf.data()[b] ^= 0x5A;
  const GuardReport r = buf.check();
  EXPECT_EQ(r.stray_bytes, 4);
  EXPECT_EQ(r.first.offset, 8);
  EXPECT_EQ(r.last_offset, 15);
  EXPECT_EQ(r.first.region, StrayRegion::kBetweenViews);
}

// A view over bytes already declared is refused, naming the first shared byte.
TEST(GuardedBuffer, OverlappingOutputsAreRefusedAtTheFirstSharedByte) {
  GuardedBuffer buf("bytes", 64);
  buf.declare_output("a", View::contiguous(DType::kU8, {6}, 3));  // bytes 3..8
  try {
    buf.declare_output("b", View::contiguous(DType::kI32, {2}, 0));  // bytes 0..7
    FAIL() << "the overlap was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at byte 3"), std::string::npos) << e.what();
  }
}

// A refused output leaves no trace: bytes it marked before reaching the overlap are not outputs.
TEST(GuardedBuffer, ARefusedOutputLeavesTheMaskAsItWas) {
  GuardedBuffer buf("bytes", 64);
  buf.declare_output("a", View::contiguous(DType::kU8, {6}, 3));  // bytes 3..8
  EXPECT_THROW(buf.declare_output("b", View::contiguous(DType::kI32, {4}, 0)), Error);  // 0..15, runs into a
  // A view whose rows overlap each other (row stride 2 of 4 columns): refused, nothing kept.
  EXPECT_THROW(buf.declare_output("c", View(DType::kU8, {3, 4}, {2, 1}, 20)), Error);
  EXPECT_EQ(buf.outputs().size(), 1u);
  buf.declare_output("d", View::contiguous(DType::kU8, {2}, 0));  // bytes 0..1: free again
  buf.arm();
  buf.data()[2] = 1;   // 'b' covered it, but 'b' was refused: a stray byte
  buf.data()[21] = 1;  // 'c' covered it: a stray byte
  buf.data()[0] = 1;   // inside 'd'
  const GuardReport r = buf.check();
  EXPECT_EQ(r.stray_bytes, 2) << r.describe();
  EXPECT_EQ(r.first.offset, 2) << r.describe();
  EXPECT_EQ(r.last_offset, 21) << r.describe();
}

// Long runs are marked a mask byte at a time: an overlap in the middle of one is still found at its
// first shared byte, what the refused view marked before it is taken back, and a long view's every
// byte is an output and the next one is not.
TEST(GuardedBuffer, LongOutputRunsAreMarkedWholeAndOverlapsInsideThemFound) {
  GuardedBuffer buf("long", 4096);
  buf.declare_output("a", View::contiguous(DType::kU8, {100}, 1001));  // bytes 1001..1100
  try {
    buf.declare_output("b", View::contiguous(DType::kF32, {256}, 64));  // bytes 64..1087
    FAIL() << "the overlap was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at byte 1001"), std::string::npos) << e.what();
  }
  buf.declare_output("c", View::contiguous(DType::kBF16, {700}, 2048));  // bytes 2048..3447
  buf.arm();
  buf.data()[70] = 1;    // 'b' was refused: a stray byte
  buf.data()[1050] = 1;  // inside 'a'
  buf.data()[2048] = 1;  // the first byte of 'c'
  buf.data()[3447] = 1;  // its last byte
  buf.data()[3448] = 1;  // one past it: a stray byte
  const GuardReport r = buf.check();
  EXPECT_EQ(r.stray_bytes, 2) << r.describe();
  EXPECT_EQ(r.first.offset, 70) << r.describe();
  EXPECT_EQ(r.last_offset, 3448) << r.describe();
}

// read_all reads every buffer whole into its destination, in order; a count that does not match is
// refused.
TEST(GuardedBuffer, ReadAllReadsEachBufferWhole) {
  GuardedBuffer a("a", 16), b("b", 40);
  for (int i = 0; i < 16; ++i) a.data()[i] = static_cast<uint8_t>(i + 1);
  for (int i = 0; i < 40; ++i) b.data()[i] = static_cast<uint8_t>(200 - i);
  std::vector<uint8_t> ra(16), rb(40);
  read_all({&a, &b}, {ra.data(), rb.data()});
  EXPECT_EQ(ra[0], 1);
  EXPECT_EQ(ra[15], 16);
  EXPECT_EQ(rb[0], 200);
  EXPECT_EQ(rb[39], 161);
  EXPECT_THROW(read_all({&a, &b}, {ra.data()}), Error);
  read_all({}, {});
}

TEST(GuardedBuffer, RejectsMisuse) {
  GuardedBuffer buf("x", 64);
  EXPECT_THROW(buf.check(), Error);  // not armed
  EXPECT_THROW(buf.declare_output("too_big", View::contiguous(DType::kF32, {17})), Error);
  buf.declare_output("a", View::contiguous(DType::kF32, {8}));
  EXPECT_THROW(buf.declare_output("overlap", View::contiguous(DType::kF32, {2}, 28)), Error);
  EXPECT_THROW(buf.declare_output("bcast", View(DType::kF32, {2}, {0}, 32)), Error);
  EXPECT_THROW(GuardedBuffer("small_zone", 8, 128), Error);
  EXPECT_THROW(buf.tensor(View::contiguous(DType::kF32, {4}, 60)), Error);
}

TEST(GuardedBuffer, DataIsAlignedAndZeroSizedBuffersWork) {
  GuardedBuffer buf("empty", 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf.data()) % 256, 0u);
  buf.arm();
  EXPECT_TRUE(buf.check().ok());
  buf.data()[0] = static_cast<uint8_t>(~GuardedBuffer::red_zone_byte(0));
  EXPECT_EQ(buf.check().first.region, StrayRegion::kAfterAllocation);
}

TEST(GuardedBuffer, PatternsVaryWithPositionSoAConstantWriteIsSeen) {
  // A stray memset of any byte value changes nearly every byte it covers.
  for (int value = 0; value < 256; ++value) {
    GuardedBuffer buf("x", 256);
    buf.arm();
    std::memset(buf.data() + 10, value, 32);
    EXPECT_GE(buf.check().stray_bytes, 28) << value;
  }
}

// queue_repeats queues nothing on the host, where each launch runs at once: nullptr, so the caller
// launches one at a time (the device side is the GPU test's); a batch of no launches is refused.
TEST(GuardedBuffer, QueueRepeatsOnTheHostSaysLaunchOneAtATime) {
  GuardedBuffer a("a", 64), b("b", 64);
  a.declare_output("out", View::contiguous(DType::kF32, {4}));
  int stream_stand_in = 0;
  arm_all({&a, &b}, &stream_stand_in);
  EXPECT_EQ(queue_repeats({&a, &b}, {&a}, &stream_stand_in, 3), nullptr);
  EXPECT_EQ(queue_repeats({}, {}, &stream_stand_in, 3), nullptr);
  EXPECT_THROW(queue_repeats({&a}, {&a}, &stream_stand_in, 0), Error);
}

TEST(GuardedBuffer, ArmAllAndCheckAllActLikeEachBufferAloneWithReportsInOrder) {
  GuardedBuffer a("a", 256), b("b", 100), c("c", 0);
  const View va = View::contiguous(DType::kF32, {8}, 32), vb = View::contiguous(DType::kI32, {4});
  a.declare_output("va", va);
  b.declare_output("vb", vb);
  arm_all({&a, &b, &c});
  float f = 0;
  std::memcpy(&f, a.data() + 32, 4);
  EXPECT_TRUE(std::isnan(f)) << "arm_all poisons the outputs";
  a.data()[31] = 1;  // just before a's view
  b.data()[4] = 7;   // inside b's view: allowed
  const std::vector<GuardReport> r = check_all({&a, &b, &c});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].stray_bytes, 1);
  EXPECT_EQ(r[0].first.buffer, "a");
  EXPECT_EQ(r[0].first.offset, 31);
  EXPECT_TRUE(r[1].ok()) << r[1].describe();
  EXPECT_TRUE(r[2].ok()) << r[2].describe();
  EXPECT_EQ(r[0].describe(), a.check().describe()) << "the same report as check() alone";
}

// The stream-ordered form on the host backend: arm_all(.., stream) arms at once, the queued check
// runs in reports(), after the launch; the reports are check_all's, in order, and are taken once.
TEST(GuardedBuffer, QueuedChecksOnTheHostCheckAfterTheLaunchWithCheckAllsReports) {
  GuardedBuffer a("a", 256), b("b", 100);
  a.declare_output("va", View::contiguous(DType::kF32, {8}, 32));
  int stream_stand_in = 0;  // the host backend's stream is a host object; the guards ignore it
  arm_all({&a, &b}, &stream_stand_in);
  float f = 0;
  std::memcpy(&f, a.data() + 32, 4);
  EXPECT_TRUE(std::isnan(f)) << "armed at once";
  QueuedChecks checks = queue_check_all({&a, &b}, &stream_stand_in);
  b.data()[50] = 9;  // after queue_check_all, before reports(): the host check runs in reports()
  const std::vector<GuardReport> r = checks.reports();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(r[0].ok()) << r[0].describe();
  EXPECT_EQ(r[1].stray_bytes, 1);
  EXPECT_EQ(r[1].first.offset, 50);
  EXPECT_EQ(r[1].describe(), check_all({&a, &b})[1].describe());
  try {
    (void)checks.reports();
    ADD_FAILURE() << "reports() answered twice";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("asked twice"), std::string::npos) << e.what();
  }
  EXPECT_THROW(queue_check_all({&a, &a}, &stream_stand_in), Error);
  // replayed(): the reports once more (on the host the check simply runs again).
  checks.replayed();
  const std::vector<GuardReport> again = checks.reports();
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[1].describe(), r[1].describe());
}

TEST(GuardedBuffer, ArmAllRefusesANullOrRepeatedBuffer) {
  GuardedBuffer a("a", 64);
  try {
    arm_all({&a, &a});
    ADD_FAILURE() << "a repeated buffer was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'a' is listed twice"), std::string::npos) << e.what();
  }
  EXPECT_THROW(check_all({&a, nullptr}), Error);
  EXPECT_TRUE(check_all({}).empty());
}

TEST(GuardedBuffer, WriteAndReadCopyBytesAndRefuseOutsideTheAllocation) {
  GuardedBuffer buf("inputs", 64);
  const uint8_t in[4] = {1, 2, 3, 4};
  buf.write(60, in, 4);
  uint8_t out[4] = {};
  buf.read(60, out, 4);
  EXPECT_EQ(std::memcmp(in, out, 4), 0);
  EXPECT_EQ(buf.data()[61], 2);
  EXPECT_THROW(buf.write(61, in, 4), Error);
  EXPECT_THROW(buf.read(-1, out, 1), Error);
  // Through the interface every backend shares.
  GuardedMemory& mem = buf;
  EXPECT_FALSE(mem.on_device());
  mem.declare_output("tail", View::contiguous(DType::kU8, {4}, 60));
  mem.arm();
  mem.write(60, in, 4);
  EXPECT_TRUE(mem.check().ok());
  mem.write(56, in, 1);
  EXPECT_EQ(mem.check().first.offset, 56);
}

// queue_write on the host is write(), whatever the stream: the bytes are there on return, src is
// free at once, and the range is checked the same.
TEST(GuardedBuffer, QueueWriteOnTheHostIsAWrite) {
  GuardedBuffer buf("queued", 64);
  GuardedMemory& mem = buf;
  uint8_t in[4] = {9, 8, 7, 6};
  int stream_stand_in = 0;
  mem.queue_write(8, in, 4, &stream_stand_in);
  in[0] = 0;  // reused at once
  mem.queue_write(20, in, 2, nullptr);
  EXPECT_EQ(buf.data()[8], 9);
  EXPECT_EQ(buf.data()[11], 6);
  EXPECT_EQ(buf.data()[20], 0);
  EXPECT_EQ(buf.data()[21], 8);
  EXPECT_THROW(mem.queue_write(62, in, 4, &stream_stand_in), Error);
}

}  // namespace
}  // namespace mlacheck
