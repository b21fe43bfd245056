// Reserved device memory (core/backend/cuda_reserved_buffer.h): a reserved virtual range, physical
// granules mapped where the case stages bytes, guards over those granules only. The fills, the
// snapshot and the comparison run on the device: the granules are 2 MiB each however few bytes a
// case stages in them, and byte loops over them on the host cost a far case tens of milliseconds.
#include "core/backend/cuda_reserved_buffer.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <utility>
#include <cstring>

#include "core/backend/cuda_patterns.h"
#include "core/backend/cuda_runtime.h"
#include "core/error.h"
#include "core/poison.h"
#include "core/reserved_buffer.h"
#include "core/tensor.h"

namespace mlacheck {

namespace {

// The driver entry points used here, found once through the runtime (no libcuda at link time).
struct Driver {
  CUresult (*address_reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) = nullptr;
  CUresult (*address_free)(CUdeviceptr, size_t) = nullptr;
  CUresult (*create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long) = nullptr;
  CUresult (*release)(CUmemGenericAllocationHandle) = nullptr;
  CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) = nullptr;
  CUresult (*unmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = nullptr;
  CUresult (*granularity)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) = nullptr;
};

template <class F>
void find(const char* symbol, F*& fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  cuda::check(cudaGetDriverEntryPointByVersion(symbol, &p, 12000, cudaEnableDefault, &status), symbol);
  MLA_REQUIRE(status == cudaDriverEntryPointSuccess && p != nullptr, "cuda: the driver has no ", symbol);
  fn = reinterpret_cast<F*>(p);
}

const Driver& driver() {
  static const Driver d = [] {
    Driver x;
    find("cuMemAddressReserve", x.address_reserve);
    find("cuMemAddressFree", x.address_free);
    find("cuMemCreate", x.create);
    find("cuMemRelease", x.release);
    find("cuMemMap", x.map);
    find("cuMemUnmap", x.unmap);
    find("cuMemSetAccess", x.set_access);
    find("cuMemGetAllocationGranularity", x.granularity);
    return x;
  }();
  return d;
}

void require(CUresult r, const std::string& name, const char* what) {
  MLA_REQUIRE(r == CUDA_SUCCESS, "reserved device buffer '", name, "': ", what, " failed (CUresult ", int(r), ")");
}

// Physical memory and address ranges kept across buffers, as the allocation caches keep blocks: a
// far case would otherwise reserve 16 GiB and more of address space and create a granule of
// physical memory per backed span, and free them all, every case. Handles by device and size, up to
// 256 MiB of them; ranges by size, up to 8. Never destroyed (the driver may be gone at exit).
class ReservedPool {
 public:
  static ReservedPool& get() {
    static ReservedPool* pool = new ReservedPool;
    return *pool;
  }
  CUresult take_handle(int device, size_t bytes, const CUmemAllocationProp& prop, CUmemGenericAllocationHandle* h) {
    {
      std::lock_guard<std::mutex> lock(m_);
      const auto it = handles_.find({device, bytes});
      if (it != handles_.end()) {
        *h = it->second;
        handles_.erase(it);
        handle_bytes_ -= bytes;
        return CUDA_SUCCESS;
      }
    }
    return driver().create(h, bytes, &prop, 0);
  }
  void give_handle(int device, size_t bytes, CUmemGenericAllocationHandle h) {
    {
      std::lock_guard<std::mutex> lock(m_);
      if (handle_bytes_ + bytes <= kMostHandleBytes) {
        handles_.emplace(std::make_pair(device, bytes), h);
        handle_bytes_ += bytes;
        return;
      }
    }
    driver().release(h);
  }
  CUresult take_range(size_t bytes, size_t alignment, CUdeviceptr* base) {
    {
      std::lock_guard<std::mutex> lock(m_);
      const auto it = ranges_.find(bytes);
      if (it != ranges_.end()) {
        *base = it->second;
        ranges_.erase(it);
        return CUDA_SUCCESS;
      }
    }
    return driver().address_reserve(base, bytes, alignment, 0, 0);
  }
  void give_range(size_t bytes, CUdeviceptr base) {
    {
      std::lock_guard<std::mutex> lock(m_);
      if (ranges_.size() < kMostRanges) {
        ranges_.emplace(bytes, base);
        return;
      }
    }
    driver().address_free(base, bytes);
  }

 private:
  static constexpr size_t kMostHandleBytes = size_t(256) << 20, kMostRanges = 8;
  std::mutex m_;
  std::multimap<std::pair<int, size_t>, CUmemGenericAllocationHandle> handles_;
  size_t handle_bytes_ = 0;
  std::multimap<size_t, CUdeviceptr> ranges_;
};

CUmemAllocationProp pinned_on(int device) {
  CUmemAllocationProp prop;
  std::memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

constexpr int kThreads = 256;

unsigned blocks_for(int64_t bytes) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((bytes + kThreads - 1) / kThreads, 1024)));
}

