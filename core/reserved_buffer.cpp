// Reserved guarded memory (core/reserved_buffer.h): address space reserved with mmap, the backed
// pages opened with mprotect, snapshots and checks over those pages only.
#include "core/reserved_buffer.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iterator>
#include <mutex>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "core/poison.h"
#include "core/shared_arena.h"
#include "core/tensor.h"

#if defined(__SANITIZE_ADDRESS__)
#define MLA_RESERVED_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MLA_RESERVED_ASAN 1
#endif
#endif
#if defined(MLA_RESERVED_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace mlacheck {

std::vector<ByteSpan> backed_pages(const std::vector<ByteSpan>& ranges, int64_t bytes, int64_t red_zone, int64_t page) {
  MLA_REQUIRE(page > 0 && red_zone >= 0 && bytes >= 0, "backed_pages: page ", page, ", red zone ", red_zone, ", bytes ", bytes);
  const auto down = [page](int64_t x) { return x >= 0 ? x / page * page : -((-x + page - 1) / page * page); };
  const auto up = [&](int64_t x) { return -down(-x); };
  std::vector<ByteSpan> spans;
  spans.push_back({down(-red_zone), up(0)});
  spans.push_back({down(bytes), up(bytes + red_zone)});
  for (const ByteSpan& r : ranges) {
    MLA_REQUIRE(r.begin >= 0 && r.end <= bytes, "backed range [", r.begin, ", ", r.end, ") lies outside the ", bytes,
                " bytes of the allocation");
    if (!r.empty()) spans.push_back({down(r.begin), up(r.end)});
  }
  std::sort(spans.begin(), spans.end(), [](const ByteSpan& a, const ByteSpan& b) { return a.begin < b.begin; });
  std::vector<ByteSpan> merged;
  for (const ByteSpan& s : spans) {
    if (s.empty()) continue;
    if (!merged.empty() && s.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, s.end);
    } else {
      merged.push_back(s);
    }
  }
  return merged;
}

// ---- live reservations, for a fault handler ------------------------------------------------------

namespace {

// A fixed table a signal handler can scan: begin != 0 marks a slot in use, published last.
struct Reservation {
  std::atomic<uintptr_t> begin{0};
  uintptr_t end = 0, data = 0;
  int64_t size = 0;
  char name[80] = {};
};
constexpr int kReservations = 64;
Reservation g_reservations[kReservations];
std::mutex g_reservations_mutex;

void add_reservation(const uint8_t* begin, int64_t bytes, const uint8_t* data, int64_t size, const std::string& name) {
  const std::lock_guard<std::mutex> lock(g_reservations_mutex);
  for (Reservation& r : g_reservations) {
    if (r.begin.load(std::memory_order_relaxed) != 0) continue;
    r.end = reinterpret_cast<uintptr_t>(begin) + static_cast<uintptr_t>(bytes);
    r.data = reinterpret_cast<uintptr_t>(data);
    r.size = size;
    const size_t n = std::min(name.size(), sizeof r.name - 1);
    std::memcpy(r.name, name.data(), n);
    r.name[n] = '\0';
    r.begin.store(reinterpret_cast<uintptr_t>(begin), std::memory_order_release);
    return;
  }  // a full table only loses the fault's description
}

void remove_reservation(const uint8_t* begin) {
  const std::lock_guard<std::mutex> lock(g_reservations_mutex);
  for (Reservation& r : g_reservations) {
    if (r.begin.load(std::memory_order_relaxed) == reinterpret_cast<uintptr_t>(begin)) r.begin.store(0);
  }
}

// Appends to a bounded buffer without allocating (for the signal handler).
struct Line {
  char* out;
  size_t n, k = 0;
  void add(const char* s) {
    while (*s && k + 1 < n) out[k++] = *s++;
    out[k < n ? k : n - 1] = '\0';
  }
  void add(uint64_t v) {
    char digits[24];
    int d = 0;
    do digits[d++] = static_cast<char>('0' + v % 10), v /= 10;
    while (v != 0);
    char s[24];
    for (int i = 0; i < d; ++i) s[i] = digits[d - 1 - i];
    s[d] = '\0';
    add(s);
  }
};

}  // namespace

