// Generators of indexer logits cases and their text form (properties/mqa_logits_gen.h).
#include "properties/mqa_logits_gen.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "properties/schedule_gen.h"
#include "properties/block_table_gen.h"

namespace mlacheck {

using kernels::LogitsMode;

const char* key_pattern_name(KeyPattern p) {
  switch (p) {
    case KeyPattern::kRandom: return "random";
    case KeyPattern::kZeroRows: return "zero-rows";
    case KeyPattern::kSharedScale: return "shared-scale";
    case KeyPattern::kBelowFloor: return "below-floor";
    case KeyPattern::kMixed: return "mixed";
  }
  return "?";
}

int64_t PagedLogitsCase::row_len(int64_t b, int64_t j) const {
  return lens_2d ? lens[static_cast<size_t>(b * next_n + j)]
                 : std::max<int64_t>(0, lens[static_cast<size_t>(b)] - next_n + j + 1);
}

int64_t PagedLogitsCase::longest(int64_t b) const {
  int64_t n = 0;
  for (int64_t j = 0; j < next_n; ++j) n = std::max(n, row_len(b, j));
  return n;
}

bool PagedLogitsCase::fast_path_shape() const {
  // Guarded allocations are 256-byte aligned (core/guarded_buffer.h): the cache's alignment is its offset's.
  return block_size == kernels::kLogitsTileTokens && D % 16 == 0 && block_stride % 16 == 0 && kv_offset % 16 == 0;
}

void showValue(const PagedLogitsCase& c, std::ostream& os) {
  CaseText t;
  paged_logits_to_text(c, t);
  os << t.format();
}

void showValue(const PrefillLogitsCase& c, std::ostream& os) {
  CaseText t;
  prefill_logits_to_text(c, t);
  os << t.format();
}

// ---- text ------------------------------------------------------------------------------------------

namespace {

const char* mode_name(LogitsMode m) { return m == LogitsMode::kClean ? "clean" : "unclean"; }

// The keys every case shares: data, special values and schedule.
template <class Case>
void common_to_text(const Case& c, CaseText& out) {
  out.set("mode", mode_name(c.mode)).set("scales", c.ue8m0 ? "ue8m0" : "fp32");
  out.set("keys", key_pattern_name(c.keys)).set("key_exponent", int64_t{c.key_exponent});
  out.set("poison", int64_t{c.poison});
  write_schedule(c, out);
}

template <class Case>
void common_from_text(const CaseText& t, Case& c) {
  c.mode = t.choice("mode", {"clean", "unclean"}) == 0 ? LogitsMode::kClean : LogitsMode::kUnclean;
  c.ue8m0 = t.choice("scales", {"fp32", "ue8m0"}) == 1;
  c.keys = static_cast<KeyPattern>(t.choice("keys", {"random", "zero-rows", "shared-scale", "below-floor", "mixed"}));
  c.key_exponent = static_cast<int>(t.integer("key_exponent", -kMaxKeyExponent, kMaxKeyExponent));
  c.poison = static_cast<uint8_t>(t.integer("poison", 0x7E, 0x7F));
  read_schedule(c, t);
}

constexpr int64_t kMaxLen = 65536, kSlack = 4096;
constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min(), kInt32Max = std::numeric_limits<int32_t>::max();
// The most values a case file's line holds (CaseText::parse: a key and at most 2^16 - 1 values).
constexpr int64_t kMaxListValues = (int64_t{1} << 16) - 1;
// What a case may stage: the KV cache (bytes) and the logits (elements).
constexpr int64_t kMaxCacheBytes = int64_t{1} << 28, kMaxLogits = int64_t{1} << 26;

// The largest head_dim whose H x D fits one block's shared memory (the glue refuses more); one row
// of any H <= 128 fits at D = 1, and the fit only shrinks as D grows.
int64_t max_head_dim(int64_t H) {
  int64_t D = 576;
  while (D > 1 && kernels::logits_rows_per_block(1, H, D) < 1) --D;
  return D;
}

}  // namespace

void paged_logits_to_text(const PagedLogitsCase& c, CaseText& out) {
  out.set("batch", c.B).set("next_n", c.next_n).set("heads", c.H).set("head_dim", c.D).set("block_size", c.block_size);
  out.set("lens_layout", c.lens_2d ? "2d" : "1d").set("lens_stride", c.lens_stride).set_list("context_lens", c.lens);
  out.set("max_context_len", c.max_context_len).set("table_width", c.W).set("table_row_pad", c.table_row_pad);
  out.set("num_blocks", c.num_blocks).set_list("block_table", c.table);
  out.set("block_stride", c.block_stride).set("kv_offset", c.kv_offset);
  out.set("logits_stride", c.logits_stride).set("logits_offset", c.logits_offset).set("host_lens", c.pass_host_lens);
  common_to_text(c, out);
}

// Reads constructively (harness/case_text.h, "Fuzz inputs"): each value's range follows from the
// values read before it, so the rules are the readers' ranges and almost any fuzz input bytes make
// a case. The scalars come first and the lists last (the bytes a fuzzer mutates first steer the
// shape; the long lists take the rest); max_context_len before the lengths it bounds, block_stride
// and the table's needed columns before num_blocks, which holds their pages within 256 MiB.
PagedLogitsCase paged_logits_from_text(const CaseText& t) {
  PagedLogitsCase c;
  c.B = t.integer("batch", 1, 256);
  c.next_n = t.integer("next_n", 1, 64);
  c.H = t.integer("heads", 1, 128);
  c.D = t.integer("head_dim", 1, max_head_dim(c.H));  // H x D within one block's shared memory
  c.block_size = t.integer("block_size", 1, 1024);
  c.lens_2d = t.choice("lens_layout", {"1d", "2d"}) == 1;
  c.lens_stride = t.integer("lens_stride", 1, c.lens_2d ? 1 : 64);  // 2-D lengths are C-contiguous
  // Every row's logits fit a logits_stride >= max_context_len within 2^26 elements.
  c.max_context_len = t.integer("max_context_len", 0, std::min(kMaxLen, kMaxLogits / c.rows()));
  c.logits_stride = t.integer("logits_stride", std::max<int64_t>(c.max_context_len, 1),
                              std::min(c.max_context_len + kSlack, kMaxLogits / c.rows()));
  c.logits_offset = t.integer("logits_offset", 0, kSlack);
  c.kv_offset = t.integer("kv_offset", 0, kSlack);
  c.table_row_pad = t.integer("table_row_pad", 0, 64);
  c.pass_host_lens = t.flag("host_lens");
  const int64_t block_bytes = c.block_size * (c.D + 4);
  c.block_stride = t.multiple("block_stride", 4, block_bytes, block_bytes + kSlack);
  common_from_text(t, c);
  // A request's longest row is its 1-D length L (row next_n - 1), or its longest 2-D row: each is
  // within max_context_len, and its pages within a table of batch x table_width <= kMaxListValues.
  const int64_t max_len = std::min(c.max_context_len, c.block_size * (kMaxListValues / c.B));
  c.lens = t.list_exactly<int32_t>("context_lens", 0, max_len, static_cast<size_t>(c.lens_2d ? c.rows() : c.B));
  int64_t needed = 0;
  for (int64_t b = 0; b < c.B; ++b) needed = std::max(needed, c.needed(b));
  c.W = t.integer("table_width", needed, std::min(kMaxLen, kMaxListValues / c.B));
  // A request's needed columns hold pages of the cache; the columns past them may hold anything.
  std::vector<int64_t> lows(static_cast<size_t>(c.B * c.W), kInt32Min);
  for (int64_t b = 0; b < c.B; ++b) std::fill_n(lows.begin() + b * c.W, c.needed(b), int64_t{0});
  for (int64_t v : t.integers_from("block_table", lows, kInt32Max)) c.table.push_back(static_cast<int32_t>(v));
  // No range expresses "a needed page is within the cache" (the garbage shares the list's top):
  // the one check left. num_blocks then covers every needed page.
  const int64_t max_blocks = std::min(kMaxLen, kMaxCacheBytes / c.block_stride);
  int64_t pages = 1;
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t col = 0; col < c.needed(b); ++col) {
      const int64_t page = c.table[static_cast<size_t>(b * c.W + col)];
      MLA_REQUIRE(page < max_blocks, "case: block_table: request ", b, " column ", col, " is page ", page,
                  ", past the largest cache (", max_blocks, " pages: at most ", kMaxLen,
                  " and 256 MiB at this block_stride)");
      pages = std::max(pages, page + 1);
    }
  }
  c.num_blocks = t.integer("num_blocks", pages, max_blocks);
  return c;
}

