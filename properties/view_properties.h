// Properties of core views, as verdict functions shared by the RapidCheck suite and the fuzzer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/view.h"
#include "harness/verdict.h"

namespace mlacheck {

// Brute force: the strides under which `shape` enumerates the elements of v in v's row-major order,
// found by reading the address step of each new dim off the element list and then checking every
// element; nothing when no strides do (or when the element counts differ). Independent of
// View::reshape's chunk walk, which it checks.
std::optional<std::vector<int64_t>> brute_force_reshape_strides(const View& v, const std::vector<int64_t>& shape);

// View::reshape(shape) succeeds exactly when brute force finds strides, and the view it returns
// addresses every element where v does (in row-major order). shape may hold one -1.
Verdict reshape_matches_brute_force(const View& v, const std::vector<int64_t>& shape);

// slice, select and transpose address exactly the elements they claim to, and byte_span covers
// every element's bytes and no more than the first and last element's.
Verdict view_ops_address_correctly(const View& v, int dim, int64_t start, int64_t stop, int64_t step);

}  // namespace mlacheck
