// The picture of a failed guard check: what `--report html` draws (tools/report_html.h). When a
// sink is installed, the testbed (harness/testbed.h) fills it as a guard check fails: the buffer,
// its size and element size, the declared views, the stray byte offsets (capped) and the first
// stray's coordinates. No sink is installed by default, and the testbed looks for one only after a
// guard check has already failed, so a run without --report html pays nothing.
//
//   GuardPictureSink sink;
//   ScopedGuardPictureSink on(sink);                 // this process's guard failures go to sink
//   const ReproResult r = run_case_text(c);
//   if (const GuardPicture* p = sink.picture_for(*r.verdict)) write_guard_picture_html(*p, dir);
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/guarded_buffer.h"
#include "core/view.h"

namespace mlacheck {

struct Buffer;

struct PictureView {
  std::string name;
  View view;
  bool output = false;  // true: a declared output view (the launch may change it); false: the
                        // buffer's own view, of which no byte outside an output may change
};

// One stray byte: its offset from the allocation's first data byte (negative in the leading red
// zone, at least size in the trailing one) and the bytes armed and found there.
struct StrayByte {
  int64_t offset = 0;
  uint8_t expected = 0;
  uint8_t actual = 0;
  bool values_known = true;  // false for a red zone's last stray, whose found byte is not kept
};

struct GuardPicture {
  static constexpr size_t kMaxStrayBytes = 4096;  // the most stray bytes listed one by one

  std::string verdict;  // the testbed's verdict line for this failure ("guard of NAME: ...")
  std::string buffer;
  int64_t size = 0;      // data bytes of the allocation
  int64_t red_zone = 0;  // bytes of red zone on each side
  int64_t element_size = 1;  // of the view the grid is laid out by (layout())
  std::vector<PictureView> views;
  int64_t stray_count = 0;         // every stray byte, red zones included
  std::vector<StrayByte> strays;   // ascending by offset, at most kMaxStrayBytes
  bool strays_complete = false;    // strays lists every stray byte (not capped, none unknown)
  StrayWrite first;                // the lowest stray: region, nearest output view, its coordinates
  int64_t last_offset = 0;         // the highest stray

  // The view whose rows and columns the picture uses: the output view nearest the first stray,
  // else the buffer's own view; null when no view was declared.
  const PictureView* layout() const;
};

// Where pictures go while installed. It keeps the first picture recorded (a property returns the
// verdict of the first guard that fails); clear() forgets it. Safe to record from several threads.
class GuardPictureSink {
 public:
  void record(GuardPicture p);
  void clear();
  std::optional<GuardPicture> picture() const;
  // The picture, when its verdict is part of `verdict` (the run's final verdict): a guard failure
  // that a property caught and then reported differently gets no picture.
  std::optional<GuardPicture> picture_for(const std::string& verdict) const;

 private:
  mutable std::mutex mutex_;
  std::optional<GuardPicture> picture_;
};

// The installed sink, or null (the default: no pictures are made).
GuardPictureSink* guard_picture_sink();

// Installs a sink for this process while it lives; the one installed before comes back after.
class ScopedGuardPictureSink {
 public:
  explicit ScopedGuardPictureSink(GuardPictureSink& sink);
  ~ScopedGuardPictureSink();
  ScopedGuardPictureSink(const ScopedGuardPictureSink&) = delete;
  ScopedGuardPictureSink& operator=(const ScopedGuardPictureSink&) = delete;

 private:
  GuardPictureSink* outer_;
};

// Builds the picture of a failed check of `memory` and records it in the installed sink (nothing
// when none is). `staged`: the Buffer the memory belongs to, or null for memory the implementation
// owns. With a Buffer, the stray bytes inside the allocation are found one by one (its host bytes
// are what the memory held outside the outputs when armed); without one, only the first and last.
void record_guard_picture(const std::string& verdict, GuardedMemory& memory, const GuardReport& report,
                          const Buffer* staged);

// The picture itself, without a sink (record_guard_picture's work), for tests and reports.
GuardPicture make_guard_picture(const std::string& verdict, GuardedMemory& memory, const GuardReport& report,
                                const Buffer* staged);

}  // namespace mlacheck
