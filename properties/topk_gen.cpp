// Generators of top-k cases and their text form (properties/topk_gen.h).
#include "properties/topk_gen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>

#include "core/error.h"
#include "oracle/decode_rows.h"
#include "kernels/topk.h"

namespace mlacheck {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

const char* const kPatternNames[] = {"distinct", "few-values", "shared-high-bits", "all-equal",
                                     "neg-inf",  "signed-zeros", "nan",            "negative",
                                     "extremes", "huge",         "tiny",           "zeros"};
static_assert(sizeof(kPatternNames) / sizeof(kPatternNames[0]) == static_cast<size_t>(TopkPattern::kCount));


}  // namespace

const char* topk_pattern_name(TopkPattern p) { return kPatternNames[static_cast<int>(p)]; }

const std::vector<const char*>& topk_pattern_names() {
  static const std::vector<const char*> names(std::begin(kPatternNames), std::end(kPatternNames));
  return names;
}

const char* topk_lengths_name(TopkLengths l) {
  return l == TopkLengths::kDecode1D ? "decode-1d" : l == TopkLengths::kDecode2D ? "decode-2d" : "prefill";
}

void fill_topk_row(float* v, int64_t stride, int64_t n, TopkPattern pattern, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 4.0f);
  auto pick = [&](int64_t m) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(m)); };
  float few[3] = {normal(rng), normal(rng), normal(rng)};
  const int64_t few_count = 1 + pick(3);
  for (int64_t i = 0; i < n; ++i) {
    float x = 0;
    switch (pattern) {
      case TopkPattern::kDistinct: x = normal(rng); break;
      case TopkPattern::kFewValues: x = few[pick(few_count)]; break;
      case TopkPattern::kSharedHighBits: {
        const uint32_t bits = 0x3F800000u + static_cast<uint32_t>(pick(256));
        std::memcpy(&x, &bits, 4);
        break;
      }
      case TopkPattern::kAllEqual: x = few[0]; break;
      case TopkPattern::kNegInf: x = pick(8) == 0 ? normal(rng) : -kInf; break;
      case TopkPattern::kSignedZeros:
        x = pick(3) == 0 ? 0.0f : (pick(3) == 0 ? -0.0f : (pick(4) == 0 ? 1e-3f : 0.0f));
        break;
      case TopkPattern::kNaN: x = pick(5) == 0 ? kNaN : normal(rng); break;
      case TopkPattern::kNegative: x = -std::fabs(normal(rng)) - 1e-3f; break;
      case TopkPattern::kExtremes: {
        constexpr float kMax = std::numeric_limits<float>::max(), kTiny = std::numeric_limits<float>::denorm_min();
        const float e[] = {kInf, -kInf, kMax, -kMax, kTiny, -kTiny, 0.0f, -0.0f, 1.0f};
        x = e[pick(9)];
        break;
      }
      case TopkPattern::kHuge: {  // exponent 251..254: magnitudes 2^124 .. FLT_MAX
        const uint32_t bits = (uint32_t(pick(2)) << 31) | (uint32_t(251 + pick(4)) << 23) | uint32_t(pick(1 << 23));
        std::memcpy(&x, &bits, 4);
        break;
      }
      case TopkPattern::kTiny: {  // exponent 0 or 1: subnormals and the smallest normals
        const uint32_t bits = (uint32_t(pick(2)) << 31) | (uint32_t(pick(2)) << 23) | uint32_t(pick(1 << 23));
        std::memcpy(&x, &bits, 4);
        break;
      }
      case TopkPattern::kZeros: x = 0.0f; break;
      case TopkPattern::kCount: break;
    }
    v[i * stride] = x;
  }
}

float topk_garbage(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  switch (z % 4) {
    case 0: return kInf;
    case 1: return kNaN;
    case 2: return 3e38f;
    default: return 1e6f + static_cast<float>((z >> 8) % 1000);
  }
}

namespace {
// The family a case is written with: far rows write their row stride.
TopkFamily writer_family(const TopkCase& c) {
  TopkFamily f;
  f.far_rows = c.logits_row_stride > 0;
  return f;
}
}  // namespace

