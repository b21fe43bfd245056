// The host backend's executor: blocks as fibers, barriers and warp collectives, fault reports.
// Why one file past 500 lines: the fiber scheduler, barriers, warp collectives and fault reports all
// work on one private per-thread state (GpuThread) that is kept out of every header on purpose.
#include "core/backend/host_executor.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include <boost/context/fiber.hpp>

#include "core/backend/fiber_stack.h"

// The executor's per-thread bookkeeping (a thread's context, its shared-memory declarations, the
// step count) runs for every GPU thread at every step; under ASan its checks of the executor's own
// vectors were a tenth of a small top-k case. The kernels' accesses stay checked.
#if defined(__clang__) || defined(__GNUC__)
#define MLA_EXECUTOR_HOT __attribute__((no_sanitize("address")))
#else
#define MLA_EXECUTOR_HOT
#endif

namespace mlacheck::simt::host {

struct ScopedWorkBudget::State {
  uint64_t max_steps = 0, max_block_steps = 0;
  std::atomic<uint64_t> steps{0};  // workers of one launch add to it at once
  std::atomic<bool> exceeded{false};
  std::atomic<uint64_t> largest_block{0};
};

namespace {

namespace bctx = boost::context;

// ---- options ----------------------------------------------------------------------------------

thread_local Options tls_options;

using detail::asan_finish_switch;
using detail::asan_start_switch;
using detail::Stack;
using detail::StackPool;

// boost.context frees a fiber's stack through its allocator; ours live in the pool, so it does not.
struct PooledStackAllocator {
  bctx::stack_context allocate() { return {}; }
  void deallocate(bctx::stack_context&) noexcept {}
};

// The shuffled schedule's random bits: splitmix64, a UniformRandomBitGenerator whose seeding is one
// word. A block's run reseeds it (from the launch's seed and the block's index), and
// std::mt19937_64's seeding of 312 words was a tenth of a small case's host time.
class ScheduleRng {
 public:
  using result_type = uint64_t;
  ScheduleRng() = default;
  explicit ScheduleRng(uint64_t seed) : state_(seed) {}
  void seed(uint64_t s) { state_ = s; }
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return ~result_type{0}; }
  result_type operator()() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_ = 0;
};

// ---- one block's run ---------------------------------------------------------------------------

enum class State { kRunnable, kAtBarrier, kAtCollective, kDone };

// Thrown into a waiting thread to unwind its fiber when its block is abandoned after a fault. Not a
// std::exception, so nothing in kernel code mistakes it for an error.
struct Abandon {};

struct BlockRun;

struct GpuThread {
  ThreadContext ctx;
  unsigned linear = 0;
  int warp = 0, lane = 0;
  BlockRun* block = nullptr;
  Stack stack;
  bctx::fiber self;  // this thread's continuation while it waits (held by the scheduler)
  bctx::fiber back;  // the scheduler's continuation while this thread runs
  State state = State::kRunnable;
  const char* file = "";  // where it waits
  int line = 0;
  Collective kind = Collective::kSyncWarp;
  uint64_t value = 0, result = 0;
  int src_lane = 0;
  std::size_t next_shared_decl = 0;
  void* fake_stack = nullptr;
  bool started = false;  // has run (on a fiber of its own, or after another thread on that one's)

  // Back to a new thread's state for the next block of the same size, without constructing it
  // anew: a block ends with every thread done and its continuations empty (run_block unwinds the
  // waiting ones), and run_block sets ctx, linear, warp, lane and block itself.
  void reuse() {
    stack = Stack{};
    state = State::kRunnable;
    file = "";
    line = 0;
    kind = Collective::kSyncWarp;
    value = result = 0;
    src_lane = 0;
    next_shared_decl = 0;
    fake_stack = nullptr;
    started = false;
  }
};

// What the hazard checks (Options::check_shared) know of one 4-byte word of a block's shared memory.
// Entries belong to the block run whose serial they carry; any other serial means "not this block's".
constexpr uint32_t kNoThread = UINT32_MAX;
constexpr uint32_t kSameValueWriters = UINT32_MAX - 1;  // several threads wrote the one value
struct ShadowWord {
  uint32_t serial = 0;  // the block run whose thread last wrote it (0: none)
  uint32_t w_tid = 0, w_epoch = 0, w_warp_epoch = 0;  // that write: thread, barrier and sync_warp epochs
  bool w_atomic = false;                              // and whether it was an atomic
  uint32_t r_serial = 0, r_epoch = 0;                 // the reads recorded: block run, barrier epoch
  uint32_t r_tid = 0, r_tid2 = kNoThread;             // the first reader and another one, if any
  uint32_t r_warp = 0, r_warp_epoch = 0;              // the readers' warp (kNoThread: several) and newest epoch
  // (serial << 32 | epoch) once readers of several warps are recorded in that block run and barrier
  // epoch: until the next barrier a read has nothing to record, and nothing to report either, since
  // a write to the word before that barrier is a race with those readers, which the write reports.
  uint64_t r_done = 0;
};

struct SharedDecl {
  const char* name;  // the declaration's string literal (every thread passes the same pointer)
  std::size_t offset, bytes;
};

struct BlockRun {
  const char* kernel = "";
  Dim3 block_idx, block_dim, grid_dim;
  const Options* options = nullptr;
  const std::function<void()>* body = nullptr;
  std::vector<GpuThread> threads;
  int warp_size = 32, warps = 0;
  ScheduleRng* rng = nullptr;  // the shuffled schedule's (seeded per block)
  // The scheduler's round: the runnable threads in the order they run, and the position in it.
  // Threads pass control to each other down the round (next_in_round): a thread that waits switches
  // to the next runnable thread's fiber, and only the last of the round switches back to the
  // scheduler; a thread that returns without waiting hands its own fiber to the next thread that
  // has not started, so a kernel with no barrier runs a block on one fiber.
  const std::vector<unsigned>* order = nullptr;
  std::size_t cursor = 0;
  const std::vector<Stack>* stacks = nullptr;
  std::size_t fibers = 0;            // stacks in use
  GpuThread* from = nullptr;         // who switched last: a thread, or null for the scheduler
  ScopedWorkBudget::State* budget = nullptr;
  uint64_t steps = 0, max_steps = 0;  // this block's, and Options::max_block_steps (0: none)
  // Shared memory: static arrays in one arena, the dynamic bytes in their own allocation of exactly
  // the declared size (so ASan sees a raw pointer running past it).
  std::vector<uint8_t>* static_arena = nullptr;
  uint8_t* arena = nullptr;  // static_arena->data(), for the checks of every access
  std::vector<SharedDecl> shared_decls;
  std::size_t static_used = 0;
  uint8_t* dynamic = nullptr;
  std::size_t dynamic_bytes = 0;
  // Hazard checks (null shadows: off). epoch counts the block's barriers, warp_epochs each warp's
  // sync_warps; barrier_file/line: where the last barrier was.
  ShadowWord* static_shadow = nullptr;
  ShadowWord* dynamic_shadow = nullptr;
  uint32_t serial = 0, epoch = 0;
  uint32_t* warp_epochs = nullptr;  // [warps]
  const char* barrier_file = nullptr;
  int barrier_line = 0;
  bool abandoning = false;
  std::exception_ptr fault;
  const void* scheduler_stack_bottom = nullptr;
  std::size_t scheduler_stack_size = 0;
};

thread_local GpuThread* tls_thread = nullptr;
thread_local ScopedWorkBudget::State* tls_budget = nullptr;

std::string dim3_string(Dim3 d) {
  std::ostringstream os;
  os << '(' << d.x << ',' << d.y << ',' << d.z << ')';
  return os.str();
}

std::string where_block(const BlockRun& b) {
  return "kernel '" + std::string(b.kernel) + "' block " + dim3_string(b.block_idx);
}
std::string where_thread(const GpuThread& t) {
  return where_block(*t.block) + " thread " + dim3_string(t.ctx.thread_idx);
}

// "threads 0..15, 32..47" (linear ids; x fastest), at most four ranges.
std::string thread_list(const std::vector<unsigned>& ids) {
  std::ostringstream os;
  os << (ids.size() == 1 ? "thread " : "threads ");
  int ranges = 0;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (ranges == 4) {
      os << ", ...";
      break;
    }
    os << (ranges++ ? ", " : "") << ids[i];
    if (j > i) os << ".." << ids[j];
    i = j + 1;
  }
  return os.str();
}

