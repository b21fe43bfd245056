// Tests of the testbed (harness/testbed.h) on the host backend: staging, guards, read-back,
// comparison, the case's schedule and the all-zero rule.
#include "harness/testbed.h"

#include <cmath>
#include <cstring>
#include <functional>

#include <gtest/gtest.h>

#include "core/backend/host_executor.h"
#include "core/error.h"
#include "core/poison.h"
#include "core/read_fence.h"

namespace mlacheck {
namespace {

struct Bed : ::testing::Test {
  std::unique_ptr<kernels::Device> device = kernels::make_device(Backend::kHost);
  CaseSchedule schedule;
  Buffer in{"in", View::contiguous(DType::kF32, {4}), 0, 0};
  // Two rows of 3 floats, the view taking the first 2 of each row.
  Buffer out{"out", View(DType::kF32, {2, 2}, {3, 1}, 0), 0, 0};
  Bed() {
    for (int i = 0; i < 4; ++i) in.put<float>({i}, 1.0f + i);
  }
  // Copies in[0..3] into out's four view elements, as a kernel would, through the device's bytes.
  void copy() {
    const float* src = reinterpret_cast<const float*>(in.memory->data());
    float* dst = reinterpret_cast<float*>(out.memory->data());
    for (int r = 0; r < 2; ++r) {
      for (int c = 0; c < 2; ++c) dst[r * 3 + c] = src[r * 2 + c];
    }
  }
};

TEST_F(Bed, StagesRunsAndReadsTheOutputsBack) {
  Testbed bed(*device, schedule);
  bed.input(in).output(out);
  EXPECT_EQ(bed.launch([&] { copy(); }), std::nullopt);
  EXPECT_EQ(*reinterpret_cast<const float*>(out.host.data() + out.view.byte_offset_of({1, 1})), 4.0f);
}

TEST_F(Bed, AnUnwrittenOutputElementComesBackPoisoned) {
  Testbed bed(*device, schedule);
  bed.input(in).output(out);
  ASSERT_EQ(bed.launch([] {}), std::nullopt);
  EXPECT_TRUE(is_output_poison(DType::kF32, out.host.data()));
}

TEST_F(Bed, AStrayWriteIsTheGuardsVerdictAndSkipsTheComparison) {
  Testbed bed(*device, schedule);
  bed.input(in).output(out);
  bool compared = false;
  const Verdict v = bed.run(
      [&] {
        copy();
        out.memory->data()[2 * 4] = 1;  // row 0, column 2: past the view's 2 columns
      },
      [&] {
        compared = true;
        return Verdict();
      });
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->rfind("guard of out: ", 0), 0u) << *v;
  EXPECT_FALSE(compared);
}

TEST_F(Bed, AWriteToAnInputIsCaught) {
  Testbed bed(*device, schedule);
  bed.input(in).output(out);
  const Verdict v = bed.launch([&] { in.memory->data()[0] ^= 1; });
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->rfind("guard of in: ", 0), 0u) << *v;
}

// A reserved input (Buffer::reserved): staged only where backed, read through its host bytes by the
// launch, and an unbacked page the launch touches is the guard's verdict; a device fault during such
// a launch says that the launch had reserved memory.
TEST_F(Bed, AReservedInputIsStagedWhereBackedAndItsUnbackedPagesAreWatched) {
  constexpr int64_t kFar = (int64_t{1} << 32) + 100;
  Buffer kv = Buffer::reserved("kv", View::contiguous(DType::kU8, {kFar + 8}), {{kFar, kFar + 8}}, 0x11);
  kv.put<uint8_t>({kFar + 3}, 0x42);
  EXPECT_EQ(kv.size(), kFar + 8);
  EXPECT_TRUE(kv.host.empty());
  Testbed bed(*device, schedule);
  bed.input(kv).output(out);
  uint8_t seen = 0;
  EXPECT_EQ(bed.launch([&] { seen = kv.memory->data()[kFar + 3]; }), std::nullopt);
  EXPECT_EQ(seen, 0x42);
  const Verdict v = bed.launch([&] { seen = static_cast<const volatile uint8_t*>(kv.memory->data())[1 << 20]; });
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("guard of kv: 1 unbacked page touched"), std::string::npos) << *v;
  try {
    bed.launch([] { throw ContextLost("cudaStreamSynchronize: an illegal address", "cudaErrorIllegalAddress"); });
    ADD_FAILURE() << "the fault was swallowed";
  } catch (const ContextLost& e) {
    EXPECT_EQ(e.fault(), "cudaErrorIllegalAddress");
    EXPECT_NE(std::string(e.what()).find("the launch had reserved memory ('kv')"), std::string::npos) << e.what();
  }
}