void showValue(const TopkCase& c, std::ostream& os) { show_case(c, os, writer_family(c)); }

std::vector<int64_t> topk_row_lengths(const TopkCase& c) {
  std::vector<int64_t> n(static_cast<size_t>(c.rows), 0);
  for (int64_t r = 0; r < c.rows; ++r) {
    const size_t i = static_cast<size_t>(r);
    int64_t len = 0;
    if (c.lengths == TopkLengths::kPrefill) {
      len = int64_t{c.ke[i]} - c.ks[i];
    } else if (c.lengths == TopkLengths::kDecode2D) {
      len = c.seq_lens[i];
    } else {
      len = oracle::decode_row_length(c.seq_lens[static_cast<size_t>(r / c.next_n)], c.next_n, r % c.next_n);
    }
    n[i] = std::clamp<int64_t>(len, 0, c.cols);
  }
  return n;
}

std::vector<int64_t> topk_row_starts(const TopkCase& c) {
  std::vector<int64_t> s(static_cast<size_t>(c.rows), 0);
  if (c.prefill()) std::copy(c.ks.begin(), c.ks.end(), s.begin());
  return s;
}

std::vector<std::vector<float>> topk_row_values(const TopkCase& c) {
  if (!c.explicit_rows.empty()) return c.explicit_rows;
  const std::vector<int64_t> n = topk_row_lengths(c);
  std::vector<std::vector<float>> rows(static_cast<size_t>(c.rows));
  for (size_t r = 0; r < rows.size(); ++r) {
    std::mt19937_64 rng(c.seed ^ (0x9E3779B97F4A7C15ull * (r + 1)));
    rows[r].resize(static_cast<size_t>(n[r]));
    fill_topk_row(rows[r].data(), 1, n[r], c.patterns[r], rng);
  }
  return rows;
}

void topk_to_text(const TopkCase& c, CaseText& out) { write_case(c, out, writer_family(c)); }

namespace {

// A reader's family: the spec, with lengths one of `lengths` (a property of one family names only
// its own), k in [min_k, max_k] and next_n at most max_next_n.
TopkFamily spec(std::vector<TopkLengths> lengths, int64_t min_k = 1, int64_t max_k = 262144, int64_t max_next_n = 16) {
  TopkFamily f;
  f.lengths = std::move(lengths);
  f.min_k = min_k, f.max_k = max_k, f.max_next_n = max_next_n;
  return f;
}

}  // namespace

TopkCase topk_from_text(const CaseText& t) { return read_case<TopkCase>(t, TopkFamily{}); }
TopkCase topk_decode_from_text(const CaseText& t) {
  return read_case<TopkCase>(t, spec({TopkLengths::kDecode1D, TopkLengths::kDecode2D}));
}
TopkCase topk_prefill_from_text(const CaseText& t) { return read_case<TopkCase>(t, spec({TopkLengths::kPrefill})); }
TopkCase topk_fast_k_from_text(const CaseText& t, bool prefill) {
  const std::vector<TopkLengths> lengths =
      prefill ? std::vector<TopkLengths>{TopkLengths::kPrefill} : std::vector<TopkLengths>{TopkLengths::kDecode1D, TopkLengths::kDecode2D};
  return read_case<TopkCase>(t, spec(lengths, kernels::kTopkFastK, kernels::kTopkFastK));
}
TopkCase topk_split_from_text(const CaseText& t) {
  // At most kTopkMaxSplits chunks of at most k candidates: k <= 4096 keeps them one unsplit row.
  return read_case<TopkCase>(t, spec({TopkLengths::kDecode2D}, 1, kernels::kTopkSplitRowMinLen / kernels::kTopkMaxSplits, 1));
}

namespace {
TopkFamily far_spec(std::vector<TopkLengths> lengths) {
  TopkFamily f = spec(std::move(lengths), 1, 262144, 4);
  f.far_rows = true;
  f.max_rows = 8;
  f.max_cols = 8192;
  return f;
}
}  // namespace

TopkCase topk_decode_far_from_text(const CaseText& t) {
  return read_case<TopkCase>(t, far_spec({TopkLengths::kDecode1D, TopkLengths::kDecode2D}));
}
TopkCase topk_prefill_far_from_text(const CaseText& t) { return read_case<TopkCase>(t, far_spec({TopkLengths::kPrefill})); }

