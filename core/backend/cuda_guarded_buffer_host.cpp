// The host side of a device guarded buffer (core/backend/cuda_guarded_buffer.h): copies in and
// out, queued staging from page-locked memory and the waits it needs, the output read-back of a
// group, repeated launches queued back to back (queue_repeats), and the read fence. The batching
// of arm and check is cuda_guarded_buffer.cpp; the kernels, cuda_guard_kernels.cu.
#include "core/backend/cuda_guarded_buffer.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
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
  mask_upload_pending_ = write_upload_pending_ = extra_upload_pending_ = false;
}

uint8_t* DeviceGuardedBuffer::take_staging(cuda::PinnedHostAllocation* staging, bool* pending, size_t bytes) {
  // Many uploads queued and never waited for would keep a staging buffer each: past a few, wait.
  if (retired_.size() >= 8) wait_for_queued();
  if (*pending) retired_.push_back(std::move(*staging));
  if (staging->bytes() < bytes) *staging = cuda::PinnedHostAllocation(bytes);
  *pending = true;
  ++staged_;
  return staging->data();
}

void DeviceGuardedBuffer::write(int64_t offset, const void* src, int64_t bytes) {
  require_inside(offset, bytes, "write");
  if (bytes == 0) return;
  wait_for_queued();  // queued on another stream, it would poison or snapshot over these bytes
  snapshot_stale_ = true;  // the next arm copies the snapshot, whatever its sum says
  cuda::copy_to_device(data() + offset, src, static_cast<size_t>(bytes), ("guarded buffer '" + name() + "': write").c_str());
  forget_clean_check(nullptr);
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
  forget_clean_check(s);
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

// queue_repeats on the device: the outputs' poison of each later launch is one queued kernel over
// every buffer, and each launch's reads land in a page-locked area of their own, so nothing waits
// until the caller synchronizes after the last launch.
class DeviceGuardedBuffer::Repeats final : public RepeatedLaunches {
 public:
  Repeats(std::vector<DeviceGuardedBuffer*> buffers, std::vector<const DeviceGuardedBuffer*> read, cudaStream_t stream,
          int launches, size_t per_launch, std::vector<size_t> offsets)
      : buffers_(std::move(buffers)),
        read_(std::move(read)),
        stream_(stream),
        launches_(static_cast<size_t>(launches)),
        per_launch_(per_launch),
        offsets_(std::move(offsets)),
        staging_(std::max<size_t>(1, per_launch * static_cast<size_t>(launches))) {}
  // Copies still queued into the staging must land before it goes back to the cache (a caller that
  // threw before synchronizing); an error here is the launch's, reported by the stream's next user.
  ~Repeats() override {
    if (reads_ > 0 || !rewrites_.empty()) (void)cudaStreamSynchronize(stream_);
  }

  void poison_outputs() override {
    queue_repoison(buffers_, stream_);
    for (const Rewrite& r : rewrites_) {
      cuda::check(cudaMemcpyAsync(r.buffer->data(), r.bytes.data(), r.bytes.bytes(), cudaMemcpyHostToDevice, stream_),
                  ("guarded buffer '" + r.buffer->name() + "': bytes written back after the poison").c_str());
    }
  }

  void rewrite_after_poison(size_t i, const void* src, int64_t bytes) override {
    MLA_REQUIRE(i < buffers_.size() && bytes >= 0 && bytes <= buffers_[i]->size(), "queue_repeats: ", bytes,
                " bytes written back into buffer ", i, " of ", buffers_.size());
    if (bytes == 0) return;
    Rewrite r{buffers_[i], cuda::PinnedHostAllocation(static_cast<size_t>(bytes))};
    std::memcpy(r.bytes.data(), src, static_cast<size_t>(bytes));  // page-locked, unchanged while queued
    rewrites_.push_back(std::move(r));
  }

  void read() override {
    MLA_REQUIRE(reads_ < launches_, "queue_repeats: read ", reads_ + 1, " of a batch of ", launches_, " launches");
    uint8_t* at = staging_.data() + reads_ * per_launch_;
    for (size_t j = 0; j < read_.size(); ++j) {
      const DeviceGuardedBuffer& b = *read_[j];
      if (b.size() == 0) continue;
      cuda::check(cudaMemcpyAsync(at + offsets_[j], b.data(), static_cast<size_t>(b.size()), cudaMemcpyDeviceToHost, stream_),
                  ("guarded buffer '" + b.name() + "': a repeated launch's read").c_str());
    }
    ++reads_;
  }

  const uint8_t* bytes(size_t k, size_t j) const override {
    MLA_REQUIRE(k < reads_ && j < read_.size(), "queue_repeats: bytes(", k, ", ", j, ") of ", reads_, " reads of ",
                read_.size(), " buffers");
    return staging_.data() + k * per_launch_ + offsets_[j];
  }

 private:
  std::vector<DeviceGuardedBuffer*> buffers_;
  std::vector<const DeviceGuardedBuffer*> read_;
  cudaStream_t stream_;
  size_t launches_, per_launch_;
  std::vector<size_t> offsets_;  // of each read buffer within one launch's area
  cuda::PinnedHostAllocation staging_;
  size_t reads_ = 0;
  struct Rewrite {
    DeviceGuardedBuffer* buffer;
    cuda::PinnedHostAllocation bytes;
  };
  std::vector<Rewrite> rewrites_;
};

std::unique_ptr<RepeatedLaunches> DeviceGuardedBuffer::repeats_group(const std::vector<GuardedMemory*>& group,
                                                                     const std::vector<GuardedMemory*>& read,
                                                                     void* stream, int launches) const {
  constexpr size_t kMostStaged = size_t(64) << 20;
  const auto s = static_cast<cudaStream_t>(stream);
  if (s == nullptr || ReadFence::device_fences() || cuda::capturing(s)) return nullptr;
  std::vector<DeviceGuardedBuffer*> buffers;
  for (GuardedMemory* m : group) {
    auto& b = dynamic_cast<DeviceGuardedBuffer&>(*m);
    // Armed on this stream (an arm that waited is done too), every output poisoned on the device.
    if (!b.armed_ || !b.host_poisoned_.empty() || (b.pending_ && b.pending_on_ != s)) return nullptr;
    buffers.push_back(&b);
  }
  std::vector<const DeviceGuardedBuffer*> reads;
  std::vector<size_t> offsets;
  size_t per_launch = 0;
  for (const GuardedMemory* m : read) {
    reads.push_back(&dynamic_cast<const DeviceGuardedBuffer&>(*m));
    offsets.push_back(per_launch);
    per_launch += (static_cast<size_t>(m->size()) + 15) / 16 * 16;
  }
  if (per_launch * static_cast<size_t>(launches) > kMostStaged) return nullptr;
  return std::make_unique<Repeats>(std::move(buffers), std::move(reads), s, launches, per_launch, std::move(offsets));
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
