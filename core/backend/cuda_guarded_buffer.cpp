// Guarded device memory, the host side of arm and check: the buffer's first fill, what an arm
// prepares (the output mask, which outputs the device poisons and which the host), the batching of
// up to kMaxSegments buffers per arm, re-poison and check kernel, and the collection of the checks'
// results from their mapped slots. The kernels are cuda_guard_kernels.cu; copies in and out and
// queued staging, cuda_guarded_buffer_host.cpp.
#include "core/backend/cuda_guarded_buffer.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/cuda_guard_kernels.h"
#include "core/poison.h"
#include "core/read_fence.h"
#include "core/tensor.h"

namespace mlacheck {
namespace {

using cuda::PatternTable;
using cuda::pattern_table;
using cuda::require_periodic_patterns;
using namespace guard_kernels;

// A buffer smaller than this copies its snapshot in the arm's own pass even on the checksum path:
// the copy of a few MiB costs less than the launch of the kernel that would gate it.
constexpr int64_t kGateBytes = int64_t(8) << 20;

// A DevicePoison (the host's description of an output poisoned on the device) as the kernels take it.
template <class Poison>
PoisonSpan poison_span(const Poison& p) {
  PoisonSpan d{};
  d.begin = p.begin, d.end = p.end, d.origin = p.origin;
  d.element_mask = static_cast<uint32_t>(p.element_bytes - 1), d.dense = p.dense;
  std::copy(p.pattern, p.pattern + 8, d.pattern);
  return d;
}

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

int blocks_for(int64_t work_items, int64_t per_block, int limit) {
  const int64_t want = (work_items + per_block - 1) / per_block;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(want, limit)));
}

// What one device's guard kernels launch with, found once per device (a process uses few).
struct DeviceShape {
  int multiprocessors = 1;
  int grid_limit = 1;  // blocks that fill the device once: the larger of arm's and check's occupancy
};

DeviceShape device_shape() {  // a copy: a later device's entry may move the vector
  static std::mutex m;
  static std::vector<std::pair<int, DeviceShape>> known;
  int device = 0;
  cuda::check(cudaGetDevice(&device), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(m);
  for (const auto& [d, shape] : known) {
    if (d == device) return shape;
  }
  int sms = 0;
  cuda::check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  DeviceShape shape;
  shape.multiprocessors = std::max(1, sms);
  shape.grid_limit = shape.multiprocessors * resident_blocks_per_multiprocessor();
  known.emplace_back(device, shape);
  return shape;
}

int grid_limit() { return device_shape().grid_limit; }
int multiprocessors() { return device_shape().multiprocessors; }

// The bytes poison_output writes into one element of dtype t.
std::vector<uint8_t> element_poison(DType t) {
  const View one = View::contiguous(t, {1});
  std::vector<uint8_t> bytes(static_cast<size_t>(one.byte_span().size()), 0);
  poison_output(HostTensor(bytes.data(), one));
  return bytes;
}

}  // namespace