int64_t topk_logits_row_stride(const TopkCase& c) {
  return c.logits_row_stride > 0 ? c.logits_row_stride : c.cols * c.logits_col_stride + c.logits_row_pad;
}

std::pair<int64_t, int64_t> topk_far_row_stride_range(const TopkCase& c) {
  const int64_t span = std::max<int64_t>(1, c.cols * c.logits_col_stride);  // a row's elements
  if (c.rows < 2) return {span, span};
  const int64_t max_elements = kTopkMaxReservedBytes / 4;
  const int64_t hi = (max_elements - c.logits_lead - span) / (c.rows - 1);
  // The last row starts past element 2^31 (byte 2^33), where an int32 element offset wraps; the
  // rows between cross bytes 2^31 and 2^32 on the way.
  const int64_t edge = int64_t{1} << 31;
  const int64_t lo = std::max(span, (edge - c.logits_lead + c.rows - 2) / (c.rows - 1));
  return {std::min(lo, hi), hi};
}

int64_t draw_topk_far_row_stride(const TopkCase& c, int64_t lo, int64_t hi) {
  const int64_t span = std::max<int64_t>(1, c.cols * c.logits_col_stride);
  // The edge in fp32 elements: byte 2^31, 2^32, or 2^33 (where an int32 element offset wraps).
  const int64_t edge = int64_t{1} << *rc::gen::weightedElement<int>({{1, 29}, {1, 30}, {2, 31}});
  const int64_t jitter = *rc::gen::inRange<int64_t>(0, std::min<int64_t>(span, 64) + 1);
  const int64_t first = *rc::gen::inRange<int64_t>(1, c.rows);  // the first row past the edge
  for (int64_t j = first; j < first + c.rows - 1; ++j) {
    const int64_t row = 1 + (j - 1) % (c.rows - 1);
    const int64_t stride = (edge - c.logits_lead + row - 1) / row + jitter;
    if (stride >= lo && stride <= hi) return stride;
  }
  return *rc::gen::inRange<int64_t>(lo, hi + 1);
}

TopkCase topk_rows_of_lengths(int64_t k, const std::vector<int64_t>& lengths, int64_t cols, uint64_t seed,
                              const std::vector<TopkPattern>& patterns) {
  TopkCase c;
  c.lengths = TopkLengths::kDecode2D;
  c.k = k;
  c.cols = cols;
  c.rows = static_cast<int64_t>(lengths.size());
  for (size_t r = 0; r < lengths.size(); ++r) {
    c.seq_lens.push_back(static_cast<int32_t>(lengths[r]));
    c.patterns.push_back(patterns[r % patterns.size()]);
  }
  c.logits_row_pad = 5;
  c.out_row_pad = 3;
  c.out_rows_before = 1;
  c.out_rows_after = 2;
  c.index_lead = 1;
  c.seed = seed;
  c.shuffled = true;
  return c;
}

namespace {

// Uniform in [lo, hi] at every size (rc::gen::inRange favours lo while the size is small), still
// shrinking towards lo.
int64_t uniform(int64_t lo, int64_t hi) { return *rc::gen::resize(100, rc::gen::inRange<int64_t>(lo, hi + 1)); }

// A row length in [0, cols] near one of the points the kernels switch at, or anywhere.
int64_t draw_length(int64_t k, int64_t cols, const std::vector<int64_t>& switch_points) {
  int64_t n = 0;
  switch (*rc::gen::element(0, 1, 2, 3)) {  // element, not inRange: uniform at every size
    case 0: n = k + *rc::gen::element<int64_t>(-1, 0, 1); break;
    case 1: n = uniform(0, cols); break;
    case 2:
      n = switch_points.empty() ? cols : *rc::gen::elementOf(switch_points) + *rc::gen::element<int64_t>(-1, 0, 1);
      break;
    default: n = *rc::gen::element<int64_t>(0, cols); break;
  }
  return std::clamp<int64_t>(n, 0, cols);
}

}  // namespace

