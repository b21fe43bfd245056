// Top-k validity: the rules of docs/ops.md section 3, row by row.
#include "core/topk_check.h"

#include "core/poison.h"

#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/poison.h"

namespace mlacheck {

std::string TopkReport::describe() const {
  if (ok) {
    std::ostringstream os;
    os << "ok: " << rows << " rows";
    return os.str();
  }
  std::ostringstream os;
  os << bad_rows << " of " << rows << " rows invalid; first: row " << first_bad_row << ": " << what;
  return os.str();
}

namespace {

// An index as a verdict shows it (core/poison.h: the output's poison named as such).
std::string index_text(int32_t i) { return int32_text(i); }

// The rows the masked rule decides (TopkRules::neg_inf_masked): a short row, or a row with fewer than
// k values above -inf. Nothing for a row it leaves to the ordinary rules (k or more live values).
std::optional<std::optional<std::string>> check_masked_row(const int32_t* idx, int64_t k, const double* values,
                                                           int64_t n, const TopkRules& rules) {
  const int64_t m = n < 0 ? 0 : n;
  int64_t live = 0;
  bool nan = false;
  for (int64_t i = 0; i < m; ++i) {
    live += values[i] != -HUGE_VAL;
    nan = nan || std::isnan(values[i]);
  }
  if (m > k && live >= k) return std::nullopt;  // k live values to take: the ordinary rule
  std::ostringstream os;
  if (m <= k && !rules.short_rows_any_order) {
    // In order, as the spec's short row, but a -inf value's position may hold -1.
    for (int64_t p = 0; p < k; ++p) {
      const int64_t want = p < m ? p : -1;
      if (idx[p] == want || (p < m && values[p] == -HUGE_VAL && idx[p] == -1)) continue;
      os << "position " << p << " holds " << index_text(idx[p]) << ", expected " << want
         << (p < m && values[p] == -HUGE_VAL ? " or -1 (its value is -inf, masked under 'neg_inf masked')" : "")
         << " (a row of length " << m << " <= k = " << k << " is [0, 1, ..., n-1, -1, ...])";
      return std::optional<std::string>(os.str());
    }
    return std::optional<std::string>();
  }
  // Distinct indices in [0, n) or -1; every live value taken (any, when the row holds NaN).
  std::vector<uint8_t> taken(static_cast<size_t>(m), 0);
  for (int64_t p = 0; p < k; ++p) {
    const int32_t i = idx[p];
    if (i == -1) continue;
    if (i < 0 || i >= m) {
      os << "position " << p << " holds index " << index_text(i) << ", outside the row's [0, " << m << ")";
      return std::optional<std::string>(os.str());
    }
    if (taken[static_cast<size_t>(i)]++) {
      os << "index " << i << " appears twice";
      return std::optional<std::string>(os.str());
    }
  }
  for (int64_t i = 0; i < m && !nan; ++i) {
    if (values[i] != -HUGE_VAL && !taken[static_cast<size_t>(i)]) {
      os.precision(9);
      os << "index " << i << " (value " << values[i] << ") was left out, though the row has only " << live
         << " values above -inf for k = " << k << " (-inf is masked under 'neg_inf masked'; the rest may be -1)";
      return std::optional<std::string>(os.str());
    }
  }
  return std::optional<std::string>();
}

}  // namespace

std::optional<std::string> check_topk_row(const int32_t* idx, int64_t k, const double* values, int64_t n,
                                          const TopkRules& rules) {
  std::ostringstream os;
  if (rules.neg_inf_masked) {
    if (auto masked = check_masked_row(idx, k, values, n, rules)) return *masked;
  }
  if (n <= k && rules.short_rows_any_order) {
    // Each of [0, n) once, -1 in the other positions, in any order.
    const int64_t m = n < 0 ? 0 : n;
    std::vector<uint8_t> seen(static_cast<size_t>(m), 0);
    for (int64_t p = 0; p < k; ++p) {
      const int32_t i = idx[p];
      if (i == -1) continue;
      if (i < 0 || i >= m) {
        os << "position " << p << " holds " << index_text(i) << ", outside the row's [0, " << m << ") and not -1 (a row of length "
           << m << " <= k = " << k << " holds each of [0, n) once, in any order under 'short_rows any-order')";
        return os.str();
      }
      if (seen[static_cast<size_t>(i)]++) {
        os << "index " << i << " appears twice in a row of length " << m << " <= k = " << k;
        return os.str();
      }
    }
    for (int64_t i = 0; i < m; ++i) {
      if (!seen[static_cast<size_t>(i)]) {
        os << "index " << i << " is missing: a row of length " << m << " <= k = " << k
           << " holds each of [0, n) once (in any order under 'short_rows any-order')";
        return os.str();
      }
    }
    return std::nullopt;
  }
  if (n <= k) {
    // Short rows have one answer: every position in order, then -1.
    for (int64_t p = 0; p < k; ++p) {
      const int64_t want = p < n ? p : -1;
      if (idx[p] != want) {
        os << "position " << p << " holds " << index_text(idx[p]) << ", expected " << want << " (a row of length "
           << (n < 0 ? 0 : n) << " <= k = " << k << " is [0, 1, ..., n-1, -1, ...])";
        return os.str();
      }
    }
    return std::nullopt;
  }
  std::vector<uint8_t> taken(static_cast<size_t>(n), 0);
  for (int64_t p = 0; p < k; ++p) {
    const int32_t i = idx[p];
    if (i == -1) {
      os << "position " << p << " holds -1, but the row has n = " << n << " > k = " << k
         << " elements, so all k positions must hold an index";
      return os.str();
    }
    if (i < 0 || i >= n) {
      os << "position " << p << " holds index " << index_text(i) << ", outside the row's [0, " << n << ")";
      return os.str();
    }
    if (taken[i]) {
      int64_t q = 0;
      while (idx[q] != i) ++q;
      os << "index " << i << " appears twice, at positions " << q << " and " << p;
      return os.str();
    }
    taken[i] = 1;
  }
  for (int64_t t = 0; t < n; ++t) {
    if (std::isnan(values[t])) return std::nullopt;  // selection unspecified, indices were valid
  }
  // A valid top-k takes nothing smaller than anything it leaves out.
  int64_t min_taken = -1, max_left = -1;
  for (int64_t t = 0; t < n; ++t) {
    if (taken[t]) {
      if (min_taken < 0 || values[t] < values[min_taken]) min_taken = t;
    } else if (max_left < 0 || values[t] > values[max_left]) {
      max_left = t;
    }
  }
  if (max_left >= 0 && values[max_left] > values[min_taken]) {
    int64_t p = 0;
    while (idx[p] != min_taken) ++p;
    os.precision(9);
    os << "not the k largest: index " << min_taken << " (value " << values[min_taken] << ", position " << p
       << ") was taken while index " << max_left << " (value " << values[max_left] << ") was left out";
    return os.str();
  }
  return std::nullopt;
}

TopkReport check_topk(const HostTensor& indices, const HostTensor& logits,
                      const std::vector<int64_t>& row_starts, const std::vector<int64_t>& row_lengths,
                      const TopkRules& rules) {
  const View& iv = indices.view;
  const View& lv = logits.view;
  MLA_REQUIRE(iv.rank() == 2 && iv.dtype() == DType::kI32, "check_topk: indices must be int32 [rows, k], got ",
              iv.to_string());
  MLA_REQUIRE(lv.rank() == 2 && dtype_is_float(lv.dtype()), "check_topk: logits must be a float [rows, cols] view, got ",
              lv.to_string());
  MLA_REQUIRE(lv.size(0) == iv.size(0), "check_topk: ", iv.size(0), " index rows for ", lv.size(0), " logit rows");
  MLA_REQUIRE(static_cast<int64_t>(row_lengths.size()) == iv.size(0) &&
                  static_cast<int64_t>(row_starts.size()) == iv.size(0),
              "check_topk: ", row_starts.size(), " row starts and ", row_lengths.size(), " row lengths for ",
              iv.size(0), " rows");
  TopkReport report;
  const int64_t k = iv.size(1);
  std::vector<int32_t> row_idx(static_cast<size_t>(k));
  std::vector<double> row_vals;
  // Rows are walked by their strides: an element's address from its index, per element, was a
  // tenth of a small top-k case.
  const int64_t idx_step = iv.stride(1) * iv.element_size(), val_step = lv.stride(1) * lv.element_size();
  for (int64_t r = 0; r < iv.size(0); ++r) {
    ++report.rows;
    if (k > 0) {
      const uint8_t* at = indices.bytes() + iv.byte_offset_of({r, 0});
      for (int64_t p = 0; p < k; ++p, at += idx_step) std::memcpy(&row_idx[p], at, 4);
    }
    const int64_t n = row_lengths[r];
    row_vals.assign(static_cast<size_t>(n > 0 ? n : 0), 0.0);
    if (n > k || (rules.neg_inf_masked && n > 0)) {  // the masked rule reads short rows' values too
      MLA_REQUIRE(row_starts[r] >= 0 && row_starts[r] + n <= lv.size(1), "check_topk: row ", r, " spans columns [",
                  row_starts[r], ", ", row_starts[r] + n, ") of a ", lv.to_string(), " view");
      const uint8_t* at = logits.bytes() + lv.byte_offset_of({r, row_starts[r]});
      for (int64_t t = 0; t < n; ++t, at += val_step) row_vals[t] = load_element(lv.dtype(), at);
    }
    if (auto bad = check_topk_row(row_idx.data(), k, row_vals.data(), n, rules)) {
      if (report.bad_rows++ == 0) {
        report.ok = false;
        report.first_bad_row = r;
        report.what = *bad;
      }
    }
  }
  return report;
}

TopkReport check_topk(const HostTensor& indices, const HostTensor& logits, const std::vector<int64_t>& row_lengths) {
  return check_topk(indices, logits, std::vector<int64_t>(row_lengths.size(), 0), row_lengths);
}

}  // namespace mlacheck