void prefill_logits_to_text(const PrefillLogitsCase& c, CaseText& out) {
  out.set("rows", c.M).set("keys_count", c.N).set("heads", c.H).set("head_dim", c.D);
  out.set_list("ks", c.ks).set_list("ke", c.ke);
  out.set("k_stride", c.k_stride).set("k_offset", c.k_offset).set("scale_stride", c.scale_stride);
  out.set("range_stride", c.range_stride).set("logits_stride", c.logits_stride).set("logits_offset", c.logits_offset);
  out.set("host_ranges", c.pass_host_ranges);
  common_to_text(c, out);
}

// Reads constructively, as paged_logits_from_text does: keys_count within what rows x logits_stride
// >= keys_count allows, the lists last, ks before ke (ke[m] >= ks[m]).
PrefillLogitsCase prefill_logits_from_text(const CaseText& t) {
  PrefillLogitsCase c;
  c.M = t.integer("rows", 1, 4096);
  c.N = t.integer("keys_count", 0, std::min(kMaxLen, kMaxLogits / c.M));
  c.H = t.integer("heads", 1, 128);
  c.D = t.integer("head_dim", 1, max_head_dim(c.H));  // H x D within one block's shared memory
  // keys_count x k_stride within 256 MiB (N <= 65536 leaves k_stride at least 4096 >= D).
  c.k_stride = t.integer("k_stride", c.D, std::min(c.D + kSlack, kMaxCacheBytes / std::max<int64_t>(c.N, 1)));
  c.k_offset = t.integer("k_offset", 0, kSlack);
  c.scale_stride = t.integer("scale_stride", 1, 64);
  c.range_stride = t.integer("range_stride", 1, 64);
  c.logits_stride = t.integer("logits_stride", std::max<int64_t>(c.N, 1), std::min(c.N + kSlack, kMaxLogits / c.M));
  c.logits_offset = t.integer("logits_offset", 0, kSlack);
  c.pass_host_ranges = t.flag("host_ranges");
  common_from_text(t, c);
  c.ks = t.list_exactly<int32_t>("ks", 0, c.N, static_cast<size_t>(c.M));
  for (int64_t e : t.integers_from("ke", std::vector<int64_t>(c.ks.begin(), c.ks.end()), c.N)) {
    c.ke.push_back(static_cast<int32_t>(e));
  }
  return c;
}

