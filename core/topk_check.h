// The top-k validity checker (docs/ops.md section 3): accepts every correct answer, whatever its order
// and tie-breaking, and rejects everything else with the row, position and values that break it.
//
// For a row of length n (its values are the logits the kernel was given, from the row's start):
// - n <= k (n <= 0 included): the result must be exactly [0, 1, ..., n-1, -1, ..., -1] (with
//   TopkRules::short_rows_any_order: those k entries in any order);
// - n > k: k distinct indices in [0, n), no -1, and no value left out may exceed a value taken
//   (equivalently: the multiset of selected values equals the k largest values of the row);
// - a row with NaN in [0, n) only needs k distinct indices in [0, n).
// Values at and past n are never read: they may be garbage (docs/ops.md 2.1, unclean mode).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace mlacheck {

// What an implementation's contract leaves free beyond docs/ops.md 3 (its declarations).
struct TopkRules {
  // "short_rows any-order": a row of n <= k holds each of [0, n) once and -1 in its other k - n
  // positions, in any order (a caller that reads the row as a set).
  bool short_rows_any_order = false;
  // "neg_inf masked": -inf in a row means "no candidate" (the caller's logits carry -inf past each
  // row's length and at masked positions): where a row has fewer than k values above -inf, the
  // positions those values leave hold -1 or distinct indices of -inf values, in [0, n) either way;
  // in a short row a -inf value's position may hold -1. Every value above -inf is still taken.
  bool neg_inf_masked = false;
};

struct TopkReport {
  bool ok = true;
  int64_t rows = 0;
  int64_t bad_rows = 0;
  int64_t first_bad_row = -1;
  std::string what;  // the first bad row's failure, one line; "" when ok
  std::string describe() const;
};

// Checks one row. indices has k entries; values holds the row's values from its start (at least n
// of them when n > 0). Returns the failure, or nothing when the row is a valid answer.
std::optional<std::string> check_topk_row(const int32_t* indices, int64_t k, const double* values, int64_t n,
                                          const TopkRules& rules = {});

// Checks int32 indices [rows, k] against logits [rows, cols] (any float dtype). Row r's values
// start at column row_starts[r] (ks of the prefill variant; 0 for decode) and it has
// row_lengths[r] of them; indices are relative to the row start.
TopkReport check_topk(const HostTensor& indices, const HostTensor& logits,
                      const std::vector<int64_t>& row_starts, const std::vector<int64_t>& row_lengths,
                      const TopkRules& rules = {});
// Decode form: every row starts at column 0.
TopkReport check_topk(const HostTensor& indices, const HostTensor& logits,
                      const std::vector<int64_t>& row_lengths);

}  // namespace mlacheck
