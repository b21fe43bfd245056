// Guarded host buffers: red zones, poison, output masks and the stray-write check.
#include "core/guarded_buffer.h"
#include "core/shared_arena.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include <sys/mman.h>

#include "core/error.h"
#include "core/poison.h"
#include "core/quarantine.h"

#if defined(__SANITIZE_ADDRESS__)
#define MLA_GUARD_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MLA_GUARD_ASAN 1
#endif
#endif
#if defined(MLA_GUARD_ASAN)
#include <sanitizer/asan_interface.h>
#define MLA_ASAN_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, static_cast<size_t>(n))
#define MLA_ASAN_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, static_cast<size_t>(n))
// Links the read fence (core/read_fence.cpp) and its AddressSanitizer options into every program
// with guarded memory: halt_on_error=0, which the fence needs, comes with its error hooks.
extern "C" int mlacheck_read_fence_anchor;
__attribute__((used)) static int* const read_fence_anchor = &mlacheck_read_fence_anchor;
#else
#define MLA_ASAN_POISON(p, n) ((void)(p), (void)(n))
#define MLA_ASAN_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace mlacheck {

const char* stray_region_name(StrayRegion r) {
  switch (r) {
    case StrayRegion::kBeforeAllocation: return "before the allocation (leading red zone)";
    case StrayRegion::kAfterAllocation: return "after the allocation (trailing red zone)";
    case StrayRegion::kBetweenViews: return "inside the allocation, outside every output view";
  }
  return "?";
}


std::string StrayWrite::describe() const {
  std::ostringstream os;
  if (unbacked_access) {
    // Bytes touched past the ends of reserved memory lie in its reserved margins: a far access is
    // the mark of an offset computed in 32 bits, wrapped by 2^32.
    os << "buffer '" << buffer << "': an access to unbacked memory in the page at byte " << offset;
    if (region == StrayRegion::kBetweenViews) {
      os << ", inside the reserved allocation but in no page the case staged";
    } else if (region == StrayRegion::kAfterAllocation) {
      os << ", after the allocation";
    } else {
      const double gib = double(-offset) / double(int64_t{1} << 30);
      os << ", " << gib << " GiB before the allocation";
      if (gib > 1) os << " (where an offset wrapped to 32 bits lands)";
    }
    return os.str();
  }
  os << "buffer '" << buffer << "': stray write at byte " << offset << ", "
     << stray_region_name(region) << "; expected 0x" << std::hex << int(expected) << ", found 0x"
     << int(actual) << std::dec;
  if (nearest_view.empty()) {
    os << "; no output views were declared";
  } else {
    os << "; nearest output view '" << nearest_view << "' " << view.to_string() << " at "
       << describe_coords(view, coords);
  }
  return os.str();
}

std::string GuardReport::describe() const {
  if (ok()) return "ok: no byte outside the output views changed";
  std::ostringstream os;
  if (first.unbacked_access) {  // reserved memory: counted in pages
    os << stray_bytes << " unbacked page" << (stray_bytes == 1 ? "" : "s") << " touched (last at byte " << last_offset
       << "); first: " << first.describe();
    return os.str();
  }
  os << stray_bytes << " stray byte" << (stray_bytes == 1 ? "" : "s") << " (last at byte " << last_offset
     << "); first: " << first.describe();
  return os.str();
}

uint8_t GuardedMemory::red_zone_byte(int64_t off) {
  return static_cast<uint8_t>(0xFD ^ static_cast<uint8_t>(off * 0x3B));
}
uint8_t GuardedMemory::poison_byte(int64_t off) {
  return static_cast<uint8_t>(0xA5 ^ static_cast<uint8_t>(off * 0x9D));
}

GuardedMemory::GuardedMemory(std::string name, int64_t bytes, int64_t red_zone, OutputViews outputs)
    : name_(std::move(name)), size_(bytes), red_zone_(red_zone), outputs_mode_(outputs) {
  MLA_REQUIRE(bytes >= 0, "guarded buffer '", name_, "': negative size ", bytes);
  MLA_REQUIRE(red_zone >= 256 && red_zone % 256 == 0, "guarded buffer '", name_, "': red zone of ",
              red_zone, " bytes; it must be a multiple of 256, at least 256");
  if (outputs_mode_ == OutputViews::kMasked) output_mask_.assign(static_cast<size_t>((size_ + 7) / 8), 0);
}