bool describe_reserved_address(const void* addr, char* out, size_t n) {
  if (out == nullptr || n == 0) return false;
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  for (const Reservation& r : g_reservations) {
    const uintptr_t begin = r.begin.load(std::memory_order_acquire);
    if (begin == 0 || a < begin || a >= r.end) continue;
    Line line{out, n};
    line.add("reserved '");
    line.add(r.name);
    line.add("': ");
    const uintptr_t end = r.data + static_cast<uintptr_t>(r.size);
    constexpr uint64_t kGiB = uint64_t{1} << 30;
    if (a < r.data) {
      line.add(static_cast<uint64_t>(r.data - a));
      line.add(" bytes before its data, in its reserved margin");
      if (r.data - a > kGiB) line.add(", where an offset wrapped to 32 bits lands");
    } else if (a >= end) {
      line.add(static_cast<uint64_t>(a - end));
      line.add(" bytes past its end, in its reserved margin");
      if (a - end > kGiB) line.add(", where an offset wrapped to 32 bits lands");
    } else {
      line.add("byte ");
      line.add(static_cast<uint64_t>(a - r.data));
      line.add(" of its data, in a page the case did not stage");
    }
    return true;
  }
  return false;
}

LazyBytes::LazyBytes(int64_t bytes) : size_(bytes) {
  MLA_REQUIRE(bytes >= 0, "lazy bytes: negative size ", bytes);
  void* p = mmap(nullptr, static_cast<size_t>(std::max<int64_t>(bytes, 1)), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  MLA_REQUIRE(p != MAP_FAILED, "lazy bytes: cannot map ", bytes, " bytes");
  data_ = static_cast<uint8_t*>(p);
}

void LazyBytes::open(int64_t begin, int64_t end) {
  MLA_REQUIRE(begin >= 0 && begin <= end && end <= size_, "lazy bytes: range [", begin, ", ", end, ") of ", size_);
#if defined(MLA_RESERVED_ASAN)
  ASAN_UNPOISON_MEMORY_REGION(data_ + begin, static_cast<size_t>(end - begin));
#endif
}

LazyBytes::~LazyBytes() {
  if (data_ != nullptr) munmap(data_, static_cast<size_t>(std::max<int64_t>(size_, 1)));
}

ReservedBuffer::ReservedBuffer(std::string name, int64_t bytes, const std::vector<ByteSpan>& backed, int64_t red_zone,
                               bool writable)
    : GuardedMemory(std::move(name), bytes, red_zone, writable ? OutputViews::kUnmasked : OutputViews::kNone) {
  backed_ = backed_pages(backed, bytes, red_zone, kPage);
  const int64_t span = (bytes + kPage - 1) / kPage * kPage + 2 * kPage * ((red_zone + kPage - 1) / kPage);
  reservation_bytes_ = 2 * kMargin + span;
  if (shared_arena::active()) {
    // In a process that lends its memory to a Python worker: a span of the shared arena (sparse,
    // so unbacked pages cost nothing until touched, and every touch shows in mincore(2)), emptied
    // first. The worker maps it writable: there a stray write is seen as a touched page, not a fault.
    reservation_ = shared_arena::allocate(reservation_bytes_);
    MLA_REQUIRE(reservation_ != nullptr, "reserved buffer '", this->name(), "': the shared arena has no ",
                reservation_bytes_, " bytes left");
    shared_arena::discard(reservation_, reservation_bytes_);
    in_arena_ = true;
  } else {
    // Read-only everywhere: an unbacked page reads as zeros, and a write there faults. A memory
    // file, mapped shared: a read brings in a page of the file, which check() finds among the
    // file's few data extents. Without memfd_create, an anonymous mapping: a read maps the shared
    // zero page (no memory), which check() finds by its page table entry (mincore).
    fd_ = static_cast<int>(memfd_create("mlacheck-reserved", MFD_CLOEXEC));
    if (fd_ >= 0 && ftruncate(fd_, static_cast<off_t>(reservation_bytes_)) != 0) {
      close(fd_);
      fd_ = -1;
    }
    void* p = fd_ >= 0 ? mmap(nullptr, static_cast<size_t>(reservation_bytes_), PROT_READ, MAP_SHARED | MAP_NORESERVE,
                              fd_, 0)
                       : mmap(nullptr, static_cast<size_t>(reservation_bytes_), PROT_READ,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED && fd_ >= 0) close(fd_), fd_ = -1;
    MLA_REQUIRE(p != MAP_FAILED, "reserved buffer '", this->name(), "': cannot reserve ", reservation_bytes_,
                " bytes of address space");
    reservation_ = static_cast<uint8_t*>(p);
  }
  data_ = reservation_ + kMargin + kPage * ((red_zone + kPage - 1) / kPage);
  add_reservation(reservation_, reservation_bytes_, data_, size(), this->name());
  for (const ByteSpan& s : backed_) {
    if (!in_arena_ && mprotect(data_ + s.begin, static_cast<size_t>(s.size()), PROT_READ | PROT_WRITE) != 0) {
      remove_reservation(reservation_);
      munmap(reservation_, static_cast<size_t>(reservation_bytes_));
      if (fd_ >= 0) close(fd_);
      MLA_REQUIRE(false, "reserved buffer '", this->name(), "': cannot back ", s.size(), " bytes at offset ", s.begin);
    }
#if defined(MLA_RESERVED_ASAN)
    ASAN_UNPOISON_MEMORY_REGION(data_ + s.begin, static_cast<size_t>(s.size()));
#endif
    // The red-zone pattern outside the data (as wide as the pages holding the red zones), the
    // poison pattern inside it.
    for (int64_t i = s.begin; i < s.end; ++i) {
      const bool red = i < 0 || i >= size();
      data_[i] = red ? red_zone_byte(i) : poison_byte(i);
    }
  }
}

ReservedBuffer::~ReservedBuffer() {
  if (reservation_ == nullptr) return;
  remove_reservation(reservation_);
  if (in_arena_) {
    shared_arena::release(reservation_);  // punches the pages out
  } else {
    munmap(reservation_, static_cast<size_t>(reservation_bytes_));
    if (fd_ >= 0) close(fd_);
  }
}

bool inside_backed(const std::vector<ByteSpan>& backed, int64_t offset, int64_t bytes) {
  if (bytes == 0) return true;
  for (const ByteSpan& s : backed) {
    if (offset >= s.begin && offset + bytes <= s.end) return true;
  }
  return false;
}

std::vector<uint8_t> output_bytes(const std::string& buffer, const std::vector<ByteSpan>& backed,
                                  const std::vector<NamedView>& outputs) {
  if (outputs.empty()) return {};
  int64_t total = 0;
  std::vector<int64_t> first;  // each span's first byte in snapshot order
  for (const ByteSpan& s : backed) first.push_back(total), total += s.size();
  std::vector<uint8_t> mask(static_cast<size_t>(total), 0);
  for (const NamedView& o : outputs) {
    const int64_t es = o.view.element_size();
    o.view.for_each_byte_offset([&](int64_t off) {
      const auto it = std::upper_bound(backed.begin(), backed.end(), off,
                                       [](int64_t x, const ByteSpan& s) { return x < s.begin; });
      MLA_REQUIRE(it != backed.begin() && off + es <= std::prev(it)->end, "reserved buffer '", buffer,
                  "': output view '", o.name, "' ", o.view.to_string(), " has an element at byte ", off,
                  " outside the backed pages");
      const int64_t span = std::prev(it) - backed.begin();
      std::fill_n(mask.begin() + first[static_cast<size_t>(span)] + off - std::prev(it)->begin, es, uint8_t{1});
    });
  }
  return mask;
}

void ReservedBuffer::write(int64_t offset, const void* src, int64_t bytes) {
  require_inside(offset, bytes, "write");
  MLA_REQUIRE(inside_backed(backed_, offset, bytes), "reserved buffer '", name(), "': write of ", bytes,
              " bytes at offset ", offset, " reaches unbacked pages");
  if (bytes > 0) std::memcpy(data_ + offset, src, static_cast<size_t>(bytes));
}

void ReservedBuffer::read(int64_t offset, void* dst, int64_t bytes) const {
  require_inside(offset, bytes, "read");
  MLA_REQUIRE(inside_backed(backed_, offset, bytes), "reserved buffer '", name(), "': read of ", bytes,
              " bytes at offset ", offset, " reaches unbacked pages");
  if (bytes > 0) std::memcpy(dst, data_ + offset, static_cast<size_t>(bytes));
}

void ReservedBuffer::arm() {
  if (unbacked_access_) {  // drop the zero pages an earlier launch brought in
    for (const ByteSpan& r : unbacked_pages_touched()) {
      if (in_arena_) {
        shared_arena::discard(data_ + r.begin, r.size());
      } else if (fd_ >= 0) {  // the file's pages go, and with them every mapping of them
        fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(data_ - reservation_ + r.begin),
                  static_cast<off_t>(r.size()));
      } else {
        madvise(data_ + r.begin, static_cast<size_t>(r.size()), MADV_DONTNEED);
      }
    }
    unbacked_access_ = false;
  }
  for (const ByteSpan& s : backed_) {  // the red zones, as wide as their pages
    for (int64_t i = s.begin; i < std::min<int64_t>(s.end, 0); ++i) data_[i] = red_zone_byte(i);
    for (int64_t i = std::max(s.begin, size()); i < s.end; ++i) data_[i] = red_zone_byte(i);
  }
  // The output views: every byte inside the backed pages, marked and poisoned.
  in_output_ = output_bytes(name(), backed_, outputs());
  for (const NamedView& o : outputs()) poison_output(HostTensor(data_, o.view));
  snapshot_.clear();
  for (const ByteSpan& s : backed_) snapshot_.insert(snapshot_.end(), data_ + s.begin, data_ + s.end);
  armed_ = true;
}

