// Exact and tolerance-based comparison with worst-coordinate reports.
#include "core/compare.h"

#include "core/poison.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"

namespace mlacheck {
namespace {

enum class FloatClass { kFinite, kPosInf, kNegInf, kNaN };

FloatClass classify(double x) {
  if (std::isnan(x)) return FloatClass::kNaN;
  if (std::isinf(x)) return x > 0 ? FloatClass::kPosInf : FloatClass::kNegInf;
  return FloatClass::kFinite;
}

const char* class_name(FloatClass c) {
  switch (c) {
    case FloatClass::kFinite: return "a finite value";
    case FloatClass::kPosInf: return "+inf";
    case FloatClass::kNegInf: return "-inf";
    case FloatClass::kNaN: return "NaN";
  }
  return "?";
}

bool same_shape(const HostTensor& a, const HostTensor& b, CompareReport& r) {
  if (a.view.shape() == b.view.shape()) return true;
  r.ok = false;
  r.what = "shape mismatch: actual " + a.view.to_string() + ", expected " + b.view.to_string();
  return false;
}

// Every index of a's shape (b has the same) in row-major order, with the address of the element in
// each tensor, advanced by the strides (an odometer) instead of computed from the index each time:
// a comparison visits millions of elements.
template <class F>
void walk_pair(const HostTensor& a, const HostTensor& b, F&& f) {
  const int rank = a.view.rank();
  const std::vector<int64_t> shape = a.view.shape();
  int64_t numel = 1;
  for (int64_t n : shape) numel *= n;
  if (numel == 0) return;
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0), sa(idx.size()), sb(idx.size());
  for (int d = 0; d < rank; ++d) {
    sa[static_cast<size_t>(d)] = a.view.stride(d) * a.view.element_size();
    sb[static_cast<size_t>(d)] = b.view.stride(d) * b.view.element_size();
  }
  const uint8_t* pa = a.bytes() + a.view.byte_offset();
  const uint8_t* pb = b.bytes() + b.view.byte_offset();
  for (int64_t n = 0; n < numel; ++n) {
    f(idx, pa, pb);
    for (int d = rank - 1; d >= 0; --d) {
      const size_t k = static_cast<size_t>(d);
      if (++idx[k] < shape[k]) {
        pa += sa[k], pb += sb[k];
        break;
      }
      pa -= sa[k] * (shape[k] - 1), pb -= sb[k] * (shape[k] - 1);
      idx[k] = 0;
    }
  }
}

}  // namespace

std::string value_text(double x) {
  std::ostringstream os;
  os.precision(9);
  os << x;
  return os.str();
}

std::string CompareReport::describe() const {
  if (ok) {
    std::ostringstream os;
    os << "ok: " << elements << " elements";
    if (cosine_distance != 0) os << ", cosine distance " << value_text(cosine_distance);
    return os.str();
  }
  return what;
}

CompareReport compare_exact(const HostTensor& actual, const HostTensor& expected) {
  CompareReport r;
  if (!same_shape(actual, expected, r)) return r;
  const DType ta = actual.view.dtype(), tb = expected.view.dtype();
  walk_pair(actual, expected, [&](const std::vector<int64_t>& idx, const uint8_t* pa, const uint8_t* pb) {
    ++r.elements;
    const double a = load_element(ta, pa);
    const double b = load_element(tb, pb);
    if (a == b || (std::isnan(a) && std::isnan(b))) return;
    if (r.mismatches++ == 0) {
      r.worst = idx;
      r.worst_actual = a;
      r.worst_expected = b;
    }
  });
  if (r.mismatches > 0) {
    r.ok = false;
    std::ostringstream os;
    os << r.mismatches << " of " << r.elements << " elements differ (exact comparison); first at "
       << shape_string(r.worst) << ": got " << value_text(r.worst_actual) << ", expected " << value_text(r.worst_expected);
    r.what = os.str();
  }
  return r;
}

