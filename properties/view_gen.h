// RapidCheck generators for tensor views: contiguous, padded, offset, transposed, broadcast and
// arbitrarily strided, with sizes that include 0 and 1.
#pragma once

#include <cstdint>
#include <vector>

#include <rapidcheck.h>

#include "core/view.h"

namespace mlacheck::gen {

// A view of rank 0..4 with small sizes, in one of the layouts above.
rc::Gen<View> view();
// A shape with the same element count as n (a factorization, possibly with one -1 and size-1
// dims), or, one time in five, a random shape that usually has another count.
rc::Gen<std::vector<int64_t>> reshape_target(int64_t n);

}  // namespace mlacheck::gen
