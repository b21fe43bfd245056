// Guarded host memory: red zones around an allocation, poison inside it, and a check that a launch
// wrote nothing but its declared output views.
//
// A GuardedBuffer owns its allocation. Life of one launch:
//   GuardedBuffer buf("logits", bytes);      // red zones patterned, interior poisoned
//   ... write inputs through buf.tensor(v) ...
//   buf.declare_output("logits", out_view);  // the only bytes the launch may change
//   buf.arm();                               // poison the outputs, snapshot everything else
//   launch(...);
//   GuardReport r = buf.check();             // first stray byte, with the nearest view's coordinates
// This catches writes past a *view* that stay inside the allocation (e.g. the extra rows of vLLM's
// preallocated topk buffer), which a memory checker cannot see. The device variant shares this
// interface (GuardedMemory).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/view.h"

namespace mlacheck {

class Quarantine;  // core/quarantine.h
class QueuedChecks;
class RepeatedLaunches;

struct NamedView {
  std::string name;
  View view;
};

// Where a stray byte lies relative to the allocation.
enum class StrayRegion { kBeforeAllocation, kAfterAllocation, kBetweenViews };
const char* stray_region_name(StrayRegion r);

struct StrayWrite {
  std::string buffer;
  // An access to reserved memory's unbacked pages (core/reserved_buffer.h), seen by the page it
  // brought in: offset is that page's first byte, and expected/actual mean nothing.
  bool unbacked_access = false;
  StrayRegion region = StrayRegion::kBetweenViews;
  int64_t offset = 0;  // from the allocation start; negative in the leading red zone
  uint8_t expected = 0;
  uint8_t actual = 0;
  // The declared output view nearest to the byte ("" when none was declared), and the byte's
  // coordinates in that view's index space. They may fall outside the view's shape: row 8 of a
  // view with rows 0..7 is one row past its end; column 130 of 128 columns is in the row padding.
  std::string nearest_view;
  View view;
  std::vector<int64_t> coords;
  std::string describe() const;  // one line
};

struct GuardReport {
  bool ok() const { return stray_bytes == 0; }
  int64_t stray_bytes = 0;   // bytes that differ from their armed value
  StrayWrite first;          // the lowest-addressed stray byte (meaningful when !ok())
  int64_t last_offset = 0;   // the highest-addressed one
  std::string describe() const;  // one line: "ok" or the first stray write and the count
};

// What every guarded allocation offers, on the host or on a device: the kernel sees data(); the
// test writes inputs with write(), declares the output views, arms, launches, and checks. The host
// GuardedBuffer below and the CUDA DeviceGuardedBuffer (core/backend/cuda_guarded_buffer.h)
// implement it, so properties and fuzzers are written once for every backend.
class GuardedMemory {
 public:
  static constexpr int64_t kDefaultRedZone = 256;
  virtual ~GuardedMemory();

  const std::string& name() const { return name_; }
  int64_t size() const { return size_; }
  int64_t red_zone() const { return red_zone_; }

  // The first data byte as the kernel sees it: a host pointer, or a device pointer.
  virtual uint8_t* data() = 0;
  virtual bool on_device() const = 0;
  // Copies bytes in from, or out to, host memory at an offset from data().
  virtual void write(int64_t offset, const void* src, int64_t bytes) = 0;
  virtual void read(int64_t offset, void* dst, int64_t bytes) const = 0;
  // write(), queued on stream (a Device::stream()) where the backend can: src may be reused as soon
  // as it returns, work queued next on that stream sees the bytes, and a host read() or write() of
  // this memory waits for it first; a kernel on another stream must wait for that stream. The
  // default (and a null stream) is write().
  virtual void queue_write(int64_t offset, const void* src, int64_t bytes, void* stream) {
    (void)stream;
    write(offset, src, bytes);
  }

  // Declares a view the next launch may write. Outputs may not overlap each other.
  void declare_output(std::string view_name, const View& v);
  void clear_outputs();
  const std::vector<NamedView>& outputs() const { return outputs_; }

