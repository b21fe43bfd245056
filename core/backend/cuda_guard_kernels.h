// The device side of guarded device memory, as the host orchestration (cuda_guarded_buffer.cpp)
// sees it: the work lists a batch kernel takes (Batch, Segment, PoisonSpan), the per-buffer tally
// and mapped slot the check leaves its result in (Tally, Slot), and one launch function per kernel
// (cuda_guard_kernels.cu). Internal to core/backend: no public header includes it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/backend/cuda_mapped_slot.h"
#include "core/backend/cuda_patterns.h"

namespace mlacheck::guard_kernels {

constexpr int kThreads = 256;
// Chunks of 16 bytes each thread loads before using any: enough bytes in flight per SM to keep HBM
// busy without a deep pipeline.
constexpr int kUnroll = 4;
// Buffers one batch kernel covers (blockIdx.y), and outputs per buffer poisoned on the device: the
// batch travels as a kernel parameter, about 2 KiB at these sizes (the limit is 4 KiB).
constexpr int kMaxSegments = 8;
constexpr int kMaxPoisonSpans = 4;
// The top bit of a check's serial: set on the exact comparison that follows a checksum mismatch.
constexpr uint32_t kRecheckSerial = 0x80000000u;

// The result of one check, in each buffer's device scratch. The last block of a check to finish
// copies it to the buffer's slot in mapped host memory (a Slot, with the serial the host gave the
// check) and resets it for the next; arm resets it too, so a check that never ran leaves nothing
// behind.
struct alignas(16) Tally {
  unsigned long long first;       // lowest stray storage index; ~0 when there is none
  unsigned long long last;        // highest stray storage index
  unsigned long long count;       // stray bytes
  unsigned long long sum_now;     // checksum of the storage at check() (checksum fast path)
  unsigned long long sum_armed;   // checksum taken by arm()
  unsigned long long sum_arming;  // arm's blocks add here; its last block moves it to sum_armed
  unsigned int done;              // blocks of the running kernel finished
  unsigned int serial;            // in the mapped slot: the check it is the result of
  unsigned int clean;             // checksum path: the last check's sums agreed (nothing strayed)
  unsigned int stale;             // set by a gated arm: the snapshot must be copied again
  unsigned int runs;              // checks this buffer has finished (the exact one after a mismatch aside)
};

// A check's result in the buffer's slot of mapped host memory. `outcome` is one 8-byte store, the
// last: the checks finished so far (Tally::runs) times two, plus one when nothing strayed (no byte
// differs, or the sums agree). A host that reads its own check's count there with the bit set
// knows the check ran clean without synchronizing the stream and without reading anything else
// (collect_checks); any other outcome waits for the stream and reads the rest.
struct alignas(16) Slot {
  unsigned long long first, last, count, sum_now, sum_armed;  // as in Tally
  unsigned long long outcome;
  unsigned int serial;  // the check it is the result of
};
static_assert(sizeof(Slot) <= cuda::MappedSlot::kSlotBytes, "a check's result fits its mapped slot");
__host__ __device__ constexpr unsigned long long outcome_of(unsigned int runs, bool clean) {
  return static_cast<unsigned long long>(runs) << 1 | (clean ? 1u : 0u);
}

// An output view's poison on the device. Its elements start at origin + a multiple of the element
// size, so the byte at data offset o of an element byte is pattern[(o - origin) & element_mask].
// In a dense view every byte of [begin, end) is an element byte; otherwise only those whose output
// bit is set (the host makes sure no other output's bytes lie in the span).
struct PoisonSpan {
  int64_t begin, end, origin;
  uint32_t element_mask;
  uint32_t dense;
  uint8_t pattern[8];
};

// One buffer of a batch.
struct Segment {
  uint8_t* storage;
  uint8_t* snapshot;
  const uint8_t* mask;
  Tally* tally;           // the buffer's scratch
  Slot* mapped;           // check: its slot in mapped host memory (a device pointer to it)
  uint32_t serial;        // check: the serial to leave in the slot
  int64_t chunks, total;  // whole 16-byte chunks of the storage; storage bytes
  int64_t red_zone, size;
  int32_t checksum;       // arm takes sum_armed; check computes sum_now instead of comparing
  int32_t force;          // arm (checksum path): copy the snapshot whatever the sums say
  int32_t chained;        // arm (checksum path): after a clean check, poison the outputs and stop
  int32_t outputs;        // the buffer has output bytes (else its mask is all zeros: not read)
  int32_t spans;
  PoisonSpan span[kMaxPoisonSpans];
};

struct Batch {
  Segment seg[kMaxSegments];
  cuda::PatternTable red;
  int32_t count;
};

// The first fill of a new buffer's storage (red zones, then poison over the data), its zeroed
// output mask and tally, over `blocks` blocks.
void launch_init(int blocks, uint8_t* storage, int64_t red_zone, int64_t size, int64_t total, const cuda::PatternTable& red,
                 const cuda::PatternTable& data, uint8_t* mask, int64_t mask_bytes, uint8_t* tally, int tally_bytes,
                 cudaStream_t stream);
// The arm of every segment of b (blockIdx.y): outputs poisoned, red zones restored, the snapshot
// copied or (checksum path) the sum taken; a chained arm after a clean check only poisons.
void launch_arm(const Batch& b, dim3 grid, cudaStream_t stream);
// The outputs of every segment poisoned again and nothing else.
void launch_repoison(const Batch& b, dim3 grid, cudaStream_t stream);
// After a gated arm: the snapshot copied for each segment whose arm found it stale.
void launch_snapshot(const Batch& b, dim3 grid, cudaStream_t stream);
// The check of every segment: the comparison or the checksum, its result left in the slot.
void launch_check(const Batch& b, dim3 grid, cudaStream_t stream);
// The `count` dense poison spans of a device list over one buffer's storage (none: nothing queued).
void launch_poison_spans(uint8_t* storage, int64_t red_zone, const PoisonSpan* spans, size_t count, cudaStream_t stream);
// Blocks of kThreads the arm or the check kernel keeps resident per multiprocessor, the larger.
int resident_blocks_per_multiprocessor();

}  // namespace mlacheck::guard_kernels
