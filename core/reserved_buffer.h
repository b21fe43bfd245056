// Reserved guarded memory: an input allocation of gigabytes of which only the pages a case fills
// are backed; every other byte is reserved address space that faults when touched.
//
// Byte offsets past 2^31 and 2^32 are where 32-bit index arithmetic breaks: a KV block id times
// the block stride computed in int32, a row times a stride in unsigned 32 bits. Reaching them with
// ordinary guarded buffers takes gigabytes of staging, poison and snapshot per case; a reserved
// buffer takes the pages the case uses:
//
//   ReservedBuffer kv("kv_blocks", 5'000'000'000, {{4'294'960'000, 4'294'990'000}});
//   kv.write(4'294'960'000, keys, 30'000);   // only inside the backed ranges
//   kv.arm();  launch(...);  GuardReport r = kv.check();
//
// Around the allocation lie 8 GiB of reserved address space on either side, so an offset wrapped
// to 32 bits lands in reserved space instead of some other live allocation: a byte offset, signed
// or not, and an int32 element offset of 4-byte elements in an allocation under 16 GiB. A
// launch may touch only the backed ranges, rounded out to whole pages (4 KiB here; the cuda
// variant maps 2 MiB granules). Everywhere else, in the allocation and in its margins, on the host
// a read returns zeros (the kernel's shared zero page, no memory) and check() reports it, with the
// page, as "an access to unbacked memory"; a write faults, which ends the case's child process and
// is reported as "crashed" with the case saved (core/backend/isolate.h). In a process that lends
// its memory to a Python worker (core/shared_arena.h) the storage is a sparse span of the arena:
// a write there is reported like a read. On cuda either faults.
//
// Input only unless made writable: then output views may be declared inside the backed ranges
// (each view's span apart from the others': a slot's codes, its scale), arm() poisons them as
// GuardedBuffer does, and check() leaves their bytes out. arm() restores the red zones and
// snapshots every backed byte, check() compares them, and a stray write is reported as in
// GuardedBuffer. A read fence (core/read_fence.h) leaves reserved memory
// alone: check() sees the reads it would.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/guarded_buffer.h"

namespace mlacheck {

// ranges (data offsets [begin, end), any order, may overlap) rounded out to multiples of `page`,
// clipped to [-red_zone, bytes + red_zone) and merged, with the red zones added: the pages a
// reserved allocation of `bytes` backs.
std::vector<ByteSpan> backed_pages(const std::vector<ByteSpan>& ranges, int64_t bytes, int64_t red_zone, int64_t page);
// Whether [offset, offset + bytes) lies inside one of backed_pages()'s spans (merged: one holds all
// of it, or none does). An empty range always does.
bool inside_backed(const std::vector<ByteSpan>& backed, int64_t offset, int64_t bytes);
// Per byte of backed (merged spans, in order, concatenated as a snapshot holds them): 1 inside an
// element of one of the output views, else 0; empty when there are none. Throws mlacheck::Error
// naming the buffer and the view when an element lies outside every span.
std::vector<uint8_t> output_bytes(const std::string& buffer, const std::vector<ByteSpan>& backed,
                                  const std::vector<NamedView>& outputs);

// For a fault handler (core/backend/isolate.cpp): when addr lies in the reservation of a live
// reserved buffer, writes one line into out (NUL-terminated, at most n bytes) saying which buffer
// and where the address lies from its data ("reserved 'kv_cache': 2147483392 bytes before its data,
// in its reserved margin, where an offset wrapped to 32 bits lands") and returns true; otherwise
// returns false. Async-signal-safe: no allocation, no lock, no stdio.
bool describe_reserved_address(const void* addr, char* out, size_t n);

// Host bytes of any size that cost only the pages written: an anonymous mapping without swap
// reservation, zero until written. The staging copy of a reserved buffer (what the oracle reads).
class LazyBytes {
 public:
  explicit LazyBytes(int64_t bytes);
  LazyBytes(const LazyBytes&) = delete;
  LazyBytes& operator=(const LazyBytes&) = delete;
  ~LazyBytes();
  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  int64_t size() const { return size_; }
  // Declares [begin, end) in use: under AddressSanitizer its shadow is cleared (a fresh mapping
  // may carry a stale one). Only the ranges opened may be touched.
  void open(int64_t begin, int64_t end);

 private:
  uint8_t* data_ = nullptr;
  int64_t size_ = 0;
};

class ReservedBuffer final : public GuardedMemory {
 public:
  static constexpr int64_t kPage = 4096;
  static constexpr int64_t kMargin = int64_t{1} << 33;  // reserved on either side

  // Throws mlacheck::Error when a range lies outside [0, bytes) or the address space cannot be
  // reserved.
  ReservedBuffer(std::string name, int64_t bytes, const std::vector<ByteSpan>& backed,
                 int64_t red_zone = kDefaultRedZone, bool writable = false);
  ReservedBuffer(const ReservedBuffer&) = delete;
  ReservedBuffer& operator=(const ReservedBuffer&) = delete;
  ~ReservedBuffer() override;

  uint8_t* data() override { return data_; }
  bool on_device() const override { return false; }
  // Both throw unless every byte lies in a backed page.
  void write(int64_t offset, const void* src, int64_t bytes) override;
  void read(int64_t offset, void* dst, int64_t bytes) const override;
  void arm() override;
  GuardReport check() const override;
  const std::vector<ByteSpan>* backed() const override { return &backed_; }
  // The pages outside the backed ones that a launch has touched (data offsets, merged). The
  // reservation is a memory file (memfd) mapped shared and read-only: a read of any page brings
  // in a page of the file, so the file's data extents (lseek SEEK_DATA / SEEK_HOLE), a few per
  // buffer, are every page touched, found without visiting the gigabytes never touched. In the
  // shared arena the same over its file's range (a stray write adds an extent too); where memfd_create
  // fails, an anonymous mapping, and mincore(2) finds the pages a read mapped (a byte per page).
  std::vector<ByteSpan> unbacked_pages_touched() const;

 private:
  uint8_t* reservation_ = nullptr;
  int64_t reservation_bytes_ = 0;
  uint8_t* data_ = nullptr;
  std::vector<ByteSpan> backed_;   // data offsets, whole pages, merged, red zones included
  std::vector<uint8_t> snapshot_;  // the backed bytes, in order
  std::vector<uint8_t> in_output_;  // per backed byte, in the same order: 1 inside an output view
  bool in_arena_ = false;               // the storage is a span of core/shared_arena.h
  int fd_ = -1;                         // the memory file mapped at reservation_ (-1: anonymous)
  mutable bool unbacked_access_ = false;  // check() saw one: arm() drops those pages
};

}  // namespace mlacheck