GuardedMemory::GuardedMemory(GuardedMemory&&) noexcept = default;
GuardedMemory& GuardedMemory::operator=(GuardedMemory&&) noexcept = default;
GuardedMemory::~GuardedMemory() = default;

void GuardedMemory::retire_to(std::shared_ptr<Quarantine> q) { quarantine_ = std::move(q); }

bool GuardedMemory::retiring() const { return quarantine_ != nullptr && quarantine_->holding(); }

void GuardedMemory::hand_to_quarantine(std::unique_ptr<GuardedMemory> m) noexcept {
  const std::shared_ptr<Quarantine> q = std::move(m->quarantine_);  // kept memory is freed, not kept again
  q->keep(std::move(m));
}

void GuardedMemory::require_inside(int64_t offset, int64_t bytes, const char* what) const {
  MLA_REQUIRE(offset >= 0 && bytes >= 0 && offset + bytes <= size_, "guarded buffer '", name_, "' (",
              size_, " bytes): ", what, " of ", bytes, " bytes at offset ", offset, " reaches outside it");
}

void GuardedMemory::declare_output(std::string view_name, const View& v) {
  MLA_REQUIRE(outputs_mode_ != OutputViews::kNone, "guarded buffer '", name_, "': output view '", view_name,
              "' declared on input-only memory (this reserved allocation may not be written)");
  const ByteSpan span = v.byte_span();
  MLA_REQUIRE(span.empty() || span.end <= size_, "guarded buffer '", name_, "' (", size_,
              " bytes): output view '", view_name, "' ", v.to_string(), " reaches byte ", span.end);
  if (outputs_mode_ == OutputViews::kUnmasked) {  // no mask: views whose spans are apart
    for (const NamedView& o : outputs_) {
      const ByteSpan other = o.view.byte_span();
      MLA_REQUIRE(span.empty() || other.empty() || span.end <= other.begin || other.end <= span.begin,
                  "guarded buffer '", name_, "': output view '", view_name, "' ", v.to_string(),
                  " overlaps the span of output view '", o.name, "' (reserved memory takes output views apart)");
    }
    outputs_.push_back({std::move(view_name), v});
    armed_ = false;
    return;
  }
  // Marks [begin, end) in the mask, in place, a whole byte of bits at a time; each run marked is
  // remembered, so that an overlap found later takes back what this view marked before the error.
  std::vector<uint8_t>& mask = output_mask_;
  std::vector<ByteSpan> marked;
  const auto bits_of = [](int64_t b, int64_t end) {
    const int64_t lo = b & 7, hi = std::min<int64_t>(8, lo + (end - b));
    return std::make_pair(static_cast<uint8_t>(((1u << hi) - 1) & ~((1u << lo) - 1)), hi - lo);
  };
  auto mark = [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end;) {
      // Whole mask bytes at once where the run covers them: free (all zero) ones are set with one
      // fill; one already marked falls through to the bit-wise path below, which names the byte.
      if ((b & 7) == 0 && end - b >= 8) {
        uint8_t* const from = &mask[b >> 3];
        uint8_t* const to = from + (end - b) / 8;
        uint8_t* const taken = std::find_if(from, to, [](uint8_t x) { return x != 0; });
        std::fill(from, taken, uint8_t{0xFF});
        b += 8 * (taken - from);
        if (taken == to) continue;
      }
      uint8_t& m = mask[b >> 3];
      const auto [bits, n] = bits_of(b, end);
      if (m & bits) {
        int64_t at = b;
        while (!((m >> (at & 7)) & 1)) ++at;
        for (const ByteSpan& r : marked) {
          for (int64_t c = r.begin; c < r.end;) {
            const auto [done, k] = bits_of(c, r.end);
            mask[c >> 3] &= static_cast<uint8_t>(~done);
            c += k;
          }
        }
        for (int64_t c = begin; c < b;) {
          const auto [done, k] = bits_of(c, b);
          mask[c >> 3] &= static_cast<uint8_t>(~done);
          c += k;
        }
        MLA_REQUIRE(false, "guarded buffer '", name_, "': output view '", view_name, "' ", v.to_string(),
                    " overlaps itself or an earlier output at byte ", at);
      }
      m |= bits;
      b += n;
    }
    marked.push_back({begin, end});
  };
  // Runs of adjacent elements (View::for_each_run: the whole view when contiguous, else rows or
  // elements), consecutive runs merged.
  int64_t run_begin = 0, run_end = -1;
  v.for_each_run([&](int64_t first, int64_t n) {
    if (first == run_end) {
      run_end += n;
      return;
    }
    if (run_end >= 0) mark(run_begin, run_end);
    run_begin = first;
    run_end = first + n;
  });
  if (run_end >= 0) mark(run_begin, run_end);
  outputs_.push_back({std::move(view_name), v});
  armed_ = false;
}

