// The shared case fields (harness/schedule.h).
#include "harness/schedule.h"

namespace mlacheck {

simt::host::Options CaseSchedule::host_options() const {
  simt::host::Options o;
  o.warp_size = warp_size;
  o.schedule = shuffled ? simt::host::Schedule::kShuffled : simt::host::Schedule::kOrdered;
  o.seed = seed;
  return o;
}

void write_schedule(const CaseSchedule& s, CaseText& out, const std::string& prefix, SeedKey seed) {
  if (seed == SeedKey::kWritten) out.set(prefix + "seed", s.seed);
  out.set(prefix + "warp", int64_t{s.warp_size}).set(prefix + "shuffled", s.shuffled);
}

void read_schedule(CaseSchedule& s, const CaseText& t, const std::string& prefix, SeedKey seed) {
  if (seed == SeedKey::kWritten) s.seed = t.unsigned_integer(prefix + "seed");
  s.warp_size = static_cast<int>(t.one_of(prefix + "warp", {32, 64}));
  s.shuffled = t.flag(prefix + "shuffled");
}

}  // namespace mlacheck
