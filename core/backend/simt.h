// The portability header: the one header a kernel file includes, for CUDA, HIP and the host backend.
//
// A kernel file is compiled three times from one source: by nvcc (cuda), by hipcc (hip, gfx9,
// 64-lane warps) and by the host C++ compiler (host: each block run as fibers by host_executor.h).
// It never names a backend, never writes <<<>>>, and reaches every GPU feature through simt::
//
//   #include "core/backend/simt.h"
//   namespace mlacheck::kernels::MLA_BACKEND_NS {          // cuda, hip or host
//   MLA_KERNEL void row_sum(const float* in, float* out, int n) {
//     MLA_SHARED(float, partial, simt::kMaxWarpsPerBlock);
//     float v = 0;
//     for (int i = simt::thread_idx().x; i < n; i += simt::block_dim().x) v += in[i];
//     v = simt::warp_sum(v);
//     ...
//     simt::sync_threads();
//   }
//   void launch_row_sum(const float* in, float* out, int n, simt::Stream stream) {
//     MLA_LAUNCH(row_sum, simt::LaunchConfig{{1}, {256}, 0, stream}, in, out, n);
//   }
//   }
//
// Semantics are CUDA's on every backend (shuffle width rules, source lanes taken modulo width), so
// a kernel gives the same bits on host and on the GPU for the same warp size. Warp collectives are
// whole-warp operations (CUDA's full mask): every lane of the warp must take part.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__HIP__)
#define MLA_BACKEND_HIP 1
#define MLA_BACKEND_NS hip
#include <hip/hip_runtime.h>
#elif defined(__CUDACC__)
#define MLA_BACKEND_CUDA 1
#define MLA_BACKEND_NS cuda
#include <cuda_runtime.h>
#else
#define MLA_BACKEND_HOST 1
#define MLA_BACKEND_NS host
#include "core/backend/host_executor.h"
#endif

// After the runtime headers: hipcc must see its device memcpy before core/hd.h's bit casts use it.
#include "core/backend/dim3.h"
#include "core/fp16.h"
#include "core/fp8.h"

#if defined(MLA_BACKEND_HOST)
#define MLA_KERNEL
#define MLA_DEVICE inline
#else
#define MLA_KERNEL __global__
#define MLA_DEVICE __device__ __forceinline__
#endif