DeviceGuardedBuffer::DeviceGuardedBuffer(std::string name, int64_t bytes, int64_t red_zone, cudaStream_t stream)
    : GuardedMemory(std::move(name), bytes, red_zone) {
  require_periodic_patterns();
  auto allocate = [this](int64_t n, const char* what) {
    try {
      return cuda::DeviceAllocation(static_cast<size_t>(n));
    } catch (const cuda::LaunchError& e) {
      throw cuda::LaunchError("guarded buffer '" + this->name() + "' (" + std::to_string(size()) + " bytes): " +
                                  what + ": " + e.what(),
                              e.code());
    }
  };
  // Storage and snapshot are 16-byte multiples (cudaMalloc aligns to 256) for the vector loads.
  const int64_t alloc = round_up(total(), 256);
  storage_ = allocate(alloc, "storage");
  snapshot_ = allocate(alloc, "snapshot");
  // One bit per data byte, zero-padded so the 16-bit mask load of the last chunk stays inside.
  mask_ = allocate(round_up((size() + 7) / 8, 16) + 16, "output mask");
  scratch_ = allocate(sizeof(Tally), "check tally");
  static_cast<volatile Slot*>(slot_.host())->outcome = 0;  // no run yet (a slot is reused once its owner is gone)

  static const PatternTable red = pattern_table(true), poison = pattern_table(false);
  // Allocated inside a capture: filled now, on the legacy stream, not at each replay.
  const bool inside_capture = cuda::capturing(stream);
  if (inside_capture) stream = nullptr;
  std::optional<cuda::RelaxedCaptureMode> relaxed;
  if (inside_capture) relaxed.emplace();
  launch_init(blocks_for(std::max<int64_t>(total(), static_cast<int64_t>(mask_.bytes())), kThreads, grid_limit()),
              storage_.as<uint8_t>(), this->red_zone(), size(), total(), red, poison, mask_.as<uint8_t>(),
              static_cast<int64_t>(mask_.bytes()), scratch_.as<uint8_t>(), static_cast<int>(sizeof(Tally)), stream);
  if (stream != nullptr) {
    pending_ = true, pending_on_ = stream;
    return;
  }
  cuda::check(cudaStreamSynchronize(nullptr), "guarded buffer: initial fill");
}

DeviceGuardedBuffer::DeviceGuardedBuffer(DeviceGuardedBuffer&&) noexcept = default;
DeviceGuardedBuffer& DeviceGuardedBuffer::operator=(DeviceGuardedBuffer&&) noexcept = default;
DeviceGuardedBuffer::~DeviceGuardedBuffer() {
  // Work still queued on this buffer (a fill or a write never waited for, a launch that threw
  // between arm and check) must finish before its slot can go to another owner. The whole device is
  // waited for, not the stream: the stream's owner (a Device) may be gone before its buffers. A
  // failure here is the work's, reported by the device's next user.
  if (pending_ || check_queued_) (void)cudaDeviceSynchronize();
  retire(*this);
}

void DeviceGuardedBuffer::arm() {
  cuda::check(cudaDeviceSynchronize(), ("guarded buffer '" + name() + "': arm (waiting for the device)").c_str());
  arm_buffers({this}, nullptr, true);
}

void DeviceGuardedBuffer::arm(cudaStream_t stream) { arm_buffers({this}, stream, true); }

GuardReport DeviceGuardedBuffer::check() const {
  cuda::check(cudaDeviceSynchronize(), ("guarded buffer '" + name() + "': check (waiting for the device)").c_str());
  queue_checks({this}, nullptr, false);
  return collect_checks({this}, nullptr).front();
}

GuardReport DeviceGuardedBuffer::check(cudaStream_t stream) const {
  queue_checks({this}, stream, false);
  return collect_checks({this}, stream).front();
}

namespace {

template <class Buffer, class Memory>
std::vector<Buffer*> as_device_buffers(const std::vector<Memory*>& group) {
  std::vector<Buffer*> buffers;
  buffers.reserve(group.size());
  for (Memory* m : group) buffers.push_back(&dynamic_cast<Buffer&>(*m));
  return buffers;
}

}  // namespace

void DeviceGuardedBuffer::arm_group(const std::vector<GuardedMemory*>& group, void* stream) {
  const auto buffers = as_device_buffers<DeviceGuardedBuffer>(group);
  if (stream != nullptr) {
    arm_buffers(buffers, static_cast<cudaStream_t>(stream), false);
    return;
  }
  cuda::check(cudaDeviceSynchronize(), "guarded buffers: arm (waiting for the device)");
  arm_buffers(buffers, nullptr, true);
}

bool DeviceGuardedBuffer::queue_check_group(const std::vector<GuardedMemory*>& group, void* stream) const {
  // Under compute-sanitizer's read fence (MLACHECK_DEVICE_FENCE=1) the check kernel reads bytes
  // the fence forbids until it is lifted: then the check waits for check_group.
  if (stream == nullptr || ReadFence::device_fences()) return false;
  queue_checks(as_device_buffers<const DeviceGuardedBuffer>(group), static_cast<cudaStream_t>(stream), false);
  return true;
}

