// The staging sequence of a launch (harness/testbed.h).
#include "harness/testbed.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>

#include "core/error.h"
#include "core/poison.h"
#include "core/read_fence.h"
#include "harness/guard_picture.h"

namespace mlacheck {

Testbed& Testbed::input(Buffer& b, Content content) {
  staged_.push_back({&b, false, content, "", b.view, Sameness::kBits, {}});
  return *this;
}

Testbed& Testbed::output(Buffer& b, Content content) { return output(b, b.name, b.view, content); }

Testbed& Testbed::output(Buffer& b, const std::string& view_name, const View& view, Content content) {
  staged_.push_back({&b, true, content, view_name, view, Sameness::kBits, {}});
  return *this;
}

Testbed& Testbed::same_across_launches(const std::string& view_name, Sameness sameness) {
  for (Staged& s : staged_) {
    if (s.output && s.view_name == view_name) {
      s.sameness = sameness;
      return *this;
    }
  }
  throw Error("testbed: no output view '" + view_name + "' to say what repeated launches keep of");
}

Testbed& Testbed::same_across_launches(const std::string& view_name, std::function<Verdict()> rule) {
  MLA_REQUIRE(rule != nullptr, "testbed: an empty rule for the repeated launches of '", view_name, "'");
  same_across_launches(view_name, Sameness::kOwnRule);
  for (Staged& s : staged_) {
    if (s.output && s.view_name == view_name) s.rule = std::move(rule);
  }
  return *this;
}

Testbed& Testbed::guard(GuardedMemory& memory) {
  guarded_.push_back(&memory);
  return *this;
}

Testbed& Testbed::rewrite_after_arm(Buffer& b, std::vector<uint8_t> bytes) {
  MLA_REQUIRE(std::any_of(staged_.begin(), staged_.end(), [&](const Staged& s) { return s.buffer == &b && s.output; }),
              "testbed: rewrite_after_arm of '", b.name, "', which holds no output view");
  MLA_REQUIRE(static_cast<int64_t>(bytes.size()) <= b.size(), "testbed: rewrite_after_arm of ", bytes.size(),
              " bytes into '", b.name, "' of ", b.size());
  rewrites_.push_back({&b, std::move(bytes)});
  return *this;
}

void Testbed::arm(const std::vector<GuardedMemory*>& memory) {
  arm_all(memory, device_.stream());
  for (const Rewrite& r : rewrites_) {
    r.buffer->memory->queue_write(0, r.bytes.data(), static_cast<int64_t>(r.bytes.size()), device_.stream());
  }
}

Testbed& Testbed::after_arm(std::function<void()> f) {
  after_arm_ = std::move(f);
  return *this;
}

std::vector<Buffer*> Testbed::buffers() const {
  std::vector<Buffer*> all;
  for (const Staged& s : staged_) {
    if (std::find(all.begin(), all.end(), s.buffer) == all.end()) all.push_back(s.buffer);
  }
  return all;
}

Verdict Testbed::refuse_all_zero(bool outputs) const {
  for (const Staged& s : staged_) {
    if (s.output != outputs || s.content != Content::kNonZero || s.view.numel() == 0) continue;
    if (!all_zero(HostTensor(s.buffer->bytes(), s.view))) continue;
    return std::string("testbed: ") + (outputs ? "output '" + s.view_name + "'" : "input '" + s.buffer->name + "'") +
           " is all zero, so the case cannot tell a kernel that " + (outputs ? "writes zeros" : "ignores it") +
           " from a correct one (a staging fault of the case, not of the kernel)";
  }
  return std::nullopt;
}

void Testbed::stage(Buffer& b) {
  if (b.memory && b.memory->size() == b.size()) {
    b.refill(device_.stream());
    b.memory->clear_outputs();
  } else {
    b.upload(device_);
  }
}

Verdict Testbed::launch(const std::function<void()>& fn) {
  if (Verdict v = launch_once(fn, schedule_.host_options())) return v;
  const int launches = ScopedRepeats::launches();
  return launches > 1 ? repeat(fn, launches) : std::nullopt;
}

namespace {

std::string hex_bytes(const uint8_t* p, int64_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x";
  for (int64_t i = n - 1; i >= 0; --i) s += digits[p[i] >> 4], s += digits[p[i] & 15];  // little-endian value
  return s;
}

}  // namespace

namespace {

// Each element of a row of the view (1 to 8 bytes), in column order, as a number.
std::vector<uint64_t> row_elements(const uint8_t* base, const View& view, const std::vector<int64_t>& row) {
  const int64_t es = view.element_size(), cols = view.size(view.rank() - 1);
  std::vector<uint64_t> out(static_cast<size_t>(cols), 0);
  std::vector<int64_t> idx = row;
  idx.push_back(0);
  for (int64_t c = 0; c < cols; ++c) {
    idx.back() = c;
    std::memcpy(&out[static_cast<size_t>(c)], base + view.byte_offset_of(idx), static_cast<size_t>(es));
  }
  return out;
}

}  // namespace

Verdict Testbed::bits_differ(const Staged& s, const std::vector<uint8_t>& first, const std::string& which) const {
  const int64_t es = s.view.element_size();
  // Equal bytes over the view's whole span (its gaps included) are equal elements: the common
  // case, one memcmp instead of a visit of every element.
  const ByteSpan span = s.view.byte_span();
  if (span.empty() ||
      std::memcmp(s.buffer->bytes() + span.begin, first.data() + span.begin, static_cast<size_t>(span.size())) == 0) {
    return std::nullopt;
  }
  Verdict diff;
  s.view.for_each_index([&](const std::vector<int64_t>& idx) {
    if (diff) return;
    const int64_t at = s.view.byte_offset_of(idx);
    const uint8_t* now = s.buffer->bytes() + at;
    const uint8_t* was = first.data() + at;
    if (std::memcmp(now, was, static_cast<size_t>(es)) == 0) return;
    diff = which + " wrote output '" + s.view_name + "' element " + shape_string(idx) + " as " + hex_bytes(now, es) +
           ", launch 1 as " + hex_bytes(was, es);
  });
  return diff;
}

Verdict Testbed::row_sets_differ(const Staged& s, const std::vector<uint8_t>& first, const std::string& which) const {
  MLA_REQUIRE(s.view.rank() >= 1 && s.view.element_size() <= 8, "testbed: output '", s.view_name,
              "' compared as row sets needs rows of elements of at most 8 bytes, got ", s.view.to_string());
  const ByteSpan span = s.view.byte_span();  // equal bytes: equal rows, in the same order even
  if (span.empty() ||
      std::memcmp(s.buffer->bytes() + span.begin, first.data() + span.begin, static_cast<size_t>(span.size())) == 0) {
    return std::nullopt;
  }
  const std::vector<int64_t> shape = s.view.shape();
  const View rows = View::contiguous(s.view.dtype(), s.view.rank() == 1 ? std::vector<int64_t>{1}
                                                                        : std::vector<int64_t>(shape.begin(), shape.end() - 1));
  const auto hex = [&](const std::vector<uint64_t>& v) {
    if (v.empty()) return std::string("nothing");
    // Integers (indices) in decimal, anything else as its bits.
    const DType t = s.view.dtype();
    std::string h = t == DType::kI32   ? std::to_string(static_cast<int32_t>(static_cast<uint32_t>(v.front())))
                    : t == DType::kI64 ? std::to_string(static_cast<int64_t>(v.front()))
                                       : hex_bytes(reinterpret_cast<const uint8_t*>(&v.front()), s.view.element_size());
    return v.size() > 1 ? h + " and " + std::to_string(v.size() - 1) + " more" : h;
  };
  Verdict diff;
  rows.for_each_index([&](const std::vector<int64_t>& row_idx) {
    if (diff) return;
    const std::vector<int64_t> row = s.view.rank() == 1 ? std::vector<int64_t>{} : row_idx;
    std::vector<uint64_t> now = row_elements(s.buffer->bytes(), s.view, row);
    std::vector<uint64_t> was = row_elements(first.data(), s.view, row);
    if (now == was) return;
    std::sort(now.begin(), now.end());
    std::sort(was.begin(), was.end());
    if (now == was) return;
    std::vector<uint64_t> only_now, only_was;  // what one launch took and the other left
    std::set_difference(now.begin(), now.end(), was.begin(), was.end(), std::back_inserter(only_now));
    std::set_difference(was.begin(), was.end(), now.begin(), now.end(), std::back_inserter(only_was));
    diff = which + " wrote output '" + s.view_name + "' row " + shape_string(row) + " (compared as a set) holding " +
           hex(only_now) + " where launch 1 held " + hex(only_was);
  });
  return diff;
}

Verdict Testbed::repeat(const std::function<void()>& fn, int launches) {
  std::vector<std::vector<uint8_t>> first;
  for (const Staged& s : staged_) first.push_back(s.output ? s.buffer->host : std::vector<uint8_t>{});
  if (device_.backend() != Backend::kHost) {
    bool queued = false;
    Verdict v = repeat_queued(fn, launches, first, &queued);
    if (queued) return v;
  }
  for (int i = 2; i <= launches; ++i) {
    simt::host::Options host = schedule_.host_options();
    std::string how;
    if (device_.backend() == Backend::kHost) {
      host.schedule = simt::host::Schedule::kShuffled;
      host.seed = schedule_.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i);
      char seed[40];
      std::snprintf(seed, sizeof seed, "%#llx", static_cast<unsigned long long>(host.seed));
      how = " (host schedule shuffled, seed " + std::string(seed) + ")";
    }
    if (Verdict v = launch_once(fn, host, false)) {
      return "launch " + std::to_string(i) + " of " + std::to_string(launches) + how + ": " + *v;
    }
    if (Verdict v = differs_from_first(first, "nondeterministic: launch " + std::to_string(i) + " of " +
                                                  std::to_string(launches) + how)) {
      return v;
    }
  }
  return std::nullopt;
}