namespace mlacheck::simt {

#if defined(MLA_BACKEND_HOST)
// A host stream: null runs each launch at once; a capturing stream records launches instead.
using Stream = host::Stream*;
#elif defined(MLA_BACKEND_CUDA)
using Stream = cudaStream_t;
#elif defined(MLA_BACKEND_HIP)
using Stream = hipStream_t;
#endif

// A bit per lane; 64 bits so one type serves 32- and 64-lane warps.
using lane_mask = std::uint64_t;
constexpr int kMaxWarpSize = 64;
constexpr int kMinWarpSize = 32;
constexpr int kMaxThreadsPerBlock = 1024;
// Enough slots for one value per warp of any block on any backend.
constexpr int kMaxWarpsPerBlock = kMaxThreadsPerBlock / kMinWarpSize;

// How to launch: grid and block shape, dynamic shared memory bytes, stream (null: the default).
struct LaunchConfig {
  Dim3 grid;
  Dim3 block;
  std::size_t dynamic_shared_bytes = 0;
  Stream stream = nullptr;
};

// ---- indices and sizes -------------------------------------------------------------------------
#if defined(MLA_BACKEND_HOST)
MLA_DEVICE Dim3 thread_idx() { return host::this_thread().thread_idx; }
MLA_DEVICE Dim3 block_idx() { return host::this_thread().block_idx; }
MLA_DEVICE Dim3 block_dim() { return host::this_thread().block_dim; }
MLA_DEVICE Dim3 grid_dim() { return host::this_thread().grid_dim; }
MLA_DEVICE int warp_size() { return host::this_thread().warp_size; }
#else
MLA_DEVICE Dim3 thread_idx() { return Dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
MLA_DEVICE Dim3 block_idx() { return Dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
MLA_DEVICE Dim3 block_dim() { return Dim3(blockDim.x, blockDim.y, blockDim.z); }
MLA_DEVICE Dim3 grid_dim() { return Dim3(gridDim.x, gridDim.y, gridDim.z); }
#if defined(MLA_BACKEND_HIP)
// The wavefront size is a device-compilation macro; the host pass only needs something to parse.
#if defined(__AMDGCN_WAVEFRONT_SIZE)
MLA_DEVICE constexpr int warp_size() { return __AMDGCN_WAVEFRONT_SIZE; }
#else
MLA_DEVICE constexpr int warp_size() { return 64; }
#endif
#else
MLA_DEVICE constexpr int warp_size() { return 32; }
#endif
#endif

// The thread's rank in its block (x fastest), its lane in its warp, and its warp in the block.
MLA_DEVICE unsigned linear_thread_idx() {
  const Dim3 t = thread_idx(), b = block_dim();
  return t.x + b.x * (t.y + b.y * t.z);
}
MLA_DEVICE int lane_id() { return static_cast<int>(linear_thread_idx()) % warp_size(); }
MLA_DEVICE int warp_id() { return static_cast<int>(linear_thread_idx()) / warp_size(); }
MLA_DEVICE unsigned threads_per_block() {
  const Dim3 b = block_dim();
  return b.x * b.y * b.z;
}

// ---- barriers ----------------------------------------------------------------------------------
// Host builds record the call site, so a divergent barrier is reported with its line.
#if defined(MLA_BACKEND_HOST)
inline void sync_threads(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  host::barrier(file, line);
}
inline void sync_warp(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  host::warp_collective(host::Collective::kSyncWarp, 0, 0, file, line);
}
inline void thread_fence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#elif defined(MLA_BACKEND_HIP)
MLA_DEVICE void sync_threads() { __syncthreads(); }
// HIP 5.2 has no __syncwarp: a wavefront executes in lockstep, so a wave barrier (which also orders
// LDS accesses) is the equivalent.
MLA_DEVICE void sync_warp() { __builtin_amdgcn_wave_barrier(); }
MLA_DEVICE void thread_fence() { __threadfence(); }
#else
MLA_DEVICE void sync_threads() { __syncthreads(); }
MLA_DEVICE void sync_warp() { __syncwarp(); }
MLA_DEVICE void thread_fence() { __threadfence(); }
#endif

// ---- warp shuffles -----------------------------------------------------------------------------
// T is a 4- or 8-byte arithmetic type (int, unsigned, float, int64_t, uint64_t, double).
// shfl_xor: the value of lane (lane ^ lane_mask), or the caller's own when that lane lies in a later
//           width-segment.
// shfl_down: the value of lane (lane + delta), or the caller's own past the end of its segment.
// shfl: the value of lane src_lane (taken modulo width) of the caller's segment.
#if defined(MLA_BACKEND_HOST)
namespace detail {
template <class T>
inline T host_shuffle(T v, int src_lane, const char* file, int line) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffle a 4- or 8-byte value");
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = host::warp_collective(host::Collective::kShuffle, bits, src_lane, file, line);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}
}  // namespace detail

template <class T>
inline T shfl_xor(T v, int lane_mask, int width = 0, const char* file = __builtin_FILE(),
                  int line = __builtin_LINE()) {
  if (width == 0) width = warp_size();
  const int lane = lane_id();
  const int segment_end = (lane / width + 1) * width;
  const int src = lane ^ lane_mask;
  return detail::host_shuffle(v, src >= segment_end ? lane : src, file, line);
}
template <class T>
inline T shfl_down(T v, unsigned delta, int width = 0, const char* file = __builtin_FILE(),
                   int line = __builtin_LINE()) {
  if (width == 0) width = warp_size();
  const int lane = lane_id();
  const int in_segment = lane % width + static_cast<int>(delta);
  return detail::host_shuffle(v, in_segment >= width ? lane : lane + static_cast<int>(delta), file, line);
}
template <class T>
inline T shfl(T v, int src_lane, int width = 0, const char* file = __builtin_FILE(),
              int line = __builtin_LINE()) {
  if (width == 0) width = warp_size();
  const int lane = lane_id();
  return detail::host_shuffle(v, lane / width * width + (src_lane & (width - 1)), file, line);
}
inline lane_mask ballot(bool pred, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return host::warp_collective(host::Collective::kBallot, pred ? 1 : 0, 0, file, line);
}
#elif defined(MLA_BACKEND_HIP)
// HIP 5.2 has only the mask-less forms; the whole wavefront takes part, as the full mask says.
template <class T>
MLA_DEVICE T shfl_xor(T v, int lane_mask, int width = warp_size()) {
  return __shfl_xor(v, lane_mask, width);
}
template <class T>
MLA_DEVICE T shfl_down(T v, unsigned delta, int width = warp_size()) {
  return __shfl_down(v, delta, width);
}
template <class T>
MLA_DEVICE T shfl(T v, int src_lane, int width = warp_size()) {
  return __shfl(v, src_lane & (width - 1), width);  // CUDA's modulo rule; HIP would cross segments
}
MLA_DEVICE lane_mask ballot(bool pred) { return __ballot(pred); }
#else
template <class T>
MLA_DEVICE T shfl_xor(T v, int lane_mask, int width = warp_size()) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask, width);
}
template <class T>
MLA_DEVICE T shfl_down(T v, unsigned delta, int width = warp_size()) {
  return __shfl_down_sync(0xffffffffu, v, delta, width);
}
template <class T>
MLA_DEVICE T shfl(T v, int src_lane, int width = warp_size()) {
  return __shfl_sync(0xffffffffu, v, src_lane, width);
}
MLA_DEVICE lane_mask ballot(bool pred) { return __ballot_sync(0xffffffffu, pred); }
#endif

