// Checks of the backend test kernels against plain loops, written once for every backend.
//
// simt_test_kernels.cu is compiled for host, cuda and hip; each backend's kernels() fills a
// SimtKernels table. The checks below take that table and a way to make guarded buffers (host or
// device), run a kernel with every buffer guarded, and compare its outputs with a plain loop.
// Each returns "" when everything matched, else one line saying what differed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/guarded_buffer.h"

namespace mlacheck::simt_test_kernels {

struct SimtKernels {
  const char* backend;
  int (*warp_size)();
  void (*synchronize)();  // waits for the launches and throws on a device fault
  // One block per row: out[r] = sum of in[r, :]. Warp sums, per-warp partials in shared memory,
  // a barrier, and a second warp sum.
  void (*block_sum)(const float* in, float* out, int rows, int cols, int threads);
  // Per element (n = blocks * threads): out[0n + i] inclusive scan within the warp (shfl by index),
  // out[1n + i] warp max, out[2n + i] shfl_down(v, 3, width 8), out[3n + i] shfl(v, 2, width 16),
  // out[4n + i] shfl_xor(v, 5); per warp: down_sum[w] the shfl_down tree sum, ballot[w] the lanes
  // whose value is odd.
  void (*warp_ops)(const int* in, int* out, int* down_sum, uint64_t* ballot, int blocks, int threads);
  // Atomic histogram of n bytes into 256 bins (shared-memory atomics, then global ones), plus the
  // float total (atomic add), the largest value (atomic max) and a block id claimed by CAS on -1.
  void (*histogram)(const uint8_t* in, int n, unsigned* bins, float* total, int* max_value, int* claimed,
                    int blocks, int threads);
  // Each row reversed through dynamic shared memory of dynamic_bytes (cols * 4 is enough).
  void (*reverse_rows)(const float* in, float* out, int rows, int cols, std::size_t dynamic_bytes);
  // out[block, t] after `barriers` barrier-separated rounds of neighbour exchange through shared
  // memory (the host backend's benchmark kernel).
  void (*barrier_loop)(float* out, int blocks, int threads, int barriers);
  // Thread t writes slot t of a shared array, then reads slot t+1 (mod n): right only with the
  // barrier between the two.
  void (*neighbour_exchange)(int* out, int n, bool with_barrier);
  // Faulty kernels (the host backend must report them): threads 16.. return before a barrier;
  // odd and even threads wait at different barriers; lanes 0..15 alone call a warp sum; a static
  // shared array of 8 ints indexed up to threads - 1.
  void (*early_return_barrier)(int* out, int threads);
  void (*split_barrier)(int* out, int threads);
  void (*partial_warp_sum)(float* out, int threads);
  void (*shared_overrun)(int* out, int threads);
  // Writes dynamic shared memory through the raw pointer, one int past the threads * 4 - 4 bytes
  // the launch declares: only AddressSanitizer can see it (on the host backend).
  void (*raw_dynamic_overrun)(int* out, int threads);
  // One block of n threads through one shared-memory pattern (SharedPattern); out[t] what thread t
  // read back.
  void (*shared_pattern)(int* out, int n, int pattern);
};

// The patterns of shared_pattern: the ordered ones are not races; the others are, and the host
// backend's checks (simt::host::Options::check_shared) report them.
enum SharedPattern : int {
  kExchangeAfterBarrier = 0,  // write slot t, barrier, read slot t + 1
  kExchangeWithoutBarrier,    // the same without the barrier
  kLaneExchangeAfterSyncWarp, // write slot t, sync_warp, read the next lane's slot of the warp
  kLaneExchangeAfterShuffle,  // the same with a shuffle in place of sync_warp (it orders no memory)
  kSameValueFromEveryThread,  // every thread writes 5 into slot 0, barrier, reads it
  kOwnValueFromEveryThread,   // every thread writes its id into slot 0
  kAtomicsThenBarrier,        // thread 0 zeroes slot 0, barrier, atomic adds, barrier, read
  kAtomicsThenRead,           // the same without the second barrier
  kReadThenOverwrite,         // write slot t, barrier, read slot t + 1, write slot t again (no barrier)
  kRereadThenOverwrite,       // the same, reading slot t + 1 twice (the second read of a word)
  kRereadAcrossSyncWarp,      // write slot t, barrier, read the next lane's slot, sync_warp, read it
                              // again, write slot t (the second read is unordered with that write)
  kTwoLanesRereadAcrossSyncWarp,  // as kRereadAcrossSyncWarp, each slot read first by both
                                  // neighbouring lanes
  kRewrittenAfterWarpsRead,   // thread 0 writes slot 0, barrier, every thread reads it, barrier,
                              // thread 0 writes it again and every thread reads it (no barrier)
  // Float sums by atomics into one shared word, after thread 0 zeroes it and a barrier:
  kFloatSumRounded,  // each thread adds 1 / (t + 3): sums that round, in arrival order (the
                     // executor's "order: " verdict)
  kFloatSumExact,    // each thread adds 1: every partial sum exact, the same in any order
  kFloatSumInTurns,  // each thread adds 1 / (t + 3) in its own turn, a barrier between turns
};

using MakeBuffer = std::function<std::unique_ptr<GuardedMemory>(const std::string& name, int64_t bytes)>;

std::string check_block_sum(const SimtKernels& k, const MakeBuffer& make, int rows, int cols, int threads,
                            uint64_t seed);
std::string check_warp_ops(const SimtKernels& k, const MakeBuffer& make, int blocks, int threads, uint64_t seed);
std::string check_histogram(const SimtKernels& k, const MakeBuffer& make, int n, int blocks, int threads,
                            uint64_t seed);
std::string check_reverse_rows(const SimtKernels& k, const MakeBuffer& make, int rows, int cols, uint64_t seed);
std::string check_barrier_loop(const SimtKernels& k, const MakeBuffer& make, int blocks, int threads, int barriers);
std::string check_neighbour_exchange(const SimtKernels& k, const MakeBuffer& make, int n);

// The plain-loop results the checks compare with (exposed for the benchmark and tests).
std::vector<float> expected_barrier_loop(int blocks, int threads, int barriers);
std::vector<int> expected_neighbour_exchange(int n);

}  // namespace mlacheck::simt_test_kernels