// Data offsets [begin, end) of a span: the red zone pattern outside [0, size), the poison pattern
// inside it unless only_red.
__global__ void fill_span(uint8_t* data, int64_t begin, int64_t end, int64_t size, cuda::PatternTable red,
                          cuda::PatternTable poison, bool only_red) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = begin + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < end; i += stride) {
    if (i < 0 || i >= size) {
      data[i] = red.byte[i & 0xFF];
    } else if (!only_red) {
      data[i] = poison.byte[i & 0xFF];
    }
  }
}

// One dense output's poison, copied by scatter_poison: `bytes` bytes from `from` (an offset into
// the staged bytes) to data offset `to`.
struct Piece {
  int64_t to, from, bytes;
};

// Copies each piece's bytes from page-locked host memory (read over the bus) into the buffer: a
// block per piece at a time. One launch for every dense output of an arm, where a write of each
// was a synchronous copy (a K-cache insert declares two views per slot).
__global__ void scatter_poison(uint8_t* data, const Piece* pieces, const uint8_t* bytes, int count) {
  for (int k = blockIdx.x; k < count; k += gridDim.x) {
    const Piece p = pieces[k];
    for (int64_t i = threadIdx.x; i < p.bytes; i += blockDim.x) data[p.to + i] = bytes[p.from + i];
  }
}

// The bytes of a span that differ from its snapshot, outside the outputs (in_output: a byte per
// byte, or null for none), added to *t: the count, and the lowest and highest data offsets.
struct Strays {
  unsigned long long count;
  long long first, last;
};
__global__ void compare_span(const uint8_t* now, const uint8_t* was, const uint8_t* in_output, int64_t n,
                             int64_t offset, Strays* t) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  unsigned long long count = 0;
  long long first = LLONG_MAX, last = LLONG_MIN;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    if (now[i] == was[i] || (in_output != nullptr && in_output[i] != 0)) continue;
    ++count;
    first = min(first, static_cast<long long>(offset + i));
    last = max(last, static_cast<long long>(offset + i));
  }
  if (count == 0) return;
  atomicAdd(&t->count, count);
  atomicMin(&t->first, first);
  atomicMax(&t->last, last);
}

}  // namespace

DeviceReservedBuffer::DeviceReservedBuffer(std::string name, int64_t bytes, const std::vector<ByteSpan>& backed,
                                           int64_t red_zone, bool writable)
    : GuardedMemory(std::move(name), bytes, red_zone, writable ? OutputViews::kUnmasked : OutputViews::kNone) {
  const Driver& d = driver();
  int device = 0;
  cuda::check(cudaGetDevice(&device), "cudaGetDevice");
  cuda::check(cudaFree(nullptr), "cudaFree(0)");  // the primary context, current on this thread
  const CUmemAllocationProp prop = pinned_on(device);
  size_t g = 0;
  require(d.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), this->name(), "cuMemGetAllocationGranularity");
  granule_ = static_cast<int64_t>(g);
  backed_ = backed_pages(backed, bytes, red_zone, granule_);
  const int64_t lead = granule_ * ((red_zone + granule_ - 1) / granule_);
  // The range rounded up to a power of two, so that a range given back serves cases of other sizes;
  // the margin after the data only grows.
  const int64_t need = (bytes + granule_ - 1) / granule_ * granule_ + 2 * lead;
  int64_t span = granule_;
  while (span < need) span *= 2;
  reservation_bytes_ = 2 * kMargin + span;
  device_ = device;
  CUdeviceptr base = 0;
  require(ReservedPool::get().take_range(static_cast<size_t>(reservation_bytes_), static_cast<size_t>(granule_), &base),
          this->name(), "cuMemAddressReserve");
  reservation_ = base;
  data_ = reinterpret_cast<uint8_t*>(base) + kMargin + lead;
  CUmemAccessDesc access;
  std::memset(&access, 0, sizeof access);
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  for (const ByteSpan& s : backed_) {
    CUmemGenericAllocationHandle h = 0;
    const CUdeviceptr at = reinterpret_cast<CUdeviceptr>(data_ + s.begin);
    CUresult r = ReservedPool::get().take_handle(device, static_cast<size_t>(s.size()), prop, &h);
    if (r == CUDA_SUCCESS) {
      r = d.map(at, static_cast<size_t>(s.size()), 0, h, 0);
      if (r != CUDA_SUCCESS) ReservedPool::get().give_handle(device, static_cast<size_t>(s.size()), h);
    }
    if (r == CUDA_SUCCESS) {
      handles_.push_back(h);
      r = d.set_access(at, static_cast<size_t>(s.size()), &access, 1);
    }
    if (r != CUDA_SUCCESS) {
      release_all();  // what was mapped so far, and the range
      require(r, this->name(), "mapping a granule");
    }
  }
  // Poison inside the data, the red-zone pattern outside it, as wide as the granules.
  fill(false);
  cuda::check(cudaStreamSynchronize(nullptr), "reserved device buffer: poison");
}

