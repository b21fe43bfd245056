// The guard's CUDA allocator: torch's allocator replaced (torch.cuda.memory.CUDAPluggableAllocator,
// python/mlacheck/guard.py's alloc=True) by one that puts red zones around every block it hands
// out, so a kernel that writes past the end of a tensor (or before its start) writes into bytes
// nobody owns, which the guard finds after the call. torch's own caching allocator packs blocks
// side by side, so the same write would land in a neighbour's bytes or in free memory, where no
// check of the tensor's storage can see it; compute-sanitizer sees it only past the whole segment.
//
// A block: [front red zone, kFront bytes][the tensor's size bytes][tail red zone, at least
// tail_bytes(size)], the zones filled with kRedByte when the block is handed out. Freed blocks are
// cached for reuse on the stream they were freed on (stream order makes that safe; torch's
// record_stream is not honoured: a block used on another stream may be reused early, as the docs
// say). While a captured CUDA graph lives (mlacheck_alloc_graphs > 0) or a stream captures, a freed
// block is not reused but quarantined, filled with kRedByte whole: a replay that writes memory its
// capture freed is found when the graphs are gone (mlacheck_alloc_quarantine_check).
//
// Built into libmlacheck_guard.so with nvcc (MLACHECK_GUARD_CUDA); its C ABI is at the end.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace {

constexpr unsigned char kRedByte = 0xCB;
constexpr size_t kFront = 4096;               // keeps the tensor 4 KiB-aligned (cudaMalloc gives 256)
constexpr size_t kTailMin = size_t{64} << 10;  // at least 64 KiB past every tensor
constexpr size_t kTailMax = size_t{16} << 20;  // and as much as the tensor itself, up to 16 MiB
constexpr size_t kCacheLimit = size_t{4} << 30;  // past it the cache is given back (a pytest-xdist run has a process per worker)

size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }
size_t tail_bytes(size_t size) { return std::max(kTailMin, std::min(round_up(size, 4096), kTailMax)); }
// The whole block for a tensor of size bytes: 4 KiB steps below 1 MiB, 2 MiB steps above.
size_t block_bytes(size_t size) {
  const size_t n = kFront + size + tail_bytes(size);
  return round_up(n, n < (size_t{1} << 20) ? 4096 : (size_t{2} << 20));
}

struct Block {
  char* base = nullptr;
  size_t total = 0;   // bytes of the block
  size_t size = 0;    // the tensor's bytes (user = base + kFront)
  int device = 0;
  cudaStream_t stream = nullptr;
};

struct Tally {
  unsigned long long changed = 0;
  unsigned long long first = ~0ull;
};

std::mutex mu;
std::unordered_map<uintptr_t, Block> live;                                 // by the tensor's pointer
std::map<std::tuple<int, cudaStream_t, size_t>, std::vector<Block>> cache;  // freed: device, stream, total
std::vector<Block> quarantine;                                             // freed while a graph lived
size_t cached = 0;
int graphs = 0;
cudaStream_t side[64] = {};  // per device: fills of blocks made or freed while a stream captures

bool capturing(cudaStream_t s) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(s, &st) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return st != cudaStreamCaptureStatusNone;
}

// While a stream captures: relaxed capture mode for this thread (a cudaMalloc or a fill on another
// stream would otherwise end the capture), and fills on a side stream, waited for at once.
struct Relaxed {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  Relaxed() { cudaThreadExchangeStreamCaptureMode(&mode); }
  ~Relaxed() { cudaThreadExchangeStreamCaptureMode(&mode); }
};

cudaStream_t side_stream(int device) {
  if (device < 0 || device >= 64) return nullptr;
  if (side[device] == nullptr) cudaStreamCreateWithFlags(&side[device], cudaStreamNonBlocking);
  return side[device];
}

// Fills the block's red zones (whole: every byte) on stream s, or on the side stream, waited for.
void fill(const Block& b, bool whole, bool on_side) {
  cudaStream_t s = on_side ? side_stream(b.device) : b.stream;
  if (whole) {
    cudaMemsetAsync(b.base, kRedByte, b.total, s);
  } else {
    cudaMemsetAsync(b.base, kRedByte, kFront, s);
    cudaMemsetAsync(b.base + kFront + b.size, kRedByte, b.total - kFront - b.size, s);
  }
  if (on_side) cudaStreamSynchronize(s);
}

void release_cache() {
  for (auto& [key, blocks] : cache)
    for (const Block& b : blocks) cudaFree(b.base);
  cache.clear();
  cached = 0;
}

__global__ void zone_kernel(const unsigned char* p, unsigned long long n, unsigned long long offset, Tally* t) {
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<unsigned long long>(gridDim.x) * blockDim.x) {
    if (p[i] == kRedByte) continue;
    atomicAdd(&t->changed, 1ull);
    atomicMin(&t->first, offset + i);
  }
}

// Bytes of [p, p + n) that are not kRedByte, the first as offset + its index; on the current device.
Tally scan(const char* p, size_t n, size_t offset, Tally* dev) {
  Tally host;
  if (n == 0) return host;
  cudaMemcpy(dev, &host, sizeof(Tally), cudaMemcpyHostToDevice);
  const unsigned grid = static_cast<unsigned>(std::min<size_t>((n + 255) / 256, 2048));
  zone_kernel<<<grid, 256>>>(reinterpret_cast<const unsigned char*>(p), n, offset, dev);
  cudaMemcpy(&host, dev, sizeof(Tally), cudaMemcpyDeviceToHost);
  return host;
}

Tally* tally_buffer() {
  static Tally* t = nullptr;  // one per process, on the device first used (blocks scanned are device memory)
  static int on = -1;
  int device = 0;
  cudaGetDevice(&device);
  if (t == nullptr || on != device) {
    if (t != nullptr) cudaFree(t);
    t = nullptr;
    if (cudaMalloc(&t, sizeof(Tally)) != cudaSuccess) return nullptr;
    on = device;
  }
  return t;
}

}  // namespace

