// The host backend: runs a kernel launch on the CPU with GPU thread semantics.
//
// Each thread block runs as one fiber per thread (boost.context). A fiber runs until it reaches a
// block barrier or a warp collective, then the next one runs; when every thread of the block (or
// every lane of the warp) has arrived, they all go on. So __syncthreads, shared memory, warp
// shuffles and atomics behave as on a GPU, and the kernel source is the one nvcc compiles.
//
// What a GPU would do silently or hang on is reported as a KernelFault naming the kernel, the block
// and the threads: a barrier not reached by every thread of the block, threads waiting at different
// barriers, a warp collective with inactive lanes (returned, or waiting at a barrier), different
// collectives in one warp, and a shared-memory access past its array (for dynamic shared memory,
// past the bytes the launch declared).
//
// Order is deterministic by default: blocks in order, and within a block the runnable threads in
// order. Schedule::kShuffled permutes the block order and, at every step, the order of warps and of
// lanes, from a seed: a kernel whose result depends on it (a missing barrier, a race) gives
// different results for different seeds. Kernel code reaches this header only through simt.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/dim3.h"
#include "core/error.h"

namespace mlacheck::simt {

namespace host {

class Stream;

enum class Schedule { kOrdered, kShuffled };

struct Options {
  int warp_size = 32;                   // 32 (CUDA) or 64 (gfx9 wavefronts)
  int workers = 1;                      // host threads running blocks; more than one lets blocks
                                        // interleave, so atomics between blocks change order
  Schedule schedule = Schedule::kOrdered;
  uint64_t seed = 0;                    // for kShuffled
  std::size_t stack_bytes = 0;          // per thread's fiber; 0: 64 KiB (256 KiB under ASan)
  std::size_t max_shared_bytes = 232448;  // per block, static + dynamic (an H100/H200's 227 KiB)
  // A block whose threads take more steps than this (one step: a thread run until it returns or
  // reaches a barrier or a warp collective) is a hang: KernelHang. The largest blocks of the suite's
  // kernels take well under a million; a loop that never ends around a barrier reaches 2^25 in a
  // few seconds. 0: no limit. (A loop with no barrier in it never yields; the check's case timeout
  // catches that one.)
  uint64_t max_block_steps = uint64_t(1) << 25;
  // Shared-memory races (SharedHazard): every access of a shared array of 4- or 8-byte elements is
  // checked against the block's earlier ones: two accesses of one word by different threads, at
  // least one a plain write, with no barrier between them (nor a sync_warp, for two lanes of one
  // warp) are a race, unless both write the same value. Shuffles and ballots order nothing in
  // memory; atomics count as writes that never conflict with each other. A read of a word no thread
  // wrote is not one (it reads 0xFF bytes: NaN where it reaches a float output).
  // MLACHECK_SHARED_CHECKS=0 in the environment turns it off for every launch.
  bool check_shared = true;
};

// The options launches on this host thread use; ScopedOptions sets them for a scope.
const Options& current_options();
class ScopedOptions {
 public:
  explicit ScopedOptions(const Options& o);
  ~ScopedOptions();
  ScopedOptions(const ScopedOptions&) = delete;
  ScopedOptions& operator=(const ScopedOptions&) = delete;

 private:
  Options saved_;
};

// A kernel's misbehaviour on the host backend; the message names kernel, block and threads.
class KernelFault : public Error {
 public:
  explicit KernelFault(const std::string& what) : Error(what) {}
};

// A block that passed Options::max_block_steps: a loop that does not end. The message starts "hang: ".
class KernelHang : public KernelFault {
 public:
  explicit KernelHang(const std::string& what) : KernelFault(what) {}
};

// A shared-memory race (Options::check_shared): the message starts "race: " and names the kernel,
// the block, both threads, the array, the element and the last barrier.
class SharedHazard : public KernelFault {
 public:
  explicit SharedHazard(const std::string& what) : KernelFault(what) {}
};

// A float sum in shared memory whose bits depend on arrival order: a float atomic add that rounded,
// to a word another thread's atomic reached first with no barrier (nor, within a warp, sync_warp)
// between them, so another schedule would round elsewhere. On a GPU such a sum gives other bits
// launch to launch. The message starts "order: " and names the kernel, block, both threads, the
// array and the element. Checked with the races (Options::check_shared), in any schedule.
class OrderDependentSum : public SharedHazard {
 public:
  explicit OrderDependentSum(const std::string& what) : SharedHazard(what) {}
};

// A cap on the work of the launches on this host thread, counted in steps: one GPU thread run until
// it returns or reaches a barrier or a warp collective. Fuzzing sets one so that the few large cases
// its mutations reach are given up quickly instead of taking most of its time: a launch that would
// pass it throws WorkBudgetExceeded (before it starts, when its threads alone are too many; else at
// the step that passes it, abandoning the block). Budgets nest; the innermost one counts.
class WorkBudgetExceeded : public Error {
 public:
  explicit WorkBudgetExceeded(const std::string& what) : Error(what) {}
};
//
// max_block_steps, when not 0, is a per-block limit tighter than Options::max_block_steps for the
// launches of the scope (the smaller counts): a block past it throws KernelHang as one past the
// options' limit does. largest_block() is the most steps one block of the scope's launches took:
// what a case's own work is, in any build (a sanitizer slows each step, not their count).
class ScopedWorkBudget {
 public:
  static constexpr uint64_t kNoCap = uint64_t(1) << 62;  // max_steps for a scope that only measures
  explicit ScopedWorkBudget(uint64_t max_steps, uint64_t max_block_steps = 0);
  ~ScopedWorkBudget();
  ScopedWorkBudget(const ScopedWorkBudget&) = delete;
  ScopedWorkBudget& operator=(const ScopedWorkBudget&) = delete;
  uint64_t steps() const;  // taken by launches in this scope so far
  bool exceeded() const;   // a launch in this scope threw WorkBudgetExceeded
  uint64_t largest_block() const;

