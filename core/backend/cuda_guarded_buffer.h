// Guarded device memory: the CUDA implementation of GuardedMemory, with the stray-write check run as a kernel on the device.
//
// Same semantics as the host GuardedBuffer (core/guarded_buffer.h), byte for byte: the same red
// zone and poison patterns, the same output poison written by arm(), and check() reports the same
// first stray byte, count and last offset, described by the same text. What differs is where the
// work happens: the buffer lives in device memory (data() is a device pointer), and check() is a
// kernel over the whole storage that compares it with a device snapshot under the output mask, so
// only a few numbers (the stray count, the lowest and highest stray offsets, and the two bytes at
// the lowest) come back to the host. No buffer is copied back to check it.
//
// Device memory held, for a buffer of N data bytes and red zones of R bytes each:
//   storage (N + 2R) + snapshot (N + 2R, 1x) + output mask (N / 8, one bit per data byte).
// So a 1 GiB buffer takes about 2.13 GiB of device memory. arm() also keeps, in pinned host
// memory, the poisoned bytes of each dense output view (as many bytes as those views), so that
// re-arming with the same outputs is a copy, not a fresh poison_output over every element.
//
// Batches: arm_all and check_all (core/guarded_buffer.h) over several of these buffers do the
// work of up to eight in one kernel each: arm, the output poison, red zones and snapshot in one
// pass over each storage; check, the comparison or checksum of each, whose last block to finish
// writes the buffer's tally to mapped host memory and resets it for the next check. arm() and
// check() of one buffer are the same with a batch of one. Outputs are poisoned on the device when
// they fit its description (views whose byte spans do not interleave, elements of 1, 2, 4 or 8
// bytes: four per buffer in the arm's own pass, and past four those dense over their span, by a
// second kernel from a list in device memory); any other output goes through a host copy of its
// bytes first.
//
// Ordering: arm() and check() without a stream first wait for the whole device
// (cudaDeviceSynchronize), so they see every launch on every stream, and return with their own
// work finished. arm_all(buffers, stream) and queue_check_all(buffers, stream) queue the same
// kernels on the launch's stream instead, with no synchronization of their own: a guarded launch
// is then two small kernels more than a plain one (the caller's one synchronization covers arm,
// launch and check; the reports of a clean check add no second one, collect_checks). A fault of the checked
// launch surfaces from check() (or the synchronization) as a cuda::StickyFault. Staging is
// queued the same way: the constructor given a stream queues the first fill there, and
// queue_write(.., stream) the upload from page-locked staging; a host read() or write() waits for
// what is queued on the buffer, and an arm on another stream waits for it too. Not thread-safe.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/cuda_mapped_slot.h"
#include "core/backend/cuda_runtime.h"
#include "core/backend/cuda_nvtx.h"
#include "core/guarded_buffer.h"

namespace mlacheck {

class DeviceGuardedBuffer final : public GuardedMemory {
 public:
  // Allocates storage, snapshot and mask on the current device; red zones patterned, data poisoned.
  // With a stream, that first fill is queued there and nothing waits for it: work queued next on
  // that stream (queue_write, an arm) follows it, and a host copy in or out waits for it first.
  // Without, it runs on the legacy default stream and the constructor waits for it.
  DeviceGuardedBuffer(std::string name, int64_t bytes, int64_t red_zone = kDefaultRedZone, cudaStream_t stream = nullptr);
  DeviceGuardedBuffer(DeviceGuardedBuffer&&) noexcept;
  DeviceGuardedBuffer& operator=(DeviceGuardedBuffer&&) noexcept;
  ~DeviceGuardedBuffer() override;

  // The first data byte, as a device pointer: for kernels only.
  uint8_t* data() override { return storage_.as<uint8_t>() + red_zone(); }
  const uint8_t* data() const { return storage_.as<uint8_t>() + red_zone(); }
  bool on_device() const override { return true; }
  // Copies between host memory and the buffer on the legacy default stream, returning once the
  // bytes are in place. They do not wait for non-blocking streams: synchronize those first.
  void write(int64_t offset, const void* src, int64_t bytes) override;
  void read(int64_t offset, void* dst, int64_t bytes) const override;
  // Queued on stream (see GuardedMemory::queue_write): up to 1 MiB is copied into page-locked
  // staging the buffer keeps and its upload queued, with no wait; more is a write().
  void queue_write(int64_t offset, const void* src, int64_t bytes, void* stream) override;

