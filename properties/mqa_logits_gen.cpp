// Indexer logits cases: their helpers, the generator's own draws and the text form through the
// schema (properties/mqa_logits_gen.h).
#include "properties/mqa_logits_gen.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "oracle/decode_rows.h"

namespace mlacheck {

const std::vector<const char*>& key_pattern_names() {
  static const std::vector<const char*> names = {"random", "zero-rows", "shared-scale", "below-floor", "mixed"};
  return names;
}

const char* key_pattern_name(KeyPattern p) { return key_pattern_names()[static_cast<size_t>(p)]; }

int64_t max_logits_head_dim(int64_t H) {
  // One row of any H <= 128 fits at D = 1, and the fit only shrinks as D grows.
  int64_t D = 576;
  while (D > 1 && kernels::logits_rows_per_block(1, H, D) < 1) --D;
  return D;
}

int64_t PagedLogitsCase::row_len(int64_t b, int64_t j) const {
  return lens_2d ? lens[static_cast<size_t>(b * next_n + j)]
                 : oracle::decode_row_length(lens[static_cast<size_t>(b)], next_n, j);
}

int64_t PagedLogitsCase::longest(int64_t b) const {
  int64_t n = 0;
  for (int64_t j = 0; j < next_n; ++j) n = std::max(n, row_len(b, j));
  return n;
}

int64_t PagedLogitsCase::longest() const {
  int64_t n = 0;
  for (int64_t b = 0; b < B; ++b) n = std::max(n, longest(b));
  return n;
}

int64_t PagedLogitsCase::most_needed() const {
  int64_t n = 0;
  for (int64_t b = 0; b < B; ++b) n = std::max(n, needed(b));
  return n;
}

std::vector<int64_t> PagedLogitsCase::table_lows() const {
  std::vector<int64_t> lows(static_cast<size_t>(B * W), std::numeric_limits<int32_t>::min());
  for (int64_t b = 0; b < B; ++b) std::fill_n(lows.begin() + b * W, needed(b), int64_t{0});
  return lows;
}

std::string PagedLogitsCase::table_pages_problem(bool far) const {
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t col = 0; col < needed(b); ++col) {
      const int64_t page = this->page(b, col);
      if (page >= max_blocks(far)) {
        return "block_table: request " + std::to_string(b) + " column " + std::to_string(col) + " is page " +
               std::to_string(page) + ", past the largest cache (" + std::to_string(max_blocks(far)) + " pages: " +
               (far ? "8 GiB" : "at most " + std::to_string(kLogitsMaxLen) + " and 256 MiB") +
               " at this block_stride and kv_offset)";
      }
    }
  }
  return "";
}

int64_t PagedLogitsCase::pages_read() const {
  int64_t pages = 1;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t col = 0; col < needed(b); ++col) pages = std::max<int64_t>(pages, page(b, col) + 1);
  }
  return pages;
}

bool PagedLogitsCase::fast_path_shape() const {
  // Guarded allocations are 256-byte aligned (core/guarded_buffer.h): the cache's alignment is its offset's.
  return block_size == kernels::kLogitsTileTokens && D % 16 == 0 && block_stride % 16 == 0 && kv_offset % 16 == 0;
}

// ---- the generator's draws ---------------------------------------------------------------------

KeyPattern draw_key_pattern() {
  return *rc::gen::weightedOneOf<KeyPattern>(
      {{3, rc::gen::just(KeyPattern::kRandom)},
       {2, rc::gen::element(KeyPattern::kZeroRows, KeyPattern::kSharedScale, KeyPattern::kBelowFloor, KeyPattern::kMixed)}});
}

int draw_key_exponent() { return *rc::gen::weightedOneOf<int>({{4, rc::gen::just(0)}, {1, rc::gen::element(-90, 90)}}); }

std::vector<int32_t> draw_paged_lens(const PagedLogitsCase& c, bool short_rows) {
  const int max_len = short_rows ? *rc::gen::element(0, 5, 70, 200) : *rc::gen::element(0, 5, 70, 200, 400);
  // A length next to a switch point of the kernel: a page boundary, a 64-key tile, a block's 4 tiles.
  const auto switch_point = short_rows ? rc::gen::element<int64_t>(int64_t{std::min<int64_t>(c.block_size, 128)}, 64, 128)
                                       : rc::gen::element<int64_t>(c.block_size + 0, 2 * c.block_size, 64, 128, 256);
  const auto around_switch_point =
      rc::gen::map(rc::gen::pair(switch_point, rc::gen::inRange(-1, 2)), [](const std::pair<int64_t, int>& p) {
        return static_cast<int32_t>(std::max<int64_t>(0, p.first + p.second));
      });
  const auto length = rc::gen::weightedOneOf<int32_t>(
      {{1, rc::gen::just(0)}, {4, rc::gen::inRange(0, max_len + 1)}, {2, around_switch_point}});
  return *rc::gen::container<std::vector<int32_t>>(static_cast<size_t>(c.lens_2d ? c.rows() : c.B), length);
}

void draw_prefill_ranges(const PrefillLogitsCase& c, std::vector<int32_t>& ks, std::vector<int32_t>& ke) {
  const int32_t N = static_cast<int32_t>(c.N);
  const auto end = rc::gen::weightedOneOf<int32_t>(
      {{3, rc::gen::inRange<int32_t>(0, N + 1)},
       {1, rc::gen::map(rc::gen::pair(rc::gen::element(64, 128), rc::gen::inRange(-1, 2)),
                        [N](const std::pair<int, int>& p) { return std::clamp(p.first + p.second, 0, N); })}});
  ks.clear();
  ke.clear();
  for (int64_t m = 0; m < c.M; ++m) {
    int32_t a = *end, b = *end;
    if (a > b) std::swap(a, b);
    if (*rc::gen::inRange(0, 6) == 0) b = a;  // an empty row
    ks.push_back(a);
    ke.push_back(b);
  }
}

// ---- text and generators -----------------------------------------------------------------------

void paged_logits_to_text(const PagedLogitsCase& c, CaseText& out) { write_case(c, out); }
void prefill_logits_to_text(const PrefillLogitsCase& c, CaseText& out) { write_case(c, out); }
namespace {
PagedLogitsCase with_variants_admitted(const CaseText& t, PagedLogitsCase c) {
  c.misaligned_cache_admitted = t.admits("kv_offset", c.kv_offset + 4);
  c.both_modes_admitted = t.admits("mode", std::string("clean")) && t.admits("mode", std::string("unclean"));
  return c;
}
}  // namespace

PagedLogitsCase paged_logits_from_text(const CaseText& t) { return with_variants_admitted(t, read_case<PagedLogitsCase>(t)); }
PagedLogitsCase paged_logits_far_from_text(const CaseText& t) {
  gen::PagedCaseShape far;
  far.far_pages = true;
  return with_variants_admitted(t, read_case<PagedLogitsCase>(t, far));
}
PrefillLogitsCase prefill_logits_from_text(const CaseText& t) { return read_case<PrefillLogitsCase>(t); }

namespace gen {

rc::Gen<PagedLogitsCase> paged_logits_case(PagedCaseShape shape) { return draw_case<PagedLogitsCase>(2, shape); }
rc::Gen<PrefillLogitsCase> prefill_logits_case() { return draw_case<PrefillLogitsCase>(); }

}  // namespace gen
}  // namespace mlacheck