  // Poisons the outputs (NaN for floats, 0xA5.. for integers, so an unwritten element never
  // passes), restores the red zones, and snapshots every byte the launch must leave alone.
  virtual void arm() = 0;
  // Compares every byte outside the output views (red zones included) to the armed snapshot.
  virtual GuardReport check() const = 0;
  // A launch's read fence on memory the host cannot watch (core/read_fence.h): the views the next
  // launch may touch, handed to a tool that watches the device's accesses (cuda: each view as an
  // NVTX memory region of the allocation, which compute-sanitizer's memcheck enforces), and taken
  // back after it. The defaults do nothing.
  virtual void fence_views(const std::vector<NamedView>& views) { (void)views; }
  virtual void lift_fence() {}
  // The data offsets [begin, end) a launch may touch, in increasing order, for memory of which only
  // part is backed (core/reserved_buffer.h: red zones included, whole pages); nullptr when every
  // byte is (the default).
  virtual const std::vector<ByteSpan>* backed() const { return nullptr; }
  // When its owner frees this memory while q holds (a graph captured on its device is alive), q
  // keeps it, poisoned and watched, instead of letting it be reused (core/quarantine.h). A Device
  // calls this on each guarded allocation it makes; nullptr (the default) frees as usual.
  void retire_to(std::shared_ptr<Quarantine> q);
  // Several buffers of one launch at once: see arm_all, check_all and queue_check_all below.
  friend void arm_all(const std::vector<GuardedMemory*>& buffers, void* stream);
  friend std::vector<GuardReport> check_all(const std::vector<GuardedMemory*>& buffers);
  friend class QueuedChecks;
  friend QueuedChecks queue_check_all(const std::vector<GuardedMemory*>& buffers, void* stream);
  friend void read_all(const std::vector<GuardedMemory*>& buffers, const std::vector<void*>& dst);
  friend std::unique_ptr<RepeatedLaunches> queue_repeats(const std::vector<GuardedMemory*>& buffers,
                                                         const std::vector<GuardedMemory*>& read, void* stream,
                                                         int launches);

  // The byte patterns, exposed for tests and reports: position-dependent, so a stray write of any
  // constant is seen at nearly every byte. Offsets count from data(); red zones are negative or
  // at least size().
  static uint8_t red_zone_byte(int64_t offset_from_allocation);
  static uint8_t poison_byte(int64_t offset_from_allocation);

 protected:
  // How a memory takes output views: kMasked keeps a bit per data byte (output_mask()); kNone
  // refuses declare_output (input-only memory); kUnmasked takes views without a mask (reserved
  // memory of gigabytes, which tracks its outputs over its backed pages itself).
  enum class OutputViews { kNone, kMasked, kUnmasked };
  // bytes may be 0. red_zone must be a multiple of 256 and at least 256 (keeps data 256-aligned).
  GuardedMemory(std::string name, int64_t bytes, int64_t red_zone, OutputViews outputs = OutputViews::kMasked);
  GuardedMemory(GuardedMemory&&) noexcept;
  GuardedMemory& operator=(GuardedMemory&&) noexcept;

  // The batching hooks of arm_all, check_all and queue_check_all: called on one member of
  // `group`, whose buffers all have this one's dynamic type. The defaults arm or check each in
  // turn, at once; a backend that can do the work of several buffers together, queued on a stream
  // (the CUDA buffers), overrides them. stream: a Device::stream() to queue on, or nullptr (wait
  // for the whole device first, and for the work itself).
  virtual void arm_group(const std::vector<GuardedMemory*>& group, void* stream);
  // Queues the check of every buffer of the group behind the work on stream; false when this
  // backend does not queue (check_group then checks at once).
  virtual bool queue_check_group(const std::vector<GuardedMemory*>& group, void* stream) const;
  // The reports: of the check queue_check_group queued (waiting for stream once), or of a check
  // run now.
  virtual std::vector<GuardReport> check_group(const std::vector<GuardedMemory*>& group, void* stream) const;
  // The check queue_check_group queued on stream ran again (a graph that captured it was replayed):
  // check_group may collect it once more. The default does nothing (a backend that does not queue
  // checks at once).
  virtual void requeue_check_group(const std::vector<GuardedMemory*>& group, void* stream) const;
  // read_all's hook: every byte of each buffer of the group into the matching dst. The default
  // reads each in turn; the CUDA buffers queue every copy and wait once.
  virtual void read_group(const std::vector<GuardedMemory*>& group, const std::vector<void*>& dst) const;
  // queue_repeats' hook, on a member of `group` (every buffer of group and read has its type); the
  // default (a backend that does not queue) returns nullptr.
  virtual std::unique_ptr<RepeatedLaunches> repeats_group(const std::vector<GuardedMemory*>& group,
                                                          const std::vector<GuardedMemory*>& read, void* stream,
                                                          int launches) const;