std::string site(const char* file, int line) {
  const char* slash = std::strrchr(file, '/');
  return std::string(slash ? slash + 1 : file) + ":" + std::to_string(line);
}

const char* collective_name(Collective k) {
  switch (k) {
    case Collective::kShuffle: return "shuffle";
    case Collective::kBallot: return "ballot";
    case Collective::kSyncWarp: return "sync_warp";
  }
  return "?";
}

// Counts one step of the block's work budget; false (with the block's fault set) once it is spent.
MLA_EXECUTOR_HOT bool take_step(BlockRun& b) {
  if (++b.steps > b.max_steps && b.max_steps != 0) {
    if (!b.fault) {
      b.fault = std::make_exception_ptr(KernelHang(
          "hang: " + where_block(b) + " took " + std::to_string(b.max_steps) +
          " thread steps (a step runs a thread to a barrier, a warp collective or its end) without finishing"));
    }
    return false;
  }
  if (b.budget == nullptr || b.budget->steps.fetch_add(1, std::memory_order_relaxed) < b.budget->max_steps) return true;
  b.budget->exceeded = true;
  if (!b.fault) {
    b.fault = std::make_exception_ptr(WorkBudgetExceeded(
        where_block(b) + ": the work budget of " + std::to_string(b.budget->max_steps) + " thread steps is spent"));
  }
  return false;
}

// The next runnable thread of the round after the cursor (advancing the cursor to it and taking its
// step), or null when the round is over, the block faulted or is being abandoned, or the budget is
// spent (which faults the block).
MLA_EXECUTOR_HOT GpuThread* next_in_round(BlockRun& b) {
  if (b.fault || b.abandoning) return nullptr;
  while (++b.cursor < b.order->size()) {
    GpuThread& c = b.threads[(*b.order)[b.cursor]];
    if (c.state != State::kRunnable) continue;
    return take_step(b) ? &c : nullptr;
  }
  return nullptr;
}

void start_fiber(GpuThread& t);

// What a fiber does when it is resumed: the continuation it gets belongs to whoever switched (a
// thread, now waiting or finished, or the scheduler, whose continuation the running thread keeps).
void arrive(GpuThread& t, bctx::fiber&& from) {
  BlockRun& b = *t.block;
  if (b.from != nullptr) {
    b.from->self = std::move(from);
  } else {
    t.back = std::move(from);
  }
  tls_thread = &t;
}

// Switches from the running thread t, which waits, to the next thread of the round (the scheduler
// when there is none); returns when t is resumed.
void wait_here(GpuThread& t) {
  BlockRun& b = *t.block;
  GpuThread* next = next_in_round(b);
  bctx::fiber from;
  b.from = &t;
  if (next != nullptr) {
    if (!next->started) start_fiber(*next);
    next->back = std::move(t.back);
    asan_start_switch(&t.fake_stack, next->stack.bottom(), next->stack.bytes);
    from = std::move(next->self).resume();
  } else {
    asan_start_switch(&t.fake_stack, b.scheduler_stack_bottom, b.scheduler_stack_size);
    from = std::move(t.back).resume();
  }
  asan_finish_switch(t.fake_stack, nullptr, nullptr);
  arrive(t, std::move(from));
  if (b.abandoning) throw Abandon{};
}

// From the scheduler: runs the round from thread t (or unwinds t, when abandoning) until control
// comes back; then stores the continuation of the thread that switched back.
void resume_from_scheduler(GpuThread& t) {
  BlockRun& b = *t.block;
  if (!t.started) start_fiber(t);
  b.from = nullptr;
  void* fake = nullptr;
  asan_start_switch(&fake, t.stack.bottom(), t.stack.bytes);
  bctx::fiber from = std::move(t.self).resume();
  asan_finish_switch(fake, nullptr, nullptr);
  b.from->self = std::move(from);  // empty when that thread returned
  tls_thread = nullptr;
}