void GuardedMemory::clear_outputs() {
  outputs_.clear();
  std::fill(output_mask_.begin(), output_mask_.end(), 0);
  armed_ = false;
}

StrayWrite GuardedMemory::describe_stray(int64_t off, uint8_t expected, uint8_t actual) const {
  StrayWrite s;
  s.buffer = name_;
  s.offset = off;
  s.region = off < 0 ? StrayRegion::kBeforeAllocation
                     : off >= size_ ? StrayRegion::kAfterAllocation : StrayRegion::kBetweenViews;
  s.expected = expected;
  s.actual = actual;
  // Nearest output view: least distance from the byte to the view's span.
  int64_t best = INT64_MAX;
  for (const NamedView& o : outputs_) {
    const ByteSpan sp = o.view.byte_span();
    const int64_t dist = off < sp.begin ? sp.begin - off : off >= sp.end ? off - sp.end + 1 : 0;
    if (dist < best) {
      best = dist;
      s.nearest_view = o.name;
      s.view = o.view;
      s.coords = o.view.coords_of_byte(off);
    }
  }
  return s;
}

void GuardedMemory::tally_changes(GuardReport& r, int64_t offset, const uint8_t* was, const uint8_t* now,
                                  int64_t n) const {
  if (std::memcmp(was, now, static_cast<size_t>(n)) == 0) return;
  for (int64_t i = 0; i < n; ++i) {
    if (was[i] == now[i]) continue;
    if (r.stray_bytes++ == 0) r.first = describe_stray(offset + i, was[i], now[i]);
    r.last_offset = offset + i;
  }
}

void GuardedMemory::tally_changes_outside(GuardReport& r, int64_t offset, const uint8_t* was, const uint8_t* now,
                                          int64_t n, const uint8_t* in_output) const {
  for (int64_t i = 0; i < n;) {
    int64_t j = i;
    while (j < n && in_output[j] == 0) ++j;
    if (j > i) tally_changes(r, offset + i, was + i, now + i, j - i);
    while (j < n && in_output[j] != 0) ++j;
    i = j;
  }
}

namespace {

// One period of a guard pattern: the byte at every offset modulo 256 (both patterns repeat every
// 256 offsets).
struct PatternPeriod {
  uint8_t byte[256];
};
const PatternPeriod& period_of(bool red) {
  static const auto make = [](uint8_t (*pattern)(int64_t)) {
    PatternPeriod t;
    for (int i = 0; i < 256; ++i) t.byte[i] = pattern(i);
    return t;
  };
  static const PatternPeriod red_zone = make(&GuardedMemory::red_zone_byte), poison = make(&GuardedMemory::poison_byte);
  return red ? red_zone : poison;
}

// Writes the pattern's byte at offset first + i to dst[i] for i in [0, n): one period copied from
// the table, then doubled (a byte loop over a 32 MiB buffer dominated small cases; calling the
// pattern per byte through a pointer, even over one period, cost a small case 13%: the red zones
// are filled at every arm).
void fill_pattern(uint8_t* dst, int64_t first, int64_t n, bool red) {
  const PatternPeriod& table = period_of(red);
  const int64_t period = std::min<int64_t>(n, 256);
  const int64_t at = first & 0xFF, head = std::min<int64_t>(period, 256 - at);  // table[at..], then table[0..]
  std::memcpy(dst, table.byte + at, static_cast<size_t>(head));
  std::memcpy(dst + head, table.byte, static_cast<size_t>(period - head));
  for (int64_t done = period; done < n;) {
    const int64_t chunk = std::min(done, n - done);  // a whole number of periods already written
    std::memcpy(dst + done, dst, static_cast<size_t>(chunk));
    done += chunk;
  }
}

// Blocks of 64 KiB and more are mapped in power-of-two size classes and, once freed, wait here,
// last freed first out, for the next allocation of their class: the allocator (AddressSanitizer's
// above all) maps a fresh large block for each, and faulting in its pages was a third of a small
// MLA case's time. They are mapped, not allocated, so LeakSanitizer does not scan the waiting
// blocks at exit or at libFuzzer's leak checks. At most 256 MiB wait; under ASan a waiting block is
// poisoned, so a kernel that touches a freed buffer is still reported.
class BlockCache {
 public:
  static constexpr int kSmallestLog2 = 16, kClasses = 32;  // 64 KiB to 128 TiB
  static constexpr int64_t kSmallest = int64_t{1} << kSmallestLog2;
  static constexpr int64_t kMaxCached = int64_t{1} << 28;
  static constexpr int kPerClass = 32;