void DeviceReservedBuffer::fill(bool only_red) {
  cuda::require_periodic_patterns();
  static const cuda::PatternTable red = cuda::pattern_table(true), poison = cuda::pattern_table(false);
  for (const ByteSpan& s : backed_) {
    if (only_red && s.begin >= 0 && s.end <= size()) continue;  // no red zone byte in it
    fill_span<<<blocks_for(s.size()), kThreads>>>(data_, s.begin, s.end, size(), red, poison, only_red);
    cuda::check_launch("reserved device buffer: fill_span");
  }
}

DeviceReservedBuffer::~DeviceReservedBuffer() { release_all(); }

void DeviceReservedBuffer::release_all() noexcept {
  if (reservation_ == 0) return;
  const Driver& d = driver();
  // After a sticky fault nothing here works and nothing is kept: the context is lost.
  const bool lost = cudaDeviceSynchronize() != cudaSuccess;
  for (size_t i = 0; i < handles_.size(); ++i) {
    const ByteSpan& s = backed_[i];
    const bool unmapped = d.unmap(reinterpret_cast<CUdeviceptr>(data_ + s.begin), static_cast<size_t>(s.size())) == CUDA_SUCCESS;
    if (unmapped && !lost) {
      ReservedPool::get().give_handle(device_, static_cast<size_t>(s.size()), handles_[i]);
    } else {
      d.release(handles_[i]);
    }
  }
  handles_.clear();
  if (!lost) {
    ReservedPool::get().give_range(static_cast<size_t>(reservation_bytes_), reservation_);
  } else {
    d.address_free(reservation_, static_cast<size_t>(reservation_bytes_));
  }
  reservation_ = 0;
}

void DeviceReservedBuffer::write(int64_t offset, const void* src, int64_t bytes) {
  require_inside(offset, bytes, "write");
  MLA_REQUIRE(inside_backed(backed_, offset, bytes), "reserved device buffer '", name(), "': write of ", bytes,
              " bytes at offset ", offset, " reaches unbacked memory");
  cuda::copy_to_device(data_ + offset, src, static_cast<size_t>(bytes), "reserved device buffer: write");
}

void DeviceReservedBuffer::read(int64_t offset, void* dst, int64_t bytes) const {
  require_inside(offset, bytes, "read");
  MLA_REQUIRE(inside_backed(backed_, offset, bytes), "reserved device buffer '", name(), "': read of ", bytes,
              " bytes at offset ", offset, " reaches unbacked memory");
  cuda::copy_to_host(dst, data_ + offset, static_cast<size_t>(bytes), "reserved device buffer: read");
}