// Runs t's share of the kernel (or unwinds it when the block is abandoned) on the current fiber.
void run_thread(GpuThread& t) {
  BlockRun& blk = *t.block;
  try {
    if (!blk.abandoning) (*blk.body)();  // never started: nothing to unwind
  } catch (const Abandon&) {
  } catch (const KernelFault&) {
    if (!blk.fault) blk.fault = std::current_exception();
  } catch (const std::exception& e) {
    if (!blk.fault) blk.fault = std::make_exception_ptr(KernelFault(where_thread(t) + ": " + e.what()));
  } catch (...) {
    if (!blk.fault) blk.fault = std::make_exception_ptr(KernelFault(where_thread(t) + ": an unknown exception"));
  }
  t.state = State::kDone;
}

// Makes t's fiber on the block's next free stack (t has not run yet). The fiber runs t; when t
// returns without waiting and the round's next thread has not started either, the fiber runs that
// one too, and so on; then it ends by switching to the next thread of the round, or the scheduler.
void start_fiber(GpuThread& t) {
  BlockRun& b = *t.block;
  t.stack = (*b.stacks)[b.fibers++];
  t.started = true;
  bctx::stack_context sctx;
  sctx.sp = t.stack.top();
  sctx.size = t.stack.bytes;
  GpuThread* first = &t;
  t.self = bctx::fiber(std::allocator_arg, bctx::preallocated(sctx.sp, sctx.size, sctx), PooledStackAllocator{},
                       [first](bctx::fiber&& from) -> bctx::fiber {
                         BlockRun& blk = *first->block;
                         // The first fiber of a block is started by the scheduler: its stack is the
                         // one every thread returns to.
                         const bool by_scheduler = blk.from == nullptr;
                         const void* old_bottom = nullptr;
                         std::size_t old_size = 0;
                         asan_finish_switch(nullptr, &old_bottom, &old_size);
                         if (by_scheduler) blk.scheduler_stack_bottom = old_bottom, blk.scheduler_stack_size = old_size;
                         GpuThread* tp = first;
                         arrive(*tp, std::move(from));
                         for (;;) {
                           run_thread(*tp);
                           GpuThread* next = next_in_round(blk);
                           if (next != nullptr && !next->started) {  // on this fiber
                             next->started = true;
                             next->stack = tp->stack;
                             next->back = std::move(tp->back);
                             tp = next;
                             tls_thread = tp;
                             continue;
                           }
                           blk.from = tp;  // returned: its continuation is the empty one
                           if (next != nullptr) {
                             next->back = std::move(tp->back);
                             asan_start_switch(nullptr, next->stack.bottom(), next->stack.bytes);
                             return std::move(next->self);
                           }
                           asan_start_switch(nullptr, blk.scheduler_stack_bottom, blk.scheduler_stack_size);
                           return std::move(tp->back);
                         }
                       });
}

// What is wrong with warp w's collective, whose lanes are not all there or not all in the same
// collective (the slow path of resolve: only a faulting block gets here).
std::string collective_problem(const BlockRun& b, int w) {
  const int n = static_cast<int>(b.threads.size());
  const int first = w * b.warp_size, end = std::min(n, first + b.warp_size);
  std::vector<unsigned> at, absent;
  for (int i = first; i < end; ++i) (b.threads[i].state == State::kAtCollective ? at : absent).push_back(i);
  const GpuThread& lead = b.threads[at[0]];
  std::ostringstream why;
  why << where_block(b) << " warp " << w << ": ";
  if (!absent.empty()) {
    // Lanes that returned or wait at a barrier will never join: on a GPU this hangs or reads
    // garbage.
    why << collective_name(lead.kind) << " at " << site(lead.file, lead.line)
        << " with inactive lanes: " << thread_list(at) << " are there, ";
    std::vector<unsigned> returned, at_barrier;
    for (unsigned i : absent) (b.threads[i].state == State::kDone ? returned : at_barrier).push_back(i);
    if (!returned.empty()) why << thread_list(returned) << " returned";
    if (!at_barrier.empty()) {
      const GpuThread& t = b.threads[at_barrier[0]];
      why << (returned.empty() ? "" : ", ") << thread_list(at_barrier) << " wait at the barrier at "
          << site(t.file, t.line);
    }
    return why.str();
  }
  for (unsigned i : at) {
    const GpuThread& t = b.threads[i];
    if (t.kind != lead.kind) {
      why << "lanes in different collectives: thread " << lead.linear << " in " << collective_name(lead.kind)
          << " at " << site(lead.file, lead.line) << ", thread " << t.linear << " in "
          << collective_name(t.kind) << " at " << site(t.file, t.line);
      return why.str();
    }
  }
  return why.str() + "inconsistent collective";  // not reached: resolve found a problem
}