// ---- generators ------------------------------------------------------------------------------------

namespace gen {
namespace {

rc::Gen<KeyPattern> key_pattern() {
  return rc::gen::weightedOneOf<KeyPattern>(
      {{3, rc::gen::just(KeyPattern::kRandom)},
       {2, rc::gen::element(KeyPattern::kZeroRows, KeyPattern::kSharedScale, KeyPattern::kBelowFloor, KeyPattern::kMixed)}});
}

rc::Gen<int> key_exponent() {
  return rc::gen::weightedOneOf<int>({{4, rc::gen::just(0)}, {1, rc::gen::element(-90, 90)}});
}

// A length next to a switch point of the kernel: a page boundary, a 64-key tile, a block's 4 tiles.
rc::Gen<int32_t> around_switch_point(int64_t block_size, bool short_rows) {
  return rc::gen::map(rc::gen::pair(short_rows ? rc::gen::element<int64_t>(int64_t{std::min<int64_t>(block_size, 128)}, 64, 128)
                                               : rc::gen::element<int64_t>(block_size + 0, 2 * block_size, 64, 128, 256),
                                    rc::gen::inRange(-1, 2)),
                      [](const std::pair<int64_t, int>& p) { return static_cast<int32_t>(std::max<int64_t>(0, p.first + p.second)); });
}

}  // namespace

rc::Gen<PagedLogitsCase> paged_logits_case(PagedCaseShape shape) {
  return rc::gen::exec([shape] {
    const bool block64_fast_path = shape.block64_fast_path;
    PagedLogitsCase c;
    c.B = *rc::gen::inRange(1, 5);
    c.next_n = shape.short_rows ? *rc::gen::inRange<int64_t>(1, 5)
                                : *rc::gen::weightedOneOf<int64_t>(
                                      {{8, rc::gen::inRange<int64_t>(1, 5)}, {1, rc::gen::inRange<int64_t>(15, 20)}});
    c.H = *rc::gen::inRange(1, 71);
    c.D = block64_fast_path ? *rc::gen::element<int64_t>(16, 32, 48, 64)
                            : *rc::gen::weightedOneOf<int64_t>(
                                  {{2, rc::gen::element<int64_t>(16, 32, 64)}, {1, rc::gen::inRange<int64_t>(1, 41)}});
    c.block_size = block64_fast_path ? 64
                                     : *rc::gen::weightedOneOf<int64_t>(
                                           {{1, rc::gen::just<int64_t>(64)},
                                            {2, rc::gen::element<int64_t>(1, 2, 3, 53, 61, 64, 69)}});
    c.lens_2d = *rc::gen::arbitrary<bool>();
    c.lens_stride = c.lens_2d ? 1 : *rc::gen::inRange(1, 3);
    const int max_len = shape.short_rows ? *rc::gen::element(0, 5, 70, 200) : *rc::gen::element(0, 5, 70, 200, 400);
    const auto length = rc::gen::weightedOneOf<int32_t>({{1, rc::gen::just(0)},
                                                         {4, rc::gen::inRange(0, max_len + 1)},
                                                         {2, around_switch_point(c.block_size, shape.short_rows)}});
    c.lens = *rc::gen::container<std::vector<int32_t>>(static_cast<size_t>(c.lens_2d ? c.rows() : c.B), length);
    int64_t longest = 0, needed = 0;
    for (int64_t b = 0; b < c.B; ++b) longest = std::max(longest, c.longest(b)), needed = std::max(needed, c.needed(b));
    c.max_context_len = longest + *rc::gen::element<int64_t>(0, 1, 13, 64, 70);
    c.W = needed + *rc::gen::inRange(0, 3);
    c.table_row_pad = *rc::gen::inRange(0, 3);
    std::vector<int64_t> pages;
    for (int64_t b = 0; b < c.B; ++b) pages.push_back(c.needed(b));
    const PagedBlockTable t = *paged_block_table(pages, c.W);
    c.num_blocks = t.num_blocks;
    c.table = t.table;
    // Aligned strides and offsets let block size 64 take the fast path.
    const bool aligned = block64_fast_path || *rc::gen::arbitrary<bool>();
    c.block_stride = c.block_size * (c.D + 4) + (aligned ? 16 * *rc::gen::inRange(0, 2) : 4 * *rc::gen::inRange(0, 5));
    c.block_stride = aligned ? (c.block_stride + 15) / 16 * 16 : (c.block_stride + 3) / 4 * 4;
    c.kv_offset = aligned ? 16 * *rc::gen::inRange(0, 3) : 4 * *rc::gen::inRange(0, 9);
    c.logits_stride = *rc::gen::arbitrary<bool>() ? (c.max_context_len + 255) / 256 * 256
                                                  : c.max_context_len + *rc::gen::inRange(0, 5);
    c.logits_stride = std::max<int64_t>(c.logits_stride, 1);  // a view's row stride is at least 1
    c.logits_offset = *rc::gen::inRange(0, 9);
    c.mode = *rc::gen::arbitrary<bool>() ? LogitsMode::kClean : LogitsMode::kUnclean;
    c.pass_host_lens = *rc::gen::arbitrary<bool>();
    c.ue8m0 = *rc::gen::arbitrary<bool>();
    c.keys = *key_pattern();
    c.key_exponent = *key_exponent();
    c.poison = *rc::gen::element<uint8_t>(0x7F, 0x7E);
    draw_schedule(c);
    return c;
  });
}

rc::Gen<PrefillLogitsCase> prefill_logits_case() {
  return rc::gen::exec([] {
    PrefillLogitsCase c;
    c.M = *rc::gen::weightedOneOf<int64_t>(
        {{8, rc::gen::inRange<int64_t>(1, 7)}, {1, rc::gen::inRange<int64_t>(15, 36)}});
    c.N = *rc::gen::element<int64_t>(0, 1, 5, 64, 70, 130, 200);
    c.H = *rc::gen::inRange(1, 41);
    c.D = *rc::gen::weightedOneOf<int64_t>(
        {{1, rc::gen::element<int64_t>(16, 32, 64)}, {1, rc::gen::inRange<int64_t>(1, 41)}});
    const int32_t N = static_cast<int32_t>(c.N);
    const auto end = rc::gen::weightedOneOf<int32_t>(
        {{3, rc::gen::inRange<int32_t>(0, N + 1)},
         {1, rc::gen::map(rc::gen::pair(rc::gen::element(64, 128), rc::gen::inRange(-1, 2)),
                          [N](const std::pair<int, int>& p) { return std::clamp(p.first + p.second, 0, N); })}});
    for (int64_t m = 0; m < c.M; ++m) {
      int32_t a = *end, b = *end;
      if (a > b) std::swap(a, b);
      if (*rc::gen::inRange(0, 6) == 0) b = a;  // an empty row
      c.ks.push_back(a);
      c.ke.push_back(b);
    }
    c.k_stride = c.D + *rc::gen::inRange(0, 20);
    c.k_offset = *rc::gen::inRange(0, 40);
    c.scale_stride = *rc::gen::inRange(1, 3);
    c.range_stride = *rc::gen::inRange(1, 3);
    c.logits_stride = std::max<int64_t>(c.N + *rc::gen::element<int64_t>(0, 1, 3, 64), 1);
    c.logits_offset = *rc::gen::inRange(0, 9);
    c.mode = *rc::gen::arbitrary<bool>() ? LogitsMode::kClean : LogitsMode::kUnclean;
    c.pass_host_ranges = *rc::gen::arbitrary<bool>();
    c.ue8m0 = *rc::gen::arbitrary<bool>();
    c.keys = *key_pattern();
    c.key_exponent = *key_exponent();
    c.poison = *rc::gen::element<uint8_t>(0x7F, 0x7E);
    draw_schedule(c);
    return c;
  });
}

}  // namespace gen
}  // namespace mlacheck
