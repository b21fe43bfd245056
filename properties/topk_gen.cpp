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
#include "kernels/topk.h"
#include "properties/schedule_gen.h"

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

void showValue(const TopkCase& c, std::ostream& os) {
  CaseText t;
  topk_to_text(c, t);
  os << t.format();
}

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
      len = int64_t{c.seq_lens[static_cast<size_t>(r / c.next_n)]} - c.next_n + r % c.next_n + 1;
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

void topk_to_text(const TopkCase& c, CaseText& out) {
  out.set("lengths", topk_lengths_name(c.lengths)).set("k", c.k).set("next_n", c.next_n);
  out.set("rows", c.rows).set("cols", c.cols);
  if (c.prefill()) {
    out.set_list("ks", c.ks).set_list("ke", c.ke);
  } else {
    out.set_list("seq_lens", c.seq_lens);
  }
  out.set("logits_lead", c.logits_lead).set("logits_row_pad", c.logits_row_pad);
  out.set("logits_col_stride", c.logits_col_stride).set("out_row_pad", c.out_row_pad);
  out.set("out_rows_before", c.out_rows_before).set("out_rows_after", c.out_rows_after);
  out.set("index_lead", c.index_lead);
  std::vector<std::string> names;
  for (TopkPattern p : c.patterns) names.push_back(topk_pattern_name(p));
  out.set_words("patterns", names);
  for (size_t r = 0; r < c.explicit_rows.size(); ++r) out.set_floats("values_" + std::to_string(r), c.explicit_rows[r]);
  write_schedule(c, out);
}

namespace {

// The case's keys, with lengths one of `allowed` (a property of one family names only its own),
// k in [min_k, max_k] and next_n at most max_next_n.
TopkCase read_topk_case(const CaseText& t, std::initializer_list<TopkLengths> allowed, int64_t min_k = 1,
                        int64_t max_k = 262144, int64_t max_next_n = 16) {
  TopkCase c;
  std::vector<const char*> names;
  for (TopkLengths l : allowed) names.push_back(topk_lengths_name(l));
  c.lengths = *(allowed.begin() + t.choices_exactly("lengths", names, 1)[0]);
  c.k = t.integer("k", min_k, max_k);
  c.next_n = t.integer("next_n", 1, c.prefill() ? 1 : max_next_n);
  c.rows = t.multiple("rows", c.next_n, 1, 4096);
  c.cols = t.integer("cols", 0, int64_t{1} << 20);
  const size_t rows = static_cast<size_t>(c.rows);
  if (c.prefill()) {
    c.ks = t.list_exactly<int32_t>("ks", 0, c.cols, rows);
    for (int64_t e : t.integers_from("ke", std::vector<int64_t>(c.ks.begin(), c.ks.end()), c.cols)) {
      c.ke.push_back(static_cast<int32_t>(e));
    }
  } else {
    const size_t want = c.lengths == TopkLengths::kDecode2D ? rows : rows / static_cast<size_t>(c.next_n);
    // Negative lengths are allowed (they mean 0); past cols a row would not fit its view.
    c.seq_lens = t.list_exactly<int32_t>("seq_lens", -(int64_t{1} << 30), c.cols, want);
  }
  c.logits_lead = t.integer("logits_lead", 0, 64);
  c.logits_row_pad = t.integer("logits_row_pad", 0, 64);
  c.logits_col_stride = t.integer("logits_col_stride", 1, 8);
  c.out_row_pad = t.integer("out_row_pad", 0, 64);
  c.out_rows_before = t.integer("out_rows_before", 0, 64);
  c.out_rows_after = t.integer("out_rows_after", 0, 64);
  c.index_lead = t.integer("index_lead", 0, 64);
  const int64_t logits_elems = c.logits_lead + c.rows * (c.cols * c.logits_col_stride + c.logits_row_pad);
  const int64_t out_elems = (c.out_rows_before + c.rows + c.out_rows_after) * (c.k + c.out_row_pad);
  MLA_REQUIRE(logits_elems <= (int64_t{1} << 27) && out_elems <= (int64_t{1} << 27), "case: rows ", c.rows, " cols ",
              c.cols, " k ", c.k, " need ", logits_elems, " logits and ", out_elems, " output elements (at most 2^27)");
  const std::vector<const char*> pattern_names(std::begin(kPatternNames), std::end(kPatternNames));
  for (int p : t.choices_exactly("patterns", pattern_names, rows)) c.patterns.push_back(static_cast<TopkPattern>(p));
  if (t.has("values_0")) {
    const std::vector<int64_t> n = topk_row_lengths(c);
    for (size_t r = 0; r < rows; ++r) {
      const std::string key = "values_" + std::to_string(r);
      c.explicit_rows.push_back(t.floats_exactly(key, static_cast<size_t>(n[r])));
    }
  }
  read_schedule(c, t);
  return c;
}

}  // namespace

