// A RapidCheck generator of permutations that shrinks towards the identity, for the metamorphic
// properties that reorder a batch.
#pragma once

#include <numeric>
#include <utility>
#include <vector>

#include <rapidcheck.h>

namespace mlacheck::gen {

// A permutation of [0, n): Fisher-Yates where each draw shrinks towards "no swap".
inline rc::Gen<std::vector<int>> permutation(int n) {
  return rc::gen::exec([n] {
    std::vector<int> p(static_cast<size_t>(n > 0 ? n : 0));
    std::iota(p.begin(), p.end(), 0);
    for (int i = 0; i + 1 < n; ++i) std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(*rc::gen::inRange(i, n))]);
    return p;
  });
}

}  // namespace mlacheck::gen
