// Tests of core/shared_arena.h: off in the process that enables it, on in its children; blocks are
// disjoint, reused once released, and the very bytes a second mapping of the arena's file sees (as
// the Python worker maps it); a guarded buffer of a child lives there.
#include "core/shared_arena.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>

#include <gtest/gtest.h>

#include "core/guarded_buffer.h"
#include "tests/support/in_child.h"

namespace mlacheck {
namespace {

using test_support::in_child;

TEST(SharedArena, OnlyChildrenOfTheEnablingProcessUseIt) {
  shared_arena::enable_for_children();
  EXPECT_FALSE(shared_arena::active());
  EXPECT_EQ(shared_arena::current().fd, -1);
  EXPECT_EQ(in_child([] { return shared_arena::active(); }), 0);
}

TEST(SharedArena, BlocksAreDisjointReusedAndSeenThroughASecondMapping) {
  shared_arena::enable_for_children();
  EXPECT_EQ(in_child([] {
              uint8_t* a = shared_arena::allocate(100);
              uint8_t* b = shared_arena::allocate(5000);
              const shared_arena::Arena arena = shared_arena::current();
              if (a == nullptr || b == nullptr || arena.fd < 0) return false;
              if (!(a + 4096 <= b || b + 8192 <= a)) return false;  // page-rounded, disjoint
              // Another mapping of the file (the worker's view) sees what this one writes.
              auto* other = static_cast<uint8_t*>(
                  mmap(nullptr, static_cast<size_t>(arena.bytes), PROT_READ | PROT_WRITE, MAP_SHARED, arena.fd, 0));
              if (other == MAP_FAILED) return false;
              std::memset(b, 0x5a, 5000);
              other[(a - arena.base) + 7] = 0x11;
              const bool shared = other[(b - arena.base) + 4999] == 0x5a && a[7] == 0x11;
              shared_arena::release(a);
              uint8_t* again = shared_arena::allocate(64);
              return shared && again == a;  // the freed block is the best fit
            }),
            0);
}

TEST(SharedArena, AGuardedBufferOfAChildLivesInTheArenaAndStillCatchesAStrayWrite) {
  shared_arena::enable_for_children();
  EXPECT_EQ(in_child([] {
              GuardedBuffer buffer("b", 64);
              buffer.declare_output("v", View::contiguous(DType::kU8, {16}));
              buffer.arm();
              const shared_arena::Arena arena = shared_arena::current();
              if (buffer.data() < arena.base || buffer.data() >= arena.base + arena.bytes) return false;
              buffer.data()[20] = 1;  // past the view
              return !buffer.check().ok();
            }),
            0);
}

}  // namespace
}  // namespace mlacheck