void DeviceGuardedBuffer::requeue_check_group(const std::vector<GuardedMemory*>& group, void* stream) const {
  if (stream == nullptr || ReadFence::device_fences()) return;  // not queued: check_group checks at once
  for (const DeviceGuardedBuffer* b : as_device_buffers<const DeviceGuardedBuffer>(group)) {
    MLA_REQUIRE(b->check_serial_ != 0, "guarded buffer '", b->name(), "': replayed() with no check ever queued");
    b->check_queued_ = true, b->queued_on_ = static_cast<cudaStream_t>(stream);
    ++b->runs_pending_;  // one more run of the check to collect
  }
}

std::vector<GuardReport> DeviceGuardedBuffer::check_group(const std::vector<GuardedMemory*>& group, void* stream) const {
  const auto buffers = as_device_buffers<const DeviceGuardedBuffer>(group);
  bool queued = true;
  for (const DeviceGuardedBuffer* b : buffers) queued = queued && b->check_queued_ && b->queued_on_ == stream;
  if (queued) return collect_checks(buffers, static_cast<cudaStream_t>(stream));
  cuda::check(cudaDeviceSynchronize(), "guarded buffers: check (waiting for the device)");
  queue_checks(buffers, nullptr, false);
  return collect_checks(buffers, nullptr);
}

void DeviceGuardedBuffer::forget_clean_check(cudaStream_t stream) {
  if (!checksum_ || !chained_) return;
  last_check_clean_ = false;
  Tally* t = static_cast<Tally*>(scratch_.get());
  const std::string what = "guarded buffer '" + name() + "': after a write, the next arm a full one";
  cuda::check(cudaMemsetAsync(&t->clean, 0, sizeof t->clean, stream), what.c_str());
  // write() returns with its bytes in place; so does this, for an arm queued on any stream next.
  if (stream == nullptr) cuda::check(cudaStreamSynchronize(nullptr), what.c_str());
}

