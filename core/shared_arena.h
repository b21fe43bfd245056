// Host memory another process can map: the guarded buffers a Python callable is handed
// (kernels/python_bridge.h) live in one shared memory file per process, so the Python worker maps the
// very bytes mlacheck guards and a stray write lands where mlacheck's check sees it.
//
// Off until enable_for_children() is called (by --python), and then only in processes other than
// the caller: the command's own process forks the children that run the cases, and a shared
// mapping it made would stay shared with every child, where a private one is copied. A process
// that runs its cases itself (a fuzzing harness) calls enable_here() instead.
#pragma once

#include <cstdint>

namespace mlacheck::shared_arena {

// From now on, guarded host buffers of processes forked from this one come from their own arena.
void enable_for_children();
// From now on, guarded host buffers of this process (and of those forked from it) come from its
// arena: for a process that runs its cases itself and forks none (a fuzzing harness).
void enable_here();
// True in a process whose guarded host buffers come from the arena.
bool active();

// size bytes of the arena (a multiple of 4096, zero on first use; reused memory is not zeroed), or
// nullptr when it is exhausted or cannot be made.
uint8_t* allocate(int64_t bytes);
void release(uint8_t* p);
// Gives the pages of [p, p + bytes) (page-aligned, inside an allocation) back: they read as zero
// again, and mincore(2) shows them not resident until touched.
void discard(uint8_t* p, int64_t bytes);

// The allocation that holds p (an address in this process's arena): its offset from the arena's
// first byte and its size, as allocate() rounded it. False when no live allocation holds p.
bool allocation_of(const uint8_t* p, int64_t* offset, int64_t* bytes);

// The arena of this process: its file (memfd; this process keeps it open), its first byte and its
// size. fd -1 when no arena was made yet.
struct Arena {
  int fd = -1;
  uint8_t* base = nullptr;
  int64_t bytes = 0;
};
Arena current();

}  // namespace mlacheck::shared_arena