void DeviceReservedBuffer::arm() {
  cuda::check(cudaDeviceSynchronize(), "reserved device buffer: arm");
  fill(true);  // the red zones
  // The output views: marked per backed byte (uploaded again only when the outputs changed: the
  // marking visits every byte of every view), and poisoned through a host copy of each one's span;
  // a view dense over its span is all poison, so only its bytes poisoned once are written.
  bool same_outputs = prepared_outputs_.size() == outputs().size();
  for (size_t i = 0; same_outputs && i < outputs().size(); ++i) same_outputs = prepared_outputs_[i].view == outputs()[i].view;
  if (!same_outputs) {
    const std::vector<uint8_t> in_output = output_bytes(name(), backed_, outputs());
    has_outputs_ = !in_output.empty();
    if (has_outputs_) {
      if (in_output_.bytes() < in_output.size()) in_output_ = cuda::DeviceAllocation(in_output.size());
      cuda::copy_to_device(in_output_.get(), in_output.data(), in_output.size(), "reserved device buffer: output bytes");
    }
    dense_poison_.assign(outputs().size(), {});
    prepared_outputs_ = outputs();
  }
  // Each output in order: a dense one's poison (computed once per set of outputs) joins the pieces
  // of one scatter_poison launch; a gapped one is read, poisoned on the host and written, after the
  // pieces before it landed (views may overlap: the later one's poison wins, as on the host).
  int64_t pieces = 0, staged = 0;
  for (size_t i = 0; i < outputs().size(); ++i) {
    const ByteSpan span = outputs()[i].view.byte_span();
    if (!span.empty() && outputs()[i].view.numel() * outputs()[i].view.element_size() == span.size()) {
      ++pieces, staged += span.size();
    }
  }
  const size_t head = static_cast<size_t>(pieces) * sizeof(Piece);
  if (poison_staging_.bytes() < head + static_cast<size_t>(staged)) {
    poison_staging_ = cuda::PinnedHostAllocation(head + static_cast<size_t>(staged));
  }
  Piece* piece = reinterpret_cast<Piece*>(poison_staging_.data());
  uint8_t* bytes = static_cast<uint8_t*>(poison_staging_.data()) + head;
  int first = 0, next = 0;  // the pieces not yet launched: [first, next)
  int64_t filled = 0;       // staged bytes so far
  const auto launch_pieces = [&] {
    if (next == first) return;
    scatter_poison<<<std::min(next - first, 1024), kThreads>>>(data_, piece + first, bytes, next - first);
    cuda::check_launch("reserved device buffer: scatter_poison");
    first = next;
  };
  std::vector<uint8_t> span_bytes;
  for (size_t i = 0; i < outputs().size(); ++i) {
    const View& v = outputs()[i].view;
    const ByteSpan span = v.byte_span();
    if (span.empty()) continue;
    const bool is_dense = v.numel() * v.element_size() == span.size();
    span_bytes.resize(static_cast<size_t>(span.size()));
    std::vector<uint8_t>& dense = dense_poison_[i];
    if (!is_dense || dense.empty()) {
      if (!is_dense) {  // its gaps keep what they hold: read after the pieces before it landed
        launch_pieces();
        read(span.begin, span_bytes.data(), span.size());
      }
      std::vector<int64_t> shape, strides;
      for (int d = 0; d < v.rank(); ++d) shape.push_back(v.size(d)), strides.push_back(v.stride(d));
      poison_output(HostTensor(span_bytes.data(), View(v.dtype(), shape, strides, v.byte_offset() - span.begin)));
      if (!is_dense) {
        write(span.begin, span_bytes.data(), span.size());
        continue;
      }
      dense = span_bytes;
    }
    std::memcpy(bytes + filled, dense.data(), dense.size());
    piece[next++] = Piece{span.begin, filled, span.size()};
    filled += span.size();
  }
  launch_pieces();
  // The snapshot: every backed byte, in order, copied on the device.
  int64_t total = 0;
  for (const ByteSpan& s : backed_) total += s.size();
  if (snapshot_.bytes() < static_cast<size_t>(total)) snapshot_ = cuda::DeviceAllocation(static_cast<size_t>(total));
  int64_t at = 0;
  for (const ByteSpan& s : backed_) {
    cuda::check(cudaMemcpyAsync(snapshot_.as<uint8_t>() + at, data_ + s.begin, static_cast<size_t>(s.size()),
                                cudaMemcpyDeviceToDevice, nullptr),
                "reserved device buffer: snapshot");
    at += s.size();
  }
  cuda::check(cudaStreamSynchronize(nullptr), "reserved device buffer: arm");
  armed_ = true;
}

GuardReport DeviceReservedBuffer::check() const {
  MLA_REQUIRE(armed_, "reserved device buffer '", name(), "': check() before arm()");
  cuda::check(cudaDeviceSynchronize(), "reserved device buffer: check");
  const Strays none{0, LLONG_MAX, LLONG_MIN};
  cuda::copy_to_device(strays_.get(), &none, sizeof none, "reserved device buffer: check");
  int64_t at = 0;
  for (const ByteSpan& s : backed_) {
    compare_span<<<blocks_for(s.size()), kThreads>>>(data_ + s.begin, snapshot_.as<const uint8_t>() + at,
                                                    has_outputs_ ? in_output_.as<const uint8_t>() + at : nullptr,
                                                    s.size(), s.begin, strays_.as<Strays>());
    cuda::check_launch("reserved device buffer: compare_span");
    at += s.size();
  }
  Strays t{};
  cuda::copy_to_host(&t, strays_.get(), sizeof t, "reserved device buffer: check");
  GuardReport report;
  if (t.count == 0) return report;
  // The first one's bytes: now from the buffer, as armed from the snapshot.
  int64_t index = 0;
  for (const ByteSpan& s : backed_) {
    if (t.first < s.end) {
      index += t.first - s.begin;
      break;
    }
    index += s.size();
  }
  uint8_t now = 0, was = 0;
  read(t.first, &now, 1);
  cuda::copy_to_host(&was, snapshot_.as<const uint8_t>() + index, 1, "reserved device buffer: check");
  report.stray_bytes = static_cast<int64_t>(t.count);
  report.first = describe_stray(t.first, was, now);
  report.last_offset = t.last;
  return report;
}

}  // namespace mlacheck