// Everyone waits: completes the warp collectives whose warps are all there, else the barrier.
// Returns "" on progress, else what is wrong. The common case (every lane of a warp in the same
// collective) allocates nothing.
std::string resolve(BlockRun& b) {
  bool progress = false;
  const int n = static_cast<int>(b.threads.size());
  for (int w = 0; w < b.warps; ++w) {
    const int first = w * b.warp_size, end = std::min(n, first + b.warp_size);
    int at = 0, lead = -1;
    bool same = true;
    for (int i = first; i < end; ++i) {
      const GpuThread& t = b.threads[i];
      if (t.state != State::kAtCollective) continue;
      if (lead < 0) {
        lead = i;
      } else if (t.kind != b.threads[lead].kind) {
        same = false;
      }
      ++at;
    }
    if (at == 0) continue;
    if (at != end - first || !same) return collective_problem(b, w);
    const Collective kind = b.threads[lead].kind;
    if (kind == Collective::kShuffle) {
      for (int i = first; i < end; ++i) {
        GpuThread& t = b.threads[i];
        const int src = first + t.src_lane;
        if (t.src_lane < 0 || src >= end) {
          std::ostringstream why;
          why << where_block(b) << " warp " << w << ": thread " << t.linear << " shuffles from lane " << t.src_lane
              << " at " << site(t.file, t.line) << ", which does not exist (the warp has " << end - first
              << " lanes in a block of " << n << " threads)";
          return why.str();
        }
        t.result = b.threads[src].value;
      }
    } else if (kind == Collective::kBallot) {
      uint64_t ballot = 0;
      for (int i = first; i < end; ++i) {
        if (b.threads[i].value != 0) ballot |= uint64_t(1) << (i - first);
      }
      for (int i = first; i < end; ++i) b.threads[i].result = ballot;
    } else {
      for (int i = first; i < end; ++i) b.threads[i].result = 0;
      if (b.warp_epochs != nullptr) ++b.warp_epochs[w];  // orders the warp's accesses
    }
    for (int i = first; i < end; ++i) b.threads[i].state = State::kRunnable;
    progress = true;
  }
  if (progress) return "";

  // Every thread waits at a barrier or has returned.
  const GpuThread* lead = nullptr;
  bool returned = false, different = false;
  for (const GpuThread& t : b.threads) {
    if (t.state != State::kAtBarrier) {
      returned = true;
    } else if (lead == nullptr) {
      lead = &t;
    } else if (t.line != lead->line || (t.file != lead->file && std::strcmp(t.file, lead->file) != 0)) {
      different = true;
    }
  }
  if (!returned && !different) {
    for (GpuThread& t : b.threads) t.state = State::kRunnable;
    ++b.epoch;  // every access before it is ordered before every access after it
    b.barrier_file = lead->file;
    b.barrier_line = lead->line;
    return "";
  }
  std::vector<unsigned> waiting, done;
  for (const GpuThread& t : b.threads) (t.state == State::kAtBarrier ? waiting : done).push_back(t.linear);
  std::ostringstream why;
  why << where_block(b) << ": ";
  if (returned) {
    why << "barrier at " << site(lead->file, lead->line) << " not reached by every thread: " << thread_list(waiting)
        << " wait there, " << thread_list(done) << " returned (first: thread "
        << dim3_string(b.threads[done[0]].ctx.thread_idx) << ")";
    return why.str();
  }
  for (unsigned i : waiting) {
    const GpuThread& t = b.threads[i];
    if (t.line != lead->line || std::strcmp(t.file, lead->file) != 0) {
      why << "threads wait at different barriers: thread " << lead->linear << " at " << site(lead->file, lead->line)
          << ", thread " << t.linear << " at " << site(t.file, t.line);
      return why.str();
    }
  }
  return why.str() + "inconsistent barrier";  // not reached
}

uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// MLACHECK_SHARED_CHECKS=0 turns the hazard checks off (benchmarks compare the two).
bool shared_checks_allowed() {
  static const bool allowed = [] {
    const char* v = std::getenv("MLACHECK_SHARED_CHECKS");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return allowed;
}

// What one host thread reuses from block to block: allocating these per block (a 227 KiB arena
// mapped and zeroed per launch, the dynamic bytes per block) was a large part of a small case.
struct WorkerScratch {
  std::vector<GpuThread> threads;     // lent to each BlockRun (150 KiB for 1024 threads)
  std::vector<uint8_t> static_arena;  // static shared arrays; each declaration fills its own bytes
  std::vector<Stack> stacks;          // taken from the pool as blocks need more, kept until exit
  std::size_t stack_bytes = 0;        // of each of them
  std::vector<unsigned> order;
  std::vector<int> warp_order;
  ScheduleRng rng;
  // Hazard checks: a shadow word per 4 bytes of the static arena and of the dynamic bytes, the
  // serial of the block run last started, and the warps' sync_warp epochs.
  std::vector<ShadowWord> static_shadow, dynamic_shadow;
  uint32_t serial = 0;
  std::vector<uint32_t> warp_epochs;

  // Starts block run b's hazard checks: a fresh serial (on wrap-around every word is cleared).
  void start_shadow(BlockRun& b, std::size_t max_shared_bytes) {
    if (static_shadow.size() < max_shared_bytes / 4) static_shadow.resize(max_shared_bytes / 4);
    if (dynamic_shadow.size() < (b.dynamic_bytes + 3) / 4) dynamic_shadow.resize((b.dynamic_bytes + 3) / 4);
    if (++serial == 0) {
      std::fill(static_shadow.begin(), static_shadow.end(), ShadowWord{});
      std::fill(dynamic_shadow.begin(), dynamic_shadow.end(), ShadowWord{});
      serial = 1;
    }
    warp_epochs.assign(static_cast<std::size_t>(b.warps), 0);
    b.serial = serial;
    b.static_shadow = static_shadow.data();
    b.dynamic_shadow = dynamic_shadow.data();
    b.warp_epochs = warp_epochs.data();
  }

  // At least n stacks of `bytes` each in stacks[0, n).
  void reserve_stacks(std::size_t n, std::size_t bytes) {
    if (bytes != stack_bytes) {
      StackPool::instance().give_back(stacks, stack_bytes, /*unwound_normally=*/true);
      stacks.clear();
      stack_bytes = bytes;
    }
    if (stacks.size() >= n) return;
    std::vector<Stack> more;
    StackPool::instance().take(n - stacks.size(), bytes, more);
    stacks.insert(stacks.end(), more.begin(), more.end());
  }
  ~WorkerScratch() { StackPool::instance().give_back(stacks, stack_bytes, /*unwound_normally=*/true); }
};

// Runs one block to completion; returns its fault, if any. dynamic is the launch's dynamic shared
// memory (an allocation of exactly its declared bytes, so ASan sees a raw pointer run past it).
std::exception_ptr run_block(const char* kernel, Dim3 block_idx, Dim3 grid, Dim3 block, std::size_t dynamic_bytes,
                             uint8_t* dynamic, const Options& options, const std::function<void()>& body,
                             WorkerScratch& scratch, ScopedWorkBudget::State* budget) {
  BlockRun b;
  b.kernel = kernel;
  b.block_idx = block_idx;
  b.block_dim = block;
  b.grid_dim = grid;
  b.options = &options;
  b.max_steps = options.max_block_steps;
  if (budget != nullptr && budget->max_block_steps != 0 && (b.max_steps == 0 || budget->max_block_steps < b.max_steps)) {
    b.max_steps = budget->max_block_steps;
  }
  b.body = &body;
  b.warp_size = options.warp_size;
  b.static_arena = &scratch.static_arena;
  b.arena = scratch.static_arena.data();
  b.dynamic_bytes = dynamic_bytes;
  b.dynamic = dynamic;
  // Uninitialised shared memory reads as NaN (0xFF bytes), as stale data would on a GPU.
  if (dynamic_bytes > 0) std::memset(dynamic, 0xFF, dynamic_bytes);
  const unsigned n = block.x * block.y * block.z;
  b.warps = static_cast<int>((n + b.warp_size - 1) / b.warp_size);
  if (options.check_shared && shared_checks_allowed()) scratch.start_shadow(b, options.max_shared_bytes);
  const uint64_t block_linear = block_idx.x + uint64_t(grid.x) * (block_idx.y + uint64_t(grid.y) * block_idx.z);
  const bool shuffled = options.schedule == Schedule::kShuffled;
  if (shuffled) {
    scratch.rng.seed(mix(options.seed ^ mix(block_linear)));
    b.rng = &scratch.rng;
  }
  b.budget = budget;

  const std::size_t stack_bytes = options.stack_bytes ? options.stack_bytes : detail::default_stack_bytes();
  b.threads.swap(scratch.threads);  // given back below, so its memory is reused by the next block
  // The same size as the last block's (a launch's blocks are): reset in place, since constructing
  // a thousand threads' state anew was a quarter of a small case. A thread with a continuation left
  // (none should be) makes it start over.
  bool reusable = b.threads.size() == n;
  for (std::size_t i = 0; reusable && i < n; ++i) reusable = !b.threads[i].self && !b.threads[i].back;
  if (reusable) {
    for (GpuThread& t : b.threads) t.reuse();
  } else {
    b.threads.clear();
    b.threads.resize(n);
  }
  scratch.reserve_stacks(n, stack_bytes);  // enough for every thread to wait at once
  b.stacks = &scratch.stacks;
  for (unsigned i = 0; i < n; ++i) {
    GpuThread& t = b.threads[i];
    t.linear = i;
    t.ctx.thread_idx = Dim3(i % block.x, (i / block.x) % block.y, i / (block.x * block.y));
    t.ctx.block_idx = block_idx;
    t.ctx.block_dim = block;
    t.ctx.grid_dim = grid;
    t.ctx.warp_size = b.warp_size;
    t.warp = static_cast<int>(i) / b.warp_size;
    t.lane = static_cast<int>(i) % b.warp_size;
    t.block = &b;
  }

  std::vector<unsigned>& order = scratch.order;
  b.order = &order;
  std::vector<int>& warp_order = scratch.warp_order;
  warp_order.resize(static_cast<std::size_t>(b.warps));
  for (;;) {
    order.clear();
    if (shuffled) {
      for (int w = 0; w < b.warps; ++w) warp_order[w] = w;
      std::shuffle(warp_order.begin(), warp_order.end(), *b.rng);
      for (int w : warp_order) {
        const std::size_t from = order.size();
        for (unsigned i = w * b.warp_size; i < std::min<unsigned>(n, (w + 1) * b.warp_size); ++i) {
          if (b.threads[i].state == State::kRunnable) order.push_back(i);
        }
        std::shuffle(order.begin() + static_cast<std::ptrdiff_t>(from), order.end(), *b.rng);
      }
    } else {
      for (unsigned i = 0; i < n; ++i) {
        if (b.threads[i].state == State::kRunnable) order.push_back(i);
      }
    }
    if (!order.empty()) {
      // The round's threads switch to each other (next_in_round); control comes back here once
      // the last of them waits or returns, or the block faulted.
      b.cursor = static_cast<std::size_t>(-1);
      if (GpuThread* first = next_in_round(b)) resume_from_scheduler(*first);
      if (b.fault) break;
      continue;
    }
    if (std::all_of(b.threads.begin(), b.threads.end(), [](const GpuThread& t) { return t.state == State::kDone; })) {
      break;
    }
    const std::string why = resolve(b);
    if (!why.empty()) {
      b.fault = std::make_exception_ptr(KernelFault(why));
      break;
    }
  }
  // Unwind every thread still waiting, so its stack can be reused.
  b.abandoning = true;
  for (GpuThread& t : b.threads) {
    if (t.self) resume_from_scheduler(t);
  }
  // After a fault the abandoned frames' red zones are still poisoned: clear them for the next block.
  if (b.fault) StackPool::clear_shadow(scratch.stacks.data(), b.fibers);
  b.threads.swap(scratch.threads);
  if (budget != nullptr) {
    uint64_t seen = budget->largest_block.load(std::memory_order_relaxed);
    while (seen < b.steps && !budget->largest_block.compare_exchange_weak(seen, b.steps, std::memory_order_relaxed)) {
    }
  }
  return b.fault;
}

void validate(const char* kernel, Dim3 grid, Dim3 block, std::size_t dynamic_bytes, const Options& o) {
  const std::string what = std::string("kernel '") + kernel + "' launch with grid " + dim3_string(grid) +
                           ", block " + dim3_string(block) + ": ";
  MLA_REQUIRE(o.warp_size == 32 || o.warp_size == 64, "host backend: warp size ", o.warp_size,
              "; it must be 32 or 64");
  MLA_REQUIRE(o.workers >= 1, "host backend: ", o.workers, " workers; at least 1");
  MLA_REQUIRE(grid.x && grid.y && grid.z, what, "a grid dimension is zero (a GPU refuses the launch)");
  MLA_REQUIRE(block.x && block.y && block.z, what, "a block dimension is zero (a GPU refuses the launch)");
  MLA_REQUIRE(uint64_t(block.x) * block.y * block.z <= 1024 && block.z <= 64, what,
              "more than 1024 threads per block or block.z over 64 (a GPU refuses the launch)");
  MLA_REQUIRE(grid.x <= 0x7FFFFFFFu && grid.y <= 65535 && grid.z <= 65535, what,
              "grid larger than a GPU allows");
  MLA_REQUIRE(dynamic_bytes <= o.max_shared_bytes, what, dynamic_bytes,
              " bytes of dynamic shared memory; a block may have at most ", o.max_shared_bytes);
}

}  // namespace