  // Poisons every output view (the bytes poison_output writes on the host), restores the red
  // zones, uploads the output mask when the outputs changed, and snapshots the storage, all on the
  // device (see the file comment for the outputs that take a host copy).
  void arm() override;
  void arm(cudaStream_t stream);
  // The allocation (red zones included) as an NVTX sub-allocator heap whose regions are the views'
  // bytes, each named "<buffer>: <view>" (core/backend/cuda_nvtx.h), until lift_fence().
  void fence_views(const std::vector<NamedView>& views) override;
  void lift_fence() override;
  // The stray-write check as a kernel; see the file comment for the ordering.
  GuardReport check() const override;
  GuardReport check(cudaStream_t stream) const;

  // With the checksum fast path on, arm() also stores a checksum of every byte outside the outputs
  // and check() first recomputes it, reading the storage once instead of storage and snapshot; only
  // on a mismatch does the full comparison run (for the report). The checksum adds a mixed 64-bit
  // term per 8-byte word, keyed by position: a change confined to one word is always seen, any
  // other change is missed with probability about 2^-64. The arm of a buffer of 8 MiB or more then
  // also skips the snapshot copy when its checksum equals the one its last check found clean (same
  // outputs, no host write since): the snapshot still holds those bytes. A second small kernel
  // copies it when they changed (a launch that wrote an input between check and arm). Off by
  // default (the comparison is exact). Switching it takes a new arm() before the next check().
  void set_checksum_fast_path(bool on);
  bool checksum_fast_path() const { return checksum_; }
  // Chained arms, on the checksum fast path: the caller promises that nothing but guarded launches
  // (an arm, the launch, a check) writes this buffer on the device, so a check that found its sums
  // equal leaves the next arm nothing to read. That arm only poisons the outputs again: no sum, no
  // snapshot, no red zones (the check found them as the last full arm left them). The guard's window
  // then runs from the last clean check rather than from the arm: a stray write by a launch outside
  // the guards between check and arm is reported by the next check, against the launch it guards.
  // A host write, new outputs, or a check that was not clean make the next arm a full one. Without
  // the checksum fast path it does nothing. Off by default.
  void set_chained_arms(bool on) { chained_ = on; }
  bool chained_arms() const { return chained_; }

  // Device bytes this buffer holds (storage, snapshot, mask, scratch), for overhead reports.
  int64_t device_bytes() const;

 protected:
  void arm_group(const std::vector<GuardedMemory*>& group, void* stream) override;
  bool queue_check_group(const std::vector<GuardedMemory*>& group, void* stream) const override;
  void requeue_check_group(const std::vector<GuardedMemory*>& group, void* stream) const override;
  std::vector<GuardReport> check_group(const std::vector<GuardedMemory*>& group, void* stream) const override;
  void read_group(const std::vector<GuardedMemory*>& group, const std::vector<void*>& dst) const override;
  // queue_repeats: a Repeats on stream when every buffer was armed on the device and its outputs
  // take no host copy to poison, and device fences are off.
  std::unique_ptr<RepeatedLaunches> repeats_group(const std::vector<GuardedMemory*>& group,
                                                  const std::vector<GuardedMemory*>& read, void* stream,
                                                  int launches) const override;

 private:
  class Repeats;  // queue_repeats' launches (cuda_guarded_buffer_host.cpp)
  // An output view poisoned on the device: its byte span, the offset its elements count from, and
  // one element of poison (see the .cu file).
  struct DevicePoison {
    int64_t begin = 0, end = 0, origin = 0;
    int element_bytes = 0;
    bool dense = false;
    uint8_t pattern[8] = {};
  };