Verdict Testbed::differs_from_first(const std::vector<std::vector<uint8_t>>& first, const std::string& which) const {
  for (size_t k = 0; k < staged_.size(); ++k) {
    const Staged& s = staged_[k];
    if (!s.output || s.sameness == Sameness::kNotAsked) continue;
    if (s.sameness == Sameness::kOwnRule) {
      // Not a comparison with the first launch: the launch is judged on its own.
      const std::string launch = which.rfind("nondeterministic: ", 0) == 0 ? which.substr(18) : which;
      if (Verdict v = s.rule()) return launch + ": '" + s.view_name + "': " + *v;
      continue;
    }
    const Verdict diff = s.sameness == Sameness::kRowSets ? row_sets_differ(s, first[k], which) : bits_differ(s, first[k], which);
    if (diff) return diff;
  }
  return std::nullopt;
}

Verdict Testbed::repeat_queued(const std::function<void()>& fn, int launches, const std::vector<std::vector<uint8_t>>& first,
                               bool* queued) {
  *queued = false;
  // A picture of a failure draws the bytes of the launch that failed, and a hook after the arm
  // runs at each: those take one launch at a time.
  if (after_arm_ || guard_picture_sink() != nullptr) return std::nullopt;
  const std::vector<Buffer*> all = buffers();
  if (std::any_of(all.begin(), all.end(), [](const Buffer* b) { return b->is_reserved(); })) return std::nullopt;
  const std::vector<GuardedMemory*> memory = declare_outputs(all, false);
  const std::vector<Buffer*> outputs = output_buffers(all);
  std::vector<GuardedMemory*> read;
  for (Buffer* b : outputs) read.push_back(b->memory.get());
  arm(memory);  // not wasted where the next line says no: launch_once arms again
  // Bytes written back between queued launches must be output bytes: written back over any other,
  // they would erase an earlier launch's stray write there before the one check.
  if (!std::all_of(rewrites_.begin(), rewrites_.end(), [&](const Rewrite& r) { return rewrite_within_outputs(r); })) {
    return std::nullopt;
  }
  const std::unique_ptr<RepeatedLaunches> repeats = queue_repeats(memory, read, device_.stream(), launches - 1);
  if (!repeats) return std::nullopt;
  *queued = true;
  for (const Rewrite& r : rewrites_) {
    const size_t i = static_cast<size_t>(std::find(memory.begin(), memory.end(), r.buffer->memory.get()) - memory.begin());
    repeats->rewrite_after_poison(i, r.bytes.data(), static_cast<int64_t>(r.bytes.size()));
  }
  for (int i = 2; i <= launches; ++i) {
    if (i > 2) repeats->poison_outputs();
    fn();
    repeats->read();
  }
  QueuedChecks checks = queue_check_all(memory, device_.stream());
  device_.synchronize();
  const std::string all_launches = "launches 2 to " + std::to_string(launches) + " of " + std::to_string(launches) +
                                   " (queued back to back, checked once after the last)";
  if (Verdict v = guard_verdict(checks.reports(), all, memory)) return all_launches + ": " + *v;
  for (int i = 2; i <= launches; ++i) {
    for (size_t j = 0; j < outputs.size(); ++j) {
      std::memcpy(outputs[j]->bytes(), repeats->bytes(static_cast<size_t>(i - 2), j),
                  static_cast<size_t>(outputs[j]->memory->size()));
    }
    if (Verdict v = differs_from_first(first, "nondeterministic: launch " + std::to_string(i) + " of " + std::to_string(launches))) {
      return v;
    }
  }
  return std::nullopt;
}