TopkCase topk_from_text(const CaseText& t) {
  return read_topk_case(t, {TopkLengths::kDecode1D, TopkLengths::kDecode2D, TopkLengths::kPrefill});
}
TopkCase topk_decode_from_text(const CaseText& t) {
  return read_topk_case(t, {TopkLengths::kDecode1D, TopkLengths::kDecode2D});
}
TopkCase topk_prefill_from_text(const CaseText& t) { return read_topk_case(t, {TopkLengths::kPrefill}); }
TopkCase topk_fast_k_from_text(const CaseText& t, bool prefill) {
  return prefill ? read_topk_case(t, {TopkLengths::kPrefill}, kernels::kTopkFastK, kernels::kTopkFastK)
                 : read_topk_case(t, {TopkLengths::kDecode1D, TopkLengths::kDecode2D}, kernels::kTopkFastK,
                                  kernels::kTopkFastK);
}
TopkCase topk_split_from_text(const CaseText& t) {
  // At most kTopkMaxSplits chunks of at most k candidates: k <= 4096 keeps them one unsplit row.
  return read_topk_case(t, {TopkLengths::kDecode2D}, 1, kernels::kTopkSplitRowMinLen / kernels::kTopkMaxSplits, 1);
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

namespace gen {
namespace {

// Uniform in [lo, hi] at every size (rc::gen::inRange favours lo while the size is small), still
// shrinking towards lo.
rc::Gen<int64_t> uniform(int64_t lo, int64_t hi) { return rc::gen::resize(100, rc::gen::inRange<int64_t>(lo, hi + 1)); }

// A row length in [0, cols] near one of the points the kernels switch at, or anywhere.
int64_t gen_length(int64_t k, int64_t cols, const std::vector<int64_t>& switch_points) {
  int64_t n = 0;
  switch (*rc::gen::element(0, 1, 2, 3)) {  // element, not inRange: uniform at every size
    case 0: n = k + *rc::gen::element<int64_t>(-1, 0, 1); break;
    case 1: n = *uniform(0, cols); break;
    case 2:
      n = switch_points.empty() ? cols : *rc::gen::elementOf(switch_points) + *rc::gen::element<int64_t>(-1, 0, 1);
      break;
    default: n = *rc::gen::element<int64_t>(0, cols); break;
  }
  return std::clamp<int64_t>(n, 0, cols);
}

}  // namespace

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

rc::Gen<TopkCase> topk_case(TopkLengths lengths, int64_t min_k, int64_t max_k, int64_t min_cols, int64_t max_cols,
                            int64_t max_rows, std::vector<int64_t> switch_points) {
  return rc::gen::exec([=] {
    TopkCase c;
    c.lengths = lengths;
    c.k = *uniform(min_k, max_k);
    c.cols = *uniform(min_cols, max_cols);
    c.next_n = lengths == TopkLengths::kPrefill ? 1 : *rc::gen::inRange<int64_t>(1, 4);
    const int64_t groups = *rc::gen::inRange<int64_t>(1, std::max<int64_t>(2, max_rows / c.next_n + 1));
    c.rows = groups * c.next_n;
    for (int64_t g = 0; g < groups; ++g) {
      if (lengths == TopkLengths::kDecode1D) {
        // Row j of the group has length L - next_n + j + 1: aim its last row at the length drawn.
        const int64_t last = gen_length(c.k, c.cols, switch_points);
        c.seq_lens.push_back(static_cast<int32_t>(*rc::gen::weightedElement<int64_t>({{8, last}, {1, 0}, {1, -1}})));
      } else {
        for (int64_t j = 0; j < c.next_n; ++j) {
          const int64_t n = gen_length(c.k, c.cols, switch_points);
          if (lengths == TopkLengths::kDecode2D) {
            c.seq_lens.push_back(static_cast<int32_t>(n));
          } else {
            const int64_t ks = *rc::gen::inRange<int64_t>(0, c.cols - n + 1);
            c.ks.push_back(static_cast<int32_t>(ks));
            c.ke.push_back(static_cast<int32_t>(ks + n));
          }
        }
      }
    }
    c.patterns = *rc::gen::container<std::vector<TopkPattern>>(static_cast<size_t>(c.rows), topk_pattern());
    c.logits_lead = *rc::gen::inRange<int64_t>(0, 4);
    c.logits_row_pad = *rc::gen::inRange<int64_t>(0, 5);
    c.logits_col_stride = *rc::gen::weightedElement<int64_t>({{5, 1}, {1, 2}});
    c.out_row_pad = *rc::gen::inRange<int64_t>(0, 4);
    c.out_rows_before = *rc::gen::inRange<int64_t>(0, 3);
    c.out_rows_after = *rc::gen::inRange<int64_t>(0, 3);
    c.index_lead = *rc::gen::inRange<int64_t>(0, 3);
    draw_schedule(c, ShuffleOdds::kMostly);
    return c;
  });
}

rc::Gen<TopkCase> topk_decode_case() {
  return rc::gen::mapcat(rc::gen::element(TopkLengths::kDecode1D, TopkLengths::kDecode2D),
                         [](TopkLengths l) { return topk_case(l, 1, 40, 1, 200, 8); });
}

rc::Gen<TopkCase> topk_prefill_case() { return topk_case(TopkLengths::kPrefill, 1, 40, 1, 200, 6); }

rc::Gen<TopkCase> topk_long_row_case(TopkLengths lengths) {
  return topk_case(lengths, 1, 24, kernels::kTopkShortRowMaxLen - 2, kernels::kTopkShortRowMaxLen + 600, 1,
                   {kernels::kTopkShortRowMaxLen, kernels::kTopkShortRowMaxLen + 1});
}

rc::Gen<TopkCase> topk_fast_k_case(TopkLengths lengths) {
  return topk_case(lengths, kernels::kTopkFastK - 1, kernels::kTopkFastK + 1, kernels::kTopkFastK - 2,
                   kernels::kTopkShortRowMaxLen + 600, 1, {kernels::kTopkFastK, kernels::kTopkShortRowMaxLen});
}

rc::Gen<TopkCase> topk_split_row_case() {
  return rc::gen::exec([] {
    using namespace kernels;
    TopkCase c;
    c.lengths = TopkLengths::kDecode2D;
    c.k = *rc::gen::weightedOneOf<int64_t>({{8, rc::gen::inRange<int64_t>(1, 41)},
                                            {1, rc::gen::just<int64_t>(kTopkFastK)},
                                            {1, rc::gen::element<int64_t>(kTopkFastK + 1, 4096)}});
    // Just past the split minimum, and around the steps from 3 to 4 and from 4 to 5 chunks.
    const std::vector<int64_t> steps = {kTopkSplitRowMinLen + 1, 3 * int64_t{kTopkSplitChunkLen}, 4 * int64_t{kTopkSplitChunkLen}};
    c.rows = *rc::gen::weightedElement<int64_t>({{3, 1}, {1, 2}});
    for (int64_t r = 0; r < c.rows; ++r) {
      const int64_t n = *rc::gen::weightedOneOf<int64_t>(
          {{3, rc::gen::map(rc::gen::pair(rc::gen::elementOf(steps), rc::gen::inRange<int64_t>(-1, 2)),
                            [](const std::pair<int64_t, int64_t>& p) { return p.first + p.second; })},
           {1, uniform(kTopkSplitRowMinLen - 1, 4 * int64_t{kTopkSplitChunkLen} + 1)}});
      c.seq_lens.push_back(static_cast<int32_t>(n));
    }
    c.cols = *std::max_element(c.seq_lens.begin(), c.seq_lens.end()) + *rc::gen::inRange<int64_t>(0, 3);
    c.patterns = *rc::gen::container<std::vector<TopkPattern>>(static_cast<size_t>(c.rows), topk_pattern());
    c.logits_lead = *rc::gen::inRange<int64_t>(0, 4);
    c.logits_row_pad = *rc::gen::inRange<int64_t>(0, 5);
    c.out_row_pad = *rc::gen::inRange<int64_t>(0, 4);
    c.out_rows_before = *rc::gen::inRange<int64_t>(0, 2);
    c.out_rows_after = *rc::gen::inRange<int64_t>(0, 2);
    c.index_lead = *rc::gen::inRange<int64_t>(0, 3);
    draw_schedule(c, ShuffleOdds::kMostly);
    return c;
  });
}

rc::Gen<std::vector<int>> permutation(int n) {
  return rc::gen::exec([n] {
    std::vector<int> p(static_cast<size_t>(std::max(n, 0)));
    std::iota(p.begin(), p.end(), 0);
    // Fisher-Yates from draws that shrink to 0: a failing permutation shrinks towards the identity.
    for (int i = n - 1; i > 0; --i) std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(i - *rc::gen::inRange(0, i + 1))]);
    return p;
  });
}

}  // namespace gen
}  // namespace mlacheck
