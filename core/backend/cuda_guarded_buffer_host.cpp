// The host side of a device guarded buffer (core/backend/cuda_guarded_buffer.h): copies in and
// out, queued staging from page-locked memory and the waits it needs, the output read-back of a
// group, and the read fence. The kernels and the batching of arm and check are in the .cu file.
#include "core/backend/cuda_guarded_buffer.h"

#include <cuda_runtime.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/read_fence.h"

namespace mlacheck {

void DeviceGuardedBuffer::wait_for_queued() const {
  if (!pending_) return;
  if (cuda::capturing(pending_on_)) {
    // Work queued before the capture began is done (cuda::Graph::capture drains the stream first);
    // work queued inside it runs only at each replay: there is nothing to wait for.
    pending_ = false;
    return;
  }
  cuda::check(cudaStreamSynchronize(pending_on_), ("guarded buffer '" + name() + "': waiting for its queued work").c_str());
  pending_ = false;
  stream_drained();
}

void DeviceGuardedBuffer::wait_for_queued_unless_on(cudaStream_t stream) const {
  if (pending_ && pending_on_ != stream) wait_for_queued();
}

void DeviceGuardedBuffer::stream_drained() const {
  retired_.clear();
  mask_upload_pending_ = write_upload_pending_ = false;
}

uint8_t* DeviceGuardedBuffer::take_staging(cuda::PinnedHostAllocation* staging, bool* pending, size_t bytes) {
  // Many uploads queued and never waited for would keep a staging buffer each: past a few, wait.
  if (retired_.size() >= 8) wait_for_queued();
  if (*pending) retired_.push_back(std::move(*staging));
  if (staging->bytes() < bytes) *staging = cuda::PinnedHostAllocation(bytes);
  *pending = true;
  return staging->data();
}

void DeviceGuardedBuffer::write(int64_t offset, const void* src, int64_t bytes) {
  require_inside(offset, bytes, "write");
  if (bytes == 0) return;
  wait_for_queued();  // queued on another stream, it would poison or snapshot over these bytes
  snapshot_stale_ = true;  // the next arm copies the snapshot, whatever its sum says
  cuda::copy_to_device(data() + offset, src, static_cast<size_t>(bytes), ("guarded buffer '" + name() + "': write").c_str());
}

void DeviceGuardedBuffer::queue_write(int64_t offset, const void* src, int64_t bytes, void* stream) {
  constexpr int64_t kMostQueued = int64_t(1) << 20;  // more would keep that much page-locked per buffer
  if (stream == nullptr || bytes > kMostQueued || cuda::capturing(static_cast<cudaStream_t>(stream))) {
    return write(offset, src, bytes);  // inside a capture the copy would be replayed, not done
  }
  require_inside(offset, bytes, "write");
  if (bytes == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  wait_for_queued_unless_on(s);
  snapshot_stale_ = true;
  uint8_t* staging = take_staging(&write_host_, &write_upload_pending_, static_cast<size_t>(bytes));
  std::memcpy(staging, src, static_cast<size_t>(bytes));
  cuda::check(cudaMemcpyAsync(data() + offset, staging, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, s),
              ("guarded buffer '" + name() + "': queued write").c_str());
  pending_ = true, pending_on_ = s;
}

void DeviceGuardedBuffer::read(int64_t offset, void* dst, int64_t bytes) const {
  require_inside(offset, bytes, "read");
  if (bytes == 0) return;
  wait_for_queued();
  cuda::copy_to_host(dst, data() + offset, static_cast<size_t>(bytes), ("guarded buffer '" + name() + "': read").c_str());
}

void DeviceGuardedBuffer::set_checksum_fast_path(bool on) {
  if (on == checksum_) return;
  checksum_ = on;
  armed_ = false;  // the armed checksum is taken by arm()
  snapshot_stale_ = true;
}

int64_t DeviceGuardedBuffer::device_bytes() const {
  return static_cast<int64_t>(storage_.bytes() + snapshot_.bytes() + mask_.bytes() + scratch_.bytes());
}

void DeviceGuardedBuffer::read_group(const std::vector<GuardedMemory*>& group, const std::vector<void*>& dst) const {
  std::vector<cuda::HostCopy> copies;
  for (size_t i = 0; i < group.size(); ++i) {
    const auto& b = dynamic_cast<const DeviceGuardedBuffer&>(*group[i]);
    b.wait_for_queued();
    copies.push_back({dst[i], b.data(), static_cast<size_t>(b.size())});
  }
  cuda::copy_many_to_host(copies, "guarded buffers: read_all");
}

void DeviceGuardedBuffer::fence_views(const std::vector<NamedView>& views) {
  std::vector<cuda::NvtxRegion> regions;
  for (const FenceRun& r : fence_runs(views, size())) {
    regions.push_back({data() + r.begin, static_cast<std::size_t>(r.end - r.begin), name() + ": " + views[r.view].name});
  }
  fence_.fence(data() - red_zone(), static_cast<std::size_t>(size() + 2 * red_zone()), regions);
}

void DeviceGuardedBuffer::lift_fence() { fence_.lift(name() + " (between launches)"); }

}  // namespace mlacheck
