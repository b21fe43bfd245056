// Small kernels that use every primitive of simt.h, one source for the host, cuda and hip backends.
#include "tests/core/backend/simt_test_kernels.h"

namespace mlacheck::simt_test_kernels::MLA_BACKEND_NS {
namespace {

MLA_KERNEL void block_sum_kernel(const float* in, float* out, int cols) {
  MLA_SHARED(float, partial, simt::kMaxWarpsPerBlock);
  const int tid = static_cast<int>(simt::thread_idx().x), threads = static_cast<int>(simt::block_dim().x);
  const float* row = in + static_cast<std::size_t>(simt::block_idx().x) * cols;
  float v = 0;
  for (int i = tid; i < cols; i += threads) v += row[i];
  v = simt::warp_sum(v);
  if (simt::lane_id() == 0) partial[simt::warp_id()] = v;
  simt::sync_threads();
  if (simt::warp_id() == 0) {
    const int warps = threads / simt::warp_size();
    float w = simt::lane_id() < warps ? partial[simt::lane_id()] : 0.0f;
    w = simt::warp_sum(w);
    if (simt::lane_id() == 0) out[simt::block_idx().x] = w;
  }
}

MLA_KERNEL void warp_ops_kernel(const int* in, int* out, int* down_sum, std::uint64_t* ballot, int n) {
  const int i = static_cast<int>(simt::block_idx().x * simt::block_dim().x + simt::thread_idx().x);
  const int lane = simt::lane_id(), ws = simt::warp_size();
  const int v = in[i];
  int scan = v;
  for (int offset = 1; offset < ws; offset *= 2) {
    const int up = simt::shfl(scan, lane >= offset ? lane - offset : lane);
    if (lane >= offset) scan += up;
  }
  int tree = v;
  for (int offset = ws / 2; offset > 0; offset /= 2) tree += simt::shfl_down(tree, offset);
  out[i] = scan;
  out[n + i] = simt::warp_max(v);
  out[2 * n + i] = simt::shfl_down(v, 3, 8);
  out[3 * n + i] = simt::shfl(v, 2, 16);
  out[4 * n + i] = simt::shfl_xor(v, 5);
  const simt::lane_mask odd = simt::ballot((v & 1) != 0);
  if (lane == 0) {
    const int warp = i / ws;
    down_sum[warp] = tree;
    ballot[warp] = odd;
  }
}

MLA_KERNEL void histogram_kernel(const std::uint8_t* in, int n, unsigned* bins, float* total, int* max_value,
                                 int* claimed) {
  MLA_SHARED(unsigned, local, 256);
  const int tid = static_cast<int>(simt::thread_idx().x), threads = static_cast<int>(simt::block_dim().x);
  for (int b = tid; b < 256; b += threads) local[b] = 0;
  simt::sync_threads();
  const int stride = static_cast<int>(simt::grid_dim().x) * threads;
  for (int i = static_cast<int>(simt::block_idx().x) * threads + tid; i < n; i += stride) {
    simt::atomic_add(&local[in[i]], 1u);
    simt::atomic_add(total, static_cast<float>(in[i]));
    simt::atomic_max(max_value, static_cast<int>(in[i]));
  }
  simt::sync_threads();
  for (int b = tid; b < 256; b += threads) {
    if (local[b] != 0) simt::atomic_add(&bins[b], local[b]);
  }
  if (tid == 0) simt::atomic_cas(claimed, -1, static_cast<int>(simt::block_idx().x));
}

MLA_KERNEL void reverse_rows_kernel(const float* in, float* out, int cols) {
  MLA_DYNAMIC_SHARED(float, tile);
  const int tid = static_cast<int>(simt::thread_idx().x), threads = static_cast<int>(simt::block_dim().x);
  const std::size_t row = static_cast<std::size_t>(simt::block_idx().x) * cols;
  for (int i = tid; i < cols; i += threads) tile[i] = in[row + i];
  simt::sync_threads();
  for (int i = tid; i < cols; i += threads) out[row + i] = tile[cols - 1 - i];
}

MLA_KERNEL void barrier_loop_kernel(float* out, int barriers) {
  MLA_SHARED(float, slot, simt::kMaxThreadsPerBlock);
  const int tid = static_cast<int>(simt::thread_idx().x), threads = static_cast<int>(simt::block_dim().x);
  float acc = static_cast<float>(tid + simt::block_idx().x);
  for (int round = 0; round < barriers; round += 2) {
    slot[tid] = acc;
    simt::sync_threads();
    acc = acc * 0.5f + slot[(tid + 1) % threads];
    simt::sync_threads();
  }
  out[simt::block_idx().x * threads + tid] = acc;
}

MLA_KERNEL void neighbour_exchange_kernel(int* out, bool with_barrier) {
  MLA_SHARED(int, slot, simt::kMaxThreadsPerBlock);
  const int tid = static_cast<int>(simt::thread_idx().x), n = static_cast<int>(simt::block_dim().x);
  slot[tid] = tid * 7 + 1;
  if (with_barrier) simt::sync_threads();
  out[tid] = slot[(tid + 1) % n];
}

MLA_KERNEL void shared_pattern_kernel(int* out, int pattern) {
  MLA_SHARED(int, slot, simt::kMaxThreadsPerBlock);
  MLA_SHARED(float, sum, 1);
  const int tid = static_cast<int>(simt::thread_idx().x), n = static_cast<int>(simt::block_dim().x);
  const int lane = simt::lane_id(), warp_base = tid - lane;
  const int warp_lanes = n - warp_base < simt::warp_size() ? n - warp_base : simt::warp_size();
  switch (pattern) {
    case kExchangeAfterBarrier:
    case kExchangeWithoutBarrier:
      slot[tid] = tid * 7 + 1;
      if (pattern == kExchangeAfterBarrier) simt::sync_threads();
      out[tid] = slot[(tid + 1) % n];
      break;
    case kLaneExchangeAfterSyncWarp:
    case kLaneExchangeAfterShuffle:
      slot[tid] = tid * 7 + 1;
      if (pattern == kLaneExchangeAfterSyncWarp) simt::sync_warp();
      else out[tid] = simt::shfl(tid, 0);
      out[tid] = slot[warp_base + (lane + 1) % warp_lanes];
      break;
    case kSameValueFromEveryThread:
    case kOwnValueFromEveryThread:
      slot[0] = pattern == kSameValueFromEveryThread ? 5 : tid;
      simt::sync_threads();
      out[tid] = slot[0];
      break;
    case kFloatSumRounded:
    case kFloatSumExact:
    case kFloatSumInTurns:
      if (tid == 0) sum[0] = 0.0f;
      simt::sync_threads();
      for (int turn = 0; turn < (pattern == kFloatSumInTurns ? n : 1); ++turn) {
        if (pattern != kFloatSumInTurns || turn == tid) {
          simt::atomic_add(sum.data(), pattern == kFloatSumExact ? 1.0f : 1.0f / static_cast<float>(tid + 3));
        }
        if (pattern == kFloatSumInTurns) simt::sync_threads();
      }
      simt::sync_threads();
      out[tid] = static_cast<int>(sum[0] * 1000.0f);
      break;
    case kAtomicsThenBarrier:
    case kAtomicsThenRead:
      if (tid == 0) slot[0] = 0;
      simt::sync_threads();
      simt::atomic_add(&slot[0], 1);
      if (pattern == kAtomicsThenBarrier) simt::sync_threads();
      out[tid] = slot[0];
      break;
    case kReadThenOverwrite:
      slot[tid] = tid;
      simt::sync_threads();
      out[tid] = slot[(tid + 1) % n];
      slot[tid] = -tid;  // what thread tid - 1 reads, with no barrier between
      break;
    case kRereadThenOverwrite:
      slot[tid] = tid;
      simt::sync_threads();
      out[tid] = slot[(tid + 1) % n];
      out[tid] += slot[(tid + 1) % n];
      slot[tid] = -tid - 1;
      break;
    case kRereadAcrossSyncWarp: {
      const int next = warp_base + (lane + 1) % warp_lanes;
      slot[tid] = tid;
      simt::sync_threads();
      out[tid] = slot[next];
      simt::sync_warp();  // orders the first read before the next lane's write, not the second
      out[tid] += slot[next];
      slot[tid] = -tid - 1;
      break;
    }
    case kTwoLanesRereadAcrossSyncWarp: {
      const int next = warp_base + (lane + 1) % warp_lanes, prev = warp_base + (lane + warp_lanes - 1) % warp_lanes;
      slot[tid] = tid;
      simt::sync_threads();
      out[tid] = slot[next] + slot[prev];  // each slot read by two lanes of one warp
      simt::sync_warp();
      out[tid] += slot[next];  // unordered with the next lane's write below
      slot[tid] = -tid - 1;
      break;
    }
    case kRewrittenAfterWarpsRead:
      if (tid == 0) slot[0] = 1;
      simt::sync_threads();
      out[tid] = slot[0];  // read by every warp: a barrier orders it before the write below
      simt::sync_threads();
      if (tid == 0) slot[0] = 2;
      out[tid] += slot[0];  // the other threads' reads are unordered with thread 0's write
      break;
  }
}

MLA_KERNEL void early_return_barrier_kernel(int* out) {
  const int tid = static_cast<int>(simt::thread_idx().x);
  if (tid >= 16) return;
  simt::sync_threads();
  out[tid] = 1;
}

MLA_KERNEL void split_barrier_kernel(int* out) {
  const int tid = static_cast<int>(simt::thread_idx().x);
  if (tid % 2 != 0) {
    simt::sync_threads();
  } else {
    simt::sync_threads();
  }
  out[tid] = tid;
}

MLA_KERNEL void partial_warp_sum_kernel(float* out) {
  float v = 1.0f;
  if (simt::lane_id() < 16) v = simt::warp_sum(v);
  out[simt::thread_idx().x] = v;
}

MLA_KERNEL void shared_overrun_kernel(int* out) {
  MLA_SHARED(int, small, 8);
  const int tid = static_cast<int>(simt::thread_idx().x);
  small[tid] = tid;
  simt::sync_threads();
  out[tid] = small[tid];
}

MLA_KERNEL void raw_dynamic_overrun_kernel(int* out) {
  MLA_DYNAMIC_SHARED(int, tile);
  const int tid = static_cast<int>(simt::thread_idx().x);
  tile.data()[tid] = tid;  // unchecked: the last thread writes past the declared bytes
  simt::sync_threads();
  out[tid] = tile.data()[tid];
}

// ---- launchers ---------------------------------------------------------------------------------

simt::Dim3 blocks_of(int n) { return simt::Dim3(static_cast<unsigned>(n)); }

int backend_warp_size() {
#if defined(MLA_BACKEND_HOST)
  return simt::host::current_options().warp_size;
#elif defined(MLA_BACKEND_HIP)
  return 64;
#else
  return 32;
#endif
}

void synchronize() {
#if defined(MLA_BACKEND_CUDA)
  simt::detail::check_launch("synchronize", cudaDeviceSynchronize());
#elif defined(MLA_BACKEND_HIP)
  simt::detail::check_launch("synchronize", hipDeviceSynchronize());
#endif
}

void block_sum_default(const float* in, float* out, int rows, int cols, int threads) {
  block_sum(in, out, rows, cols, threads, nullptr);
}

void warp_ops(const int* in, int* out, int* down_sum, std::uint64_t* ballot, int blocks, int threads) {
  MLA_LAUNCH(warp_ops_kernel, (simt::LaunchConfig{blocks_of(blocks), blocks_of(threads)}), in, out, down_sum, ballot,
             blocks * threads);
}

void histogram(const std::uint8_t* in, int n, unsigned* bins, float* total, int* max_value, int* claimed, int blocks,
               int threads) {
  MLA_LAUNCH(histogram_kernel, (simt::LaunchConfig{blocks_of(blocks), blocks_of(threads)}), in, n, bins, total,
             max_value, claimed);
}

void reverse_rows(const float* in, float* out, int rows, int cols, std::size_t dynamic_bytes) {
  const int threads = cols < 256 ? cols : 256;
  MLA_LAUNCH(reverse_rows_kernel, (simt::LaunchConfig{blocks_of(rows), blocks_of(threads), dynamic_bytes}), in, out,
             cols);
}

void barrier_loop(float* out, int blocks, int threads, int barriers) {
  MLA_LAUNCH(barrier_loop_kernel, (simt::LaunchConfig{blocks_of(blocks), blocks_of(threads)}), out, barriers);
}

void neighbour_exchange(int* out, int n, bool with_barrier) {
  MLA_LAUNCH(neighbour_exchange_kernel, (simt::LaunchConfig{simt::Dim3(1), blocks_of(n)}), out, with_barrier);
}

void shared_pattern(int* out, int n, int pattern) {
  MLA_LAUNCH(shared_pattern_kernel, (simt::LaunchConfig{simt::Dim3(1), blocks_of(n)}), out, pattern);
}

void early_return_barrier(int* out, int threads) {
  MLA_LAUNCH(early_return_barrier_kernel, (simt::LaunchConfig{simt::Dim3(1), blocks_of(threads)}), out);
}

void split_barrier(int* out, int threads) {
  MLA_LAUNCH(split_barrier_kernel, (simt::LaunchConfig{simt::Dim3(1), blocks_of(threads)}), out);
}

void partial_warp_sum(float* out, int threads) {
  MLA_LAUNCH(partial_warp_sum_kernel, (simt::LaunchConfig{simt::Dim3(1), blocks_of(threads)}), out);
}

void shared_overrun(int* out, int threads) {
  MLA_LAUNCH(shared_overrun_kernel, (simt::LaunchConfig{simt::Dim3(1), blocks_of(threads)}), out);
}

void raw_dynamic_overrun(int* out, int threads) {
  const std::size_t bytes = (static_cast<std::size_t>(threads) - 1) * sizeof(int);
  MLA_LAUNCH(raw_dynamic_overrun_kernel, (simt::LaunchConfig{simt::Dim3(1), blocks_of(threads), bytes}), out);
}

}  // namespace

void block_sum(const float* in, float* out, int rows, int cols, int threads, simt::Stream stream) {
  MLA_LAUNCH(block_sum_kernel, (simt::LaunchConfig{blocks_of(rows), blocks_of(threads), 0, stream}), in, out, cols);
}

SimtKernels kernels() {
  SimtKernels k{};
#if defined(MLA_BACKEND_HOST)
  k.backend = "host";
#elif defined(MLA_BACKEND_HIP)
  k.backend = "hip";
#else
  k.backend = "cuda";
#endif
  k.warp_size = backend_warp_size;
  k.synchronize = synchronize;
  k.block_sum = block_sum_default;
  k.warp_ops = warp_ops;
  k.histogram = histogram;
  k.reverse_rows = reverse_rows;
  k.barrier_loop = barrier_loop;
  k.neighbour_exchange = neighbour_exchange;
  k.early_return_barrier = early_return_barrier;
  k.split_barrier = split_barrier;
  k.partial_warp_sum = partial_warp_sum;
  k.shared_overrun = shared_overrun;
  k.raw_dynamic_overrun = raw_dynamic_overrun;
  k.shared_pattern = shared_pattern;
  return k;
}

}  // namespace mlacheck::simt_test_kernels::MLA_BACKEND_NS