// ---- public interface ----------------------------------------------------------------------------

const Options& current_options() { return tls_options; }

ScopedWorkBudget::ScopedWorkBudget(uint64_t max_steps, uint64_t max_block_steps)
    : state_(std::make_unique<State>()), outer_(tls_budget) {
  state_->max_steps = max_steps;
  state_->max_block_steps = max_block_steps;
  tls_budget = state_.get();
}
ScopedWorkBudget::~ScopedWorkBudget() { tls_budget = outer_; }
uint64_t ScopedWorkBudget::steps() const { return state_->steps.load(); }
bool ScopedWorkBudget::exceeded() const { return state_->exceeded.load(); }
uint64_t ScopedWorkBudget::largest_block() const { return state_->largest_block.load(); }

ScopedOptions::ScopedOptions(const Options& o) : saved_(tls_options) { tls_options = o; }
ScopedOptions::~ScopedOptions() { tls_options = saved_; }

void launch(const char* kernel_name, Dim3 grid, Dim3 block, std::size_t dynamic_shared_bytes, Stream* stream,
            std::function<void()> body) {
  const Options options = tls_options;
  validate(kernel_name, grid, block, dynamic_shared_bytes, options);
  MLA_REQUIRE(tls_thread == nullptr, "kernel '", kernel_name, "' launched from inside a kernel (",
              where_thread(*tls_thread), "); dynamic parallelism is not supported");
  if (stream != nullptr && stream->capturing_) {
    stream->recording_.launches_.push_back({kernel_name, grid, block, dynamic_shared_bytes, std::move(body)});
    return;
  }

  const uint64_t blocks = uint64_t(grid.x) * grid.y * grid.z;
  ScopedWorkBudget::State* const budget = tls_budget;
  if (budget != nullptr) {  // every thread takes at least one step
    const uint64_t least = blocks * block.x * block.y * block.z;
    if (budget->steps.load() + least > budget->max_steps) {
      budget->exceeded = true;
      throw WorkBudgetExceeded(std::string("kernel '") + kernel_name + "': " + std::to_string(least) +
                               " threads would pass the work budget of " + std::to_string(budget->max_steps) +
                               " thread steps");
    }
  }
  std::vector<uint64_t> order(blocks);
  for (uint64_t i = 0; i < blocks; ++i) order[i] = i;
  if (options.schedule == Schedule::kShuffled) {
    ScheduleRng rng(mix(options.seed));
    std::shuffle(order.begin(), order.end(), rng);
  }
  auto block_of = [&](uint64_t i) {
    return Dim3(static_cast<unsigned>(i % grid.x), static_cast<unsigned>(i / grid.x % grid.y),
                static_cast<unsigned>(i / (uint64_t(grid.x) * grid.y)));
  };

  // Workers take blocks in order; the fault reported is that of the earliest block in the order.
  std::atomic<uint64_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex fault_mutex;
  uint64_t fault_position = UINT64_MAX;
  std::exception_ptr fault;
  auto work = [&] {
    thread_local WorkerScratch scratch;
    if (scratch.static_arena.size() < options.max_shared_bytes) scratch.static_arena.resize(options.max_shared_bytes);
    const std::unique_ptr<uint8_t[]> dynamic(dynamic_shared_bytes > 0 ? new uint8_t[dynamic_shared_bytes] : nullptr);
    for (uint64_t pos; !stop.load(std::memory_order_relaxed) && (pos = next.fetch_add(1)) < blocks;) {
      std::exception_ptr f = run_block(kernel_name, block_of(order[pos]), grid, block, dynamic_shared_bytes,
                                       dynamic.get(), options, body, scratch, budget);
      if (f) {
        std::lock_guard<std::mutex> lock(fault_mutex);
        if (pos < fault_position) fault_position = pos, fault = f;
        stop = true;
      }
    }
  };
  const int helpers = static_cast<int>(std::min<uint64_t>(options.workers, blocks)) - 1;
  std::vector<std::thread> threads;
  for (int i = 0; i < helpers; ++i) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  if (fault) std::rethrow_exception(fault);
}

void Graph::replay() const {
  for (const Launch& l : launches_) launch(l.kernel_name.c_str(), l.grid, l.block, l.dynamic_shared_bytes, nullptr, l.body);
}

void Stream::begin_capture() {
  MLA_REQUIRE(!capturing_, "host stream: begin_capture while already capturing");
  capturing_ = true;
  recording_ = Graph{};
}

Graph Stream::end_capture() {
  MLA_REQUIRE(capturing_, "host stream: end_capture without begin_capture");
  capturing_ = false;
  return std::move(recording_);
}

MLA_EXECUTOR_HOT const ThreadContext& this_thread() {
  MLA_REQUIRE(tls_thread != nullptr,
              "simt: a kernel-side function (thread_idx, sync_threads, a shuffle...) was called outside a kernel launch");
  return tls_thread->ctx;
}

void barrier(const char* file, int line) {
  this_thread();
  GpuThread& t = *tls_thread;
  t.state = State::kAtBarrier;
  t.file = file;
  t.line = line;
  wait_here(t);
}

uint64_t warp_collective(Collective kind, uint64_t value, int src_lane, const char* file, int line) {
  this_thread();
  GpuThread& t = *tls_thread;
  t.state = State::kAtCollective;
  t.kind = kind;
  t.value = value;
  t.src_lane = src_lane;  // a lane of the caller's warp
  t.file = file;
  t.line = line;
  wait_here(t);
  return t.result;
}