// Under ScopedRepeats every launch runs again; a later launch that writes other bits is the verdict,
// with the output, the element and both values; one that writes the same bits passes.
TEST_F(Bed, RepeatedLaunchesMustWriteTheSameBits) {
  Testbed bed(*device, schedule);
  bed.input(in).output(out);
  int calls = 0;
  {
    const ScopedRepeats repeats(4);
    EXPECT_EQ(bed.launch([&] { copy(), ++calls; }), std::nullopt);
  }
  EXPECT_EQ(calls, 4);
  const ScopedRepeats repeats(3);
  calls = 0;
  const Verdict v = bed.launch([&] {
    copy();
    if (++calls == 3) reinterpret_cast<float*>(out.memory->data())[3 + 1] = 5.0f;  // row 1, column 1
  });
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->rfind("nondeterministic: launch 3 of 3 (host schedule shuffled, seed ", 0), 0u) << *v;
  EXPECT_NE(v->find("wrote output 'out' element [1, 1] as 0x40a00000, launch 1 as 0x40800000"), std::string::npos) << *v;
}

// An output compared as row sets may come back in another order within a row; another set in a row
// is the verdict, naming the row and what each launch held. An output not asked about may change.
TEST_F(Bed, RepeatedLaunchesKeepEachRowsSetOrNothing) {
  Buffer ids{"ids", View::contiguous(DType::kI32, {2, 3}), 0, 0};
  Buffer scratch{"scratch", View::contiguous(DType::kU8, {8}), 0, 0};
  const auto write_ids = [&](int a, int b, int c) {
    int32_t* p = reinterpret_cast<int32_t*>(ids.memory->data());
    const int32_t row[6] = {a, b, c, 7, 8, 9};
    std::memcpy(p, row, sizeof row);
  };
  int calls = 0;
  const auto run = [&](const std::function<void(int)>& body) {
    Testbed bed(*device, schedule);
    bed.input(in).output(ids).output(scratch);
    bed.same_across_launches("ids", Sameness::kRowSets).same_across_launches("scratch", Sameness::kNotAsked);
    calls = 0;
    const ScopedRepeats repeats(3);
    return bed.launch([&] {
      body(++calls);
      scratch.memory->data()[0] = static_cast<uint8_t>(calls);  // scratch differs every launch
    });
  };
  // Row 0 as {1, 2, 3} in three orders: the same set.
  EXPECT_EQ(run([&](int n) { n == 1 ? write_ids(1, 2, 3) : n == 2 ? write_ids(3, 1, 2) : write_ids(2, 3, 1); }), std::nullopt);
  // The third launch takes 4 where the first took 3.
  const Verdict v = run([&](int n) { n < 3 ? write_ids(1, 2, 3) : write_ids(2, 1, 4); });
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->rfind("nondeterministic: launch 3 of 3 (host schedule shuffled, seed ", 0), 0u) << *v;
  EXPECT_NE(v->find("wrote output 'ids' row [0] (compared as a set) holding 4 where launch 1 held 3"), std::string::npos) << *v;
  // Without kRowSets, another order is already another output.
  Testbed bed(*device, schedule);
  bed.input(in).output(ids);
  calls = 0;
  const ScopedRepeats repeats(2);
  const Verdict bits = bed.launch([&] { ++calls == 1 ? write_ids(1, 2, 3) : write_ids(3, 2, 1); });
  ASSERT_TRUE(bits.has_value());
  EXPECT_NE(bits->find("wrote output 'ids' element [0, 0] as 0x00000003, launch 1 as 0x00000001"), std::string::npos) << *bits;
  EXPECT_THROW(bed.same_across_launches("no such view", Sameness::kRowSets), Error);
}

// Under AddressSanitizer a read outside every view of the launch is the fence's verdict, after the
// guards (which saw nothing: it was a read).
TEST_F(Bed, AReadPastAViewIsTheFencesVerdict) {
  if (!ReadFence::available()) GTEST_SKIP() << "skipped: not an AddressSanitizer build (the sanitizer build runs it)";
  Testbed bed(*device, schedule);
  bed.input(in).output(out);
  volatile float sink = 0;
  const Verdict v = bed.launch([&] {
    copy();
    // Row 1, column 2: the allocation ends with row 1's last element, so this is its red zone. (Row
    // 0's padding element, bytes [8, 12), shares a granule with row 1's first element and stays
    // open: read_fence.h, precision.)
    sink = reinterpret_cast<const float*>(out.memory->data())[5];
  });
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, "fence of out: buffer 'out': read of 4 bytes at byte 20, after the allocation (trailing red zone); "
                "nearest view 'out' fp32[2, 2] strides (3, 1) at row 1, column 2 (past the row's 2 columns, in its "
                "padding)");
  (void)sink;
}

TEST_F(Bed, TheComparisonsVerdictIsTheRunsVerdict) {
  Testbed bed(*device, schedule);
  bed.input(in).output(out);
  EXPECT_EQ(bed.run([&] { copy(); }, [] { return Verdict("element (1, 1) differs"); }),
            Verdict("element (1, 1) differs"));
}