std::vector<GuardedMemory*> Testbed::declare_outputs(const std::vector<Buffer*>& all, bool restage) {
  for (Buffer* b : all) {
    if (restage) {
      stage(*b);
    } else {
      b->memory->clear_outputs();
    }
  }
  for (const Staged& s : staged_) {
    if (s.output) s.buffer->memory->declare_output(s.view_name, s.view);
  }
  std::vector<GuardedMemory*> memory = guarded_memory(all);
  memory.insert(memory.end(), guarded_.begin(), guarded_.end());
  return memory;
}

bool Testbed::rewrite_within_outputs(const Rewrite& r) const {
  std::vector<uint8_t> covered(r.bytes.size(), 0);
  for (const Staged& s : staged_) {
    if (s.buffer != r.buffer || !s.output) continue;
    const ByteSpan span = s.view.byte_span();
    if (span.empty() || s.view.numel() * s.view.element_size() != span.size()) continue;  // dense views only
    for (int64_t at = std::max<int64_t>(span.begin, 0); at < std::min<int64_t>(span.end, static_cast<int64_t>(covered.size())); ++at) {
      covered[static_cast<size_t>(at)] = 1;
    }
  }
  return std::all_of(covered.begin(), covered.end(), [](uint8_t c) { return c != 0; });
}

