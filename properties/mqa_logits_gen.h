// Cases of the indexer logits (docs/ops.md 2): paged decode cases (2.1: 1-D and 2-D lengths,
// padding rows, lengths straddling block and tile boundaries, shuffled and shared pages of 1 to 69
// tokens, offset and padded views) and ragged prefill cases (2.2), KV caches with special values.
// Each case is described once, by its schema (fields() below, harness/case_schema.h): the
// generator, the case-file reader (also the fuzz decoder) and the writer all follow from it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "kernels/mqa_logits.h"
#include "harness/case_schema.h"
#include "harness/case_text.h"
#include "harness/schedule.h"
#include "properties/block_table_gen.h"

namespace mlacheck {

// How a case's keys are made: production-quantized random keys in [-1, 1], with special rows mixed
// in per token (about a third of them).
enum class KeyPattern {
  kRandom,       // every key random
  kZeroRows,     // all-zero keys (codes 0, the scale at its 1e-4 / 448 floor): logits exactly 0
  kSharedScale,  // keys whose amax is the same (one scale for all; equal keys give tied logits)
  kBelowFloor,   // tiny keys (amax 1e-6 .. 1e-5, under the scale floor): small and subnormal fp8 codes
  kMixed,        // each special kind above, token by token
};
// The patterns' names in case text, in the enum's order.
const std::vector<const char*>& key_pattern_names();
const char* key_pattern_name(KeyPattern p);

// The largest |key_exponent|: every scale times 2^e stays a finite normal fp32 (and a ue8m0 value),
// and so does every logit the generators' data can give.
constexpr int kMaxKeyExponent = 100;

// What a case may hold (sizes the host backend runs in seconds): lengths, keys and table widths up
// to kLogitsMaxLen; strides and offsets up to kLogitsSlack past the tightest; at most
// kLogitsMaxListValues values on a case-file line (CaseText::parse); the logits within
// kLogitsMaxElements; the KV cache dense within kLogitsMaxCacheBytes, and past it reserved memory
// (only the pages read are backed) of up to kLogitsMaxReservedBytes, so that pages past byte 2^31
// and 2^32 cost no more than pages at the start.
constexpr int64_t kLogitsMaxLen = 65536, kLogitsSlack = 4096;
constexpr int64_t kLogitsMaxListValues = (int64_t{1} << 16) - 1;
constexpr int64_t kLogitsMaxCacheBytes = int64_t{1} << 28, kLogitsMaxElements = int64_t{1} << 26;
constexpr int64_t kLogitsMaxReservedBytes = int64_t{1} << 33;
// The largest head_dim whose H x D fits one block's shared memory (the glue refuses more).
int64_t max_logits_head_dim(int64_t H);

namespace gen {
// What paged_logits_case draws from (the readers take every case).
struct PagedCaseShape {
  bool block64_fast_path = false;  // only cases the reference kernel runs on its block-64 fast path
  bool short_rows = false;         // next_n <= 4 and lengths <= 200 (+1): for properties that run a case twice
  bool far_pages = false;          // the pages read lie across byte 2^31 or 2^32 of the cache (reserved memory)
};
}  // namespace gen

// One paged decode logits call (docs/ops.md 2.1) and where it runs.
struct PagedLogitsCase : CaseSchedule {
  int64_t B = 1, next_n = 1, H = 1, D = 16, block_size = 64;
  bool lens_2d = false;
  int64_t lens_stride = 1;    // 1-D only
  std::vector<int32_t> lens;  // [B] total lengths L_b, or [B * next_n] row lengths
  int64_t max_context_len = 0;
  int64_t W = 0, table_row_pad = 0;
  std::vector<int32_t> table;  // [B, W]: pages, then garbage past each request's needed columns
  int64_t page_base = 0;       // far pages: a read column's page is page_base + its table value
  int64_t num_blocks = 1, block_stride = 0, kv_offset = 0;  // bytes
  int64_t logits_stride = 1, logits_offset = 0;             // elements
  int64_t q_offset = 0, weights_offset = 0;                 // bytes before q and the weights in their buffers
  kernels::LogitsMode mode = kernels::LogitsMode::kUnclean;
  bool pass_host_lens = false, ue8m0 = false;
  // Not case keys: whether the implementation's contract takes the variants two properties run
  // besides the case (fast_path_equals_general_path: the cache 4 bytes further; clean_equals_unclean:
  // both modes). Where it does not, those properties do not take the case (outside the contract).
  bool misaligned_cache_admitted = true, both_modes_admitted = true;
  // Not a case key: the unit roundoff of the implementation's declared accumulation of q . k (its
  // contract's "precision qk fp22"), which the oracle's slack follows; 0: fp32.
  double qk_unit = 0;
  KeyPattern keys = KeyPattern::kRandom;
  int key_exponent = 0;   // every key scale times 2^key_exponent: huge (> 0) and tiny (< 0) logits
  uint8_t poison = 0x7F;  // unread bytes: 0x7F fp8 NaN keys; 0x7E 448 with a huge scale