  static BlockCache& instance() {
    static BlockCache cache;  // trivially destructible: buffers may be freed at exit
    return cache;
  }
  static int size_class(int64_t bytes) {
    int c = 0;
    while ((kSmallest << c) < bytes) ++c;
    return c;
  }
  static int64_t class_bytes(int c) { return kSmallest << c; }
  // A block of class c, or null when none can be mapped. Nothing here allocates from the heap:
  // libFuzzer reruns an input under LeakSanitizer whenever it mallocs more than it frees.
  uint8_t* take(int c) {
    const int64_t bytes = class_bytes(c);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (count_[c] > 0) {
        uint8_t* p = free_[c][--count_[c]];
        cached_ -= bytes;
        MLA_ASAN_UNPOISON(p, bytes);
        return p;
      }
    }
    void* p = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    // The range may have been unmapped by ASan's allocator with its shadow still poisoned.
    MLA_ASAN_UNPOISON(p, bytes);
    return static_cast<uint8_t*>(p);
  }
  void give(uint8_t* p, int c) {
    const int64_t bytes = class_bytes(c);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cached_ + bytes <= kMaxCached && count_[c] < kPerClass) {
        MLA_ASAN_POISON(p, bytes);
        free_[c][count_[c]++] = p;
        cached_ += bytes;
        return;
      }
    }
    MLA_ASAN_UNPOISON(p, bytes);  // the range may be mapped again, by anyone
    munmap(p, static_cast<size_t>(bytes));
  }

 private:
  std::mutex mutex_;
  uint8_t* free_[kClasses][kPerClass] = {};
  int count_[kClasses] = {};
  int64_t cached_ = 0;
};

}  // namespace

GuardedBuffer::Block GuardedBuffer::allocate_block(int64_t bytes) {
  if (shared_arena::active()) {  // a process that lends its buffers to a Python worker
    uint8_t* p = shared_arena::allocate(std::max<int64_t>(bytes, 1));
    return Block(p, Free(-1));
  }
  if (bytes < BlockCache::kSmallest) {
    bytes = std::max<int64_t>(256, (bytes + 255) / 256 * 256);
    return Block(static_cast<uint8_t*>(std::aligned_alloc(256, static_cast<size_t>(bytes))), Free(0));
  }
  const int c = BlockCache::size_class(bytes);
  MLA_REQUIRE(c < BlockCache::kClasses, "guarded buffer: ", bytes, " bytes is more than a buffer may have");
  uint8_t* p = BlockCache::instance().take(c);
  // The class's bytes past the request stay out of bounds for ASan, as an allocator's red zone would.
  const int64_t used = (bytes + 7) / 8 * 8, mapped = BlockCache::class_bytes(c);
  if (p != nullptr && used < mapped) MLA_ASAN_POISON(p + used, mapped - used);
  return Block(p, Free(c + 1));
}

// cached_class: 1 + the size class of a mapped block; 0 for a block from aligned_alloc.
void GuardedBuffer::Free::operator()(uint8_t* p) const {
  if (p == nullptr) return;
  if (cached_class < 0) {
    shared_arena::release(p);
  } else if (cached_class > 0) {
    BlockCache::instance().give(p, cached_class - 1);
  } else {
    std::free(p);
  }
}

GuardedBuffer::GuardedBuffer(std::string name, int64_t bytes, int64_t red_zone)
    : GuardedMemory(std::move(name), bytes, red_zone) {
  const int64_t total = size() + 2 * red_zone;
  storage_ = allocate_block(total);
  MLA_REQUIRE(storage_ != nullptr, "guarded buffer '", this->name(), "': cannot allocate ", total, " bytes");
  fill_red_zones();
  fill_pattern(data(), 0, size(), false);
}

