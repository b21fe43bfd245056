// View generators.
#include "properties/view_gen.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace mlacheck::gen {

rc::Gen<View> view() {
  return rc::gen::exec([] {
    const int rank = *rc::gen::weightedOneOf<int>({{1, rc::gen::inRange(0, 2)}, {6, rc::gen::inRange(2, 5)}});
    std::vector<int64_t> shape;
    for (int d = 0; d < rank; ++d) {
      shape.push_back(*rc::gen::weightedOneOf<int64_t>(
          {{1, rc::gen::just<int64_t>(0)}, {3, rc::gen::just<int64_t>(1)}, {8, rc::gen::inRange<int64_t>(2, 6)}}));
    }
    View dense = View::contiguous(DType::kF32, shape);
    std::vector<int64_t> strides = dense.strides();
    const int layout = *rc::gen::inRange(0, 5);  // 0: contiguous
    if (layout == 1 && rank > 0) {  // padded: every stride widened by a gap
      int64_t s = 1;
      for (int d = rank - 1; d >= 0; --d) {
        strides[d] = s;
        s = s * std::max<int64_t>(shape[d], 1) + *rc::gen::inRange<int64_t>(0, 4);
      }
    } else if (layout == 2 && rank > 1) {  // a permutation of a contiguous layout
      std::vector<int> perm(rank);
      std::iota(perm.begin(), perm.end(), 0);
      for (int i = rank - 1; i > 0; --i) std::swap(perm[i], perm[*rc::gen::inRange(0, i + 1)]);
      std::vector<int64_t> pshape(rank);
      for (int d = 0; d < rank; ++d) pshape[d] = shape[perm[d]];
      View p = View::contiguous(DType::kF32, pshape);
      for (int d = 0; d < rank; ++d) strides[perm[d]] = p.strides()[d];
    } else if (layout == 3) {  // some dims broadcast (stride 0)
      for (int64_t& s : strides) {
        if (*rc::gen::inRange(0, 3) == 0) s = 0;
      }
    } else if (layout == 4) {  // arbitrary
      for (int64_t& s : strides) s = *rc::gen::inRange<int64_t>(0, 13);
    }
    const int64_t offset = *rc::gen::inRange<int64_t>(0, 5) * 4;
    return View(DType::kF32, shape, strides, offset);
  });
}

rc::Gen<std::vector<int64_t>> reshape_target(int64_t n) {
  return rc::gen::exec([n] {
    std::vector<int64_t> shape;
    if (*rc::gen::inRange(0, 5) == 0) {
      const int rank = *rc::gen::weightedOneOf<int>({{1, rc::gen::inRange(0, 2)}, {6, rc::gen::inRange(2, 5)}});
      for (int d = 0; d < rank; ++d) shape.push_back(*rc::gen::inRange<int64_t>(-1, 7));
      return shape;
    }
    // Split n into factors, then sprinkle size-1 dims.
    int64_t rest = n;
    if (n == 0) {
      shape.push_back(0);
      rest = 1;
    }
    while (rest > 1) {
      std::vector<int64_t> divisors;
      for (int64_t f = 2; f <= rest; ++f) {
        if (rest % f == 0) divisors.push_back(f);
      }
      const int64_t f = *rc::gen::elementOf(divisors);
      shape.push_back(f);
      rest /= f;
    }
    const int ones = *rc::gen::inRange(0, 3);
    for (int i = 0; i < ones && shape.size() < View::kMaxRank; ++i) {
      shape.insert(shape.begin() + *rc::gen::inRange<size_t>(0, shape.size() + 1), 1);
    }
    std::shuffle(shape.begin(), shape.end(), std::mt19937(*rc::gen::arbitrary<uint32_t>()));
    if (!shape.empty() && n > 0 && *rc::gen::inRange(0, 3) == 0) {
      shape[*rc::gen::inRange<size_t>(0, shape.size())] = -1;
    }
    return shape;
  });
}

}  // namespace mlacheck::gen
