#include "core/storage_watch.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "core/error.h"
#ifdef MLACHECK_GUARD_CUDA
#include "core/backend/cuda_storage_watch.h"
#endif

namespace mlacheck {

StorageWatch::StorageWatch(const uint8_t* base, int64_t bytes, int64_t exact_limit, bool device)
    : base_(base), bytes_(bytes), exact_limit_(exact_limit), device_(device) {
#ifndef MLACHECK_GUARD_CUDA
  MLA_REQUIRE(!device, "storage watch: a CUDA storage, and this libmlacheck_guard.so was built without CUDA "
              "(build mlacheck where nvcc is, or take the GPU bundle's)");
#endif
  MLA_REQUIRE(bytes >= 0, "storage watch: negative size ", bytes);
  MLA_REQUIRE(base != nullptr || bytes == 0, "storage watch: no memory for ", bytes, " bytes");
}

StorageWatch::~StorageWatch() { release_device(); }

void StorageWatch::release_device() {
#ifdef MLACHECK_GUARD_CUDA
  for (void** p : {&d_snapshot_, &d_writable_, &d_was_, &d_sums_}) {
    watch_cuda::release(*p);
    *p = nullptr;
  }
#endif
}

int64_t StorageWatch::copy_snapshot(uint8_t* dst, int64_t len) const {
  if (!armed_ || window_begin_ != 0 || window_end_ != bytes_ || len != bytes_) return 0;
#ifdef MLACHECK_GUARD_CUDA
  if (device_) {
    watch_cuda::copy_to_host(dst, d_snapshot_, len);
    return len;
  }
#endif
  std::memcpy(dst, snapshot_.data(), static_cast<size_t>(len));
  return len;
}

void StorageWatch::mark(std::vector<uint64_t>& bits, const View& v, int64_t origin) {
  if (v.numel() == 0) return;
  const int64_t es = v.element_size();
  const int rank = v.rank();
  auto set_run = [&](int64_t b, int64_t n) {
    b -= origin;
    int64_t i = b;
    const int64_t e = b + n;
    for (; i < e && (i & 63); ++i) bits[i >> 6] |= uint64_t{1} << (i & 63);
    for (; i + 64 <= e; i += 64) bits[i >> 6] = ~uint64_t{0};
    for (; i < e; ++i) bits[i >> 6] |= uint64_t{1} << (i & 63);
  };
  if (rank == 0) {
    set_run(v.byte_offset(), es);
    return;
  }
  const int64_t inner = v.size(rank - 1), inner_stride = v.stride(rank - 1);
  std::vector<int64_t> idx(static_cast<size_t>(rank - 1), 0);
  for (;;) {
    int64_t row = v.byte_offset();
    for (int d = 0; d < rank - 1; ++d) row += idx[d] * v.stride(d) * es;
    if (inner_stride == 1) {
      set_run(row, inner * es);
    } else {
      for (int64_t j = 0; j < inner; ++j) set_run(row + j * inner_stride * es, es);
    }
    int d = rank - 2;
    while (d >= 0 && ++idx[d] == v.size(d)) idx[d--] = 0;
    if (d < 0) return;
  }
}

void StorageWatch::add_view(std::string label, const View& v, bool may_write) {
  const ByteSpan s = v.byte_span();
  MLA_REQUIRE(s.empty() || (s.begin >= 0 && s.end <= bytes_), "storage watch: ", label, " reaches bytes [", s.begin,
              ", ", s.end, ") of a storage of ", bytes_);
  views_.push_back({std::move(label), v, may_write});
  armed_ = false;
}

namespace {
// A 64-bit sum of bytes [b, e) of base, each 8-byte word mixed with its position: a change confined
// to one word always changes it, any other change is missed with probability about 2^-64.
uint64_t sum_range(const uint8_t* base, int64_t b, int64_t e) {
  uint64_t sum = 0;
  for (int64_t i = b; i < e; i += 8) {
    uint64_t w = 0;
    const int64_t n = std::min<int64_t>(8, e - i);
    std::memcpy(&w, base + i, static_cast<size_t>(n));
    uint64_t h = (w ^ (static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    sum += h * 0x94D049BB133111EBull + static_cast<uint64_t>(n);
  }
  return sum;
}
}  // namespace

uint64_t StorageWatch::block_sum(int64_t block) const {
  // Only the parts of the block outside the exact window.
  const int64_t b = block * kBlock, e = std::min(bytes_, b + kBlock);
  uint64_t sum = 0;
  if (b < window_begin_) sum += sum_range(base_, b, std::min(e, window_begin_));
  if (e > window_end_) sum += sum_range(base_, std::max(b, window_end_), e);
  return sum;
}

void StorageWatch::arm() {
  if (bytes_ <= exact_limit_ || views_.empty()) {
    window_begin_ = 0;
    window_end_ = bytes_ <= exact_limit_ ? bytes_ : 0;
  } else {
    int64_t lo = bytes_, hi = 0;
    for (const Watched& w : views_) {
      const ByteSpan s = w.view.byte_span();
      if (s.empty()) continue;
      lo = std::min(lo, s.begin);
      hi = std::max(hi, s.end);
    }
    if (hi <= lo) lo = hi = 0;
    window_begin_ = std::max<int64_t>(0, lo - kMargin);
    window_end_ = std::min(bytes_, hi + kMargin);
  }
  const int64_t blocks = (bytes_ + kBlock - 1) / kBlock;
  // The views' bits, over the window only (every view lies inside it).
  const size_t words = static_cast<size_t>((window_end_ - window_begin_ + 63) / 64);
  writable_.assign(words, 0);
  read_only_.assign(words, 0);
  for (const Watched& w : views_) mark(w.may_write ? writable_ : read_only_, w.view, window_begin_);
#ifdef MLACHECK_GUARD_CUDA
  if (device_) {
    release_device();
    watch_cuda::use_device_of(base_);
    const int64_t n = window_end_ - window_begin_;
    d_snapshot_ = watch_cuda::alloc(n);
    watch_cuda::copy_on_device(d_snapshot_, base_ + window_begin_, n);
    // The writable bits of the window, from its first byte.
    d_writable_ = watch_cuda::alloc(static_cast<int64_t>(writable_.size() * 8));
    watch_cuda::copy_to_device(d_writable_, writable_.data(), static_cast<int64_t>(writable_.size() * 8));
    blocks_ = window_begin_ > 0 || window_end_ < bytes_ ? blocks : 0;
    if (blocks_ > 0) {
      d_was_ = watch_cuda::alloc(blocks_ * 8);
      d_sums_ = watch_cuda::alloc(blocks_ * 8);
      watch_cuda::block_sums(base_, bytes_, window_begin_, window_end_, static_cast<uint64_t*>(d_was_), kBlock);
    }
    armed_ = true;
    return;
  }
#endif
  snapshot_.assign(base_ + window_begin_, base_ + window_end_);
  sums_.clear();
  if (window_begin_ > 0 || window_end_ < bytes_) {
    sums_.resize(static_cast<size_t>(blocks));
    for (int64_t b = 0; b < blocks; ++b) sums_[b] = block_sum(b);
  }
  armed_ = true;
}

void StorageWatch::locate(WatchReport& r, int64_t off) const {
  // The view holding the byte, else the nearest by distance to its span.
  int64_t best = INT64_MAX;
  for (size_t i = 0; i < views_.size(); ++i) {
    const ByteSpan s = views_[i].view.byte_span();
    const int64_t dist = off < s.begin ? s.begin - off : off >= s.end ? off - s.end + 1 : 0;
    if (dist < best) {
      best = dist;
      r.view = static_cast<int>(i);
      r.coords = views_[i].view.coords_of_byte(off);
    }
  }
}

WatchReport StorageWatch::check() const {
  MLA_REQUIRE(armed_, "storage watch: check() before arm()");
  WatchReport r;
  int64_t first_block = -1;
#ifdef MLACHECK_GUARD_CUDA
  if (device_) {
    watch_cuda::use_device_of(base_);
    if (blocks_ > 0) {
      watch_cuda::block_sums(base_, bytes_, window_begin_, window_end_, static_cast<uint64_t*>(d_sums_), kBlock);
    }
    const watch_cuda::Tally t =
        watch_cuda::compare(base_, static_cast<const uint8_t*>(d_snapshot_), window_begin_, window_end_,
                            static_cast<const uint64_t*>(d_writable_), static_cast<const uint64_t*>(d_sums_),
                            static_cast<const uint64_t*>(d_was_), blocks_);
    r.changed_bytes = static_cast<int64_t>(t.changed);
    r.changed_blocks = static_cast<int64_t>(t.blocks);
    if (t.changed > 0) {
      r.first = static_cast<int64_t>(t.first);
      watch_cuda::copy_to_host(&r.expected, static_cast<const uint8_t*>(d_snapshot_) + (r.first - window_begin_), 1);
      watch_cuda::copy_to_host(&r.actual, base_ + r.first, 1);
      r.into_read_only = in_window(read_only_, r.first);
    }
    if (t.blocks > 0) first_block = static_cast<int64_t>(t.first_block);
  }
#endif
  // The exact window: a memcmp per 4 KiB, byte by byte only where it differs.
  for (int64_t c = device_ ? window_end_ : window_begin_; c < window_end_; c += kBlock) {
    const int64_t n = std::min(kBlock, window_end_ - c);
    const uint8_t* was = snapshot_.data() + (c - window_begin_);
    if (std::memcmp(was, base_ + c, static_cast<size_t>(n)) == 0) continue;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t off = c + i;
      if (was[i] == base_[off] || in_window(writable_, off)) continue;
      if (r.changed_bytes++ == 0) {
        r.first = off;
        r.expected = was[i];
        r.actual = base_[off];
        r.into_read_only = in_window(read_only_, off);
      }
    }
  }
  // Beyond it, by block.
  for (size_t b = 0; b < sums_.size(); ++b) {
    if (block_sum(static_cast<int64_t>(b)) == sums_[b]) continue;
    if (r.changed_blocks++ == 0) first_block = static_cast<int64_t>(b);
  }
  if (first_block >= 0 && (r.first < 0 || first_block * kBlock < r.first)) {
    int64_t off = first_block * kBlock;
    if (off >= window_begin_ && off < window_end_) off = window_end_;
    r.first = off;
    r.first_exact = false;
    r.into_read_only = false;
  }
  if (r.ok()) return r;
  locate(r, r.first);
  std::ostringstream os;
  if (r.into_read_only) {
    os << "write to an input: " << r.changed_bytes << " byte" << (r.changed_bytes == 1 ? "" : "s")
       << " changed that the call may only read or must leave alone; first at storage byte " << r.first;
  } else {
    os << "stray write: ";
    if (r.changed_bytes > 0) {
      os << r.changed_bytes << " byte" << (r.changed_bytes == 1 ? "" : "s") << " outside the views it may write changed";
    }
    if (r.changed_blocks > 0) {
      os << (r.changed_bytes > 0 ? ", and " : "") << r.changed_blocks << " block" << (r.changed_blocks == 1 ? "" : "s")
         << " of " << kBlock << " bytes more than " << kMargin << " bytes from every view";
    }
    os << "; first at storage byte " << r.first;
  }
  if (r.first_exact) {
    os << " (0x" << std::hex << int(r.expected) << " -> 0x" << int(r.actual) << std::dec << ")";
  } else {
    os << " (the block of bytes [" << r.first << ", " << std::min(bytes_, r.first + kBlock)
       << "): its old bytes are not kept, only its checksum)";
  }
  if (r.view >= 0) {
    const Watched& w = views_[static_cast<size_t>(r.view)];
    os << ", " << (r.into_read_only ? "in " : "nearest ") << w.label << ": " << describe_coords(w.view, r.coords);
  }
  r.describe = os.str();
  return r;
}

}  // namespace mlacheck