int64_t draw_topk_k(const TopkFamily& f) {
  if (!f.split_rows) return uniform(f.min_k, f.max_k);
  return *rc::gen::weightedOneOf<int64_t>({{8, rc::gen::inRange<int64_t>(1, 41)},
                                           {1, rc::gen::just<int64_t>(kernels::kTopkFastK)},
                                           {1, rc::gen::element<int64_t>(kernels::kTopkFastK + 1, 4096)}});
}

int64_t draw_topk_cols(const TopkCase& c, const TopkFamily& f, int64_t max_cols, std::vector<int32_t>& split_lens) {
  if (!f.split_rows) return uniform(f.min_cols, max_cols);
  split_lens.clear();
  for (int64_t r = 0; r < c.rows; ++r) {
    const int64_t n = *rc::gen::weightedOneOf<int64_t>(
        {{3, rc::gen::map(rc::gen::pair(rc::gen::elementOf(f.switch_points), rc::gen::inRange<int64_t>(-1, 2)),
                          [](const std::pair<int64_t, int64_t>& p) { return p.first + p.second; })},
         {1, rc::gen::resize(100, rc::gen::inRange<int64_t>(f.min_cols, f.max_cols - 1))}});
    split_lens.push_back(static_cast<int32_t>(n));
  }
  return std::min(max_cols, *std::max_element(split_lens.begin(), split_lens.end()) + *rc::gen::inRange<int64_t>(0, 3));
}

std::vector<int32_t> draw_topk_seq_lens(const TopkCase& c, const TopkFamily& f) {
  std::vector<int32_t> lens;
  for (int64_t g = 0; g < c.rows / c.next_n; ++g) {
    if (c.lengths == TopkLengths::kDecode1D) {
      // Row j of the group has length L - next_n + j + 1: aim its last row at the length drawn.
      const int64_t last = draw_length(c.k, c.cols, f.switch_points);
      lens.push_back(static_cast<int32_t>(*rc::gen::weightedElement<int64_t>({{8, last}, {1, 0}, {1, -1}})));
    } else {
      for (int64_t j = 0; j < c.next_n; ++j) lens.push_back(static_cast<int32_t>(draw_length(c.k, c.cols, f.switch_points)));
    }
  }
  return lens;
}

std::vector<int32_t> draw_topk_ks(const TopkCase& c, const TopkFamily& f, std::vector<int32_t>& ke) {
  std::vector<int32_t> ks;
  ke.clear();
  for (int64_t r = 0; r < c.rows; ++r) {
    const int64_t n = draw_length(c.k, c.cols, f.switch_points);
    const int64_t start = *rc::gen::inRange<int64_t>(0, c.cols - n + 1);
    ks.push_back(static_cast<int32_t>(start));
    ke.push_back(static_cast<int32_t>(start + n));
  }
  return ks;
}

std::vector<TopkPattern> draw_topk_patterns(int64_t rows, bool rotate) {
  if (rotate) {
    const int count = static_cast<int>(TopkPattern::kCount);
    const int start = *rc::gen::inRange(0, count);
    std::vector<TopkPattern> out;
    for (int64_t r = 0; r < rows; ++r) out.push_back(static_cast<TopkPattern>((start + r) % count));
    return out;
  }
  return *rc::gen::container<std::vector<TopkPattern>>(static_cast<size_t>(rows), gen::topk_pattern());
}