GuardedBuffer::GuardedBuffer(GuardedBuffer&&) noexcept = default;
GuardedBuffer& GuardedBuffer::operator=(GuardedBuffer&&) noexcept = default;
GuardedBuffer::~GuardedBuffer() { retire(*this); }

void GuardedBuffer::fill_red_zones() {
  fill_pattern(data() - red_zone(), -red_zone(), red_zone(), true);
  fill_pattern(data() + size(), size(), red_zone(), true);
}

void GuardedBuffer::write(int64_t offset, const void* src, int64_t bytes) {
  require_inside(offset, bytes, "write");
  if (bytes > 0) std::memcpy(data() + offset, src, static_cast<size_t>(bytes));
}

void GuardedBuffer::read(int64_t offset, void* dst, int64_t bytes) const {
  require_inside(offset, bytes, "read");
  if (bytes > 0) std::memcpy(dst, data() + offset, static_cast<size_t>(bytes));
}

HostTensor GuardedBuffer::tensor(const View& v) {
  const ByteSpan span = v.byte_span();
  MLA_REQUIRE(span.empty() || span.end <= size(), "guarded buffer '", name(), "' (", size(),
              " bytes): view ", v.to_string(), " reaches byte ", span.end);
  return HostTensor(data(), v);
}

void GuardedBuffer::arm() {
  for (const NamedView& o : outputs()) poison_output(HostTensor(data(), o.view));
  fill_red_zones();
  const int64_t total = size() + 2 * red_zone();
  if (snapshot_ == nullptr) {
    snapshot_ = allocate_block(total);
    MLA_REQUIRE(snapshot_ != nullptr, "guarded buffer '", name(), "': cannot allocate ", total, " bytes");
  }
  std::memcpy(snapshot_.get(), storage_.get(), static_cast<size_t>(total));
  armed_ = true;
}

namespace {

// Whether n bytes at a and b are equal, 8 at a time. Not memcmp: under ASan and libFuzzer that is
// intercepted (both ranges checked for poison, and the comparison recorded for the fuzzer), which
// made the guard check a tenth of a small top-k case's time. The bytes are the buffer's own, so
// ASan's checks are left out here too.
#if defined(__clang__) || defined(__GNUC__)
__attribute__((no_sanitize("address")))
#endif
bool same_bytes(const uint8_t* a, const uint8_t* b, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x, y;
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    if (x != y) return false;
  }
  for (; i < n; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

}  // namespace

GuardReport GuardedBuffer::check() const {
  MLA_REQUIRE(armed_, "guarded buffer '", name(), "': check() before arm() (or outputs changed since)");
  GuardReport report;
  const uint8_t* now = storage_.get();
  const uint8_t* was = snapshot_.get();
  const int64_t total = size() + 2 * red_zone();
  // Unchanged stretches are skipped with memcmp; in a changed one, 8 bytes at a time are compared
  // against one byte of the output mask (the red zone is a multiple of 8, so data offsets of a
  // word are 8-aligned and the word's 8 mask bits are one mask byte).
  const uint8_t* mask = output_mask().data();
  auto stray = [&](int64_t i) {
    const int64_t off = i - red_zone();
    if (report.stray_bytes++ == 0) report.first = describe_stray(off, was[i], now[i]);
    report.last_offset = off;
  };
  int64_t i = 0;
  while (i < total) {
    const int64_t end = std::min<int64_t>(i + 4096, total);
    if (same_bytes(now + i, was + i, end - i)) {
      i = end;
      continue;
    }
    for (; i < end; i += 8) {
      uint64_t a = 0, b = 0;
      const int64_t n = std::min<int64_t>(8, end - i);
      std::memcpy(&a, now + i, static_cast<size_t>(n));
      std::memcpy(&b, was + i, static_cast<size_t>(n));
      if (a == b) continue;
      const int64_t off = i - red_zone();
      const uint8_t allowed = off >= 0 && off < size() ? mask[off >> 3] : 0;
      if (allowed == 0xFF) continue;  // eight output bytes: the usual changed word
      for (int64_t j = 0; j < n; ++j) {
        if (now[i + j] != was[i + j] && !((allowed >> j) & 1)) stray(i + j);
      }
    }
  }
  return report;
}

}  // namespace mlacheck
