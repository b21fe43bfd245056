// Read bounds for host launches under AddressSanitizer (core/read_fence.h).
#include "core/read_fence.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <sstream>
#include <utility>

#include "core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define MLA_FENCE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MLA_FENCE_ASAN 1
#endif
#endif

#if defined(MLA_FENCE_ASAN)
#include <sanitizer/asan_interface.h>

// The options every program with guarded memory runs under (ASAN_OPTIONS still overrides them):
// go on after an error that the fence expects, and report every launch's first fenced access, not
// only the first at each program counter. The CUDA runtime wrappers (core/backend/cuda_runtime.cpp)
// define mlacheck_asan_options with the CUDA driver's needs added.
extern "C" __attribute__((weak)) const char* mlacheck_asan_options() {
  return "halt_on_error=0:suppress_equal_pcs=0";
}
extern "C" const char* __asan_default_options() { return mlacheck_asan_options(); }
// Referenced by guarded_buffer.cpp and cuda_runtime.cpp, so that every program with guarded memory
// or CUDA links this file and its options.
extern "C" {
int mlacheck_read_fence_anchor = 0;
}
#endif

namespace mlacheck {

namespace {

// The armed fence, as the error hook sees it.
struct Region {
  uintptr_t begin, end;  // the allocation with its red zones
};
struct FenceState {
  std::atomic<bool> armed{false};
  std::vector<Region> regions;
  std::atomic<bool> hit{false};
  uintptr_t address = 0;
  int64_t bytes = 0;
  bool write = false;
  // Set by the error hook for an error outside the fence: the report callback (called after the
  // report is printed) then ends the program, as halt_on_error=1 would have.
  std::atomic<bool> foreign_error{false};
};
FenceState& state() {
  static FenceState s;
  return s;
}

#if defined(MLA_FENCE_ASAN)
void unpoison_regions(const std::vector<Region>& regions) {
  for (const Region& r : regions) {
    __asan_unpoison_memory_region(reinterpret_cast<void*>(r.begin), r.end - r.begin);
  }
}

void on_report(const char*) {
  if (state().foreign_error.exchange(false)) std::abort();
}
[[maybe_unused]] const bool report_callback_installed = (__asan_set_error_report_callback(&on_report), true);
#endif

}  // namespace

}  // namespace mlacheck

#if defined(MLA_FENCE_ASAN)
// AddressSanitizer calls this for every error, before printing its report.
extern "C" void __asan_on_error() {
  using namespace mlacheck;
  FenceState& s = state();
  const uintptr_t a = reinterpret_cast<uintptr_t>(__asan_get_report_address());
  if (s.armed.load()) {  // between arm() and disarm(), lifted or not
    // Inside a fenced allocation; or a read near one (within 64 KiB) but past its red zones, in
    // memory that is not ours but is mapped (AddressSanitizer reports it: poisoned): the launch's
    // too, reported against the nearest allocation. A write outside every allocation may have
    // corrupted memory that is not ours, and an error far from every fenced allocation is not the
    // fence's to explain: those end the program, as any other error does.
    constexpr uintptr_t kNear = 64 << 10;
    const bool write = __asan_get_report_access_type() != 0;
    bool inside = false, near = false;
    for (const Region& r : s.regions) {
      inside = inside || (a >= r.begin && a < r.end);
      near = near || (a + kNear >= r.begin && a < r.end + kNear);
    }
    if (inside || (near && !write)) {
      if (!s.hit.exchange(true)) {
        s.address = a;
        s.bytes = static_cast<int64_t>(__asan_get_report_access_size());
        s.write = write;
        // One report per launch: the launch goes on unfenced (reads past the red zones, which the
        // fence did not poison, may still be reported; they are let go the same way).
        unpoison_regions(s.regions);
      }
      return;
    }
  }
  s.foreign_error.store(true);
}
#endif

