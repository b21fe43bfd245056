// Several guarded buffers of one launch at once (core/guarded_buffer.h): arm_all, check_all,
// queue_check_all with QueuedChecks, read_all, and the per-backend group hooks' defaults. The
// buffers are grouped by dynamic type; each group goes to its backend's hook in one call, which on
// cuda is one kernel or one wait for all of them.
#include <memory>
#include <typeinfo>
#include <vector>

#include "core/error.h"
#include "core/guarded_buffer.h"

namespace mlacheck {

void GuardedMemory::arm_group(const std::vector<GuardedMemory*>& group, void* stream) {
  (void)stream;
  for (GuardedMemory* m : group) m->arm();
}

bool GuardedMemory::queue_check_group(const std::vector<GuardedMemory*>& group, void* stream) const {
  (void)group, (void)stream;
  return false;
}

void GuardedMemory::requeue_check_group(const std::vector<GuardedMemory*>& group, void* stream) const {
  (void)group, (void)stream;
}

std::vector<GuardReport> GuardedMemory::check_group(const std::vector<GuardedMemory*>& group, void* stream) const {
  (void)stream;
  std::vector<GuardReport> reports;
  reports.reserve(group.size());
  for (const GuardedMemory* m : group) reports.push_back(m->check());
  return reports;
}

namespace {

// The buffers grouped by dynamic type, in order of first appearance; each group lists the indices
// into `buffers` of its members.
std::vector<std::vector<size_t>> groups_by_type(const std::vector<GuardedMemory*>& buffers, const char* what) {
  std::vector<std::vector<size_t>> groups;
  std::vector<const std::type_info*> types;
  for (size_t i = 0; i < buffers.size(); ++i) {
    MLA_REQUIRE(buffers[i] != nullptr, what, ": buffer ", i, " is null");
    for (size_t j = 0; j < i; ++j) MLA_REQUIRE(buffers[j] != buffers[i], what, ": buffer '", buffers[i]->name(), "' is listed twice");
    const GuardedMemory& m = *buffers[i];
    const std::type_info& t = typeid(m);
    size_t g = 0;
    while (g < types.size() && *types[g] != t) ++g;
    if (g == types.size()) types.push_back(&t), groups.emplace_back();
    groups[g].push_back(i);
  }
  return groups;
}

std::vector<GuardedMemory*> members(const std::vector<GuardedMemory*>& buffers, const std::vector<size_t>& g) {
  std::vector<GuardedMemory*> group;
  group.reserve(g.size());
  for (size_t i : g) group.push_back(buffers[i]);
  return group;
}

}  // namespace

void arm_all(const std::vector<GuardedMemory*>& buffers) { arm_all(buffers, nullptr); }

void arm_all(const std::vector<GuardedMemory*>& buffers, void* stream) {
  for (const std::vector<size_t>& g : groups_by_type(buffers, "arm_all")) {
    const std::vector<GuardedMemory*> group = members(buffers, g);
    group.front()->arm_group(group, stream);
  }
}

std::vector<GuardReport> check_all(const std::vector<GuardedMemory*>& buffers) {
  return QueuedChecks::collect(buffers, groups_by_type(buffers, "check_all"), nullptr, "check_all");
}

QueuedChecks queue_check_all(const std::vector<GuardedMemory*>& buffers, void* stream) {
  QueuedChecks q;
  q.buffers_ = buffers;
  q.groups_ = groups_by_type(buffers, "queue_check_all");
  q.stream_ = stream;
  for (const std::vector<size_t>& g : q.groups_) {
    const std::vector<GuardedMemory*> group = members(buffers, g);
    group.front()->queue_check_group(group, stream);
  }
  return q;
}

void read_all(const std::vector<GuardedMemory*>& buffers, const std::vector<void*>& dst) {
  MLA_REQUIRE(dst.size() == buffers.size(), "read_all: ", buffers.size(), " buffers but ", dst.size(), " destinations");
  for (const std::vector<size_t>& g : groups_by_type(buffers, "read_all")) {
    std::vector<void*> to;
    for (size_t i : g) to.push_back(dst[i]);
    const std::vector<GuardedMemory*> group = members(buffers, g);
    group.front()->read_group(group, to);
  }
}

void GuardedMemory::read_group(const std::vector<GuardedMemory*>& group, const std::vector<void*>& dst) const {
  for (size_t i = 0; i < group.size(); ++i) group[i]->read(0, dst[i], group[i]->size());
}

std::unique_ptr<RepeatedLaunches> GuardedMemory::repeats_group(const std::vector<GuardedMemory*>& group,
                                                               const std::vector<GuardedMemory*>& read, void* stream,
                                                               int launches) const {
  (void)group, (void)read, (void)stream, (void)launches;
  return nullptr;
}

std::unique_ptr<RepeatedLaunches> queue_repeats(const std::vector<GuardedMemory*>& buffers,
                                                const std::vector<GuardedMemory*>& read, void* stream, int launches) {
  MLA_REQUIRE(launches >= 1, "queue_repeats: ", launches, " launches");
  // One backend's hook takes them all: buffers of several types launch one at a time.
  if (buffers.empty() || groups_by_type(buffers, "queue_repeats").size() != 1) return nullptr;
  const GuardedMemory& first = *buffers.front();
  const std::type_info& type = typeid(first);
  for (const GuardedMemory* m : read) {
    MLA_REQUIRE(m != nullptr, "queue_repeats: a read buffer is null");
    if (typeid(*m) != type) return nullptr;
  }
  return buffers.front()->repeats_group(buffers, read, stream, launches);
}

std::vector<GuardReport> QueuedChecks::collect(const std::vector<GuardedMemory*>& buffers, const std::vector<std::vector<size_t>>& groups,
                                 void* stream, const char* what) {
  std::vector<GuardReport> reports(buffers.size());
  for (const std::vector<size_t>& g : groups) {
    const std::vector<GuardedMemory*> group = members(buffers, g);
    std::vector<GuardReport> r = group.front()->check_group(group, stream);
    MLA_REQUIRE(r.size() == g.size(), what, ": a backend returned ", r.size(), " reports for ", g.size(), " buffers");
    for (size_t k = 0; k < g.size(); ++k) reports[g[k]] = std::move(r[k]);
  }
  return reports;
}

void QueuedChecks::replayed() {
  done_ = false;
  for (const std::vector<size_t>& g : groups_) {
    const std::vector<GuardedMemory*> group = members(buffers_, g);
    group.front()->requeue_check_group(group, stream_);
  }
}

std::vector<GuardReport> QueuedChecks::reports() {
  MLA_REQUIRE(!done_, "queued guard checks: reports() asked twice");
  done_ = true;
  return collect(buffers_, groups_, stream_, "queue_check_all");
}

}  // namespace mlacheck
