// RapidCheck generators for top-k per row (docs/ops.md 3): cases for the decode (1-D and 2-D seq_lens)
// and prefill variants with lengths straddling k and every row-length switch point, row patterns of
// special values, logits and index views offset / row-padded / column-strided inside wider buffers,
// the output a row-padded slice of a shared buffer. The case is described once, by its schema
// (fields() below, harness/case_schema.h): the generators, the case-file readers (also the fuzz
// decoders) and the writer all follow from it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <rapidcheck.h>

#include "harness/case_schema.h"
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
  // Far rows (TopkFamily::far_rows): the logits' row stride in elements, rows spread across byte
  // 2^31, 2^32 or 2^33 of reserved memory; 0: rows packed, cols x col_stride + row_pad apart.
  int64_t logits_row_stride = 0;
  // The output: rows [out_rows_before, + rows) of a shared buffer with out_rows_after more rows.
  int64_t out_row_pad = 0, out_rows_before = 0, out_rows_after = 0;
  int64_t index_lead = 0;  // seq_lens / ks / ke start this many int32 into their buffers
  std::vector<TopkPattern> patterns;              // one per row
  std::vector<std::vector<float>> explicit_rows;  // when not empty: row r's [0, n) instead of its pattern

  bool prefill() const { return lengths == TopkLengths::kPrefill; }
  friend void showValue(const TopkCase& c, std::ostream& os);
};

// Which cases a reader takes and how the generator draws them: the schema's family (fields()
// below). The defaults are the whole spec; a property's reader narrows the kinds of lengths, k and
// next_n, a generator's family narrows every range to where it draws and names the row lengths it
// aims at. A case drawn from a family lies within it.
struct TopkFamily {
  std::vector<TopkLengths> lengths = {TopkLengths::kDecode1D, TopkLengths::kDecode2D, TopkLengths::kPrefill};
  int64_t min_k = 1, max_k = 262144;
  int64_t max_next_n = 16;  // decode; prefill rows have next_n 1
  int64_t max_rows = 4096;  // rows: a multiple of next_n up to max(max_rows, next_n)
  int64_t min_cols = 0, max_cols = int64_t{1} << 20;
  // The generator's aim (readers ignore it): row lengths near k - 1, k, k + 1, near each switch
  // point (-1, 0, +1), 0, cols, or anywhere. With split_rows instead: mostly one row, each row near
  // a switch point (the split-count steps) or anywhere in [min_cols, max_cols - 2], cols up to 2
  // past the longest, k mostly up to 40 and sometimes 2048, 2049 or 4096, no column stride.
  std::vector<int64_t> switch_points;
  bool split_rows = false;
  // Far rows: at least two rows, a row stride (case key logits_row_stride) that puts the last row
  // past byte 2^33 (element 2^31, where an int32 element offset wraps) of a logits buffer staged as
  // reserved memory of up to kTopkMaxReservedBytes, only each row's [start, start + n) backed. The
  // generator aims a row just past byte 2^31, 2^32 or 2^33 where the rows allow it.
  bool far_rows = false;
  // The rows take the patterns in turn from a random one (row r: pattern start + r), not each drawn
  // by weight: the long-row and split-row families, whose few rows must still bring every pattern
  // to their paths (TopkCoverage in tests/kernels/topk_test.cpp).
  bool rotate_patterns = false;
};

// A far-rows case's logits reserve at most this many bytes (12 GiB: past byte 2^33).
constexpr int64_t kTopkMaxReservedBytes = int64_t{3} << 32;

// The logits buffer and the output buffer hold at most this many elements each.
constexpr int64_t kTopkMaxElements = int64_t{1} << 27;

// The words of the patterns (names[i] names TopkPattern(i)).
const std::vector<const char*>& topk_pattern_names();
// The row lengths the oracle gives the case (decode from seq_lens, prefill ke - ks).
std::vector<int64_t> topk_row_lengths(const TopkCase& c);

