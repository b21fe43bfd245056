// Reserved device memory: the CUDA implementation of reserved guarded memory (core/reserved_buffer.h).
//
// A virtual address range is reserved for the whole allocation and 8 GiB on either side
// (cuMemAddressReserve), and only the granules holding the backed ranges get physical memory
// (cuMemCreate + cuMemMap, 2 MiB granules on current GPUs; both the granules and the ranges are
// kept for later buffers when one is destroyed, unmapped). A kernel that touches any other byte,
// inside the allocation or in its margins (where an offset wrapped to 32 bits lands), faults with
// an illegal address: a sticky fault, which the suite's child process turns into FAIL `crashed`
// with the case saved. The backed bytes are guarded like an input: poisoned where the case stages
// nothing, snapshotted by arm() and compared by check(), all on the device.
//
// The driver API is reached through cudaGetDriverEntryPointByVersion, so nothing links libcuda.
// Not lendable to a Python worker (CUDA IPC exports cudaMalloc blocks only). Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/backend/cuda_runtime.h"
#include "core/guarded_buffer.h"

namespace mlacheck {

class DeviceReservedBuffer final : public GuardedMemory {
 public:
  static constexpr int64_t kMargin = int64_t{1} << 33;  // reserved on either side

  // Throws mlacheck::Error (one line) when the range cannot be reserved or a granule not mapped.
  // writable: output views may be declared inside the backed granules (core/reserved_buffer.h).
  DeviceReservedBuffer(std::string name, int64_t bytes, const std::vector<ByteSpan>& backed,
                       int64_t red_zone = kDefaultRedZone, bool writable = false);
  DeviceReservedBuffer(const DeviceReservedBuffer&) = delete;
  DeviceReservedBuffer& operator=(const DeviceReservedBuffer&) = delete;
  ~DeviceReservedBuffer() override;

  uint8_t* data() override { return data_; }
  bool on_device() const override { return true; }
  // Both throw unless every byte lies in a backed granule; on the legacy default stream.
  void write(int64_t offset, const void* src, int64_t bytes) override;
  void read(int64_t offset, void* dst, int64_t bytes) const override;
  // Both wait for the whole device first.
  void arm() override;
  GuardReport check() const override;
  const std::vector<ByteSpan>* backed() const override { return &backed_; }

  // The granule of physical memory mapping (bytes), for tests and reports.
  int64_t granule() const { return granule_; }

 private:
  // The red zone pattern over every backed byte outside the data, and unless only_red the poison
  // pattern over the rest: queued on the legacy default stream.
  void fill(bool only_red);
  void release_all() noexcept;  // unmaps and releases every granule, then frees the range

  uint64_t reservation_ = 0;  // CUdeviceptr
  int64_t reservation_bytes_ = 0;
  uint8_t* data_ = nullptr;
  int64_t granule_ = 0;
  int device_ = 0;                             // whose physical memory the granules are
  std::vector<ByteSpan> backed_;               // data offsets, whole granules, merged
  std::vector<unsigned long long> handles_;    // CUmemGenericAllocationHandle, one per backed span
  cuda::DeviceAllocation snapshot_;   // the backed bytes, in order, as arm() found them
  cuda::DeviceAllocation in_output_;  // per backed byte, in snapshot order: 1 inside an output view
  std::vector<NamedView> prepared_outputs_;        // the outputs in_output_ marks
  std::vector<std::vector<uint8_t>> dense_poison_;  // per output dense over its span: its poisoned bytes
  bool has_outputs_ = false;          // whether in_output_ holds the outputs of the last arm()
  // The dense outputs' poison and where each goes, read by scatter_poison at each arm (which waits
  // for it before returning, so the next arm may write it again).
  cuda::PinnedHostAllocation poison_staging_;
  cuda::DeviceAllocation strays_ = cuda::DeviceAllocation(64);  // check()'s tally
};

}  // namespace mlacheck
