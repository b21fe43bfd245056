// The device half of StorageWatch (core/storage_watch.h) for a storage in CUDA device memory: the
// snapshot of the exact window, the masks of the views, the per-block checksums and the comparison
// all stay on the device; only a tally (how many bytes and blocks changed, and where the first
// lies) comes back. Built into libmlacheck_guard.so when nvcc is there (MLACHECK_GUARD_CUDA);
// use_device_of waits for the whole device (StorageWatch calls it first in arm() and check()), so
// the watch sees every launch on every stream.
#pragma once

#include <cstdint>

namespace mlacheck::watch_cuda {

struct Tally {
  unsigned long long changed = 0;       // bytes of the window that changed and may not
  unsigned long long first = ~0ull;     // the lowest of them
  unsigned long long blocks = 0;        // blocks beyond the window whose sum changed
  unsigned long long first_block = ~0ull;
};

// The device of a pointer (cudaPointerGetAttributes), made current; throws mlacheck::Error for a
// pointer that is not device memory.
void use_device_of(const void* p);
void* alloc(int64_t bytes);
void release(void* p);
void copy_to_device(void* dst, const void* src, int64_t bytes);
void copy_to_host(void* dst, const void* src, int64_t bytes);
void copy_on_device(void* dst, const void* src, int64_t bytes);
// The checksum of each kBlock-byte block of [0, bytes) of base, leaving out [wb, we), into sums.
void block_sums(const uint8_t* base, int64_t bytes, int64_t wb, int64_t we, uint64_t* sums, int64_t block);
// Compares base's window [wb, we) with snap (its bytes at arm) under writable (a bit per window
// byte: may change), and sums with was (the arm's block sums): the tally.
Tally compare(const uint8_t* base, const uint8_t* snap, int64_t wb, int64_t we, const uint64_t* writable,
              const uint64_t* sums, const uint64_t* was, int64_t blocks);

}  // namespace mlacheck::watch_cuda