void DeviceGuardedBuffer::prepare_arm(cudaStream_t stream) {
  const std::string what = "guarded buffer '" + name() + "': arm";
  armed_ = false;
  bool same_outputs = prepared_ && prepared_outputs_.size() == outputs().size();
  for (size_t i = 0; same_outputs && i < outputs().size(); ++i) same_outputs = prepared_outputs_[i].view == outputs()[i].view;
  if (!same_outputs) {
    prepared_ = false;
    snapshot_stale_ = true;  // the sums cover other bytes now
    // The mask changes only with the outputs; re-sending it each arm would cost size/8 bytes of
    // host-to-device copy per launch.
    if (!output_mask().empty()) {
      // From a page-locked copy, so the upload is queued, not a copy the host waits on. Each
      // upload takes its own: one still queued reads the mask it was given.
      uint8_t* staging = take_staging(&mask_host_, &mask_upload_pending_, output_mask().size());
      std::memcpy(staging, output_mask().data(), output_mask().size());
      cuda::check(cudaMemcpyAsync(mask_.get(), staging, output_mask().size(), cudaMemcpyHostToDevice, stream),
                  (what + " (uploading the output mask)").c_str());
    }
    // Which outputs the arm kernel poisons: up to kMaxPoisonSpans whose byte spans do not
    // interleave with another output's (inside its span, a gapped view's bytes are then exactly
    // the mask's), with elements of a power-of-two size up to 8 bytes. More of them, each dense
    // over its span (all poison), go to a list in device memory that poison_spans_kernel takes
    // after the arm (a K-cache insert declares two views per slot written). The rest take a host
    // copy.
    device_poison_.clear();
    extra_poison_.clear();
    host_poisoned_.clear();
    for (size_t i = 0; i < outputs().size(); ++i) {
      const View& v = outputs()[i].view;
      const ByteSpan span = v.byte_span();
      if (span.empty()) continue;
      bool alone = true;
      for (size_t j = 0; alone && j < outputs().size(); ++j) {
        const ByteSpan other = outputs()[j].view.byte_span();
        alone = j == i || other.empty() || other.end <= span.begin || other.begin >= span.end;
      }
      const int64_t e = v.element_size();
      const std::vector<uint8_t> pattern = element_poison(v.dtype());
      const bool shaped = alone && e >= 1 && e <= 8 && (e & (e - 1)) == 0 && static_cast<int64_t>(pattern.size()) == e;
      const bool dense = v.numel() * e == span.size();
      const bool in_arm = shaped && device_poison_.size() < static_cast<size_t>(kMaxPoisonSpans);
      if (!in_arm && !(shaped && dense)) {
        host_poisoned_.push_back(i);
        continue;
      }
      DevicePoison p;
      p.begin = span.begin, p.end = span.end, p.origin = v.byte_offset();
      p.element_bytes = static_cast<int>(e);
      p.dense = dense;
      std::copy(pattern.begin(), pattern.end(), p.pattern);
      (in_arm ? device_poison_ : extra_poison_).push_back(p);
    }
    if (!extra_poison_.empty()) {
      std::vector<PoisonSpan> spans(extra_poison_.size());
      for (size_t k = 0; k < spans.size(); ++k) spans[k] = poison_span(extra_poison_[k]);
      const size_t bytes = spans.size() * sizeof(PoisonSpan);
      if (extra_spans_.bytes() < bytes) {
        // A queued poison_spans_kernel may still read the old list.
        cuda::check(cudaStreamSynchronize(stream), (what + " (growing the output span list)").c_str());
        extra_spans_ = cuda::DeviceAllocation(bytes);
      }
      uint8_t* staging = take_staging(&extra_host_, &extra_upload_pending_, bytes);
      std::memcpy(staging, spans.data(), bytes);
      cuda::check(cudaMemcpyAsync(extra_spans_.get(), staging, bytes, cudaMemcpyHostToDevice, stream),
                  (what + " (uploading the output span list)").c_str());
    }
  }
  // An output poisoned on the host: its bytes read back (a view with gaps keeps what they hold),
  // poisoned with poison_output and written again.
  for (size_t i : host_poisoned_) {
    const View& v = outputs()[i].view;
    const ByteSpan span = v.byte_span();
    std::vector<uint8_t> host(static_cast<size_t>(span.size()));
    cuda::check(cudaMemcpyAsync(host.data(), data() + span.begin, host.size(), cudaMemcpyDeviceToHost, stream),
                (what + " (reading an output view)").c_str());
    cuda::check(cudaStreamSynchronize(stream), (what + " (reading an output view)").c_str());
    poison_output(HostTensor(host.data(), v.with_byte_offset(v.byte_offset() - span.begin)));
    cuda::check(cudaMemcpyAsync(data() + span.begin, host.data(), host.size(), cudaMemcpyHostToDevice, stream),
                (what + " (writing an output view's poison)").c_str());
    cuda::check(cudaStreamSynchronize(stream), (what + " (writing an output view's poison)").c_str());
  }
  if (!same_outputs) prepared_outputs_ = outputs();
  prepared_ = true;
}

namespace {

// A batch of n buffers, segment i from segment_of(i), with the red zone table.
template <typename Fill>
Batch make_batch(size_t n, Fill&& segment_of) {
  static const PatternTable red = pattern_table(true);
  Batch b{};
  b.count = static_cast<int32_t>(n);
  b.red = red;
  for (size_t i = 0; i < n; ++i) b.seg[i] = segment_of(i);
  return b;
}

dim3 batch_grid(const Batch& b) {
  int64_t most = 1;
  for (int i = 0; i < b.count; ++i) most = std::max(most, b.seg[i].chunks);
  return dim3(static_cast<unsigned>(blocks_for(most, kThreads * kUnroll, grid_limit())), static_cast<unsigned>(b.count));
}

// The segment of buffer g, without its poison spans.
template <class Buffer>
Segment segment_of(Buffer& g, uint8_t* storage, uint8_t* snapshot, const uint8_t* mask, void* scratch, int64_t total,
                   int64_t red_zone) {
  Segment s{};
  s.storage = storage, s.snapshot = snapshot, s.mask = mask, s.tally = static_cast<Tally*>(scratch);
  s.chunks = total / 16, s.total = total, s.red_zone = red_zone, s.size = g.size();
  s.outputs = g.outputs().empty() ? 0 : 1;
  return s;
}

// The segment's poison spans: the outputs its buffer poisons on the device (DevicePoison).
template <class Poisons>
void set_spans(Segment& s, const Poisons& poisons) {
  s.spans = static_cast<int32_t>(poisons.size());
  for (size_t k = 0; k < poisons.size(); ++k) s.span[k] = poison_span(poisons[k]);
}

// The most 16-byte chunks any of these poison spans touches (a span need not start on a chunk):
// the chunks a thread each of repoison_segment's grid covers.
template <class Poisons>
int64_t widest_span_chunks(const Poisons& poisons) {
  int64_t most = 0;
  for (const auto& p : poisons) most = std::max(most, (p.end - p.begin) / 16 + 2);
  return most;
}

}  // namespace