#define MLACHECK_ABI __attribute__((visibility("default")))

extern "C" {

// torch's CUDAPluggableAllocator alloc: void* (size_t, int device, cudaStream_t).
MLACHECK_ABI void* mlacheck_alloc(size_t size, int device, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu);
  int was = 0;
  cudaGetDevice(&was);
  if (was != device) cudaSetDevice(device);
  const bool in_capture = capturing(stream);
  Block b;
  const size_t total = block_bytes(size);
  auto it = in_capture ? cache.end() : cache.find({device, stream, total});
  if (it != cache.end() && !it->second.empty()) {
    b = it->second.back();
    it->second.pop_back();
    cached -= b.total;
  } else {
    Relaxed relaxed;
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, total);
    if (e != cudaSuccess) {  // out of memory: give the cache back and try once more
      cudaGetLastError();
      release_cache();
      e = cudaMalloc(&p, total);
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      if (was != device) cudaSetDevice(was);
      return nullptr;  // torch raises its out-of-memory error
    }
    b.base = static_cast<char*>(p);
    b.total = total;
  }
  b.size = size;
  b.device = device;
  b.stream = stream;
  {
    Relaxed relaxed;
    fill(b, false, in_capture);
  }
  live[reinterpret_cast<uintptr_t>(b.base + kFront)] = b;
  if (was != device) cudaSetDevice(was);
  return b.base + kFront;
}

// torch's CUDAPluggableAllocator free: void (void*, size_t, int device, cudaStream_t).
MLACHECK_ABI void mlacheck_free(void* ptr, size_t, int device, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = live.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == live.end()) return;
  Block b = it->second;
  live.erase(it);
  int was = 0;
  cudaGetDevice(&was);
  if (was != device) cudaSetDevice(device);
  const bool in_capture = capturing(stream);
  if (graphs > 0 || in_capture) {
    Relaxed relaxed;
    // Whole: any later write to it is a replay writing freed memory. On its stream, after the work
    // that used it (a fill on the side stream could land before a pending kernel's last write).
    fill(b, true, in_capture);
    quarantine.push_back(b);
  } else {
    if (cached + b.total > kCacheLimit) release_cache();
    cache[{b.device, b.stream, b.total}].push_back(b);
    cached += b.total;
  }
  if (was != device) cudaSetDevice(was);
}

// Whether ptr is a tensor this allocator handed out (1) or not (0); for one that is, its red zones
// are scanned after the device is waited for: *changed the bytes that are no longer kRedByte,
// *first the first one's offset from the tensor's start (negative: before it), *size its bytes.
MLACHECK_ABI int mlacheck_alloc_zones(uintptr_t ptr, int64_t* changed, int64_t* first, int64_t* size) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = live.find(ptr);
  if (it == live.end()) return 0;
  const Block& b = it->second;
  int was = 0;
  cudaGetDevice(&was);
  if (was != b.device) cudaSetDevice(b.device);
  cudaDeviceSynchronize();
  Tally* dev = tally_buffer();
  *changed = 0;
  *first = 0;
  *size = static_cast<int64_t>(b.size);
  if (dev != nullptr) {
    const Tally front = scan(b.base, kFront, 0, dev);
    const Tally tail = scan(b.base + kFront + b.size, b.total - kFront - b.size, kFront + b.size, dev);
    *changed = static_cast<int64_t>(front.changed + tail.changed);
    if (front.changed) {
      *first = static_cast<int64_t>(front.first) - static_cast<int64_t>(kFront);
    } else if (tail.changed) {
      *first = static_cast<int64_t>(tail.first) - static_cast<int64_t>(kFront);
    }
  }
  if (was != b.device) cudaSetDevice(was);
  return 1;
}

// Puts the zones of ptr's block back (after a finding, so the next call is judged on its own).
MLACHECK_ABI void mlacheck_alloc_rearm(uintptr_t ptr) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = live.find(ptr);
  if (it == live.end()) return;
  Relaxed relaxed;
  fill(it->second, false, true);
}

// The captured graphs alive: while above 0, freed blocks are quarantined instead of reused.
MLACHECK_ABI void mlacheck_alloc_graphs(int delta) {
  std::lock_guard<std::mutex> lock(mu);
  graphs = std::max(0, graphs + delta);
}

// Scans the quarantined blocks (each must still be kRedByte whole) and, where no graph lives, hands
// them back to the cache. Returns how many were written after their free; *bytes, *block_size and
// *offset tell of the first (its changed bytes, its tensor's size, the first one's offset from the
// tensor's start).
MLACHECK_ABI int mlacheck_alloc_quarantine_check(int64_t* bytes, int64_t* block_size, int64_t* offset) {
  std::lock_guard<std::mutex> lock(mu);
  int written = 0;
  *bytes = *block_size = *offset = 0;
  for (const Block& b : quarantine) {
    cudaSetDevice(b.device);
    cudaDeviceSynchronize();
    Tally* dev = tally_buffer();
    if (dev == nullptr) continue;
    const Tally t = scan(b.base, b.total, 0, dev);
    if (t.changed == 0) continue;
    if (written++ == 0) {
      *bytes = static_cast<int64_t>(t.changed);
      *block_size = static_cast<int64_t>(b.size);
      *offset = static_cast<int64_t>(t.first) - static_cast<int64_t>(kFront);
    }
  }
  if (graphs == 0) {
    for (Block& b : quarantine) {
      cache[{b.device, b.stream, b.total}].push_back(b);
      cached += b.total;
    }
    quarantine.clear();
  }
  return written;
}

}  // extern "C"