  int64_t total() const { return size() + 2 * red_zone(); }
  // Queues the arm of every buffer on stream; with wait, waits for it (and first for the device).
  static void arm_buffers(const std::vector<DeviceGuardedBuffer*>& buffers, cudaStream_t stream, bool wait);
  // Queues the check kernel over every buffer on stream: exact, or by checksum for the buffers
  // whose fast path is on.
  static void queue_checks(const std::vector<const DeviceGuardedBuffer*>& buffers, cudaStream_t stream, bool exact);
  // Queues the outputs' poison of every buffer again on stream, nothing else (a repeated launch).
  static void queue_repoison(const std::vector<DeviceGuardedBuffer*>& buffers, cudaStream_t stream);
  // Waits for stream and returns the reports of the checks queued last (a checksum that differs is
  // followed by the exact comparison, for the report).
  static std::vector<GuardReport> collect_checks(const std::vector<const DeviceGuardedBuffer*>& buffers,
                                                 cudaStream_t stream);
  // Waits for the work queued on this buffer (its first fill, a queued write, an arm), before a
  // host copy in or out; and, called with the stream about to take new work, only if that work was
  // queued on another stream.
  void wait_for_queued() const;
  void wait_for_queued_unless_on(cudaStream_t stream) const;
  // The host side of arm(): the mask when the outputs changed, the device poison of each output,
  // and the host-poisoned outputs written to the device.
  void prepare_arm(cudaStream_t stream);
  // After a host write, with chained arms: the device's record that the last check was clean is
  // cleared (queued on stream), so the next arm is a full one even when a graph captured it before
  // the write (its host-side flags are fixed at capture).
  void forget_clean_check(cudaStream_t stream);
  // The report of a check whose tally is `first`, `last`, `count` (storage indices).
  GuardReport report(unsigned long long first, unsigned long long last, unsigned long long count,
                     cudaStream_t stream) const;

  cuda::DeviceAllocation storage_;   // red zone | data | red zone
  cuda::DeviceAllocation snapshot_;  // of storage_, taken by arm()
  cuda::NvtxHeap fence_;             // registered at the first fence, kept for the allocation's life
  cuda::DeviceAllocation mask_;      // output bits of the data bytes, zero-padded to a 16-byte multiple
  // Page-locked staging of queued uploads: the bits last uploaded to mask_, and the bytes of the
  // last queue_write. An upload still queued reads the staging it was given, so a new one takes
  // fresh staging and the old goes to retired_ until this buffer's stream is waited for.
  cuda::PinnedHostAllocation mask_host_, write_host_;
  mutable std::vector<cuda::PinnedHostAllocation> retired_;
  mutable bool mask_upload_pending_ = false, write_upload_pending_ = false;
  void stream_drained() const;  // the work queued on this buffer is done: its staging is free
  // Staging of at least `bytes` for a new upload: *staging itself, or fresh when its last upload
  // may be queued still (*pending), the old one retired.
  uint8_t* take_staging(cuda::PinnedHostAllocation* staging, bool* pending, size_t bytes);
  cuda::DeviceAllocation scratch_;   // the check's tally and the checksums
  cuda::MappedSlot slot_;            // where the check's last block leaves the tally
  mutable uint32_t check_serial_ = 0;  // of the last check queued, echoed in the slot
  mutable cudaStream_t queued_on_ = nullptr;  // the stream of a check queued and not yet collected
  mutable bool check_queued_ = false;
  // Runs of this buffer's check: collected (the count its slot showed then), and queued or replayed
  // since (each one more run to collect). collect_checks needs no wait when the slot shows their sum.
  mutable unsigned int runs_collected_ = 0, runs_pending_ = 0;
  // Staging taken (take_staging) in all, and when the check was queued: one taken since feeds an
  // upload queued behind the check, still to run when the check's result is read without a wait.
  mutable uint64_t staged_ = 0, staged_at_check_ = 0;
  // The stream of work queued on this buffer (first fill, queued write, arm) the host has not
  // waited for.
  mutable cudaStream_t pending_on_ = nullptr;
  mutable bool pending_ = false;
  // The next arm copies the snapshot in its own pass (checksum path): true until the first arm, and
  // after new outputs, a host write or switching the path. Otherwise the arm only sums the bytes,
  // and copies them only if they changed since the last clean check (see the file comment).
  bool snapshot_stale_ = true;
  // What arm() prepares once per set of outputs: the device mask, and the poisoned bytes of each
  // dense output view (empty for the others, whose gaps must be read back each time).
  std::vector<NamedView> prepared_outputs_;
  bool prepared_ = false;
  std::vector<DevicePoison> device_poison_;   // the outputs arm() poisons on the device
  // Outputs past those, each dense over its span, poisoned by a kernel from a list in device
  // memory (uploaded from page-locked staging when the outputs change).
  std::vector<DevicePoison> extra_poison_;
  cuda::DeviceAllocation extra_spans_;
  cuda::PinnedHostAllocation extra_host_;
  mutable bool extra_upload_pending_ = false;
  std::vector<size_t> host_poisoned_;         // the others (indices into outputs())
  bool checksum_ = false;
  bool chained_ = false;
  // The reports of the last check collected found the sums equal: the next chained arm is expected
  // to poison only (the device decides; this sizes its grid).
  mutable bool last_check_clean_ = false;
};

}  // namespace mlacheck
