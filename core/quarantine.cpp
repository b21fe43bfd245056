// Freed memory kept, poisoned and watched while a captured graph may still use it (core/quarantine.h).
#include "core/quarantine.h"

#include <sstream>
#include <utility>

#include "core/error.h"

namespace mlacheck {

Quarantine::Quarantine(int64_t max_bytes) : max_bytes_(max_bytes) {
  MLA_REQUIRE(max_bytes >= 0, "quarantine: negative budget ", max_bytes);
}

Quarantine::~Quarantine() = default;

std::shared_ptr<void> Quarantine::hold() {
  ++holds_;
  std::shared_ptr<Quarantine> self = shared_from_this();
  return std::shared_ptr<void>(nullptr, [self](void*) { self->release_hold(); });
}

std::shared_ptr<void> Quarantine::open_capture() {
  ++holds_;
  ++open_captures_;
  std::shared_ptr<Quarantine> self = shared_from_this();
  return std::shared_ptr<void>(nullptr, [self](void*) {
    self->close_capture();
    self->release_hold();
  });
}

void Quarantine::close_capture() {
  if (--open_captures_ > 0) return;
  std::vector<std::unique_ptr<GuardedMemory>> freed;
  freed.swap(freed_in_capture_);
  for (auto& m : freed) watch(std::move(m));
}

void Quarantine::release_hold() {
  if (--holds_ > 0) return;
  kept_.clear();  // no graph left that could hold these addresses
  kept_bytes_ = 0;
}

void Quarantine::keep(std::unique_ptr<GuardedMemory> m) noexcept {
  if (!m) return;
  if (open_captures_ > 0) {
    // The capture's stream records rather than runs: poisoning now could become part of the graph
    // or be refused. Kept as it is until the capture closes.
    try {
      freed_in_capture_.push_back(std::move(m));
    } catch (...) {
    }
    return;
  }
  watch(std::move(m));
}

void Quarantine::watch(std::unique_ptr<GuardedMemory> m) noexcept {
  try {
    // Poison every byte (NaN for each float when the size allows, so a read before a write shows in
    // the result), then snapshot all of it: any change from now on is a write after the free.
    m->clear_outputs();
    const int64_t n = m->size();
    if (n > 0) {
      m->declare_output("freed", n % 4 == 0 ? View::contiguous(DType::kF32, {n / 4}) : View::contiguous(DType::kU8, {n}));
      m->arm();
      m->clear_outputs();
    }
    m->arm();
  } catch (...) {
    return;  // cannot watch it (a device that faulted): released with m
  }
  kept_bytes_ += m->size();
  kept_.push_back(std::move(m));
  while (kept_bytes_ > max_bytes_ && !kept_.empty()) {
    kept_bytes_ -= kept_.front()->size();
    kept_.pop_front();
  }
}

std::vector<std::string> Quarantine::writes_since_freed() {
  std::vector<std::string> lines;
  for (const auto& m : kept_) {
    const GuardReport r = m->check();
    if (r.ok()) continue;
    std::ostringstream os;
    os << "'" << m->name() << "' (" << m->size() << " bytes), freed while a captured graph was alive, was written after "
       << "it was freed: " << r.stray_bytes << " byte" << (r.stray_bytes == 1 ? "" : "s") << " changed, from byte "
       << r.first.offset << " to " << r.last_offset << " (a launch still uses its address)";
    lines.push_back(os.str());
    m->arm();
  }
  return lines;
}

}  // namespace mlacheck