// The generator's own draws of the fields whose distribution matters (topk_gen.cpp).
int64_t draw_topk_k(const TopkFamily& f);
// cols; a split_rows family draws its rows' lengths first, into split_lens, and cols past them.
int64_t draw_topk_cols(const TopkCase& c, const TopkFamily& f, int64_t max_cols, std::vector<int32_t>& split_lens);
std::vector<int32_t> draw_topk_seq_lens(const TopkCase& c, const TopkFamily& f);
// The rows' starts; their ends into ke.
std::vector<int32_t> draw_topk_ks(const TopkCase& c, const TopkFamily& f, std::vector<int32_t>& ke);
std::vector<TopkPattern> draw_topk_patterns(int64_t rows, bool rotate = false);
// A far row stride in [lo, hi] that puts a row just past byte 2^31, 2^32 or 2^33 and the row
// before it below that edge, where the rows allow one.
int64_t draw_topk_far_row_stride(const TopkCase& c, int64_t lo, int64_t hi);
// The far row stride's range for the fields drawn before it: from where the last row starts past
// element 2^31, byte 2^33 (so any value, fuzz bytes' too, reaches where an int32 element offset
// wraps), to the reservation's end. The rows between cross bytes 2^31 and 2^32.
std::pair<int64_t, int64_t> topk_far_row_stride_range(const TopkCase& c);

// The schema of a top-k case (harness/case_schema.h): keys, ranges and draws, in reading order.
// Every range follows from the fields before it, the 2^27-element budgets of the logits and of
// the output included (rows within it for k, cols for rows, each pad and lead for what is left),
// so fuzz bytes always decode to a case.
template <class V>
void fields(V& v, TopkCase& c, const TopkFamily& f) {
  std::vector<std::pair<const char*, TopkLengths>> kinds;
  for (TopkLengths l : f.lengths) kinds.emplace_back(topk_lengths_name(l), l);
  v.named("lengths", c.lengths, kinds);
  v.integer("k", c.k, f.min_k, f.max_k, [&f] { return draw_topk_k(f); });
  v.integer("next_n", c.next_n, 1, c.prefill() ? 1 : f.max_next_n);
  const int64_t max_rows = std::min(std::max(f.max_rows, c.next_n), kTopkMaxElements / c.k);
  v.multiple("rows", c.rows, c.next_n, f.far_rows ? 2 : 1, max_rows, f.split_rows ? Favor{1} : Favor{});
  std::vector<int32_t> split_lens;
  const int64_t max_cols = std::min(f.max_cols, kTopkMaxElements / c.rows);
  v.integer("cols", c.cols, f.min_cols, max_cols, [&] { return draw_topk_cols(c, f, max_cols, split_lens); });
  if (c.prefill()) {
    std::vector<int32_t> ke;  // drawn with the starts
    v.list("ks", c.ks, c.rows, 0, c.cols, [&] { return draw_topk_ks(c, f, ke); });
    v.list_from("ke", c.ke, std::vector<int64_t>(c.ks.begin(), c.ks.end()), c.cols, [&ke] { return ke; });
  } else {
    // Negative lengths are allowed (they mean 0); past cols a row would not fit its view.
    v.list("seq_lens", c.seq_lens, c.lengths == TopkLengths::kDecode2D ? c.rows : c.rows / c.next_n,
           -(int64_t{1} << 30), c.cols, [&] { return f.split_rows ? split_lens : draw_topk_seq_lens(c, f); });
  }
  // The logits: lead + rows x (cols x col_stride + row_pad) elements.
  v.integer("logits_lead", c.logits_lead, 0, std::min(int64_t{64}, kTopkMaxElements - c.rows * c.cols), UpTo{3});
  const int64_t row_room = (kTopkMaxElements - c.logits_lead) / c.rows;
  v.integer("logits_row_pad", c.logits_row_pad, 0, f.far_rows ? 0 : std::min(int64_t{64}, row_room - c.cols), UpTo{4});
  v.integer("logits_col_stride", c.logits_col_stride, 1,
            c.cols == 0 ? 8 : std::min(int64_t{8}, (row_room - c.logits_row_pad) / c.cols),
            [&f] { return f.split_rows ? int64_t{1} : *rc::gen::weightedElement<int64_t>({{5, 1}, {1, 2}}); });
  if (f.far_rows) {
    const auto [lo, hi] = topk_far_row_stride_range(c);
    v.integer("logits_row_stride", c.logits_row_stride, lo, hi, [&, lo = lo, hi = hi] {
      return draw_topk_far_row_stride(c, lo, hi);
    });
  }
  // The output: (rows_before + rows + rows_after) x (k + row_pad) elements.
  v.integer("out_row_pad", c.out_row_pad, 0, std::min(int64_t{64}, kTopkMaxElements / c.rows - c.k), UpTo{3});
  const int64_t out_rows = kTopkMaxElements / (c.k + c.out_row_pad);
  const int64_t around = f.split_rows ? 1 : 2;
  v.integer("out_rows_before", c.out_rows_before, 0, std::min(int64_t{64}, out_rows - c.rows), UpTo{around});
  v.integer("out_rows_after", c.out_rows_after, 0, std::min(int64_t{64}, out_rows - c.rows - c.out_rows_before),
            UpTo{around});
  v.integer("index_lead", c.index_lead, 0, 64, UpTo{2});
  v.choices("patterns", c.patterns, c.rows, topk_pattern_names(),
            [&c, &f] { return draw_topk_patterns(c.rows, f.rotate_patterns); });
  // Explicit row values, each row's [0, n): the drawer draws none, and none when a row is longer
  // than a case line holds (CaseText::parse: 65,535 values), so every case decoded reads back. (The
  // cases that hold such rows explicitly, the permutation's and the split's, are run, never written.)
  const std::vector<int64_t> n = topk_row_lengths(c);
  const bool fit = std::all_of(n.begin(), n.end(), [](int64_t len) { return len < (int64_t{1} << 16); });
  if (fit && v.present("values_0", !c.explicit_rows.empty())) {
    c.explicit_rows.resize(static_cast<size_t>(c.rows));
    for (size_t r = 0; r < n.size(); ++r) v.floats("values_" + std::to_string(r), c.explicit_rows[r], n[r]);
  }
  v.schedule(c);
}