  // For a final class's destructor, first thing: when this memory's quarantine holds, moves it
  // (Self's move constructor) into a new object the quarantine keeps, so the storage outlives its
  // owner at the same address; otherwise does nothing and the destructor frees as usual.
  template <class Self>
  static void retire(Self& self) noexcept {
    if (!self.retiring()) return;
    std::unique_ptr<GuardedMemory> kept;
    try {
      kept = std::make_unique<Self>(std::move(self));
    } catch (...) {
      return;  // no memory for the object: freed as usual
    }
    hand_to_quarantine(std::move(kept));
  }

  // Throws unless [offset, offset + bytes) lies inside the allocation.
  void require_inside(int64_t offset, int64_t bytes, const char* what) const;
  // The report for a stray byte at offset (from data()): its region and nearest output view.
  StrayWrite describe_stray(int64_t offset, uint8_t expected, uint8_t actual) const;
  // Adds to r each byte of the n at data offset `offset` that differs between was (armed) and now:
  // the count, the first one described, the last one's offset. For memory with no output views.
  void tally_changes(GuardReport& r, int64_t offset, const uint8_t* was, const uint8_t* now, int64_t n) const;
  // The same over the bytes whose in_output[i] is 0 (the runs between output views).
  void tally_changes_outside(GuardReport& r, int64_t offset, const uint8_t* was, const uint8_t* now, int64_t n,
                             const uint8_t* in_output) const;
  // One bit per data byte inside an output element, lowest offset in bit 0 of byte 0.
  const std::vector<uint8_t>& output_mask() const { return output_mask_; }

  bool armed_ = false;

 private:
  std::string name_;
  int64_t size_ = 0;
  int64_t red_zone_ = 0;
  OutputViews outputs_mode_ = OutputViews::kMasked;
  std::vector<uint8_t> output_mask_;
  std::vector<NamedView> outputs_;
  std::shared_ptr<Quarantine> quarantine_;

  bool retiring() const;
  static void hand_to_quarantine(std::unique_ptr<GuardedMemory> m) noexcept;
};

// arm() of every buffer of a launch, or check() of every one after it (the reports in the same
// order): what each would do alone, but buffers of a backend that batches are armed or checked
// together. On cuda that is one kernel over all of them with one synchronization, instead of a few
// synchronizations per buffer, which is what a guarded launch of small kernels mostly spent.
void arm_all(const std::vector<GuardedMemory*>& buffers);
std::vector<GuardReport> check_all(const std::vector<GuardedMemory*>& buffers);

// The same, ordered on the stream the launch runs on (Device::stream()), for a launch that queues
// all its work there (the built-in kernels do; a plugin must, by its contract). arm_all(buffers,
// stream) queues the arm and returns at once: the launch queued next on that stream sees the
// armed bytes. queue_check_all(buffers, stream) queues the check behind the launch, before anyone
// waits for it, so one synchronization covers launch and check; reports() returns the reports in
// the order of buffers, waiting for the stream first unless every check has already finished clean
// (on cuda each check leaves its count of runs and whether it was clean in mapped memory: after the
// caller's own synchronization, a clean guarded launch's reports cost no second wait). On the host
// backend arm_all arms at once and the check runs in reports(). A guarded launch on cuda is then:
//
//   arm_all(memory, device.stream());
//   launch(device);
//   QueuedChecks checks = queue_check_all(memory, device.stream());
//   device.synchronize();                        // a fault of the launch surfaces here
//   std::vector<GuardReport> reports = checks.reports();
//
// A host write() into an armed buffer waits for the queued arm first.
void arm_all(const std::vector<GuardedMemory*>& buffers, void* stream);
class QueuedChecks {
 public:
  QueuedChecks() = default;
  QueuedChecks(QueuedChecks&&) = default;
  QueuedChecks& operator=(QueuedChecks&&) = default;
  // Once: the reports of every buffer, in the order given to queue_check_all.
  std::vector<GuardReport> reports();
  // The queued work ran again: a CUDA graph captured arm_all(.., stream), the launch and
  // queue_check_all, and was replayed (and synchronized, or reports() waits for the stream).
  // reports() may then be asked again, for that replay (after the capture itself, which ran
  // nothing, the first replay's reports need no replayed()). Call it once for every later replay:
  // on cuda it counts the check's runs, and reports() waits for the stream only while the check has
  // run fewer times than counted (a replay never counted could pass for the one asked about). The
  // backend must queue its checks (cuda); on the host the captured arm and check do not replay, so a
  // graph of them is refused where it is made.
  void replayed();