TEST_F(Bed, TheLaunchRunsUnderTheCasesSchedule) {
  schedule.warp_size = 64, schedule.shuffled = true, schedule.seed = 7;
  Testbed bed(*device, schedule);
  bed.input(in).output(out);
  simt::host::Options seen;
  ASSERT_EQ(bed.launch([&] { seen = simt::host::current_options(); }), std::nullopt);
  EXPECT_EQ(seen.warp_size, 64);
  EXPECT_EQ(seen.schedule, simt::host::Schedule::kShuffled);
  EXPECT_EQ(seen.seed, 7u);
  EXPECT_EQ(simt::host::current_options().warp_size, 32);  // restored after the launch
}

TEST_F(Bed, AfterArmRunsBetweenArmingAndTheLaunch) {
  Testbed bed(*device, schedule);
  bed.input(in).output(out);
  float first = 0;
  bed.after_arm([&] {
    const float zero = 0;
    out.memory->write(0, &zero, 4);  // arming poisoned it
  });
  ASSERT_EQ(bed.launch([&] { std::memcpy(&first, out.memory->data(), 4); }), std::nullopt);
  EXPECT_EQ(first, 0.0f);
}

// rewrite_after_arm: an output the launch adds to starts from the given bytes at every launch (after
// the arm poisoned it), repeated launches included; only a buffer holding an output takes it, and
// no more bytes than it has.
TEST_F(Bed, RewriteAfterArmStartsEveryLaunchFromTheBytes) {
  Testbed bed(*device, schedule);
  bed.input(in).output(out);
  const std::vector<uint8_t> zeros(static_cast<size_t>(out.size()), 0);
  bed.rewrite_after_arm(out, zeros);
  const auto element_11 = [&] {
    float v;
    std::memcpy(&v, out.host.data() + out.view.byte_offset_of({1, 1}), 4);
    return v;
  };
  const auto add_one = [&] {
    float* o = reinterpret_cast<float*>(out.memory->data());
    for (int i : {0, 1, 3, 4}) o[i] += 1.0f;  // the view's four elements, counters
  };
  {
    const ScopedRepeats repeats(3);
    ASSERT_EQ(bed.launch(add_one), std::nullopt);  // each launch 1.0: not poison + 1, not 2.0 or 3.0
  }
  EXPECT_EQ(element_11(), 1.0f);
  Testbed plain(*device, schedule);
  plain.input(in).output(out);
  ASSERT_EQ(plain.launch(add_one), std::nullopt);
  EXPECT_TRUE(std::isnan(element_11()));  // without it the counter started from poison
  EXPECT_THROW(plain.rewrite_after_arm(in, zeros), Error);                       // an input
  EXPECT_THROW(plain.rewrite_after_arm(out, std::vector<uint8_t>(zeros.size() + 1, 0)), Error);  // past its bytes
}

TEST_F(Bed, SeveralOutputViewsOfOneBuffer) {
  Testbed bed(*device, schedule);
  bed.input(in)
      .output(out, "row 0", View(DType::kF32, {2}, {1}, 0))
      .output(out, "row 1", View(DType::kF32, {2}, {1}, 12));
  EXPECT_EQ(bed.launch([&] { copy(); }), std::nullopt);
  const Verdict v = bed.launch([&] { out.memory->data()[8] = 1; });  // between the two views (staged as 0)
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("guard of out"), std::string::npos) << *v;
}

TEST_F(Bed, AnAllZeroPayloadIsRefusedAsTheCasesFault) {
  std::fill(in.host.begin(), in.host.end(), uint8_t{0});
  {
    Testbed bed(*device, schedule);
    bed.input(in).output(out);
    EXPECT_EQ(bed.launch([&] { copy(); }), std::nullopt) << "zeros are a case of their own unless declared";
  }
  Testbed bed(*device, schedule);
  bed.input(in, Content::kNonZero).output(out);
  bool launched = false;
  const Verdict v = bed.launch([&] { launched = true; });
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->rfind("testbed: input 'in' is all zero", 0), 0u) << *v;
  EXPECT_FALSE(launched);
}

TEST_F(Bed, AnAllZeroOutputThatPassedIsRefused) {
  Testbed bed(*device, schedule);
  bed.input(in).output(out, Content::kNonZero);
  const auto zeros = [&] {
    float* dst = reinterpret_cast<float*>(out.memory->data());
    for (int i = 0; i < 6; ++i) {
      if (i % 3 != 2) dst[i] = 0.0f;  // elements 2 and 5 left unwritten (never read: they are poisoned until written)
    }
  };
  const Verdict v = bed.run(zeros, [] { return Verdict(); });
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->rfind("testbed: output 'out' is all zero", 0), 0u) << *v;
  EXPECT_EQ(bed.run([&] { copy(); }, [] { return Verdict(); }), std::nullopt);
}

TEST_F(Bed, ALaunchWithNothingDeclaredIsAnError) {
  Testbed bed(*device, schedule);
  EXPECT_THROW(bed.launch([] {}), Error);
}

}  // namespace
}  // namespace mlacheck