  int64_t rows() const { return B * next_n; }
  // The page request b reads at table column col (col < needed(b)), as the staged table holds it.
  int64_t page(int64_t b, int64_t col) const { return page_base + table[static_cast<size_t>(b * W + col)]; }
  // Row (b, j)'s length (docs/ops.md 2.1).
  int64_t row_len(int64_t b, int64_t j) const;
  int64_t longest(int64_t b) const;
  int64_t longest() const;  // over every request
  // Table columns request b reads, and the most any request reads.
  int64_t needed(int64_t b) const { return (longest(b) + block_size - 1) / block_size; }
  int64_t most_needed() const;
  // block_table's lowest value per entry: 0 (a page) where a request reads, int32's least elsewhere.
  std::vector<int64_t> table_lows() const;
  // The most pages a cache may have at this block_stride: kLogitsMaxCacheBytes of them (and at most
  // kLogitsMaxLen), or for far pages (PagedCaseShape::far_pages) kLogitsMaxReservedBytes.
  int64_t max_blocks(bool far = false) const {
    return far ? (kLogitsMaxReservedBytes - kv_offset) / block_stride : std::min(kLogitsMaxLen, kLogitsMaxCacheBytes / block_stride);
  }
  // Whether the cache is staged as reserved memory: more pages than a dense cache may have (far
  // pages only); only the pages read are backed (core/reserved_buffer.h).
  bool reserved_cache() const { return num_blocks > max_blocks(false); }
  // "" when every page a request reads is below max_blocks(far), else which is not.
  std::string table_pages_problem(bool far = false) const;
  // The fewest pages the cache needs: one past the largest page read (at least 1).
  int64_t pages_read() const;
  // Whether the reference kernel takes its block-64 fast path (16-byte key loads) on this case.
  bool fast_path_shape() const;
  friend void showValue(const PagedLogitsCase& c, std::ostream& os) { show_case(c, os); }
};

// One ragged prefill logits call (docs/ops.md 2.2) and where it runs.
struct PrefillLogitsCase : CaseSchedule {
  int64_t M = 1, N = 0, H = 1, D = 16;
  std::vector<int32_t> ks, ke;  // [M] each, 0 <= ks <= ke <= N
  int64_t k_stride = 16, k_offset = 0, scale_stride = 1, range_stride = 1;  // elements / bytes for k
  int64_t logits_stride = 1, logits_offset = 0;                            // elements
  int64_t q_offset = 0, weights_offset = 0;  // bytes before q and the weights in their buffers
  kernels::LogitsMode mode = kernels::LogitsMode::kUnclean;
  bool pass_host_ranges = false, ue8m0 = false;
  KeyPattern keys = KeyPattern::kRandom;
  int key_exponent = 0;
  uint8_t poison = 0x7F;
  friend void showValue(const PrefillLogitsCase& c, std::ostream& os) { show_case(c, os); }
};

// The generator's own draws (mqa_logits_gen.cpp).
KeyPattern draw_key_pattern();  // random 3 times in 5, else one of the special patterns
int draw_key_exponent();        // 0 4 times in 5, else -90 or 90
// 1-D or 2-D lengths (as the case's layout says): zeros, anything up to 5, 70, 200 or 400, and
// lengths next to the kernel's switch points (one or two pages, 64, 128 or 256 keys, +- 1).
std::vector<int32_t> draw_paged_lens(const PagedLogitsCase& c, bool short_rows);
// Pairs of row ends (an empty row one time in 6), ends at 64-key tiles +- 1 one time in 4.
void draw_prefill_ranges(const PrefillLogitsCase& c, std::vector<int32_t>& ks, std::vector<int32_t>& ke);

// The fields both cases share: mode, scale format, special keys, poison and schedule.
template <class V, class Case>
void logits_data_fields(V& v, Case& c) {
  v.choice("mode", c.mode, {"clean", "unclean"});
  v.choice("scales", c.ue8m0, {"fp32", "ue8m0"});
  // Drawn by weight: the random pattern the most often.
  std::vector<std::pair<const char*, KeyPattern>> keys;
  for (size_t i = 0; i < key_pattern_names().size(); ++i) keys.emplace_back(key_pattern_names()[i], static_cast<KeyPattern>(i));
  v.named("keys", c.keys, keys, draw_key_pattern);
  v.integer("key_exponent", c.key_exponent, -kMaxKeyExponent, kMaxKeyExponent, draw_key_exponent);
  v.integer("poison", c.poison, 0x7E, 0x7F);
  // Where q and the weights start in their buffers, in bytes (the weights' a multiple of 4): a
  // kernel that loads them through TMA needs 16-byte aligned starts, which its contract can ask
  // for ("q_offset one-of 0 16 32 48"). A case file written before these keys has them at 0.
  if (v.present("q_offset", true)) {
    v.integer("q_offset", c.q_offset, 0, 63, Favor{0, 16, 1, 7, 62});
    v.multiple("weights_offset", c.weights_offset, 4, 0, 60, Favor{0, 16, 4, 28});
  }
  v.schedule(c);
}

// The schema of a paged case (harness/case_schema.h), in reading order: the scalars first and the
// lists last (the bytes a fuzzer mutates first steer the shape; the long lists take the rest).
// Each range follows from the fields before it: max_context_len from what rows x logits_stride
// allows, the lengths within it and within a table of batch x table_width values, the table's
// needed columns from the lengths, num_blocks from the pages they read. That a read page lies
// within the largest cache is the one rule (the garbage past a request's columns shares the
// list's top). The shape only steers the draws.
template <class V>
void fields(V& v, PagedLogitsCase& c, const gen::PagedCaseShape& shape = {}) {
  bool aligned = shape.block64_fast_path;  // drawn: strides and offsets that let block size 64 take the fast path
  int64_t drawn_blocks = 1;                // drawn with the table
  v.integer("batch", c.B, 1, 256, UpTo{4});
  v.integer("next_n", c.next_n, 1, 64, [&] {
    return shape.short_rows ? *rc::gen::inRange<int64_t>(1, 5)
                            : *rc::gen::weightedOneOf<int64_t>(
                                  {{8, rc::gen::inRange<int64_t>(1, 5)}, {1, rc::gen::inRange<int64_t>(15, 20)}});
  });
  v.integer("heads", c.H, 1, 128, UpTo{70});
  v.integer("head_dim", c.D, 1, max_logits_head_dim(c.H), [&] {
    return shape.block64_fast_path ? *rc::gen::element<int64_t>(16, 32, 48, 64)
                                   : *rc::gen::weightedOneOf<int64_t>(
                                         {{2, rc::gen::element<int64_t>(16, 32, 64)}, {1, rc::gen::inRange<int64_t>(1, 41)}});
  });
  v.integer("block_size", c.block_size, 1, 1024, [&] {
    return shape.block64_fast_path ? 64
                                   : *rc::gen::weightedOneOf<int64_t>(
                                         {{1, rc::gen::just<int64_t>(64)},
                                          {2, rc::gen::element<int64_t>(1, 2, 3, 53, 61, 64, 69)}});
  });
  v.choice("lens_layout", c.lens_2d, {"1d", "2d"});
  v.integer("lens_stride", c.lens_stride, 1, c.lens_2d ? 1 : 64, UpTo{2});  // 2-D lengths are C-contiguous
  // Every row's logits fit a logits_stride >= max_context_len within kLogitsMaxElements. Drawn: the
  // lengths first (the list below takes them), then a little room past the longest.
  v.integer("max_context_len", c.max_context_len, 0, std::min(kLogitsMaxLen, kLogitsMaxElements / c.rows()), [&] {
    c.lens = draw_paged_lens(c, shape.short_rows);
    return c.longest() + *rc::gen::element<int64_t>(0, 1, 13, 64, 70);
  });
  v.integer("logits_stride", c.logits_stride, std::max<int64_t>(c.max_context_len, 1),
            std::min(c.max_context_len + kLogitsSlack, kLogitsMaxElements / c.rows()), [&] {
              return std::max<int64_t>(1, *rc::gen::arbitrary<bool>() ? (c.max_context_len + 255) / 256 * 256
                                                                      : c.max_context_len + *rc::gen::inRange(0, 5));
            });
  v.integer("logits_offset", c.logits_offset, 0, kLogitsSlack, UpTo{8});
  v.integer("kv_offset", c.kv_offset, 0, kLogitsSlack, [&] {
    aligned = aligned || *rc::gen::arbitrary<bool>();
    return aligned ? 16 * *rc::gen::inRange(0, 3) : 4 * *rc::gen::inRange(0, 9);
  });
  v.integer("table_row_pad", c.table_row_pad, 0, 64, UpTo{2});
  v.flag("host_lens", c.pass_host_lens);
  const int64_t block_bytes = c.block_size * (c.D + 4);
  v.multiple("block_stride", c.block_stride, 4, block_bytes, block_bytes + kLogitsSlack, [&] {
    return aligned ? (block_bytes + 16 * *rc::gen::inRange(0, 2) + 15) / 16 * 16
                   : (block_bytes + 4 * *rc::gen::inRange(0, 5) + 3) / 4 * 4;
  });
  logits_data_fields(v, c);
  // A request's longest row is its 1-D length L (row next_n - 1), or its longest 2-D row.
  v.list("context_lens", c.lens, c.lens_2d ? c.rows() : c.B, 0,
         std::min(c.max_context_len, c.block_size * (kLogitsMaxListValues / c.B)), [&c] { return c.lens; });
  v.integer("table_width", c.W, c.most_needed(), std::min(kLogitsMaxLen, kLogitsMaxListValues / c.B),
            [&c] { return c.most_needed() + *rc::gen::inRange(0, 3); });
  // Far pages: every page read moves up by page_base, so that they straddle byte 2^31 or 2^32 of
  // the cache (a page id times the stride computed in 32 bits wraps there). Its range starts that
  // far, less the columns read, so that fuzz bytes (which decode to small offsets in a range) reach
  // past 2^31 too.
  if (shape.far_pages || c.page_base != 0) {
    const auto edge_page = [&c](int64_t edge) { return (edge - c.kv_offset) / c.block_stride; };
    const int64_t lo = std::max<int64_t>(1, edge_page(int64_t{1} << 31) - c.most_needed());
    v.integer("page_base", c.page_base, lo, c.max_blocks(true) - 1, [&c, edge_page, lo] {
      const int64_t edge = *rc::gen::element<int64_t>(int64_t{1} << 31, int64_t{1} << 32);
      return std::max<int64_t>(lo, edge_page(edge) - *rc::gen::inRange<int64_t>(0, std::max<int64_t>(1, c.most_needed())));
    });
  }
  v.list_from("block_table", c.table, c.table_lows(), std::numeric_limits<int32_t>::max(), [&] {
    std::vector<int64_t> pages;
    for (int64_t b = 0; b < c.B; ++b) pages.push_back(c.needed(b));
    const PagedBlockTable t = *gen::paged_block_table(pages, c.W);
    drawn_blocks = t.num_blocks + c.page_base;
    return t.table;
  });
  v.rule(c.table_pages_problem(shape.far_pages).empty(), c.table_pages_problem(shape.far_pages));
  v.integer("num_blocks", c.num_blocks, c.pages_read(), c.max_blocks(shape.far_pages), [&] { return drawn_blocks; });
}

// The schema of a prefill case: keys_count within what rows x logits_stride >= keys_count allows,
// k's row stride within the cache's bytes, the lists last, ks before ke (ke[m] >= ks[m]).
template <class V>
void fields(V& v, PrefillLogitsCase& c) {
  std::vector<int32_t> drawn_ke;  // drawn with ks
  v.integer("rows", c.M, 1, 4096, [] {
    return *rc::gen::weightedOneOf<int64_t>({{8, rc::gen::inRange<int64_t>(1, 7)}, {1, rc::gen::inRange<int64_t>(15, 36)}});
  });
  v.integer("keys_count", c.N, 0, std::min(kLogitsMaxLen, kLogitsMaxElements / c.M),
            [] { return *rc::gen::element<int64_t>(0, 1, 5, 64, 70, 130, 200); });
  v.integer("heads", c.H, 1, 128, UpTo{40});
  v.integer("head_dim", c.D, 1, max_logits_head_dim(c.H), [] {
    return *rc::gen::weightedOneOf<int64_t>({{1, rc::gen::element<int64_t>(16, 32, 64)}, {1, rc::gen::inRange<int64_t>(1, 41)}});
  });
  // keys_count x k_stride within kLogitsMaxCacheBytes (N <= 65536 leaves k_stride at least 4096 >= D).
  v.integer("k_stride", c.k_stride, c.D, std::min(c.D + kLogitsSlack, kLogitsMaxCacheBytes / std::max<int64_t>(c.N, 1)),
            [&c] { return c.D + *rc::gen::inRange(0, 20); });
  v.integer("k_offset", c.k_offset, 0, kLogitsSlack, UpTo{39});
  v.integer("scale_stride", c.scale_stride, 1, 64, UpTo{2});
  v.integer("range_stride", c.range_stride, 1, 64, UpTo{2});
  v.integer("logits_stride", c.logits_stride, std::max<int64_t>(c.N, 1), std::min(c.N + kLogitsSlack, kLogitsMaxElements / c.M),
            [&c] { return std::max<int64_t>(c.N + *rc::gen::element<int64_t>(0, 1, 3, 64), 1); });
  v.integer("logits_offset", c.logits_offset, 0, kLogitsSlack, UpTo{8});
  v.flag("host_ranges", c.pass_host_ranges);
  logits_data_fields(v, c);
  v.list("ks", c.ks, c.M, 0, c.N, [&] {
    std::vector<int32_t> ks;
    draw_prefill_ranges(c, ks, drawn_ke);
    return ks;
  });
  v.list_from("ke", c.ke, std::vector<int64_t>(c.ks.begin(), c.ks.end()), c.N, [&] { return drawn_ke; });
}

// The cases as case-text keys, appended to out (after its property / impl / backend), and back:
// a value out of its range or breaking a rule throws mlacheck::Error naming the key.
void paged_logits_to_text(const PagedLogitsCase& c, CaseText& out);
void prefill_logits_to_text(const PrefillLogitsCase& c, CaseText& out);
PagedLogitsCase paged_logits_from_text(const CaseText& t);
// The same keys; drawn, the pages read lie across byte 2^31 or 2^32 of the cache (PagedCaseShape::far_pages).
PagedLogitsCase paged_logits_far_from_text(const CaseText& t);
PrefillLogitsCase prefill_logits_from_text(const CaseText& t);

namespace gen {

// Small paged cases: 1-D and 2-D lengths (zeros, and lengths at block size, 64, 128 and 256 +- 1),
// page sizes 1, 2, 3, 53, 61, 64, 69, shuffled, shared and garbage pages (properties/block_table_gen.h),
// aligned and unaligned block strides and cache offsets, padded and offset logits rows, up to 20
// rows per request (more than one row group), every KeyPattern, key exponents 0 and +-90.
rc::Gen<PagedLogitsCase> paged_logits_case(PagedCaseShape shape = {});
// Small prefill cases: empty and full ranges, ends at 64-key tile boundaries +- 1, strided k and
// scales, strided ks / ke, padded and offset logits rows, every KeyPattern and key exponent.
rc::Gen<PrefillLogitsCase> prefill_logits_case();

}  // namespace gen
}  // namespace mlacheck
