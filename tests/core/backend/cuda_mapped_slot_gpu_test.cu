// GPU test of core/backend/cuda_mapped_slot.h: a kernel's write to a slot is what the host reads
// after synchronizing, with no copy; slots held at once are distinct and never overlap, across more
// than one chunk; a slot given back is taken again; a moved-from slot holds nothing.
//
// Plain main, one line per check; exits 0 on pass, 1 on a failure, 77 ("skipped: no GPU") when no
// GPU is usable.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "core/backend/cuda_mapped_slot.h"
#include "core/backend/cuda_runtime.h"
#include "tests/support/gpu_test.h"

namespace {

using namespace mlacheck;
using cuda::MappedSlot;

gpu_test::Tally tally;

// Every 8-byte word of each slot i set to (i << 8 | word): one block per slot.
__global__ void stamp(uint64_t* const* slots, int n) {
  const int i = blockIdx.x;
  if (i >= n || threadIdx.x >= MappedSlot::kSlotBytes / 8) return;
  slots[i][threadIdx.x] = static_cast<uint64_t>(i) << 8 | threadIdx.x;
}

}  // namespace

int main() {
  gpu_test::require_gpu();
  try {
    // More slots than one chunk holds, so a second chunk is allocated and addressed.
    const int n = MappedSlot::kSlotsPerChunk + 40;
    std::vector<MappedSlot> slots(static_cast<size_t>(n));
    std::set<uintptr_t> hosts;
    bool apart = true;
    for (const MappedSlot& s : slots) {
      const auto h = reinterpret_cast<uintptr_t>(s.host());
      apart = apart && h % 16 == 0 && s.device() != nullptr;
      hosts.insert(h);
      std::memset(s.host(), 0xEE, MappedSlot::kSlotBytes);
    }
    std::vector<uintptr_t> sorted(hosts.begin(), hosts.end());
    for (size_t i = 1; i < sorted.size(); ++i) apart = apart && sorted[i] - sorted[i - 1] >= MappedSlot::kSlotBytes;
    tally.report(apart && hosts.size() == static_cast<size_t>(n),
                 std::to_string(n) + " slots held at once: distinct, 16-byte aligned, none overlapping another");

    std::vector<uint64_t*> device(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) device[static_cast<size_t>(i)] = static_cast<uint64_t*>(slots[static_cast<size_t>(i)].device());
    cuda::DeviceAllocation table(device.size() * sizeof(uint64_t*));
    cuda::check(cudaMemcpy(table.get(), device.data(), device.size() * sizeof(uint64_t*), cudaMemcpyHostToDevice), "table");
    stamp<<<n, 32>>>(table.as<uint64_t* const>(), n);
    cuda::check(cudaDeviceSynchronize(), "stamp");
    int wrong = 0;
    for (int i = 0; i < n; ++i) {
      const auto* words = static_cast<const volatile uint64_t*>(slots[static_cast<size_t>(i)].host());
      for (size_t w = 0; w < MappedSlot::kSlotBytes / 8; ++w) wrong += words[w] != (static_cast<uint64_t>(i) << 8 | w);
    }
    tally.report(wrong == 0, "a kernel's writes to every slot are what the host reads after synchronizing (" +
                                 std::to_string(wrong) + " words wrong)");

    const void* given = slots.back().host();
    slots.pop_back();
    MappedSlot again;
    tally.report(again.host() == given, "a slot given back is the next one taken");

    MappedSlot moved = std::move(again);
    tally.report(again.host() == nullptr && again.device() == nullptr && again.index() == -1 && moved.host() == given,
                 "a moved-from slot holds nothing; the slot moved with its owner");
  } catch (const std::exception& e) {
    tally.report(false, std::string("threw: ") + e.what());
  }
  return tally.finish("cuda mapped slots");
}