namespace mlacheck {

std::string StrayAccess::describe() const {
  std::ostringstream os;
  os << "buffer '" << buffer << "': " << (write ? "write" : "read") << " of " << bytes << " byte"
     << (bytes == 1 ? "" : "s") << " at byte " << offset << ", ";
  switch (region) {
    case StrayRegion::kBeforeAllocation:
      os << (offset >= -red_zone ? "before the allocation (leading red zone)"
                                 : "before the allocation, past its leading red zone");
      break;
    case StrayRegion::kAfterAllocation:
      os << (offset < allocation_bytes + red_zone ? "after the allocation (trailing red zone)"
                                                  : "after the allocation, past its trailing red zone");
      break;
    case StrayRegion::kBetweenViews: os << "inside the allocation, outside every view of the launch"; break;
  }
  if (nearest_view.empty()) {
    os << "; the launch declared no view of it";
  } else {
    os << "; nearest view '" << nearest_view << "' " << view.to_string() << " at " << describe_coords(view, coords);
  }
  return os.str();
}

bool ReadFence::available() {
#if defined(MLA_FENCE_ASAN)
  static const bool on = [] {
    const char* v = std::getenv("MLACHECK_READ_FENCE");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
#else
  return false;
#endif
}

ReadFence::~ReadFence() {
  if (armed_) disarm();
}

bool ReadFence::device_fences() {
  static const bool on = [] {
    const char* v = std::getenv("MLACHECK_DEVICE_FENCE");
    return v != nullptr && std::string(v) == "1";
  }();
  return on;
}

std::vector<FenceRun> fence_runs(const std::vector<NamedView>& views, int64_t bytes) {
  std::vector<FenceRun> runs;
  for (std::size_t i = 0; i < views.size(); ++i) {
    views[i].view.for_each_run([&](int64_t first, int64_t n) {
      const int64_t lo = std::max<int64_t>(first, 0), hi = std::min<int64_t>(first + n, bytes);
      if (hi > lo) runs.push_back({lo, hi, i});
    });
  }
  std::sort(runs.begin(), runs.end(), [](const FenceRun& a, const FenceRun& b) { return a.begin < b.begin; });
  std::vector<FenceRun> merged;
  for (const FenceRun& r : runs) {
    if (!merged.empty() && r.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, r.end);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

void ReadFence::add(GuardedMemory& memory, const std::vector<NamedView>& views) {
  // Reserved memory (core/reserved_buffer.h) is fenced already: its unbacked pages fault on any
  // access, and poisoning gigabytes of shadow would cost more than the launch.
  if (memory.backed() != nullptr) return;
  std::vector<Entry>& list = memory.on_device() ? device_ : entries_;
  if (memory.on_device() && !device_fences()) return;
  for (Entry& e : list) {
    if (e.memory != &memory) continue;
    e.views.insert(e.views.end(), views.begin(), views.end());
    return;
  }
  list.push_back({&memory, views});
}

void ReadFence::arm() {
  MLA_REQUIRE(!armed_, "read fence: armed twice");
  for (const Entry& e : device_) e.memory->fence_views(e.views);
  device_armed_ = !device_.empty();
  if (!available() || entries_.empty()) {
    armed_ = true;
    return;
  }
  FenceState& s = state();
  MLA_REQUIRE(!s.armed.load() && s.regions.empty(), "read fence: another fence is armed in this process");
  armed_ = fenced_ = true;
#if defined(MLA_FENCE_ASAN)
  s.regions.clear();
  for (const Entry& e : entries_) {
    uint8_t* const data = e.memory->data();
    const int64_t red = e.memory->red_zone(), size = e.memory->size();
    const uintptr_t begin = reinterpret_cast<uintptr_t>(data - red);
    s.regions.push_back({begin, begin + static_cast<uintptr_t>(size + 2 * red)});
    __asan_poison_memory_region(data - red, static_cast<size_t>(size + 2 * red));
    // The views' bytes made addressable again (a run that begins inside a granule opens the
    // granule from its start: AddressSanitizer's precision, see the header).
    for (const FenceRun& r : fence_runs(e.views, size)) {
      __asan_unpoison_memory_region(data + r.begin, static_cast<size_t>(r.end - r.begin));
    }
  }
  s.hit.store(false);
  s.armed.store(true);
#endif
}

std::optional<StrayAccess> ReadFence::disarm() {
  if (!armed_) return std::nullopt;
  armed_ = false;
  if (device_armed_) {
    for (const Entry& e : device_) e.memory->lift_fence();
    device_armed_ = false;
  }
  std::optional<StrayAccess> out;
  if (!fenced_) return out;
  fenced_ = false;
#if defined(MLA_FENCE_ASAN)
  FenceState& s = state();
  s.armed.store(false);
  unpoison_regions(s.regions);
  if (s.hit.exchange(false)) {
    // The allocation the access lies in, or else the nearest one.
    const Entry* nearest = nullptr;
    uint64_t best_distance = UINT64_MAX;
    for (const Entry& e : entries_) {
      const uintptr_t begin = reinterpret_cast<uintptr_t>(e.memory->data()),
                      end = begin + static_cast<uintptr_t>(e.memory->size());
      const uint64_t d = s.address < begin ? begin - s.address : s.address >= end ? s.address - end + 1 : 0;
      if (d < best_distance) best_distance = d, nearest = &e;
    }
    for (const Entry& e : entries_) {
      if (&e != nearest) continue;
      const uintptr_t data = reinterpret_cast<uintptr_t>(e.memory->data());
      const int64_t size = e.memory->size();
      StrayAccess a;
      a.write = s.write;
      a.bytes = s.bytes;
      a.buffer = e.memory->name();
      a.offset = static_cast<int64_t>(s.address) - static_cast<int64_t>(data);
      a.allocation_bytes = size;
      a.red_zone = e.memory->red_zone();
      a.region = a.offset < 0 ? StrayRegion::kBeforeAllocation
                              : a.offset >= size ? StrayRegion::kAfterAllocation : StrayRegion::kBetweenViews;
      int64_t best = INT64_MAX;
      for (const NamedView& v : e.views) {
        const ByteSpan sp = v.view.byte_span();
        const int64_t dist = a.offset < sp.begin ? sp.begin - a.offset : a.offset >= sp.end ? a.offset - sp.end + 1 : 0;
        if (dist >= best) continue;
        best = dist;
        a.nearest_view = v.name;
        a.view = v.view;
        a.coords = v.view.coords_of_byte(a.offset);
      }
      out = std::move(a);
      break;
    }
  }
  s.regions.clear();
#endif
  return out;
}

}  // namespace mlacheck