void DeviceGuardedBuffer::queue_repoison(const std::vector<DeviceGuardedBuffer*>& buffers, cudaStream_t stream) {
  for (size_t from = 0; from < buffers.size(); from += kMaxSegments) {
    const size_t n = std::min<size_t>(kMaxSegments, buffers.size() - from);
    int64_t most = 0;  // chunks of the widest span
    const Batch batch = make_batch(n, [&](size_t i) {
      DeviceGuardedBuffer& g = *buffers[from + i];
      MLA_REQUIRE(g.armed_ && g.host_poisoned_.empty(), "guarded buffer '", g.name(),
                  "': outputs poisoned again before an arm that poisons them all on the device");
      Segment s = segment_of(g, g.storage_.as<uint8_t>(), g.snapshot_.as<uint8_t>(), g.mask_.as<const uint8_t>(),
                             g.scratch_.get(), g.total(), g.red_zone());
      set_spans(s, g.device_poison_);
      most = std::max(most, widest_span_chunks(g.device_poison_));
      return s;
    });
    if (most > 0) {
      launch_repoison(batch, dim3(static_cast<unsigned>(blocks_for(most, kThreads, grid_limit())), static_cast<unsigned>(n)),
                      stream);
    }
    for (size_t i = 0; i < n; ++i) {
      DeviceGuardedBuffer& g = *buffers[from + i];
      launch_poison_spans(g.storage_.as<uint8_t>(), g.red_zone(), g.extra_spans_.as<const PoisonSpan>(),
                          g.extra_poison_.size(), stream);
    }
  }
}

