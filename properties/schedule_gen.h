// Drawing the fields every case shares (harness/schedule.h) inside a RapidCheck generator.
#pragma once

#include <cstdint>

#include <rapidcheck.h>

#include "harness/schedule.h"

namespace mlacheck {

// How often a drawn case runs the host backend's threads shuffled: ops whose kernels synchronise
// between threads draw it 3 times in 4, the others half the time.
enum class ShuffleOdds { kEven, kMostly };

// Draws warp_size (32 or 64) and shuffled; the seed only when draw_seed (some ops keep theirs
// elsewhere in the case).
inline void draw_schedule(CaseSchedule& s, ShuffleOdds odds = ShuffleOdds::kEven, bool draw_seed = true) {
  if (draw_seed) s.seed = *rc::gen::arbitrary<uint64_t>();
  s.warp_size = *rc::gen::element(32, 64);
  s.shuffled = odds == ShuffleOdds::kMostly ? *rc::gen::weightedElement<bool>({{3, true}, {1, false}})
                                            : *rc::gen::arbitrary<bool>();
}

}  // namespace mlacheck