namespace gen {

rc::Gen<TopkPattern> topk_pattern() {
  return rc::gen::weightedOneOf<TopkPattern>({{6, rc::gen::just(TopkPattern::kDistinct)},
                                              {2, rc::gen::just(TopkPattern::kFewValues)},
                                              {2, rc::gen::just(TopkPattern::kSharedHighBits)},
                                              {1, rc::gen::just(TopkPattern::kAllEqual)},
                                              {1, rc::gen::just(TopkPattern::kNegInf)},
                                              {1, rc::gen::just(TopkPattern::kSignedZeros)},
                                              {1, rc::gen::just(TopkPattern::kNaN)},
                                              {1, rc::gen::just(TopkPattern::kNegative)},
                                              {1, rc::gen::just(TopkPattern::kExtremes)},
                                              {1, rc::gen::just(TopkPattern::kHuge)},
                                              {1, rc::gen::just(TopkPattern::kTiny)},
                                              {1, rc::gen::just(TopkPattern::kZeros)}});
}

rc::Gen<TopkCase> topk_case(const TopkFamily& f) { return draw_case<TopkCase>(3, f); }

rc::Gen<TopkCase> topk_case(TopkLengths lengths, int64_t min_k, int64_t max_k, int64_t min_cols, int64_t max_cols,
                            int64_t max_rows, std::vector<int64_t> switch_points) {
  TopkFamily f;
  f.lengths = {lengths};
  f.min_k = min_k, f.max_k = max_k, f.min_cols = min_cols, f.max_cols = max_cols, f.max_rows = max_rows;
  f.max_next_n = 3;
  f.switch_points = std::move(switch_points);
  return topk_case(f);
}

rc::Gen<TopkCase> topk_decode_case() {
  return rc::gen::mapcat(rc::gen::element(TopkLengths::kDecode1D, TopkLengths::kDecode2D),
                         [](TopkLengths l) { return topk_case(l, 1, 40, 1, 200, 8); });
}

rc::Gen<TopkCase> topk_prefill_case() { return topk_case(TopkLengths::kPrefill, 1, 40, 1, 200, 6); }

rc::Gen<TopkCase> topk_long_row_case(TopkLengths lengths) {
  TopkFamily f;
  f.lengths = {lengths};
  f.min_k = 1, f.max_k = 24, f.min_cols = kernels::kTopkShortRowMaxLen - 2;
  f.max_cols = kernels::kTopkShortRowMaxLen + 600, f.max_rows = static_cast<int64_t>(TopkPattern::kCount), f.max_next_n = 3;
  f.switch_points = {kernels::kTopkShortRowMaxLen, kernels::kTopkShortRowMaxLen + 1};
  f.rotate_patterns = true;
  return topk_case(f);
}

rc::Gen<TopkCase> topk_fast_k_case(TopkLengths lengths) {
  return topk_case(lengths, kernels::kTopkFastK - 1, kernels::kTopkFastK + 1, kernels::kTopkFastK - 2,
                   kernels::kTopkShortRowMaxLen + 600, 1, {kernels::kTopkFastK, kernels::kTopkShortRowMaxLen});
}

rc::Gen<TopkCase> topk_far_rows_case(TopkLengths lengths) {
  return rc::gen::mapcat(rc::gen::weightedElement<int>({{3, 0}, {1, 1}}), [lengths](int fast) {
    TopkFamily f;
    f.lengths = {lengths};
    f.far_rows = true;
    f.max_rows = 8;
    f.max_next_n = 3;
    if (fast) {  // the k = 2048 path, rows around it and the short / long switch
      f.min_k = kernels::kTopkFastK - 1, f.max_k = kernels::kTopkFastK + 1;
      f.min_cols = kernels::kTopkFastK - 2, f.max_cols = kernels::kTopkShortRowMaxLen + 600;
      f.switch_points = {kernels::kTopkFastK, kernels::kTopkShortRowMaxLen};
    } else {
      f.min_k = 1, f.max_k = 40, f.min_cols = 1, f.max_cols = 300;
    }
    return topk_case(f);
  });
}

rc::Gen<TopkCase> topk_split_row_case() {
  using namespace kernels;
  TopkFamily f;
  f.lengths = {TopkLengths::kDecode2D};
  f.max_k = 4096;
  f.max_next_n = 1;
  f.max_rows = 2;
  // Rows just past the split minimum, and around the steps from 3 to 4 and from 4 to 5 chunks.
  f.switch_points = {kTopkSplitRowMinLen + 1, 3 * int64_t{kTopkSplitChunkLen}, 4 * int64_t{kTopkSplitChunkLen}};
  f.min_cols = kTopkSplitRowMinLen - 1;
  f.max_cols = 4 * int64_t{kTopkSplitChunkLen} + 3;
  f.split_rows = true;
  f.rotate_patterns = true;
  return topk_case(f);
}

}  // namespace gen
}  // namespace mlacheck