CompareReport compare_close(const HostTensor& actual, const HostTensor& expected, const Tolerance& tol) {
  CompareReport r;
  if (!same_shape(actual, expected, r)) return r;
  int64_t special_mismatches = 0, unwritten = 0;
  std::vector<int64_t> first_special;
  double special_a = 0, special_b = 0;
  bool first_unwritten = false;
  double worst_ratio = 0;  // |a-b| / (atol + rtol*|b|) of the worst finite pair
  double excess2 = 0, norms = 0;
  const DType ta = actual.view.dtype(), tb = expected.view.dtype();
  walk_pair(actual, expected, [&](const std::vector<int64_t>& idx, const uint8_t* pa, const uint8_t* pb) {
    ++r.elements;
    const double a = load_element(ta, pa);
    const double b = load_element(tb, pb);
    const FloatClass ca = classify(a), cb = classify(b);
    if (ca != cb) {
      // The testbed's output poison (core/poison.h): an element the kernel never wrote (or wrote
      // with a copy of poison it read), named so rather than as the NaN it is.
      const bool poison = is_output_poison(ta, pa);
      unwritten += poison;
      if (special_mismatches++ == 0) {
        first_special = idx;
        special_a = a;
        special_b = b;
        first_unwritten = poison;
      }
      return;
    }
    if (ca != FloatClass::kFinite) return;
    const double diff = std::fabs(a - b);
    // Only the part of an error beyond atol counts: the absolute budget already allows the rest
    // (an fp32 dot product that cancels to near zero carries error at the scale of its terms).
    const double excess = diff > tol.atol ? diff - tol.atol : 0.0;
    excess2 += excess * excess;
    norms += a * a + b * b;
    const double allowed = tol.atol + tol.rtol * std::fabs(b);
    if (diff <= allowed) return;
    ++r.mismatches;
    const double ratio = allowed > 0 ? diff / allowed : INFINITY;
    if (ratio > worst_ratio || r.worst.empty()) {
      worst_ratio = ratio;
      r.worst = idx;
      r.worst_actual = a;
      r.worst_expected = b;
    }
  });
  r.cosine_distance = norms > 0 ? excess2 / norms : 0.0;
  std::ostringstream os;
  if (special_mismatches > 0) {
    r.mismatches += special_mismatches;
    r.worst = first_special;
    r.worst_actual = special_a;
    r.worst_expected = special_b;
    os << special_mismatches << " of " << r.elements << " elements have the wrong special value; first at "
       << shape_string(first_special) << ": got " << class_name(classify(special_a)) << " ("
       << (first_unwritten ? "the output poison: never written" : value_text(special_a)) << "), expected "
       << class_name(classify(special_b)) << " (" << value_text(special_b) << ")";
    if (unwritten > 0) os << "; " << unwritten << " of them hold the output poison (never written, or a copy of it)";
  } else if (r.mismatches > 0) {
    os << r.mismatches << " of " << r.elements << " elements exceed |a-b| <= " << tol.atol << " + "
       << tol.rtol << "*|b|; worst at " << shape_string(r.worst) << ": got " << value_text(r.worst_actual)
       << ", expected " << value_text(r.worst_expected) << " (" << value_text(worst_ratio) << "x the allowed difference)";
  } else if (!(r.cosine_distance <= tol.max_cosine_distance)) {
    os << "cosine distance " << value_text(r.cosine_distance) << " exceeds " << tol.max_cosine_distance << " over "
       << r.elements << " elements";
  } else {
    return r;
  }
  r.ok = false;
  r.what = os.str();
  return r;
}

bool move_by_slack(std::vector<double>& got, const std::vector<double>& want, const std::vector<double>& slack) {
  MLA_REQUIRE(got.size() == want.size() && got.size() == slack.size(), "move_by_slack: ", got.size(), " values, ",
              want.size(), " wanted, ", slack.size(), " slacks");
  bool moved = false;
  for (size_t i = 0; i < got.size(); ++i) {
    double& g = got[i];
    const double w = want[i], allowed = slack[i];
    if (!std::isfinite(g) || !std::isfinite(w) || !(allowed > 0)) continue;
    const double d = g - w;
    const double left = std::max(0.0, std::abs(d) - allowed);
    moved = moved || left != std::abs(d);
    g = w + std::copysign(left, d);
  }
  return moved;
}

CompareReport compare_runs(const std::vector<double>& after, const std::vector<double>& before,
                           const std::vector<double>& exact, const std::vector<double>& slack,
                           const std::vector<int64_t>& shape, const Tolerance& tol) {
  MLA_REQUIRE(after.size() == before.size() && after.size() == exact.size() && after.size() == slack.size(),
              "compare_runs: ", after.size(), " values against ", before.size(), ", ", exact.size(), " exact, ",
              slack.size(), " slacks");
  std::vector<double> moved = after, by(after.size());
  for (size_t i = 0; i < by.size(); ++i) {
    const double s = std::isfinite(slack[i]) ? std::max(0.0, slack[i]) : 0.0;
    by[i] = std::isfinite(exact[i]) ? 2 * s + tol.atol + tol.rtol * std::abs(exact[i]) : 0.0;
  }
  move_by_slack(moved, before, by);
  std::vector<double> ref = before;
  return compare_close(HostTensor(moved.data(), View::contiguous(DType::kF64, shape)),
                       HostTensor(ref.data(), View::contiguous(DType::kF64, shape)), tol);
}

}  // namespace mlacheck
