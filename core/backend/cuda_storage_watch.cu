#include "core/backend/cuda_storage_watch.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>

#include "core/error.h"

namespace mlacheck::watch_cuda {
namespace {

void ok(cudaError_t e, const char* what) {
  MLA_REQUIRE(e == cudaSuccess, "storage watch: ", what, ": ", cudaGetErrorString(e));
}

__device__ uint64_t mix(uint64_t w, uint64_t pos, uint64_t n) {
  uint64_t h = (w ^ (pos * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
  h ^= h >> 31;
  return h * 0x94D049BB133111EBull + n;
}

// One thread block per storage block; each thread sums its words, then the block adds them up.
__global__ void sums_kernel(const uint8_t* base, int64_t bytes, int64_t wb, int64_t we, uint64_t* sums, int64_t block) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * block;
  const int64_t e = b + block < bytes ? b + block : bytes;
  uint64_t s = 0;
  for (int64_t i = b + 8 * static_cast<int64_t>(threadIdx.x); i < e; i += 8 * static_cast<int64_t>(blockDim.x)) {
    uint64_t w = 0;
    int64_t n = 0;
    for (int64_t k = 0; k < 8 && i + k < e; ++k) {
      if (i + k >= wb && i + k < we) continue;  // the exact window is compared byte for byte
      w |= static_cast<uint64_t>(base[i + k]) << (8 * k);
      ++n;
    }
    if (n > 0) s += mix(w, static_cast<uint64_t>(i), static_cast<uint64_t>(n));
  }
  for (int off = 16; off > 0; off /= 2) s += __shfl_down_sync(0xffffffffu, s, off);
  __shared__ uint64_t warp_sums[32];
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint64_t t = 0;
    for (unsigned i = 0; i < blockDim.x / 32; ++i) t += warp_sums[i];
    sums[blockIdx.x] = t;
  }
}

__global__ void compare_kernel(const uint8_t* base, const uint8_t* snap, int64_t wb, int64_t we,
                               const uint64_t* writable, Tally* tally) {
  const int64_t n = we - wb;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (base[wb + i] == snap[i]) continue;
    if ((writable[i >> 6] >> (i & 63)) & 1u) continue;
    atomicAdd(&tally->changed, 1ull);
    atomicMin(&tally->first, static_cast<unsigned long long>(wb + i));
  }
}

__global__ void compare_sums_kernel(const uint64_t* sums, const uint64_t* was, int64_t blocks, Tally* tally) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < blocks;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (sums[i] == was[i]) continue;
    atomicAdd(&tally->blocks, 1ull);
    atomicMin(&tally->first_block, static_cast<unsigned long long>(i));
  }
}

}  // namespace

void use_device_of(const void* p) {
  cudaPointerAttributes a{};
  ok(cudaPointerGetAttributes(&a, p), "cudaPointerGetAttributes");
  MLA_REQUIRE(a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged,
              "storage watch: the storage is not CUDA device memory");
  ok(cudaSetDevice(a.device), "cudaSetDevice");
  ok(cudaDeviceSynchronize(), "waiting for the device");
}

// Device memory is kept for the next watch (a guarded test calls one op after another): a
// cudaMalloc and cudaFree per call cost more than the watch's kernels. Blocks are rounded up to a
// power of two and at most 1 GiB is kept; a block is reused on the device it was made on.
namespace {
struct Cached {
  void* p;
  int device;
};
std::mutex cache_mutex;
std::multimap<size_t, Cached> cache;  // free blocks by size
std::map<void*, std::pair<size_t, int>> live;  // blocks handed out: size, device
size_t cached_bytes = 0;
constexpr size_t kCacheLimit = size_t{1} << 30;
size_t rounded(int64_t bytes) {
  size_t n = 256;
  while (n < static_cast<size_t>(bytes)) n *= 2;
  return n;
}
}  // namespace

void* alloc(int64_t bytes) {
  const size_t n = rounded(bytes);
  int device = 0;
  ok(cudaGetDevice(&device), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(cache_mutex);
  for (auto it = cache.lower_bound(n); it != cache.end() && it->first == n; ++it) {
    if (it->second.device != device) continue;
    void* p = it->second.p;
    cached_bytes -= n;
    cache.erase(it);
    live[p] = {n, device};
    return p;
  }
  void* p = nullptr;
  ok(cudaMalloc(&p, n), "cudaMalloc");
  live[p] = {n, device};
  return p;
}
void release(void* p) {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(cache_mutex);
  auto it = live.find(p);
  if (it == live.end()) return;
  const auto [n, device] = it->second;
  live.erase(it);
  if (cached_bytes + n > kCacheLimit) {
    cudaFree(p);
    return;
  }
  cache.insert({n, {p, device}});
  cached_bytes += n;
}
void copy_to_device(void* dst, const void* src, int64_t bytes) {
  if (bytes > 0) ok(cudaMemcpy(dst, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice), "cudaMemcpy to the device");
}
void copy_to_host(void* dst, const void* src, int64_t bytes) {
  if (bytes > 0) ok(cudaMemcpy(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
}
void copy_on_device(void* dst, const void* src, int64_t bytes) {
  if (bytes > 0) ok(cudaMemcpy(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice), "cudaMemcpy on the device");
}

void block_sums(const uint8_t* base, int64_t bytes, int64_t wb, int64_t we, uint64_t* sums, int64_t block) {
  const int64_t blocks = (bytes + block - 1) / block;
  if (blocks == 0) return;
  sums_kernel<<<static_cast<unsigned>(blocks), 256>>>(base, bytes, wb, we, sums, block);
  ok(cudaGetLastError(), "the checksum kernel");
  ok(cudaDeviceSynchronize(), "the checksum kernel");
}

Tally compare(const uint8_t* base, const uint8_t* snap, int64_t wb, int64_t we, const uint64_t* writable,
              const uint64_t* sums, const uint64_t* was, int64_t blocks) {
  Tally host;
  auto* t = static_cast<Tally*>(alloc(sizeof(Tally)));
  copy_to_device(t, &host, sizeof(Tally));
  if (we > wb) {
    const int64_t n = we - wb;
    const unsigned grid = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 4096));
    compare_kernel<<<grid, 256>>>(base, snap, wb, we, writable, t);
    ok(cudaGetLastError(), "the compare kernel");
  }
  if (blocks > 0) {
    compare_sums_kernel<<<static_cast<unsigned>(std::min<int64_t>((blocks + 255) / 256, 4096)), 256>>>(sums, was,
                                                                                                     blocks, t);
    ok(cudaGetLastError(), "the checksum compare kernel");
  }
  ok(cudaDeviceSynchronize(), "the compare kernels");
  copy_to_host(&host, t, sizeof(Tally));
  release(t);
  return host;
}

}  // namespace mlacheck::watch_cuda