  struct State;

 private:
  std::unique_ptr<State> state_;
  State* outer_;
};

// Runs body once per thread of every block of the grid (see the top of this file). Throws
// KernelFault, or Error for a configuration a GPU would refuse (more than 1024 threads per block,
// a zero dimension, too much shared memory). On a capturing stream the launch is recorded instead.
void launch(const char* kernel_name, Dim3 grid, Dim3 block, std::size_t dynamic_shared_bytes,
            Stream* stream, std::function<void()> body);
template <class Config, class Body>
void launch(const char* kernel_name, const Config& config, Body&& body) {
  launch(kernel_name, config.grid, config.block, config.dynamic_shared_bytes, config.stream,
         std::function<void()>(std::forward<Body>(body)));
}

// A recorded sequence of launches, replayed against the same arguments (pointers included), as a
// CUDA graph is. Its launches run with the options current at replay.
class Graph {
 public:
  void replay() const;
  std::size_t launch_count() const { return launches_.size(); }

 private:
  friend class Stream;
  friend void launch(const char*, Dim3, Dim3, std::size_t, Stream*, std::function<void()>);
  struct Launch {
    std::string kernel_name;
    Dim3 grid, block;
    std::size_t dynamic_shared_bytes;
    std::function<void()> body;
  };
  std::vector<Launch> launches_;
};

// A host stream: a null Stream* runs each launch at once; a capturing stream records launches.
class Stream {
 public:
  void begin_capture();
  Graph end_capture();
  bool capturing() const { return capturing_; }

 private:
  friend void launch(const char*, Dim3, Dim3, std::size_t, Stream*, std::function<void()>);
  bool capturing_ = false;
  Graph recording_;
};

// What a running thread sees of itself. Valid only inside a launch.
struct ThreadContext {
  Dim3 thread_idx, block_idx, block_dim, grid_dim;
  int warp_size = 32;
};
// Throws Error when called outside a kernel launch.
const ThreadContext& this_thread();

enum class Collective { kShuffle, kBallot, kSyncWarp };
// Block barrier: returns when every thread of the block has reached a barrier.
void barrier(const char* file, int line);
// Warp collective: every lane of the warp deposits value; kShuffle returns the value of lane
// src_lane, kBallot a bit per lane whose value was non-zero, kSyncWarp 0.
uint64_t warp_collective(Collective kind, uint64_t value, int src_lane, const char* file, int line);

// Shared memory of the running block. static_shared gives every thread the same array for the
// same declaration (in declaration order); dynamic_shared is the launch's dynamic bytes.
void* static_shared_bytes(std::size_t bytes, std::size_t align, const char* name);
void* dynamic_shared_base();
std::size_t dynamic_shared_bytes();
template <class T>
T* static_shared(std::size_t count, const char* name) {
  return static_cast<T*>(static_shared_bytes(count * sizeof(T), alignof(T), name));
}
template <class T>
T* dynamic_shared() {
  return static_cast<T*>(dynamic_shared_base());
}
// The hazard checks of one access (shared_array's element references call them): bytes at p, element
// index of array name; same_value: a write that leaves the bytes as they were (two threads writing
// one value is not reported). shared_atomic: an atomic read-modify-write at p, if p is shared;
// rounded: a float add whose result rounded (OrderDependentSum when another thread's unordered
// atomic reached the word before it).
void shared_read(const void* p, std::size_t bytes, const char* name, std::size_t index);
void shared_write(const void* p, std::size_t bytes, const char* name, std::size_t index, bool same_value);
void shared_atomic(const void* p, std::size_t bytes, bool rounded = false);
[[noreturn]] void shared_out_of_bounds(const char* name, std::size_t index, std::size_t count,
                                       std::size_t element_bytes);

}  // namespace host
}  // namespace mlacheck::simt