void DeviceGuardedBuffer::arm_buffers(const std::vector<DeviceGuardedBuffer*>& buffers, cudaStream_t stream, bool wait) {
  for (DeviceGuardedBuffer* b : buffers) {
    b->wait_for_queued_unless_on(stream);  // a first fill or a write queued on another stream
    b->prepare_arm(stream);
  }
  for (size_t from = 0; from < buffers.size(); from += kMaxSegments) {
    const size_t n = std::min<size_t>(kMaxSegments, buffers.size() - from);
    bool gated = false;  // some buffer's snapshot copy waits for its sum (snapshot_kernel)
    // Whether every buffer is expected to take the chained arm (its last check's reports were
    // clean): then the grid covers their output spans only. The device decides; a buffer that
    // finds otherwise still takes its full pass, over fewer blocks.
    bool all_chained = true;
    int64_t most = 1;  // chunks of the widest output span
    const Batch batch = make_batch(n, [&](size_t i) {
      DeviceGuardedBuffer& g = *buffers[from + i];
      Segment s = segment_of(g, g.storage_.as<uint8_t>(), g.snapshot_.as<uint8_t>(), g.mask_.as<const uint8_t>(),
                             g.scratch_.get(), g.total(), g.red_zone());
      s.checksum = g.checksum_;
      s.chained = g.checksum_ && g.chained_ ? 1 : 0;
      s.force = g.snapshot_stale_ || (!s.chained && g.total() < kGateBytes) ? 1 : 0;
      gated = gated || (g.checksum_ && !s.force && !s.chained);
      all_chained = all_chained && s.chained && !s.force && g.last_check_clean_;
      set_spans(s, g.device_poison_);
      most = std::max(most, widest_span_chunks(g.device_poison_));
      return s;
    });
    const dim3 grid = all_chained ? dim3(static_cast<unsigned>(blocks_for(most, kThreads, grid_limit())), batch.count)
                                  : batch_grid(batch);
    launch_arm(batch, grid, stream);
    for (size_t i = 0; i < n; ++i) {
      DeviceGuardedBuffer& g = *buffers[from + i];
      launch_poison_spans(g.storage_.as<uint8_t>(), g.red_zone(), g.extra_spans_.as<const PoisonSpan>(),
                          g.extra_poison_.size(), stream);
    }
    if (gated) {
      // Mostly it finds nothing to copy: a block per SM per buffer, not the arm's full grid, whose
      // blocks would each be scheduled only to return.
      const dim3 grid(static_cast<unsigned>(std::min<int64_t>(multiprocessors(), batch_grid(batch).x)), static_cast<unsigned>(batch.count));
      launch_snapshot(batch, grid, stream);
    }
  }
  if (wait) {
    cuda::check(cudaStreamSynchronize(stream), "guarded buffers: arm");
    for (DeviceGuardedBuffer* b : buffers) b->stream_drained();
  }
  for (DeviceGuardedBuffer* b : buffers) {
    b->armed_ = true;
    b->snapshot_stale_ = false;
    b->last_check_clean_ = false;  // until this arm's check says otherwise
    b->check_queued_ = false;
    b->pending_ = !wait, b->pending_on_ = stream;
  }
}

void DeviceGuardedBuffer::queue_checks(const std::vector<const DeviceGuardedBuffer*>& buffers, cudaStream_t stream,
                                       bool exact) {
  for (const DeviceGuardedBuffer* b : buffers) {
    MLA_REQUIRE(b->armed_, "guarded buffer '", b->name(), "': check() before arm() (or outputs changed since)");
  }
  for (size_t from = 0; from < buffers.size(); from += kMaxSegments) {
    const size_t n = std::min<size_t>(kMaxSegments, buffers.size() - from);
    const Batch batch = make_batch(n, [&](size_t i) {
      const DeviceGuardedBuffer& g = *buffers[from + i];
      Segment s = segment_of(g, const_cast<uint8_t*>(g.storage_.as<const uint8_t>()),
                             const_cast<uint8_t*>(g.snapshot_.as<const uint8_t>()), g.mask_.as<const uint8_t>(),
                             const_cast<void*>(g.scratch_.get()), g.total(), g.red_zone());
      s.checksum = g.checksum_ && !exact;
      s.mapped = static_cast<Slot*>(g.slot_.device());
      // The exact comparison after a checksum mismatch has a serial of its own (the top bit set)
      // and leaves check_serial_ alone: a check captured in a graph echoes the serial it was
      // captured with at every replay.
      if (!exact) {
        g.check_serial_ = g.check_serial_ % (kRecheckSerial - 1) + 1;  // 1 to kRecheckSerial - 1
        ++g.runs_pending_;
      }
      s.serial = exact ? g.check_serial_ | kRecheckSerial : g.check_serial_;
      return s;
    });
    launch_check(batch, batch_grid(batch), stream);
  }
  for (const DeviceGuardedBuffer* b : buffers) {
    b->check_queued_ = true, b->queued_on_ = stream;
    b->pending_ = false;  // the check is queued behind the arm: waiting for it waits for both
    b->staged_at_check_ = b->staged_;
  }
}