namespace {

// The faults of static_shared_bytes, out of line so that its frame stays small (see MLA_REQUIRE).
[[noreturn]] __attribute__((noinline)) void shared_decl_diverged(const GpuThread& t, const SharedDecl& d,
                                                                 std::size_t bytes, const char* name) {
  throw KernelFault(where_thread(t) + ": declares shared array '" + name + "' (" + std::to_string(bytes) +
                    " bytes) where another thread declared '" + std::string(d.name) + "' (" +
                    std::to_string(d.bytes) + " bytes); shared declarations must not diverge");
}
[[noreturn]] __attribute__((noinline)) void shared_too_large(const GpuThread& t, std::size_t offset, std::size_t bytes,
                                                             const char* name) {
  const BlockRun& b = *t.block;
  throw KernelFault(where_thread(t) + ": shared array '" + name + "' (" + std::to_string(bytes) +
                    " bytes) takes the block's static shared memory to " + std::to_string(offset + bytes) +
                    " bytes, with " + std::to_string(b.dynamic_bytes) + " dynamic; a block may have " +
                    std::to_string(b.options->max_shared_bytes));
}

}  // namespace

MLA_EXECUTOR_HOT void* static_shared_bytes(std::size_t bytes, std::size_t align, const char* name) {
  this_thread();
  GpuThread& t = *tls_thread;
  BlockRun& b = *t.block;
  const std::size_t index = t.next_shared_decl++;
  if (index < b.shared_decls.size()) {  // every thread but the first to declare it
    const SharedDecl& d = b.shared_decls[index];
    if (d.bytes != bytes || (d.name != name && std::strcmp(d.name, name) != 0)) shared_decl_diverged(t, d, bytes, name);
    return b.static_arena->data() + d.offset;
  }
  align = std::max<std::size_t>(align, 16);
  const std::size_t offset = (b.static_used + align - 1) / align * align;
  if (offset + bytes + b.dynamic_bytes > b.options->max_shared_bytes) shared_too_large(t, offset, bytes, name);
  b.static_used = offset + bytes;
  b.shared_decls.push_back({name, offset, bytes});
  std::memset(b.static_arena->data() + offset, 0xFF, bytes);  // uninitialised reads give NaN
  return b.static_arena->data() + offset;
}

void* dynamic_shared_base() {
  this_thread();
  return tls_thread->block->dynamic;
}

std::size_t dynamic_shared_bytes() {
  this_thread();
  return tls_thread->block->dynamic_bytes;
}

namespace {

// The shadow of the word holding byte p of the running block's shared memory, or null when p is not
// shared memory or the checks are off.
MLA_EXECUTOR_HOT __attribute__((always_inline)) inline ShadowWord* shadow_of(const BlockRun& b, const uint8_t* p) {
  if (b.static_shadow == nullptr) return nullptr;
  const uint8_t* arena = b.arena;
  if (p >= arena && p < arena + b.static_used) return b.static_shadow + (p - arena) / 4;
  if (p >= b.dynamic && p < b.dynamic + b.dynamic_bytes) return b.dynamic_shadow + (p - b.dynamic) / 4;
  return nullptr;
}

// The shared array holding byte p and the index of the element of `bytes` there (for atomics, which
// see a raw pointer): a static declaration, or the dynamic bytes.
std::pair<const char*, std::size_t> shared_element(const BlockRun& b, const uint8_t* p, std::size_t bytes) {
  const uint8_t* arena = b.arena;
  for (const SharedDecl& d : b.shared_decls) {
    if (p >= arena + d.offset && p < arena + d.offset + d.bytes) return {d.name, (p - arena - d.offset) / bytes};
  }
  return {"dynamic shared memory", (p - b.dynamic) / bytes};
}

std::string thread_name(const BlockRun& b, uint32_t linear) {
  const Dim3 d = b.block_dim;
  return "thread " + dim3_string(Dim3(linear % d.x, linear / d.x % d.y, linear / (d.x * d.y)));
}

// Is an access by thread `tid` (warp `warp`, at barrier epoch `epoch` and that warp's sync_warp epoch
// `warp_epoch`) ordered before what the running thread t does now?
bool ordered_before(const BlockRun& b, const GpuThread& t, uint32_t epoch, uint32_t warp, uint32_t warp_epoch) {
  return epoch != b.epoch || (warp == static_cast<uint32_t>(t.warp) &&
                              warp_epoch < b.warp_epochs[t.warp]);
}

[[noreturn]] __attribute__((noinline)) void hazard(const GpuThread& t, const std::string& what, const char* name,
                                                   std::size_t index, const std::string& other) {
  const BlockRun& b = *t.block;
  std::ostringstream os;
  os << what << where_thread(t) << " " << other << " shared '" << name << "'[" << index
     << "] with no barrier between them (the last barrier: "
     << (b.barrier_file ? site(b.barrier_file, b.barrier_line) : std::string("none since the block began")) << ")";
  throw SharedHazard(os.str());
}

// The thread whose read of w since the last barrier is not ordered before t's access now, if any
// (kNoThread: none).
uint32_t unordered_reader(const BlockRun& b, const GpuThread& t, const ShadowWord& w) {
  if (w.r_serial != b.serial || w.r_epoch != b.epoch) return kNoThread;
  const uint32_t reader = w.r_tid != t.linear ? w.r_tid : w.r_tid2;
  return reader == kNoThread || ordered_before(b, t, w.r_epoch, w.r_warp, w.r_warp_epoch) ? kNoThread : reader;
}

// The running thread and the shadow of the word holding p: null when outside a kernel, or when p
// is not shared memory the checks follow; and the thread's warp's sync_warp epoch.
struct Access {
  const GpuThread* t = nullptr;
  ShadowWord* w = nullptr;
  uint32_t warp_epoch = 0;
};
MLA_EXECUTOR_HOT __attribute__((always_inline)) inline Access access_of(const void* p) {
  const GpuThread* t = tls_thread;
  if (t == nullptr) return {};
  ShadowWord* w = shadow_of(*t->block, static_cast<const uint8_t*>(p));
  if (w == nullptr) return {};
  return {t, w, t->block->warp_epochs[t->warp]};
}

}  // namespace