 private:
  friend QueuedChecks queue_check_all(const std::vector<GuardedMemory*>& buffers, void* stream);
  friend std::vector<GuardReport> check_all(const std::vector<GuardedMemory*>& buffers);
  // The reports of every group's check (queued on stream, or run now), in the order of buffers.
  static std::vector<GuardReport> collect(const std::vector<GuardedMemory*>& buffers,
                                          const std::vector<std::vector<size_t>>& groups, void* stream, const char* what);
  std::vector<GuardedMemory*> buffers_;
  std::vector<std::vector<size_t>> groups_;
  void* stream_ = nullptr;
  bool done_ = false;
};
QueuedChecks queue_check_all(const std::vector<GuardedMemory*>& buffers, void* stream);

// read(0, dst[i], size()) of every buffer (a launch's outputs, read back): on cuda every copy is
// queued and one synchronization waits for them all, instead of one per buffer.
void read_all(const std::vector<GuardedMemory*>& buffers, const std::vector<void*>& dst);

// The same launch run again and again, queued back to back on a device with one check after the
// last (the testbed's repeated launches, harness/testbed.h), instead of an arm, a check and two
// waits per launch. After arm_all(buffers, stream), for each launch k = 0, 1, ...:
//
//   if (k > 0) repeats->poison_outputs();   // the outputs' poison again, queued
//   launch(device);
//   repeats->read();                         // every byte of each `read` buffer, queued
//
// then queue_check_all(buffers, stream) and one synchronization. Between launches only the
// outputs are poisoned again: red zones and the snapshot stay as the arm left them, so the one
// check sees a stray byte that any launch wrote (unless a later one wrote back what was there).
// bytes(k, j) is then buffer read[j]'s data after launch k. nullptr where the backend cannot queue
// this (the host backend, where each launch runs at once; reserved memory; an output whose poison
// takes a host copy) or the reads would take more than 64 MiB: the caller launches one at a time.
class RepeatedLaunches {
 public:
  virtual ~RepeatedLaunches() = default;
  virtual void poison_outputs() = 0;
  // After each later poison_outputs(), src's bytes go back at the start of buffers[i]'s data (an
  // output the launch also reads: counters, an in-place update), from a copy taken now.
  virtual void rewrite_after_poison(size_t i, const void* src, int64_t bytes) = 0;
  virtual void read() = 0;
  // After the stream was synchronized: buffer read[j]'s size() bytes as launch k (the k-th read())
  // left them.
  virtual const uint8_t* bytes(size_t k, size_t j) const = 0;
};
std::unique_ptr<RepeatedLaunches> queue_repeats(const std::vector<GuardedMemory*>& buffers,
                                                const std::vector<GuardedMemory*>& read, void* stream, int launches);

// Guarded host memory. It owns its allocation; data() is a host pointer.
class GuardedBuffer final : public GuardedMemory {
 public:
  GuardedBuffer(std::string name, int64_t bytes, int64_t red_zone = kDefaultRedZone);
  GuardedBuffer(GuardedBuffer&&) noexcept;
  GuardedBuffer& operator=(GuardedBuffer&&) noexcept;
  ~GuardedBuffer() override;

  uint8_t* data() override { return storage_.get() + red_zone(); }
  const uint8_t* data() const { return storage_.get() + red_zone(); }
  bool on_device() const override { return false; }
  void write(int64_t offset, const void* src, int64_t bytes) override;
  void read(int64_t offset, void* dst, int64_t bytes) const override;

  // A view of this buffer; throws if it reaches outside the allocation.
  HostTensor tensor(const View& v);

  void arm() override;
  GuardReport check() const override;

 private:
  void fill_red_zones();

  // Blocks come from, and go back to, a process-wide cache by size class (guarded_buffer.cpp), so a
  // fuzzer's case after case does not map, fault in and unmap fresh pages for every buffer. In a
  // process that lends its buffers to a Python worker they come from core/shared_arena.h instead
  // (cached_class -1).
  struct Free {
    Free() : cached_class(0) {}
    explicit Free(int c) : cached_class(c) {}
    int cached_class;
    void operator()(uint8_t* p) const;
  };
  using Block = std::unique_ptr<uint8_t[], Free>;
  static Block allocate_block(int64_t bytes);
  Block storage_;   // red zone | data | red zone
  Block snapshot_;  // of storage_, taken by arm()
};

}  // namespace mlacheck
