// The picture of a failed guard check (harness/guard_picture.h).
#include "harness/guard_picture.h"

#include <algorithm>
#include <atomic>

#include "harness/staged_buffer.h"

namespace mlacheck {

namespace {

std::atomic<GuardPictureSink*> installed{nullptr};

// Buffers past this are not scanned byte by byte for a picture: its first and last stray suffice.
constexpr int64_t kMaxScannedBytes = int64_t{256} << 20;
constexpr int64_t kChunk = int64_t{1} << 20;

// Adds the stray bytes of the data region to p.strays: bytes outside every output view that differ
// from the armed host bytes. Returns false when the buffer was too large to scan.
bool scan_data(GuardPicture& p, GuardedMemory& memory, const Buffer& staged) {
  const int64_t size = memory.size();
  if (size > kMaxScannedBytes || static_cast<int64_t>(staged.host.size()) != size) return false;
  std::vector<uint8_t> mask(static_cast<size_t>((size + 7) / 8), 0);  // one bit per output byte
  for (const NamedView& o : memory.outputs()) {
    o.view.for_each_run([&](int64_t begin, int64_t bytes) {
      for (int64_t b = std::max<int64_t>(begin, 0); b < std::min(begin + bytes, size); ++b) {
        mask[static_cast<size_t>(b >> 3)] |= static_cast<uint8_t>(1u << (b & 7));
      }
    });
  }
  std::vector<uint8_t> now(static_cast<size_t>(std::min(size, kChunk)));
  for (int64_t at = 0; at < size; at += kChunk) {
    const int64_t n = std::min(kChunk, size - at);
    memory.read(at, now.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t off = at + i;
      if (now[static_cast<size_t>(i)] == staged.host[static_cast<size_t>(off)]) continue;
      if ((mask[static_cast<size_t>(off >> 3)] >> (off & 7)) & 1) continue;
      if (p.strays.size() >= GuardPicture::kMaxStrayBytes) return true;
      p.strays.push_back({off, staged.host[static_cast<size_t>(off)], now[static_cast<size_t>(i)]});
    }
  }
  return true;
}

}  // namespace

const PictureView* GuardPicture::layout() const {
  for (const PictureView& v : views) {
    if (v.output && v.name == first.nearest_view && v.view == first.view) return &v;
  }
  for (const PictureView& v : views) {
    if (!v.output) return &v;
  }
  return views.empty() ? nullptr : &views.front();
}

void GuardPictureSink::record(GuardPicture p) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!picture_) picture_ = std::move(p);
}

void GuardPictureSink::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  picture_.reset();
}

std::optional<GuardPicture> GuardPictureSink::picture() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return picture_;
}

std::optional<GuardPicture> GuardPictureSink::picture_for(const std::string& verdict) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!picture_ || picture_->verdict.empty() || verdict.find(picture_->verdict) == std::string::npos) {
    return std::nullopt;
  }
  return picture_;
}

GuardPictureSink* guard_picture_sink() { return installed.load(std::memory_order_acquire); }

ScopedGuardPictureSink::ScopedGuardPictureSink(GuardPictureSink& sink)
    : outer_(installed.exchange(&sink, std::memory_order_acq_rel)) {}

ScopedGuardPictureSink::~ScopedGuardPictureSink() { installed.store(outer_, std::memory_order_release); }

GuardPicture make_guard_picture(const std::string& verdict, GuardedMemory& memory, const GuardReport& report,
                                const Buffer* staged) {
  GuardPicture p;
  p.verdict = verdict;
  p.buffer = memory.name();
  p.size = memory.size();
  p.red_zone = memory.red_zone();
  for (const NamedView& o : memory.outputs()) p.views.push_back({o.name, o.view, true});
  if (staged != nullptr) {
    const bool same = std::any_of(p.views.begin(), p.views.end(), [&](const PictureView& v) { return v.view == staged->view; });
    if (!same) p.views.push_back({staged->name, staged->view, false});
  }
  p.stray_count = report.stray_bytes;
  p.first = report.first;
  p.last_offset = report.last_offset;
  const bool scanned = staged != nullptr && scan_data(p, memory, *staged);
  // The red zones' strays are known by their first and last only (the check keeps no more).
  auto add = [&](int64_t off, uint8_t expected, uint8_t actual, bool values_known) {
    const bool listed = std::any_of(p.strays.begin(), p.strays.end(), [&](const StrayByte& s) { return s.offset == off; });
    if (!listed) p.strays.push_back({off, expected, actual, values_known});
  };
  const auto in_data = [&](int64_t off) { return off >= 0 && off < p.size; };
  if (!scanned || !in_data(report.first.offset)) add(report.first.offset, report.first.expected, report.first.actual, true);
  if ((!scanned || !in_data(report.last_offset)) && report.stray_bytes > 1) {
    add(report.last_offset, 0, 0, false);
  }
  std::sort(p.strays.begin(), p.strays.end(), [](const StrayByte& a, const StrayByte& b) { return a.offset < b.offset; });
  if (p.strays.size() > GuardPicture::kMaxStrayBytes) p.strays.resize(GuardPicture::kMaxStrayBytes);
  p.strays_complete = static_cast<int64_t>(p.strays.size()) == p.stray_count;
  if (const PictureView* l = p.layout()) p.element_size = l->view.element_size();
  return p;
}

void record_guard_picture(const std::string& verdict, GuardedMemory& memory, const GuardReport& report,
                          const Buffer* staged) {
  GuardPictureSink* sink = guard_picture_sink();
  if (sink == nullptr) return;
  sink->record(make_guard_picture(verdict, memory, report, staged));
}

}  // namespace mlacheck