std::vector<ByteSpan> ReservedBuffer::unbacked_pages_touched() const {
  // The memory file under the reservation and the file offset of its first byte: its own, or the
  // shared arena's (a span of it, the arena's other allocations outside the range searched).
  int fd = fd_;
  int64_t file_begin = 0;
  if (in_arena_) {
    const shared_arena::Arena arena = shared_arena::current();
    fd = arena.fd;
    file_begin = reservation_ - arena.base;
  }
  if (fd >= 0) {
    // The file's data extents, less the backed spans.
    const int64_t base = file_begin + (data_ - reservation_);  // the file offset of data offset 0
    const int64_t file_end = file_begin + reservation_bytes_;
    std::vector<ByteSpan> touched;
    const auto add = [&](int64_t begin, int64_t end) {  // data offsets
      if (begin >= end) return;
      if (!touched.empty() && touched.back().end == begin) {
        touched.back().end = end;
      } else {
        touched.push_back({begin, end});
      }
    };
    for (off_t at = static_cast<off_t>(file_begin); at < file_end;) {
      const off_t data = lseek(fd, at, SEEK_DATA);
      if (data < 0 || data >= file_end) break;  // ENXIO: no data past at
      off_t hole = lseek(fd, data, SEEK_HOLE);
      if (hole < 0 || hole > file_end) hole = static_cast<off_t>(file_end);
      int64_t from = static_cast<int64_t>(data) - base;
      const int64_t to = static_cast<int64_t>(hole) - base;
      for (const ByteSpan& s : backed_) {  // in increasing order
        if (s.end <= from) continue;
        if (s.begin >= to) break;
        add(from, std::min(s.begin, to));
        from = std::max(from, s.end);
      }
      add(from, to);
      at = hole;
    }
    return touched;
  }
  const int64_t pages = reservation_bytes_ / kPage;
  // A byte per page of up to tens of GiB of reservation: kept from check to check (mincore fills
  // every byte), and scanned eight at a time, since nearly every page is untouched.
  static thread_local std::vector<unsigned char> resident;
  if (resident.size() < static_cast<size_t>(pages)) resident.resize(static_cast<size_t>(pages));
  MLA_REQUIRE(mincore(reservation_, static_cast<size_t>(reservation_bytes_), resident.data()) == 0,
              "reserved buffer '", name(), "': mincore failed");
  const int64_t first = (data_ - reservation_) / kPage;  // the page of data offset 0
  std::vector<ByteSpan> read;
  size_t next = 0;  // the first backed span not below the page
  for (int64_t i = 0; i < pages; ++i) {
    if (i + 8 <= pages && (i & 7) == 0) {
      uint64_t word;
      std::memcpy(&word, resident.data() + i, 8);
      if ((word & 0x0101010101010101ull) == 0) {
        i += 7;  // none of the eight is resident
        continue;
      }
    }
    if (!(resident[static_cast<size_t>(i)] & 1)) continue;
    const int64_t off = (i - first) * kPage;
    while (next < backed_.size() && backed_[next].end <= off) ++next;
    if (next < backed_.size() && backed_[next].begin <= off) continue;  // a backed page
    if (!read.empty() && read.back().end == off) {
      read.back().end += kPage;
    } else {
      read.push_back({off, off + kPage});
    }
  }
  return read;
}

GuardReport ReservedBuffer::check() const {
  MLA_REQUIRE(armed_, "reserved buffer '", name(), "': check() before arm()");
  GuardReport report;
  // Reads of unbacked pages first: the lowest one is the report, each page counts as one.
  const std::vector<ByteSpan> read = unbacked_pages_touched();
  for (const ByteSpan& r : read) {
    if (report.stray_bytes == 0) {
      report.first = describe_stray(r.begin, 0, 0);
      report.first.unbacked_access = true;
    }
    report.stray_bytes += r.size() / kPage;
    report.last_offset = r.end - kPage;
  }
  if (!report.ok()) {
    unbacked_access_ = true;
    return report;
  }
  size_t at = 0;
  for (const ByteSpan& s : backed_) {
    if (in_output_.empty()) {
      tally_changes(report, s.begin, snapshot_.data() + at, data_ + s.begin, s.size());
    } else {
      tally_changes_outside(report, s.begin, snapshot_.data() + at, data_ + s.begin, s.size(), in_output_.data() + at);
    }
    at += static_cast<size_t>(s.size());
  }
  return report;
}

}  // namespace mlacheck