// The case as case-text keys, appended to out (after its property / impl / backend).
void topk_to_text(const TopkCase& c, CaseText& out);
// The inverse (the schema over the whole spec): k <= 262144, cols <= 1 << 20, rows <= 4096, the
// logits and output buffers at most 2^27 elements, lengths within [0, cols], 0 <= ks <= ke <=
// cols, one pattern per row, explicit row values matching the row lengths; throws mlacheck::Error
// with one line naming the key.
TopkCase topk_from_text(const CaseText& t);
// The same, for one family's properties: lengths must be decode-1d or decode-2d / prefill.
TopkCase topk_decode_from_text(const CaseText& t);
TopkCase topk_prefill_from_text(const CaseText& t);
// The fast-path property's cases: k = 2048 (decode or prefill lengths).
TopkCase topk_fast_k_from_text(const CaseText& t, bool prefill);
// The split property's cases: decode-2d rows, next_n 1, k <= 4096.
TopkCase topk_split_from_text(const CaseText& t);
// The far-rows properties' cases (TopkFamily::far_rows): decode or prefill lengths, up to 8 rows
// of up to 8192 columns, the key logits_row_stride; no other reader takes that key.
TopkCase topk_decode_far_from_text(const CaseText& t);
TopkCase topk_prefill_far_from_text(const CaseText& t);
// The row stride the logits view has: logits_row_stride for far rows, else cols x col_stride + row_pad.
int64_t topk_logits_row_stride(const TopkCase& c);

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
// The cases of a family (fields() above), shuffled 3 times in 4.
rc::Gen<TopkCase> topk_case(const TopkFamily& f);
// A family's cases: rows of lengths near k - 1, k, k + 1, the switch points given (each -1, 0, +1),
// 0, cols, or anywhere; k in [min_k, max_k], cols in [min_cols, max_cols], up to max_rows rows
// (at least one group); decode groups of next_n 1..3; all views offset and padded at random.
rc::Gen<TopkCase> topk_case(TopkLengths lengths, int64_t min_k, int64_t max_k, int64_t min_cols, int64_t max_cols,
                            int64_t max_rows, std::vector<int64_t> switch_points = {});
// The suite's decode cases: 1-D or 2-D, k up to 40, rows up to 200 long, up to 8 rows.
rc::Gen<TopkCase> topk_decode_case();
// The suite's prefill cases: k up to 40, up to 6 rows within 200 columns.
rc::Gen<TopkCase> topk_prefill_case();
// Up to 12 rows (one per pattern, in turn) around the short / long switch (kTopkShortRowMaxLen),
// k up to 24.
rc::Gen<TopkCase> topk_long_row_case(TopkLengths lengths);
// k = 2047, 2048, 2049 with rows around k and the short / long switch.
rc::Gen<TopkCase> topk_fast_k_case(TopkLengths lengths);
// Decode 2-D, one or two rows past kTopkSplitRowMinLen (around the split-count steps), k up to
// 4096 so a row's chunk candidates fit one unsplit row (the split-equivalence property).
rc::Gen<TopkCase> topk_split_row_case();
// Far rows (TopkFamily::far_rows): up to 8 rows spread across byte 2^31, 2^32 or 2^33 of the
// logits, k up to 40 or 2048, rows up to 4096 + 600 columns.
rc::Gen<TopkCase> topk_far_rows_case(TopkLengths lengths);

}  // namespace gen
}  // namespace mlacheck