// Host builds pass the caller's file and line down, so a fault names the kernel's line, not this
// header's.
#if defined(MLA_BACKEND_HOST)
#define MLA_SITE_PARAMS , const char *file = __builtin_FILE(), int line = __builtin_LINE()
#define MLA_SITE_ARGS , file, line
#else
#define MLA_SITE_PARAMS
#define MLA_SITE_ARGS
#endif

MLA_DEVICE bool warp_any(bool pred MLA_SITE_PARAMS) { return ballot(pred MLA_SITE_ARGS) != 0; }
MLA_DEVICE bool warp_all(bool pred MLA_SITE_PARAMS) {
  const lane_mask full = warp_size() == 64 ? ~lane_mask(0) : (lane_mask(1) << warp_size()) - 1;
  return ballot(pred MLA_SITE_ARGS) == full;
}

// Butterfly reductions: every lane gets the result, and the order of operations is the same on
// every backend, so float sums agree bit for bit for the same warp size.
template <class T>
MLA_DEVICE T warp_sum(T v MLA_SITE_PARAMS) {
  for (int offset = warp_size() / 2; offset > 0; offset /= 2) v += shfl_xor(v, offset, warp_size() MLA_SITE_ARGS);
  return v;
}
template <class T>
MLA_DEVICE T warp_max(T v MLA_SITE_PARAMS) {
  for (int offset = warp_size() / 2; offset > 0; offset /= 2) {
    const T other = shfl_xor(v, offset, warp_size() MLA_SITE_ARGS);
    v = other > v ? other : v;
  }
  return v;
}
template <class T>
MLA_DEVICE T warp_min(T v MLA_SITE_PARAMS) {
  for (int offset = warp_size() / 2; offset > 0; offset /= 2) {
    const T other = shfl_xor(v, offset, warp_size() MLA_SITE_ARGS);
    v = other < v ? other : v;
  }
  return v;
}

