// Reserved device memory (core/backend/cuda_reserved_buffer.h): a reserved virtual range, physical
// granules mapped where the case stages bytes, guards over those granules only.
#include "core/backend/cuda_reserved_buffer.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>

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

CUmemAllocationProp pinned_on(int device) {
  CUmemAllocationProp prop;
  std::memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
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
  const int64_t span = (bytes + granule_ - 1) / granule_ * granule_ + 2 * lead;
  reservation_bytes_ = 2 * kMargin + span;
  CUdeviceptr base = 0;
  require(d.address_reserve(&base, static_cast<size_t>(reservation_bytes_), static_cast<size_t>(granule_), 0, 0),
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
    CUresult r = d.create(&h, static_cast<size_t>(s.size()), &prop, 0);
    if (r == CUDA_SUCCESS) {
      r = d.map(at, static_cast<size_t>(s.size()), 0, h, 0);
      if (r != CUDA_SUCCESS) d.release(h);
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
  std::vector<uint8_t> bytes_of;
  for (const ByteSpan& s : backed_) {
    bytes_of.resize(static_cast<size_t>(s.size()));
    for (int64_t i = s.begin; i < s.end; ++i) {
      bytes_of[static_cast<size_t>(i - s.begin)] = i < 0 || i >= size() ? red_zone_byte(i) : poison_byte(i);
    }
    cuda::check(cudaMemcpy(data_ + s.begin, bytes_of.data(), bytes_of.size(), cudaMemcpyHostToDevice),
                "reserved device buffer: poison");
  }
}

DeviceReservedBuffer::~DeviceReservedBuffer() { release_all(); }

void DeviceReservedBuffer::release_all() noexcept {
  if (reservation_ == 0) return;
  const Driver& d = driver();
  cudaDeviceSynchronize();
  for (size_t i = 0; i < handles_.size(); ++i) {
    const ByteSpan& s = backed_[i];
    d.unmap(reinterpret_cast<CUdeviceptr>(data_ + s.begin), static_cast<size_t>(s.size()));
    d.release(handles_[i]);
  }
  handles_.clear();
  d.address_free(reservation_, static_cast<size_t>(reservation_bytes_));
  reservation_ = 0;
}

void DeviceReservedBuffer::write(int64_t offset, const void* src, int64_t bytes) {
  require_inside(offset, bytes, "write");
  MLA_REQUIRE(inside_backed(backed_, offset, bytes), "reserved device buffer '", name(), "': write of ", bytes,
              " bytes at offset ", offset, " reaches unbacked memory");
  if (bytes > 0) {
    cuda::check(cudaMemcpy(data_ + offset, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice),
                "reserved device buffer: write");
  }
}

void DeviceReservedBuffer::read(int64_t offset, void* dst, int64_t bytes) const {
  require_inside(offset, bytes, "read");
  MLA_REQUIRE(inside_backed(backed_, offset, bytes), "reserved device buffer '", name(), "': read of ", bytes,
              " bytes at offset ", offset, " reaches unbacked memory");
  if (bytes > 0) {
    cuda::check(cudaMemcpy(dst, data_ + offset, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost),
                "reserved device buffer: read");
  }
}

void DeviceReservedBuffer::paint_red_zones() {
  std::vector<uint8_t> red;
  for (const ByteSpan& s : backed_) {
    for (const ByteSpan& part : {ByteSpan{s.begin, std::min<int64_t>(s.end, 0)}, ByteSpan{std::max(s.begin, size()), s.end}}) {
      if (part.empty()) continue;
      red.resize(static_cast<size_t>(part.size()));
      for (int64_t i = part.begin; i < part.end; ++i) red[static_cast<size_t>(i - part.begin)] = red_zone_byte(i);
      cuda::check(cudaMemcpy(data_ + part.begin, red.data(), red.size(), cudaMemcpyHostToDevice),
                  "reserved device buffer: red zones");
    }
  }
}

void DeviceReservedBuffer::arm() {
  cuda::check(cudaDeviceSynchronize(), "reserved device buffer: arm");
  paint_red_zones();
  // The output views: marked per backed byte, and poisoned through a host copy of each one's span.
  in_output_ = output_bytes(name(), backed_, outputs());
  std::vector<uint8_t> span_bytes;
  for (const NamedView& o : outputs()) {
    const ByteSpan span = o.view.byte_span();
    if (span.empty()) continue;
    span_bytes.resize(static_cast<size_t>(span.size()));
    read(span.begin, span_bytes.data(), span.size());
    std::vector<int64_t> shape, strides;
    for (int d = 0; d < o.view.rank(); ++d) shape.push_back(o.view.size(d)), strides.push_back(o.view.stride(d));
    poison_output(HostTensor(span_bytes.data(), View(o.view.dtype(), shape, strides, o.view.byte_offset() - span.begin)));
    write(span.begin, span_bytes.data(), span.size());
  }
  snapshot_.clear();
  for (const ByteSpan& s : backed_) {
    const size_t at = snapshot_.size();
    snapshot_.resize(at + static_cast<size_t>(s.size()));
    cuda::check(cudaMemcpy(snapshot_.data() + at, data_ + s.begin, static_cast<size_t>(s.size()), cudaMemcpyDeviceToHost),
                "reserved device buffer: snapshot");
  }
  armed_ = true;
}

GuardReport DeviceReservedBuffer::check() const {
  MLA_REQUIRE(armed_, "reserved device buffer '", name(), "': check() before arm()");
  cuda::check(cudaDeviceSynchronize(), "reserved device buffer: check");
  GuardReport report;
  std::vector<uint8_t> now;
  size_t at = 0;
  for (const ByteSpan& s : backed_) {
    now.resize(static_cast<size_t>(s.size()));
    cuda::check(cudaMemcpy(now.data(), data_ + s.begin, now.size(), cudaMemcpyDeviceToHost), "reserved device buffer: check");
    if (in_output_.empty()) {
      tally_changes(report, s.begin, snapshot_.data() + at, now.data(), s.size());
    } else {
      tally_changes_outside(report, s.begin, snapshot_.data() + at, now.data(), s.size(), in_output_.data() + at);
    }
    at += now.size();
  }
  return report;
}

}  // namespace mlacheck