std::vector<Buffer*> Testbed::output_buffers(const std::vector<Buffer*>& all) const {
  std::vector<Buffer*> outputs;
  for (Buffer* b : all) {
    if (std::any_of(staged_.begin(), staged_.end(), [&](const Staged& s) { return s.buffer == b && s.output; })) {
      outputs.push_back(b);
    }
  }
  return outputs;
}

Verdict Testbed::guard_verdict(const std::vector<GuardReport>& reports, const std::vector<Buffer*>& all,
                               const std::vector<GuardedMemory*>& memory) const {
  for (size_t i = 0; i < memory.size(); ++i) {
    if (!reports[i].ok()) {
      const std::string v = "guard of " + (i < all.size() ? all[i]->name : memory[i]->name()) + ": " + reports[i].describe();
      // --report html: the failure's picture (harness/guard_picture.h), only when a sink is installed.
      if (guard_picture_sink() != nullptr) record_guard_picture(v, *memory[i], reports[i], i < all.size() ? all[i] : nullptr);
      return v;
    }
  }
  return std::nullopt;
}

Verdict Testbed::launch_once(const std::function<void()>& fn, const simt::host::Options& host, bool restage) {
  MLA_REQUIRE(!staged_.empty(), "testbed: a launch with no buffers declared");
  if (Verdict v = refuse_all_zero(false)) return v;
  const std::vector<Buffer*> all = buffers();
  const std::vector<GuardedMemory*> memory = declare_outputs(all, restage);
  // Queued on the launch's stream (core/guarded_buffer.h): the arm, the launch and the check run
  // back to back, and one synchronization waits for all three.
  arm(memory);
  if (after_arm_) after_arm_();
  // Under AddressSanitizer on the host backend, the bytes of these allocations outside the launch's
  // views are unaddressable while it runs (core/read_fence.h): a read past a view is seen too.
  ReadFence fence;
  for (const Staged& s : staged_) fence.add(*s.buffer->memory, {{s.output ? s.view_name : s.buffer->name, s.view}});
  for (GuardedMemory* m : guarded_) fence.add(*m, {{m->name(), View::contiguous(DType::kU8, {m->size()})}});
  std::optional<StrayAccess> stray_access;
  QueuedChecks checks;
  {
    const simt::host::ScopedOptions scope(host);
    fence.arm();
    try {
      fn();
      checks = queue_check_all(memory, device_.stream());
      device_.synchronize();
    } catch (const ContextLost& e) {
      // On a device, touching reserved memory anywhere but its staged granules faults: say so, so
      // that "an illegal address" reads as the finding it is (compute-sanitizer names the address).
      std::string reserved;
      for (GuardedMemory* m : memory) {
        if (m->backed() != nullptr) reserved += (reserved.empty() ? "'" : ", '") + m->name() + "'";
      }
      if (reserved.empty()) throw;
      throw ContextLost(std::string(e.what()) + "; the launch had reserved memory (" + reserved +
                            "): an access to it outside the pages the case staged, or within 8 GiB of it (where an "
                            "offset wrapped to 32 bits lands), faults",
                        e.fault());
    }
    stray_access = fence.disarm();
  }
  if (Verdict v = guard_verdict(checks.reports(), all, memory)) return v;
  // A write the guards saw is reported by them (above); the fence adds reads, and writes that left
  // the bytes as they were.
  if (stray_access) return "fence of " + stray_access->buffer + ": " + stray_access->describe();
  // The outputs read back: together (one wait on cuda), a reserved buffer's backed ranges each.
  std::vector<GuardedMemory*> outputs;
  std::vector<void*> into;
  for (Buffer* b : output_buffers(all)) {
    if (b->is_reserved()) {
      b->download();
    } else {
      outputs.push_back(b->memory.get());
      into.push_back(b->bytes());
    }
  }
  read_all(outputs, into);
  return std::nullopt;
}

Verdict Testbed::run(const std::function<void()>& fn, const std::function<Verdict()>& compare) {
  if (Verdict v = launch(fn)) return v;
  if (Verdict v = compare()) return v;
  return refuse_all_zero(true);
}

}  // namespace mlacheck