MLA_EXECUTOR_HOT void shared_read(const void* p, std::size_t bytes, const char* name, std::size_t index) {
  auto [tp, w, warp_epoch] = access_of(p);
  if (w == nullptr) return;
  const GpuThread& t = *tp;
  const BlockRun& b = *t.block;
  const uint32_t me = t.linear, warp = static_cast<uint32_t>(t.warp);
  const uint64_t done = uint64_t(b.serial) << 32 | b.epoch;
  for (ShadowWord* end = w + (bytes + 3) / 4; w < end; ++w) {
    if (w->r_done == done) continue;  // the common read: a word several warps read since the last barrier
    // A word no thread of the block wrote reads as 0xFF bytes (static_shared_bytes, run_block): not
    // reported here, since kernels read such words and mask what they computed from them; a value
    // that reaches an output shows there as NaN.
    if (w->serial == b.serial && w->w_tid != me && w->w_tid != kSameValueWriters &&
        !ordered_before(b, t, w->w_epoch, w->w_tid / static_cast<uint32_t>(b.warp_size), w->w_warp_epoch)) {
      hazard(t, "race: ", name, index, "reads what " + thread_name(b, w->w_tid) + " wrote to");
    }
    if (w->r_serial != b.serial || w->r_epoch != b.epoch) {
      w->r_serial = b.serial, w->r_epoch = b.epoch, w->r_tid = me, w->r_tid2 = kNoThread;
      w->r_warp = warp, w->r_warp_epoch = warp_epoch;
    } else {
      if (w->r_tid != me && w->r_tid2 == kNoThread) w->r_tid2 = me;
      if (w->r_warp != warp) w->r_warp = kNoThread;
      w->r_warp_epoch = std::max(w->r_warp_epoch, warp_epoch);
      if (w->r_warp == kNoThread && w->r_tid2 != kNoThread) w->r_done = done;  // the next reads pass both checks above
    }
  }
}

MLA_EXECUTOR_HOT void shared_write(const void* p, std::size_t bytes, const char* name, std::size_t index,
                                   bool same_value) {
  auto [tp, w, warp_epoch] = access_of(p);
  if (w == nullptr) return;
  const GpuThread& t = *tp;
  const BlockRun& b = *t.block;
  const uint32_t me = t.linear;
  for (ShadowWord* end = w + (bytes + 3) / 4; w < end; ++w) {
    const bool written_now = w->serial == b.serial && w->w_tid != me &&
                             !ordered_before(b, t, w->w_epoch, w->w_tid == kSameValueWriters ? kNoThread
                                                                   : w->w_tid / static_cast<uint32_t>(b.warp_size),
                                             w->w_warp_epoch);
    if (written_now && !same_value) {
      hazard(t, "race: ", name, index,
             w->w_tid == kSameValueWriters ? "writes another value where other threads wrote to"
                                           : "writes another value where " + thread_name(b, w->w_tid) + " wrote to");
    }
    if (const uint32_t reader = unordered_reader(b, t, *w); reader != kNoThread) {
      hazard(t, "race: ", name, index, "writes where " + thread_name(b, reader) + " read");
    }
    w->w_tid = written_now ? kSameValueWriters : me;
    w->serial = b.serial, w->w_epoch = b.epoch, w->w_warp_epoch = warp_epoch, w->w_atomic = false;
  }
}

[[noreturn]] __attribute__((noinline)) void order_dependent(const GpuThread& t, const char* name, std::size_t index,
                                                            uint32_t other) {
  std::ostringstream os;
  os << "order: " << where_thread(t) << " adds a float to shared '" << name << "'[" << index << "] that "
     << thread_name(*t.block, other) << " added to with no barrier between them, and the sum rounds: its bits "
     << "depend on which add arrives first (a sum in a fixed order, or an exact one, does not)";
  throw OrderDependentSum(os.str());
}

MLA_EXECUTOR_HOT void shared_atomic(const void* p, std::size_t bytes, bool rounded) {
  auto [tp, w, warp_epoch] = access_of(p);
  if (w == nullptr) return;
  const GpuThread& t = *tp;
  const BlockRun& b = *t.block;
  const uint32_t me = t.linear;
  // Atomics never conflict with each other; with another thread's plain write or read, unordered,
  // they do (a plain read of a counter others still add to reads whatever has arrived).
  const auto [name, index] = shared_element(b, static_cast<const uint8_t*>(p), bytes);
  for (ShadowWord* end = w + (bytes + 3) / 4; w < end; ++w) {
    if (w->serial == b.serial && !w->w_atomic && w->w_tid != me && w->w_tid != kSameValueWriters &&
        !ordered_before(b, t, w->w_epoch, w->w_tid / static_cast<uint32_t>(b.warp_size), w->w_warp_epoch)) {
      hazard(t, "race: ", name, index, "atomically updates what " + thread_name(b, w->w_tid) + " wrote to");
    }
    if (const uint32_t reader = unordered_reader(b, t, *w); reader != kNoThread) {
      hazard(t, "race: ", name, index, "atomically updates where " + thread_name(b, reader) + " read");
    }
    if (rounded && w->serial == b.serial && w->w_atomic && w->w_tid != me &&
        !ordered_before(b, t, w->w_epoch, w->w_tid / static_cast<uint32_t>(b.warp_size), w->w_warp_epoch)) {
      order_dependent(t, name, index, w->w_tid);
    }
    w->serial = b.serial, w->w_tid = me, w->w_epoch = b.epoch, w->w_warp_epoch = warp_epoch, w->w_atomic = true;
  }
}

void shared_out_of_bounds(const char* name, std::size_t index, std::size_t count, std::size_t element_bytes) {
  this_thread();
  const GpuThread& t = *tls_thread;
  const bool is_static = std::any_of(t.block->shared_decls.begin(), t.block->shared_decls.end(),
                                     [&](const SharedDecl& d) { return std::strcmp(d.name, name) == 0; });
  std::ostringstream os;
  os << where_thread(t) << ": ";
  if (is_static) {
    os << "shared array '" << name << "' indexed at " << index << ", past its " << count << " elements";
  } else {
    os << "dynamic shared memory '" << name << "' indexed at element " << index << " (byte "
       << index * element_bytes << "), past the " << t.block->dynamic_bytes << " bytes the launch declared";
  }
  throw KernelFault(os.str());
}

}  // namespace mlacheck::simt::host
