// NVTX memory regions for compute-sanitizer (core/backend/cuda_nvtx.h).
#include "core/backend/cuda_nvtx.h"

#include <nvtx3/nvToolsExtMem.h>

namespace mlacheck::cuda {

namespace {

nvtxDomainHandle_t domain() {
  static const nvtxDomainHandle_t d = nvtxDomainCreateA("mlacheck");
  return d;
}

}  // namespace

void set_regions(nvtxMemHeapHandle_t h, const std::vector<NvtxRegion>& regions) {
  nvtxMemHeapReset(domain(), h);
  if (regions.empty()) return;
  std::vector<nvtxMemVirtualRangeDesc_t> ranges;
  ranges.reserve(regions.size());
  for (const NvtxRegion& r : regions) ranges.push_back({r.bytes, r.begin});
  nvtxMemRegionsRegisterBatch_t batch{};
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = sizeof(batch);
  batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  batch.heap = h;
  batch.regionCount = ranges.size();
  batch.regionDescElementSize = sizeof(ranges[0]);
  batch.regionDescElements = ranges.data();
  nvtxMemRegionsRegister(domain(), &batch);
  std::vector<nvtxMemRegionNameDesc_t> names(regions.size());
  for (std::size_t i = 0; i < regions.size(); ++i) {
    names[i].regionRefType = NVTX_MEM_REGION_REF_TYPE_POINTER;
    names[i].nameType = NVTX_MESSAGE_TYPE_ASCII;
    names[i].region.pointer = regions[i].begin;
    names[i].name.ascii = regions[i].name.c_str();
  }
  nvtxMemRegionsNameBatch_t named{};
  named.extCompatID = NVTX_EXT_COMPATID_MEM;
  named.structSize = sizeof(named);
  named.regionCount = names.size();
  named.regionElementSize = sizeof(names[0]);
  named.regionElements = names.data();
  nvtxMemRegionsName(domain(), &named);
}

void NvtxHeap::fence(const void* begin, std::size_t bytes, const std::vector<NvtxRegion>& regions) {
  if (heap_ == nullptr || begin != begin_ || bytes != bytes_) {
    if (heap_ != nullptr) nvtxMemHeapUnregister(domain(), static_cast<nvtxMemHeapHandle_t>(heap_));
    nvtxMemVirtualRangeDesc_t range{bytes, begin};
    nvtxMemHeapDesc_t heap{};
    heap.extCompatID = NVTX_EXT_COMPATID_MEM;
    heap.structSize = sizeof(heap);
    heap.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
    heap.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    heap.typeSpecificDescSize = sizeof(range);
    heap.typeSpecificDesc = &range;
    heap_ = nvtxMemHeapRegister(domain(), &heap);
    begin_ = begin, bytes_ = bytes;
  }
  set_regions(static_cast<nvtxMemHeapHandle_t>(heap_), regions);
}

void NvtxHeap::lift(const std::string& name) {
  if (heap_ != nullptr) set_regions(static_cast<nvtxMemHeapHandle_t>(heap_), {{begin_, bytes_, name}});
}

NvtxHeap& NvtxHeap::operator=(NvtxHeap&& o) noexcept {
  if (this != &o) {
    if (heap_ != nullptr) nvtxMemHeapUnregister(domain(), static_cast<nvtxMemHeapHandle_t>(heap_));
    heap_ = o.heap_, begin_ = o.begin_, bytes_ = o.bytes_;
    o.heap_ = nullptr;
  }
  return *this;
}

NvtxHeap::~NvtxHeap() {
  if (heap_ != nullptr) nvtxMemHeapUnregister(domain(), static_cast<nvtxMemHeapHandle_t>(heap_));
}

}  // namespace mlacheck::cuda