std::vector<GuardReport> DeviceGuardedBuffer::collect_checks(const std::vector<const DeviceGuardedBuffer*>& buffers,
                                                             cudaStream_t stream) {
  // Each check counts its runs in its slot's outcome. When every slot shows the runs this host
  // queued (or replayed) since it last collected, each finished, clean, and so did everything
  // queued on the stream before it: the caller's own synchronization (the pattern of QueuedChecks)
  // leaves nothing to wait for, and a clean check nothing else to read. Otherwise, wait and read the
  // tallies. (A replayed graph's check echoes its capture's serial, so the serial cannot tell this
  // run's result from the last one's; the count can.)
  bool clean = true;
  for (const DeviceGuardedBuffer* b : buffers) {
    const unsigned int runs = b->runs_collected_ + b->runs_pending_;
    clean = clean && b->runs_pending_ > 0 &&
            static_cast<const volatile Slot*>(b->slot_.host())->outcome == outcome_of(runs, true);
  }
  if (clean) {
    std::vector<GuardReport> reports(buffers.size());
    for (const DeviceGuardedBuffer* b : buffers) {
      const DeviceGuardedBuffer& g = *b;
      g.check_queued_ = false;
      g.runs_collected_ += g.runs_pending_, g.runs_pending_ = 0;
      g.last_check_clean_ = g.checksum_;
      // Staging taken after the check was queued may feed an upload still queued behind it.
      if (g.staged_ == g.staged_at_check_) g.stream_drained();
    }
    return reports;
  }
  cuda::check(cudaStreamSynchronize(stream), "guarded buffers: check");
  // The tally the check's last block left in the buffer's slot, once it carries that check's serial.
  const auto tally_of = [](const DeviceGuardedBuffer& g, bool recheck) {
    const volatile Slot* t = static_cast<const volatile Slot*>(g.slot_.host());
    const uint32_t serial = t->serial, expected = recheck ? g.check_serial_ | kRecheckSerial : g.check_serial_;
    MLA_REQUIRE(serial == expected, "guarded buffer '", g.name(), "': the check's tally is not in its slot "
                "(serial ", serial, ", expected ", expected, ")");
    Tally r{};
    r.first = t->first, r.last = t->last, r.count = t->count, r.sum_now = t->sum_now, r.sum_armed = t->sum_armed;
    return r;
  };
  std::vector<GuardReport> reports;
  reports.reserve(buffers.size());
  for (const DeviceGuardedBuffer* b : buffers) {
    const DeviceGuardedBuffer& g = *b;
    g.check_queued_ = false;
    g.stream_drained();
    g.runs_collected_ = static_cast<unsigned int>(static_cast<const volatile Slot*>(g.slot_.host())->outcome >> 1);
    g.runs_pending_ = 0;
    Tally t = tally_of(g, false);
    // The checksum fast path: equal sums mean nothing outside the outputs changed; different
    // ones, that something did, and the exact comparison says where.
    g.last_check_clean_ = g.checksum_ && t.sum_now == t.sum_armed;
    if (g.checksum_ && t.sum_now != t.sum_armed) {
      queue_checks({b}, stream, true);
      cuda::check(cudaStreamSynchronize(stream), "guarded buffers: check");
      g.check_queued_ = false;
      t = tally_of(g, true);
    } else if (g.checksum_) {
      t.first = ~0ull, t.last = 0, t.count = 0;
    }
    reports.push_back(g.report(t.first, t.last, t.count, stream));
  }
  return reports;
}

GuardReport DeviceGuardedBuffer::report(unsigned long long first, unsigned long long last, unsigned long long count,
                                        cudaStream_t stream) const {
  GuardReport r;
  if (count == 0) return r;
  const std::string what = "guarded buffer '" + name() + "': check";
  uint8_t now = 0, was = 0;
  cuda::check(cudaMemcpyAsync(&now, storage_.as<const uint8_t>() + first, 1, cudaMemcpyDeviceToHost, stream), what.c_str());
  cuda::check(cudaMemcpyAsync(&was, snapshot_.as<const uint8_t>() + first, 1, cudaMemcpyDeviceToHost, stream), what.c_str());
  cuda::check(cudaStreamSynchronize(stream), what.c_str());
  r.stray_bytes = static_cast<int64_t>(count);
  r.first = describe_stray(static_cast<int64_t>(first) - red_zone(), was, now);
  r.last_offset = static_cast<int64_t>(last) - red_zone();
  return r;
}

}  // namespace mlacheck
