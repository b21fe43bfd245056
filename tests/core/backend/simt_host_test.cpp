// Tests of the host backend (core/backend/host_executor.h) through simt.h's test kernels: every
// primitive against a plain loop for warps of 32 and 64, ordered and shuffled, on one and two
// workers; the faults a GPU would hide are reported with block and threads; races show up under
// shuffling; launches are recorded and replayed on a capturing stream.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/backend/host_executor.h"
#include "core/guarded_buffer.h"
#include "tests/core/backend/simt_test_kernels.h"
#include "tests/support/asan.h"

namespace mlacheck::simt_test_kernels {
namespace {

namespace sh = simt::host;

std::unique_ptr<GuardedMemory> host_buffer(const std::string& name, int64_t bytes) {
  return std::make_unique<GuardedBuffer>(name, bytes);
}

struct Setting {
  int warp_size;
  sh::Schedule schedule;
  int workers;
  std::string name() const {
    return "warp" + std::to_string(warp_size) + (schedule == sh::Schedule::kOrdered ? "_ordered" : "_shuffled") +
           "_workers" + std::to_string(workers);
  }
};

void PrintTo(const Setting& s, std::ostream* os) { *os << s.name(); }

class EveryPrimitive : public ::testing::TestWithParam<Setting> {
 protected:
  sh::Options options() const {
    sh::Options o;
    o.warp_size = GetParam().warp_size;
    o.schedule = GetParam().schedule;
    o.workers = GetParam().workers;
    o.seed = 7;
    return o;
  }
  const SimtKernels k = host::kernels();
};

TEST_P(EveryPrimitive, BlockReductionWithBarriers) {
  sh::ScopedOptions scope(options());
  EXPECT_EQ(check_block_sum(k, host_buffer, 5, 1000, 256, 1), "");
  EXPECT_EQ(check_block_sum(k, host_buffer, 3, 64, 64, 2), "");
  EXPECT_EQ(check_block_sum(k, host_buffer, 2, 5000, 1024, 3), "");
}

TEST_P(EveryPrimitive, WarpShuffleScanBallotAndReductions) {
  sh::ScopedOptions scope(options());
  EXPECT_EQ(check_warp_ops(k, host_buffer, 3, 128, 4), "");
  EXPECT_EQ(check_warp_ops(k, host_buffer, 1, 64, 5), "");
}

TEST_P(EveryPrimitive, AtomicHistogram) {
  sh::ScopedOptions scope(options());
  EXPECT_EQ(check_histogram(k, host_buffer, 20000, 6, 128, 6), "");
  EXPECT_EQ(check_histogram(k, host_buffer, 100, 1, 64, 7), "");
}

TEST_P(EveryPrimitive, DynamicSharedMemory) {
  sh::ScopedOptions scope(options());
  EXPECT_EQ(check_reverse_rows(k, host_buffer, 4, 1000, 8), "");
  EXPECT_EQ(check_reverse_rows(k, host_buffer, 3, 64, 9), "");
}

TEST_P(EveryPrimitive, TenBarriers) {
  sh::ScopedOptions scope(options());
  EXPECT_EQ(check_barrier_loop(k, host_buffer, 3, 512, 10), "");
  EXPECT_EQ(check_neighbour_exchange(k, host_buffer, 96), "");
}

INSTANTIATE_TEST_SUITE_P(HostBackend, EveryPrimitive,
                         ::testing::Values(Setting{32, sh::Schedule::kOrdered, 1}, Setting{64, sh::Schedule::kOrdered, 1},
                                           Setting{32, sh::Schedule::kShuffled, 1},
                                           Setting{64, sh::Schedule::kShuffled, 2}, Setting{32, sh::Schedule::kOrdered, 2}),
                         [](const ::testing::TestParamInfo<Setting>& i) { return i.param.name(); });

// The fault a faulty kernel raises on the host backend, or "" if it raised none.
template <class F>
std::string fault_of(F&& launch) {
  try {
    launch();
  } catch (const sh::KernelFault& e) {
    return e.what();
  }
  return "";
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

TEST(HostFaults, ThreadsReturningBeforeABarrierAreReported) {
  const SimtKernels k = host::kernels();
  std::vector<int> out(32);
  const std::string f = fault_of([&] { k.early_return_barrier(out.data(), 32); });
  expect_contains(f, "kernel 'early_return_barrier_kernel' block (0,0,0): barrier at simt_test_kernels.cu:");
  expect_contains(f, "not reached by every thread: threads 0..15 wait there, threads 16..31 returned");
  expect_contains(f, "(first: thread (16,0,0))");
}

// A loop around a barrier that never ends is stopped at the block's step limit and named a hang;
// a block under the limit, however many barriers it crosses, runs to its end.
TEST(HostFaults, ABlockPastItsStepLimitIsAHang) {
  sh::Options o;
  o.max_block_steps = 1 << 16;
  sh::ScopedOptions scope(o);
  volatile bool forever = true;
  int rounds = 0;
  bool hang = false;
  try {
    sh::launch("spin_kernel", simt::Dim3(2), simt::Dim3(64), 0, nullptr, [&] {
      while (forever) {
        if (sh::this_thread().thread_idx.x == 0) ++rounds;
        sh::barrier(__FILE__, __LINE__);
      }
    });
  } catch (const sh::KernelHang& e) {
    hang = true;
    expect_contains(e.what(), "hang: kernel 'spin_kernel' block (0,0,0) took 65536 thread steps");
  }
  EXPECT_TRUE(hang);
  EXPECT_EQ(rounds, 1024);  // 65536 steps of 64 threads
  int done = 0;
  sh::launch("long_kernel", simt::Dim3(1), simt::Dim3(64), 0, nullptr, [&] {
    for (int i = 0; i < 1000; ++i) sh::barrier(__FILE__, __LINE__);  // 64064 steps
    if (sh::this_thread().thread_idx.x == 0) ++done;
  });
  EXPECT_EQ(done, 1);
}

TEST(HostFaults, ThreadsAtDifferentBarriersAreReported) {
  const SimtKernels k = host::kernels();
  std::vector<int> out(64);
  const std::string f = fault_of([&] { k.split_barrier(out.data(), 64); });
  expect_contains(f, "threads wait at different barriers: thread 0 at simt_test_kernels.cu:");
  expect_contains(f, "thread 1 at simt_test_kernels.cu:");
}

TEST(HostFaults, AWarpCollectiveWithInactiveLanesIsReported) {
  const SimtKernels k = host::kernels();
  std::vector<float> out(64);
  const std::string f = fault_of([&] { k.partial_warp_sum(out.data(), 64); });
  expect_contains(f, "block (0,0,0) warp 0: shuffle at simt_test_kernels.cu:");
  expect_contains(f, "with inactive lanes: threads 0..15 are there, threads 16..31 returned");
  // With 64-lane warps the lanes 16..63 are the inactive ones.
  sh::Options o;
  o.warp_size = 64;
  sh::ScopedOptions scope(o);
  expect_contains(fault_of([&] { k.partial_warp_sum(out.data(), 64); }), "threads 16..63 returned");
}

TEST(HostFaults, SharedMemoryPastItsArrayOrPastTheDeclaredDynamicBytes) {
  const SimtKernels k = host::kernels();
  std::vector<int> out(16);
  const std::string f = fault_of([&] { k.shared_overrun(out.data(), 16); });
  expect_contains(f, "kernel 'shared_overrun_kernel' block (0,0,0) thread (8,0,0): shared array 'small' indexed at 8, past its 8 elements");

  std::vector<float> in(2 * 100, 1.0f), rev(2 * 100);
  const std::string g = fault_of([&] { k.reverse_rows(in.data(), rev.data(), 2, 100, 99 * sizeof(float)); });
  expect_contains(g, "kernel 'reverse_rows_kernel' block (0,0,0) thread (99,0,0): dynamic shared memory 'tile' indexed at element 99 (byte 396), past the 396 bytes the launch declared");
}

TEST(HostFaults, AddressSanitizerSeesKernelsRunningInFibers) {
#if defined(MLA_TEST_ASAN)
  // A raw pointer past the dynamic shared bytes bypasses shared_array's check; the bytes are their
  // own allocation, so ASan reports the overflow from inside the fiber.
  const SimtKernels k = host::kernels();
  std::vector<int> out(32);
  EXPECT_DEATH(k.raw_dynamic_overrun(out.data(), 32), "heap-buffer-overflow");
#else
  GTEST_SKIP() << "needs an AddressSanitizer build (the asan preset)";
#endif
}

TEST(HostFaults, TheFaultOfTheFirstBlockInOrderIsReported) {
  // Every block faults; with one worker the report is always block 0's, whatever the schedule.
  const SimtKernels k = host::kernels();
  std::vector<int> out(16);
  expect_contains(fault_of([&] { k.shared_overrun(out.data(), 16); }), "block (0,0,0)");
}

// With the race checks off (as a GPU runs it), a missing barrier shows only in the results.
TEST(HostRaces, AMissingBarrierGivesDifferentResultsUnderShuffling) {
  const SimtKernels k = host::kernels();
  const int n = 64;
  const std::vector<int> want = expected_neighbour_exchange(n);
  std::set<std::vector<int>> results;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    sh::Options o;
    o.schedule = sh::Schedule::kShuffled;
    o.seed = seed;
    o.check_shared = false;
    sh::ScopedOptions scope(o);
    std::vector<int> racy(n), safe(n);
    k.neighbour_exchange(racy.data(), n, false);
    k.neighbour_exchange(safe.data(), n, true);
    EXPECT_EQ(safe, want) << "seed " << seed;
    results.insert(racy);
  }
  EXPECT_GT(results.size(), 1u) << "the race gave the same result for every seed";
  // In order, thread t reads slot t+1 before thread t+1 wrote it: the race is visible even there.
  sh::Options o;
  o.check_shared = false;
  sh::ScopedOptions scope(o);
  std::vector<int> ordered(n);
  k.neighbour_exchange(ordered.data(), n, false);
  EXPECT_NE(ordered, want);
}

TEST(HostRaces, OrderedRunsAreDeterministic) {
  const SimtKernels k = host::kernels();
  sh::Options o;
  o.check_shared = false;
  sh::ScopedOptions scope(o);
  std::vector<int> a(64), b(64);
  k.neighbour_exchange(a.data(), 64, false);
  k.neighbour_exchange(b.data(), 64, false);
  EXPECT_EQ(a, b);
}

// A work budget counts thread steps (a step runs a thread to a barrier, a warp collective or its
// end) across the launches of its scope; a launch that would pass it throws, having run no more
// than the budget.
TEST(HostWorkBudget, CountsEveryThreadStepAndStopsALaunchThatPassesIt) {
  const SimtKernels k = host::kernels();
  std::vector<int> out(48);
  {
    sh::ScopedWorkBudget budget(1000);
    k.neighbour_exchange(out.data(), 48, true);  // each thread: to the barrier, then to its end
    EXPECT_EQ(budget.steps(), 2u * 48);
    k.neighbour_exchange(out.data(), 48, true);
    EXPECT_EQ(budget.steps(), 4u * 48);
    EXPECT_FALSE(budget.exceeded());
  }
  {
    sh::ScopedWorkBudget budget(90);  // the 48 threads alone fit; their second steps do not
    EXPECT_THROW(k.neighbour_exchange(out.data(), 48, true), sh::WorkBudgetExceeded);
    EXPECT_TRUE(budget.exceeded());
    EXPECT_EQ(budget.steps(), 91u);  // the 90 it ran, and the one refused
  }
  {
    sh::ScopedWorkBudget budget(47);  // refused before it starts: more threads than steps
    EXPECT_THROW(k.neighbour_exchange(out.data(), 48, true), sh::WorkBudgetExceeded);
    EXPECT_TRUE(budget.exceeded());
    EXPECT_EQ(budget.steps(), 0u);
  }
}

// With them on (the default), the race is the verdict in any schedule, whichever thread comes
// first: the later of the two accesses is reported, naming both threads, the array and the element.
TEST(HostRaces, EveryUnorderedConflictIsReportedInAnySchedule) {
  const SimtKernels k = host::kernels();
  struct Want {
    SharedPattern pattern;
    std::string ordered;   // what the ordered schedule reports (thread 0 runs first)
  };
  const std::vector<Want> races = {
      // Thread 0 read slot 1 before thread 1 wrote it.
      {kExchangeWithoutBarrier, "race: kernel 'shared_pattern_kernel' block (0,0,0) thread (1,0,0) writes where "
                                "thread (0,0,0) read shared 'slot'[1] with no barrier between them (the last "
                                "barrier: none since the block began)"},
      // After the shuffle, thread 0 reads slot 1, written before it by thread 1.
      {kLaneExchangeAfterShuffle, "thread (0,0,0) reads what thread (1,0,0) wrote to shared 'slot'[1]"},
      {kOwnValueFromEveryThread, "thread (1,0,0) writes another value where thread (0,0,0) wrote to shared 'slot'[0]"},
      {kAtomicsThenRead, "thread (1,0,0) atomically updates where thread (0,0,0) read shared 'slot'[0]"},
      {kReadThenOverwrite, "thread (1,0,0) writes where thread (0,0,0) read shared 'slot'[1]"},
      // A second read of a word by the same thread, before the same barrier: still a read.
      {kRereadThenOverwrite, "thread (1,0,0) writes where thread (0,0,0) read shared 'slot'[1]"},
      // After the sync_warp, thread 0 reads slot 1 again; thread 1 then writes it, unordered with
      // that read (the first one the sync_warp ordered).
      {kRereadAcrossSyncWarp, "thread (1,0,0) writes where thread (0,0,0) read shared 'slot'[1]"},
      // The same when two lanes of the warp read the slot before the sync_warp.
      {kTwoLanesRereadAcrossSyncWarp, "thread (1,0,0) writes where thread (0,0,0) read shared 'slot'[1]"},
      // Every warp read slot 0 before the last barrier; that says nothing of the reads after it,
      // which race with thread 0's new write.
      {kRewrittenAfterWarpsRead, "thread (1,0,0) reads what thread (0,0,0) wrote to shared 'slot'[0]"},
  };
  for (const Want& w : races) {
    for (const int warp : {32, 64}) {
      for (const sh::Schedule schedule : {sh::Schedule::kOrdered, sh::Schedule::kShuffled}) {
        for (uint64_t seed = 0; seed < (schedule == sh::Schedule::kShuffled ? 4u : 1u); ++seed) {
          sh::Options o;
          o.warp_size = warp, o.schedule = schedule, o.seed = seed;
          sh::ScopedOptions scope(o);
          std::vector<int> out(64);
          std::string fault;
          try {
            k.shared_pattern(out.data(), 64, w.pattern);
          } catch (const sh::SharedHazard& e) {
            fault = e.what();
          }
          SCOPED_TRACE("pattern " + std::to_string(w.pattern) + ", warp " + std::to_string(warp) + ", seed " +
                       std::to_string(seed));
          ASSERT_EQ(fault.rfind("race: kernel 'shared_pattern_kernel' block (0,0,0) thread (", 0), 0u) << fault;
          if (schedule == sh::Schedule::kOrdered) {
            EXPECT_NE(fault.find(w.ordered), std::string::npos) << fault;
          }
        }
      }
    }
  }
}

// A float sum that rounds, added into one shared word by threads in no fixed order: its bits depend
// on arrival, reported in any schedule as "order: " naming both threads. A sum of exact adds, or
// one whose adds a barrier puts in turn, is the same in every order and is not reported.
TEST(HostRaces, AFloatAtomicSumThatRoundsInArrivalOrderIsReported) {
  const SimtKernels k = host::kernels();
  for (const int warp : {32, 64}) {
    for (uint64_t seed = 0; seed < 4; ++seed) {
      sh::Options o;
      o.warp_size = warp, o.schedule = seed == 0 ? sh::Schedule::kOrdered : sh::Schedule::kShuffled, o.seed = seed;
      sh::ScopedOptions scope(o);
      std::vector<int> out(64);
      std::string fault;
      try {
        k.shared_pattern(out.data(), 64, kFloatSumRounded);
      } catch (const sh::OrderDependentSum& e) {
        fault = e.what();
      }
      EXPECT_EQ(fault.rfind("order: kernel 'shared_pattern_kernel' block (0,0,0) thread (", 0), 0u) << fault;
      EXPECT_NE(fault.find("adds a float to shared 'sum'[0] that thread ("), std::string::npos) << fault;
      EXPECT_NE(fault.find("the sum rounds"), std::string::npos) << fault;
      for (const SharedPattern pattern : {kFloatSumExact, kFloatSumInTurns}) {
        EXPECT_NO_THROW(k.shared_pattern(out.data(), 64, pattern)) << "pattern " << pattern << ", seed " << seed;
        if (pattern == kFloatSumExact) EXPECT_EQ(out[7], 64000);
      }
    }
  }
  sh::Options off;
  off.check_shared = false;  // the check rides on the race checks, and is off with them
  sh::ScopedOptions scope(off);
  std::vector<int> out(64);
  EXPECT_NO_THROW(k.shared_pattern(out.data(), 64, kFloatSumRounded));
}

// What orders two accesses: a barrier, a sync_warp between lanes of one warp; and what is no race:
// several threads writing one value, atomics among themselves.
TEST(HostRaces, OrderedAndBenignPatternsAreNotReported) {
  const SimtKernels k = host::kernels();
  for (const SharedPattern pattern : {kExchangeAfterBarrier, kLaneExchangeAfterSyncWarp, kSameValueFromEveryThread,
                                      kAtomicsThenBarrier}) {
    for (const int warp : {32, 64}) {
      for (uint64_t seed = 0; seed < 4; ++seed) {
        sh::Options o;
        o.warp_size = warp, o.schedule = seed == 0 ? sh::Schedule::kOrdered : sh::Schedule::kShuffled, o.seed = seed;
        sh::ScopedOptions scope(o);
        std::vector<int> out(64);
        EXPECT_NO_THROW(k.shared_pattern(out.data(), 64, pattern)) << "pattern " << pattern << ", warp " << warp;
        if (pattern == kAtomicsThenBarrier) {
          EXPECT_EQ(out[5], 64);
        }
        if (pattern == kLaneExchangeAfterSyncWarp) {
          EXPECT_EQ(out[0], 1 * 7 + 1);
        }
      }
    }
  }
}

TEST(HostLaunch, ConfigurationsAGpuRefusesAreErrors) {
  const SimtKernels k = host::kernels();
  std::vector<float> in(4096, 1.0f), out(4);
  EXPECT_THROW(k.block_sum(in.data(), out.data(), 1, 4096, 2048), Error);  // 2048 threads per block
  EXPECT_THROW(k.block_sum(in.data(), out.data(), 0, 4096, 256), Error);   // empty grid
  EXPECT_THROW(k.reverse_rows(in.data(), out.data(), 1, 4, 300 * 1024), Error);
  sh::Options o;
  o.warp_size = 48;
  sh::ScopedOptions scope(o);
  EXPECT_THROW(k.block_sum(in.data(), out.data(), 1, 64, 64), Error);
}

TEST(HostLaunch, KernelFunctionsOutsideALaunchAreErrors) {
  EXPECT_THROW(sh::this_thread(), Error);
  EXPECT_THROW(simt::thread_idx(), Error);
  EXPECT_THROW(simt::sync_threads(), Error);
}

TEST(HostStream, CapturedLaunchesReplayAgainstNewInputs) {
  std::vector<float> in(4 * 100, 1.0f), out(4, 0.0f);
  sh::Stream stream;
  stream.begin_capture();
  host::block_sum(in.data(), out.data(), 4, 100, 64, &stream);
  host::block_sum(in.data(), out.data() + 2, 2, 100, 32, &stream);
  EXPECT_TRUE(stream.capturing());
  const sh::Graph graph = stream.end_capture();
  EXPECT_EQ(graph.launch_count(), 2u);
  EXPECT_EQ(out, std::vector<float>(4, 0.0f)) << "a captured launch ran";
  graph.replay();
  EXPECT_EQ(out, (std::vector<float>{100, 100, 100, 100}));
  std::fill(in.begin(), in.end(), 2.0f);  // new inputs written into the same buffers
  graph.replay();
  EXPECT_EQ(out, (std::vector<float>{200, 200, 200, 200}));
  EXPECT_THROW(stream.end_capture(), Error);
}

}  // namespace
}  // namespace mlacheck::simt_test_kernels
