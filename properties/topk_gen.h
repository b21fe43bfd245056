// RapidCheck generators for top-k per row (docs/ops.md 3): cases for the decode (1-D and 2-D seq_lens)
// and prefill variants with lengths straddling k and every row-length switch point, row patterns of
// special values, logits and index views offset / row-padded / column-strided inside wider buffers,
// the output a row-padded slice of a shared buffer; and their text form (harness/case_text.h).
#pragma once

#include <cstdint>
#include <ostream>
#include <random>
#include <vector>

#include <rapidcheck.h>

#include "harness/case_text.h"
#include "harness/schedule.h"

namespace mlacheck {

// What a row's [0, n) holds. Everything else of the logits buffer is garbage that would win the
// selection if it were read (+inf, huge values, NaN).
enum class TopkPattern {
  kDistinct,        // normal floats
  kFewValues,       // 1 to 3 distinct values: ties across the threshold
  kSharedHighBits,  // values 1 + i ulp, i < 256: every key shares its top three bytes
  kAllEqual,
  kNegInf,       // mostly -inf, a few finite
  kSignedZeros,  // +0, -0 and a few small values
  kNaN,          // normal floats with NaNs among them
  kNegative,     // all negative
  kExtremes,     // +-inf, +-FLT_MAX, subnormals, +-0
  kHuge,         // distinct magnitudes within a few binades of FLT_MAX, both signs
  kTiny,         // distinct subnormals and the smallest normals, both signs: keys differ in low bits
  kZeros,        // every value +0
  kCount
};
const char* topk_pattern_name(TopkPattern p);

// Fills v[0], v[stride], ... v[(n - 1) * stride] by the pattern, drawing from rng.
void fill_topk_row(float* v, int64_t stride, int64_t n, TopkPattern pattern, std::mt19937_64& rng);
// A value that wins any selection it is read into (+inf, NaN, 3e38, ~1e6): what lies outside rows.
// Advances state (a cheap splitmix64 stream: the garbage fills whole buffers).
float topk_garbage(uint64_t& state);

// Where the rows' lengths come from (docs/ops.md 3).
enum class TopkLengths { kDecode1D, kDecode2D, kPrefill };
const char* topk_lengths_name(TopkLengths l);  // "decode-1d", "decode-2d", "prefill"

// The schedule fields (seed: the logits data) come from CaseSchedule.
struct TopkCase : CaseSchedule {
  TopkLengths lengths = TopkLengths::kDecode1D;
  int64_t k = 1;
  int64_t next_n = 1;             // decode: rows = B * next_n; prefill: 1
  std::vector<int32_t> seq_lens;  // decode: [B] (1-D) or [B * next_n] (2-D)
  std::vector<int32_t> ks, ke;    // prefill, [rows] each
  int64_t rows = 0, cols = 0;
  // The logits view: lead elements before row 0, row padding, column stride.
  int64_t logits_lead = 0, logits_row_pad = 0, logits_col_stride = 1;
  // The output: rows [out_rows_before, + rows) of a shared buffer with out_rows_after more rows.
  int64_t out_row_pad = 0, out_rows_before = 0, out_rows_after = 0;
  int64_t index_lead = 0;  // seq_lens / ks / ke start this many int32 into their buffers
  std::vector<TopkPattern> patterns;              // one per row
  std::vector<std::vector<float>> explicit_rows;  // when not empty: row r's [0, n) instead of its pattern

  bool prefill() const { return lengths == TopkLengths::kPrefill; }
  friend void showValue(const TopkCase& c, std::ostream& os);
};

// The case as case-text keys, appended to out (after its property / impl / backend).
void topk_to_text(const TopkCase& c, CaseText& out);
// The inverse. Checks every value (k <= 262144, cols <= 1 << 20, rows <= 4096, the logits and
// output buffers under 1 << 27 elements, lengths within [0, cols], 0 <= ks <= ke <= cols, one
// pattern per row, explicit row values matching the row lengths) and throws mlacheck::Error with
// one line naming the key.
TopkCase topk_from_text(const CaseText& t);
// The same, for one family's properties: lengths must be decode-1d or decode-2d / prefill.
TopkCase topk_decode_from_text(const CaseText& t);
TopkCase topk_prefill_from_text(const CaseText& t);
// The fast-path property's cases: k = 2048 (decode or prefill lengths).
TopkCase topk_fast_k_from_text(const CaseText& t, bool prefill);
// The split property's cases: decode-2d rows, next_n 1, k <= 4096.
TopkCase topk_split_from_text(const CaseText& t);

// The row lengths the oracle gives the case (decode from seq_lens, prefill ke - ks).
std::vector<int64_t> topk_row_lengths(const TopkCase& c);
// Row r's first column: ks[r] for prefill, 0 for decode.
std::vector<int64_t> topk_row_starts(const TopkCase& c);
// Every row's [0, n) values: its explicit values, or its pattern drawn from a stream seeded by the
// case seed and the row (so a row's data does not depend on the views or on the other rows).
std::vector<std::vector<float>> topk_row_values(const TopkCase& c);

// One decode row per length (2-D seq_lens [rows, 1]), patterns cycled, padded views: the
// production-size tests' cases.
TopkCase topk_rows_of_lengths(int64_t k, const std::vector<int64_t>& lengths, int64_t cols, uint64_t seed,
                              const std::vector<TopkPattern>& patterns);

namespace gen {

// Weighted towards distinct values; every special pattern appears.
rc::Gen<TopkPattern> topk_pattern();
// Rows of lengths near k - 1, k, k + 1, the switch points given (each -1, 0, +1), 0, cols, or
// anywhere; k in [min_k, max_k], cols in [min_cols, max_cols], up to max_rows rows; decode groups
// of next_n 1..3; all views offset and padded at random.
rc::Gen<TopkCase> topk_case(TopkLengths lengths, int64_t min_k, int64_t max_k, int64_t min_cols, int64_t max_cols,
                            int64_t max_rows, std::vector<int64_t> switch_points = {});
// The suite's decode cases: 1-D or 2-D, k up to 40, rows up to 200 long, up to 8 rows.
rc::Gen<TopkCase> topk_decode_case();
// The suite's prefill cases: k up to 40, up to 6 rows within 200 columns.
rc::Gen<TopkCase> topk_prefill_case();
// One group of rows around the short / long switch (kTopkShortRowMaxLen), k up to 24.
rc::Gen<TopkCase> topk_long_row_case(TopkLengths lengths);
// k = 2047, 2048, 2049 with rows around k and the short / long switch.
rc::Gen<TopkCase> topk_fast_k_case(TopkLengths lengths);
// Decode 2-D, one or two rows past kTopkSplitRowMinLen (around the split-count steps), k up to
// 4096 so a row's chunk candidates fit one unsplit row (the split-equivalence property).
rc::Gen<TopkCase> topk_split_row_case();
// A permutation of 0..n-1.
rc::Gen<std::vector<int>> permutation(int n);

}  // namespace gen
}  // namespace mlacheck