// ---- atomics on 32-bit global or shared memory; each returns the old value ----------------------
#if defined(MLA_BACKEND_HOST)
// Blocks may run on several host threads at once, so these are real atomics.
// Each tells the shared-memory hazard checks first (nothing happens there for global memory).
inline int atomic_add(int* p, int v) {
  host::shared_atomic(p, sizeof *p);
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
inline unsigned atomic_add(unsigned* p, unsigned v) {
  host::shared_atomic(p, sizeof *p);
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
inline int atomic_cas(int* p, int expected, int desired) {
  host::shared_atomic(p, sizeof *p);
  __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return expected;
}
inline unsigned atomic_cas(unsigned* p, unsigned expected, unsigned desired) {
  host::shared_atomic(p, sizeof *p);
  __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return expected;
}
// A float add rounds unless old + v is exact; a shared sum of rounded adds from threads in no fixed
// order has last bits that depend on which arrives first (the executor's "order: " verdict).
inline float atomic_add(float* p, float v) {
  std::uint32_t* word = reinterpret_cast<std::uint32_t*>(p);
  std::uint32_t old = __atomic_load_n(word, __ATOMIC_RELAXED);
  float sum = 0.0f;
  for (;;) {
    sum = bits_float(old) + v;
    if (__atomic_compare_exchange_n(word, &old, float_bits(sum), false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) break;
  }
  const double exact = static_cast<double>(bits_float(old)) + static_cast<double>(v);
  host::shared_atomic(p, sizeof *p, exact - exact == 0.0 && exact != static_cast<double>(sum));
  return bits_float(old);
}
template <class T>
inline T host_atomic_max(T* p, T v) {
  host::shared_atomic(p, sizeof *p);
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}
inline int atomic_max(int* p, int v) { return host_atomic_max(p, v); }
inline unsigned atomic_max(unsigned* p, unsigned v) { return host_atomic_max(p, v); }
#else
MLA_DEVICE int atomic_add(int* p, int v) { return atomicAdd(p, v); }
MLA_DEVICE unsigned atomic_add(unsigned* p, unsigned v) { return atomicAdd(p, v); }
MLA_DEVICE float atomic_add(float* p, float v) { return atomicAdd(p, v); }
MLA_DEVICE int atomic_max(int* p, int v) { return atomicMax(p, v); }
MLA_DEVICE unsigned atomic_max(unsigned* p, unsigned v) { return atomicMax(p, v); }
MLA_DEVICE int atomic_cas(int* p, int expected, int desired) { return atomicCAS(p, expected, desired); }
MLA_DEVICE unsigned atomic_cas(unsigned* p, unsigned expected, unsigned desired) {
  return atomicCAS(p, expected, desired);
}
#endif

// ---- conversions (core's codecs; bit-exact on every backend) -----------------------------------
MLA_DEVICE float fp8_e4m3_to_float(std::uint8_t c) { return ::mlacheck::fp8_e4m3_to_float(c); }
MLA_DEVICE std::uint8_t float_to_fp8_e4m3(float f) { return ::mlacheck::float_to_fp8_e4m3(f); }
MLA_DEVICE float bf16_to_float(std::uint16_t h) { return ::mlacheck::bf16_to_float(h); }
MLA_DEVICE std::uint16_t float_to_bf16(float f) { return ::mlacheck::float_to_bf16(f); }
MLA_DEVICE float ue8m0_to_float(std::uint8_t c) { return ::mlacheck::ue8m0_to_float(c); }

// ---- shared memory -----------------------------------------------------------------------------
#if defined(MLA_BACKEND_HOST)
// An element of a shared array on the host: reading it (converting to T) and writing it (assigning)
// go through the executor's hazard checks (host::Options::check_shared) for 4- and 8-byte elements.
// Use it as the T it stands for: `T v = s[i]`, `s[i] = v`, `s[i] += v`, `&s[i]` for an atomic.
// Not `auto v = s[i]`: that keeps the reference, and reads when v is used, not there.
template <class T>
class SharedRef {
 public:
  SharedRef(T* p, const char* name, std::size_t index) : p_(p), name_(name), index_(index) {}
  operator T() const {
    if constexpr (kChecked) host::shared_read(p_, sizeof(T), name_, index_);
    return *p_;
  }
  const SharedRef& operator=(const T& v) const {
    if constexpr (kChecked) host::shared_write(p_, sizeof(T), name_, index_, std::memcmp(p_, &v, sizeof(T)) == 0);
    *p_ = v;
    return *this;
  }
  const SharedRef& operator=(const SharedRef& other) const { return *this = static_cast<T>(other); }
  template <class U>
  const SharedRef& operator+=(const U& v) const { return *this = static_cast<T>(static_cast<T>(*this) + v); }
  template <class U>
  const SharedRef& operator-=(const U& v) const { return *this = static_cast<T>(static_cast<T>(*this) - v); }
  template <class U>
  const SharedRef& operator*=(const U& v) const { return *this = static_cast<T>(static_cast<T>(*this) * v); }
  template <class U>
  const SharedRef& operator/=(const U& v) const { return *this = static_cast<T>(static_cast<T>(*this) / v); }
  template <class U>
  const SharedRef& operator|=(const U& v) const { return *this = static_cast<T>(static_cast<T>(*this) | v); }
  template <class U>
  const SharedRef& operator&=(const U& v) const { return *this = static_cast<T>(static_cast<T>(*this) & v); }
  const SharedRef& operator++() const { return *this += 1; }
  T operator++(int) const {
    const T old = *this;
    *this = static_cast<T>(old + 1);
    return old;
  }
  // The element's address, for an atomic (which simt's host atomics report to the checks themselves).
  T* operator&() const { return p_; }

 private:
  static constexpr bool kChecked = sizeof(T) % 4 == 0;  // the checks keep a word per 4 bytes
  T* p_;
  const char* name_;
  std::size_t index_;
};
#endif

// A shared-memory array. On the host every access is bounds-checked and an access past the array
// (for dynamic shared memory: past the bytes the launch declared) is reported with the block and
// thread, and every element access goes through the hazard checks (SharedRef); on a GPU it is a
// bare pointer.
template <class T>
class shared_array {
 public:
#if defined(MLA_BACKEND_HOST)
  using reference = SharedRef<T>;
#else
  using reference = T&;
#endif
  MLA_DEVICE shared_array(T* data, std::size_t count, const char* name) : data_(data), count_(count) {
#if defined(MLA_BACKEND_HOST)
    name_ = name;
#else
    (void)name;
#endif
  }
  MLA_DEVICE reference operator[](std::size_t i) const {
#if defined(MLA_BACKEND_HOST)
    if (i >= count_) host::shared_out_of_bounds(name_, i, count_, sizeof(T));
    return SharedRef<T>(data_ + i, name_, i);
#else
    return data_[i];
#endif
  }
  MLA_DEVICE T* data() const { return data_; }
  MLA_DEVICE std::size_t size() const { return count_; }
#if defined(MLA_BACKEND_HOST)
  // Elements [i, i + n) for one access (load4, store4): bounds-checked, and reported to the hazard
  // checks once for all of them; write: as a write (same_value: every byte stays as it was).
  T* checked_span(std::size_t i, std::size_t n, bool write, const void* value = nullptr) const {
    if (i + n > count_) host::shared_out_of_bounds(name_, i + n - 1, count_, sizeof(T));
    if constexpr (sizeof(T) % 4 == 0) {
      if (write) host::shared_write(data_ + i, n * sizeof(T), name_, i, std::memcmp(data_ + i, value, n * sizeof(T)) == 0);
      else host::shared_read(data_ + i, n * sizeof(T), name_, i);
    }
    return data_ + i;
  }
#endif

 private:
  T* data_;
  std::size_t count_;
#if defined(MLA_BACKEND_HOST)
  const char* name_ = nullptr;
#endif
};

// Four consecutive floats of shared memory at a 16-byte-aligned index: one vector access on a GPU,
// one bounds-checked and race-checked access of 16 bytes on the host.
struct Float4 {
  float x, y, z, w;
};
MLA_DEVICE Float4 load4(const shared_array<float>& s, std::size_t at) {
#if defined(MLA_BACKEND_HOST)
  const float* p = s.checked_span(at, 4, false);
  return {p[0], p[1], p[2], p[3]};
#else
  const float4 v = *reinterpret_cast<const float4*>(s.data() + at);
  return {v.x, v.y, v.z, v.w};
#endif
}
MLA_DEVICE void store4(const shared_array<float>& s, std::size_t at, Float4 v) {
#if defined(MLA_BACKEND_HOST)
  const float value[4] = {v.x, v.y, v.z, v.w};
  std::memcpy(s.checked_span(at, 4, true, value), value, sizeof value);
#else
  *reinterpret_cast<float4*>(s.data() + at) = make_float4(v.x, v.y, v.z, v.w);
#endif
}

#if !defined(MLA_BACKEND_HOST)
// The dynamic shared memory size of this launch, from the %dynamic_smem_size register (CUDA); HIP
// has no such register, so dynamic arrays there are unbounded (they are unchecked on a GPU anyway).
MLA_DEVICE std::size_t dynamic_shared_bytes() {
#if defined(MLA_BACKEND_CUDA) && defined(__CUDA_ARCH__)
  unsigned bytes;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
  return bytes;
#else
  return SIZE_MAX;
#endif
}
#endif

}  // namespace mlacheck::simt

// MLA_SHARED(T, name, count): a block-wide shared array of count T's (static shared memory).
// MLA_DYNAMIC_SHARED(T, name): the launch's dynamic shared memory as an array of T; one per kernel
// (carve several arrays out of it by hand).
#if defined(MLA_BACKEND_HOST)
#define MLA_SHARED(T, name, count) \
  ::mlacheck::simt::shared_array<T> name(::mlacheck::simt::host::static_shared<T>(count, #name), count, #name)
#define MLA_DYNAMIC_SHARED(T, name)                                                                  \
  ::mlacheck::simt::shared_array<T> name(::mlacheck::simt::host::dynamic_shared<T>(),               \
                                         ::mlacheck::simt::host::dynamic_shared_bytes() / sizeof(T), \
                                         #name)
#else
#define MLA_SHARED(T, name, count)      \
  __shared__ T name##_storage_[count]; \
  ::mlacheck::simt::shared_array<T> name(name##_storage_, count, #name)
#define MLA_DYNAMIC_SHARED(T, name)                                                                \
  extern __shared__ __align__(16) unsigned char mla_dynamic_shared_[];                             \
  ::mlacheck::simt::shared_array<T> name(reinterpret_cast<T*>(mla_dynamic_shared_),                \
                                         ::mlacheck::simt::dynamic_shared_bytes() / sizeof(T), #name)
#endif

// MLA_LAUNCH(kernel, config, args...): launches kernel with config. On a GPU a launch error throws
// (mlacheck::Error) naming the kernel; on the host the launch runs to completion before returning
// (or is recorded, when its stream is capturing) and a divergent barrier, a warp collective with
// inactive lanes or a shared-memory overrun throws simt::host::KernelFault with block and thread.
#if defined(MLA_BACKEND_HOST)
#define MLA_LAUNCH(kernel, config, ...) \
  ::mlacheck::simt::host::launch(#kernel, config, [=] { kernel(__VA_ARGS__); })
#elif defined(MLA_BACKEND_HIP)
#define MLA_LAUNCH(kernel, config, ...)                                                            \
  do {                                                                                             \
    const ::mlacheck::simt::LaunchConfig mla_cfg_ = (config);                                      \
    hipLaunchKernelGGL(kernel, dim3(mla_cfg_.grid.x, mla_cfg_.grid.y, mla_cfg_.grid.z),            \
                       dim3(mla_cfg_.block.x, mla_cfg_.block.y, mla_cfg_.block.z),                 \
                       mla_cfg_.dynamic_shared_bytes, mla_cfg_.stream, __VA_ARGS__);               \
    ::mlacheck::simt::detail::check_launch(#kernel, hipGetLastError());                            \
  } while (0)
namespace mlacheck::simt::detail {
void check_launch(const char* kernel, hipError_t e);
}
#else
#define MLA_LAUNCH(kernel, config, ...)                                                                 \
  do {                                                                                                  \
    const ::mlacheck::simt::LaunchConfig mla_cfg_ = (config);                                           \
    ::mlacheck::simt::detail::prepare_launch(reinterpret_cast<const void*>(&kernel),                    \
                                             mla_cfg_.dynamic_shared_bytes, #kernel);                   \
    kernel<<<dim3(mla_cfg_.grid.x, mla_cfg_.grid.y, mla_cfg_.grid.z),                                   \
             dim3(mla_cfg_.block.x, mla_cfg_.block.y, mla_cfg_.block.z), mla_cfg_.dynamic_shared_bytes, \
             mla_cfg_.stream>>>(__VA_ARGS__);                                                           \
    ::mlacheck::simt::detail::check_launch(#kernel, cudaGetLastError());                               \
  } while (0)
namespace mlacheck::simt::detail {
// Opts the kernel in to more than 48 KiB of dynamic shared memory when the launch asks for it.
void prepare_launch(const void* kernel, std::size_t dynamic_shared_bytes, const char* name);
// Throws mlacheck::Error naming the kernel when the launch failed.
void check_launch(const char* kernel, cudaError_t e);
}  // namespace mlacheck::simt::detail
#endif
