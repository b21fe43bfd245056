// Comparing a kernel's result with the oracle's (docs/ops.md section 7).
//
// Integers compare exactly. Floats compare in three steps, and the first that fails is reported:
// the positions of +inf, -inf and NaN must be identical; every finite pair must satisfy
// |a - b| <= atol + rtol * |b| (b is the expected value); and the cosine distance over the finite
// pairs must not exceed the tolerance's limit. The distance is sum(e*e) / sum(a*a + b*b) in double
// with e = max(0, |a - b| - atol): with atol = 0 exactly 1 - 2*sum(a*b) / sum(a*a + b*b), and the
// part of an error that the absolute budget already allows never counts (a result that cancels to
// near zero, like the score of a row with one key, carries rounding at the scale of its terms).
// It catches a small systematic error spread over many elements. Reports name the worst
// coordinates and values, never just "mismatch".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace mlacheck {

struct Tolerance {
  double atol = 0;
  double rtol = 0;
  double max_cosine_distance = 0;
  const char* reason = "";
};

struct CompareReport {
  bool ok = true;
  std::string what;              // "" when ok; otherwise the rule that failed, in one line
  int64_t elements = 0;
  int64_t mismatches = 0;        // elements that break the exact, special-value or elementwise rule
  std::vector<int64_t> worst;    // coordinates of the first special mismatch, else the worst element
  double worst_actual = 0;
  double worst_expected = 0;
  double cosine_distance = 0;    // over finite pairs; 0 for integer comparisons
  std::string describe() const;  // one line
};

// A value as verdicts print it: nine significant digits, so that two floats an ulp apart print apart.
std::string value_text(double x);

// Exact comparison (integer outputs: metadata, indices). Float dtypes compare by value, with NaN
// equal to NaN and +0 equal to -0.
CompareReport compare_exact(const HostTensor& actual, const HostTensor& expected);

// Float comparison by the rules above. actual and expected may have different dtypes (a bf16
// kernel result against the oracle's fp64) but must have the same shape.
CompareReport compare_close(const HostTensor& actual, const HostTensor& expected, const Tolerance& tol);

// Moves each finite element of got toward want by at most slack[i] (never past it; a slack that is
// not positive moves nothing): what is left is the error beyond what the slack explains (the
// oracles' fp32 rounding slack, oracle/mla_decode.h). True when some element moved. The three have
// the same length.
bool move_by_slack(std::vector<double>& got, const std::vector<double>& want, const std::vector<double>& slack);

// Run against run: two results of one exact problem (the same rows permuted, another split count),
// each of which the oracle comparison allows to be off the exact value by slack[i] plus the
// table's atol + rtol * |exact[i]|. So they may be twice that apart, and no more (docs/ops.md 7,
// "Run against run"): after is moved toward before by 2 slack + atol + rtol |exact| (one run's
// whole allowance and the other's slack), then compare_close applies the table's rule (the other
// run's). Special values must sit in the same places. All four have shape's element count.
CompareReport compare_runs(const std::vector<double>& after, const std::vector<double>& before,
                           const std::vector<double>& exact, const std::vector<double>& slack,
                           const std::vector<int64_t>& shape, const Tolerance& tol);

}  // namespace mlacheck
