// Generators of packing and global-slot cases and their text form (properties/pack_decode_gen.h).
#include "properties/pack_decode_gen.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <string>

#include "core/error.h"
#include "properties/block_table_gen.h"

namespace mlacheck {

namespace {

const DType kRowDTypes[] = {DType::kF32, DType::kBF16, DType::kFP8E4M3, DType::kI32};

std::vector<int32_t> prefix_sums(const std::vector<int32_t>& d) {
  std::vector<int32_t> q{0};
  for (int32_t x : d) q.push_back(q.back() + x);
  return q;
}

int32_t pages_needed(int32_t len, int64_t page) { return static_cast<int32_t>((int64_t{len} + page - 1) / page); }



}  // namespace

const std::vector<std::pair<const char*, DType>>& row_dtype_names() {
  static const std::vector<std::pair<const char*, DType>> names = {
      {"fp32", DType::kF32}, {"bf16", DType::kBF16}, {"fp8_e4m3", DType::kFP8E4M3}, {"int32", DType::kI32}};
  return names;
}

int64_t PackDecodeCase::longest() const {
  return decode_lens.empty() ? 1 : std::max<int64_t>(1, *std::max_element(decode_lens.begin(), decode_lens.end()));
}

// 1 to 8 requests of at most max_d tokens (mostly 1 to 4), a uniform batch one time in four.
std::vector<int32_t> draw_pack_decode_lens() {
  const int64_t max_d = *rc::gen::weightedElement<int64_t>({{4, 1}, {4, 2}, {4, 3}, {4, 4}, {1, 8}});
  const int64_t B = *rc::gen::inRange<int64_t>(1, 9);
  if (*rc::gen::weightedElement<int>({{1, 0}, {3, 1}}) == 0) {
    return std::vector<int32_t>(static_cast<size_t>(B), static_cast<int32_t>(*rc::gen::inRange<int64_t>(1, max_d + 1)));
  }
  return *rc::gen::container<std::vector<int32_t>>(static_cast<size_t>(B),
                                                   rc::gen::inRange<int32_t>(0, static_cast<int32_t>(max_d + 1)));
}

// Mostly one dimension of 1 to 9 elements, else two: [1..4, 1 | 3 | 16].
std::vector<int64_t> draw_row_shape() {
  return *rc::gen::weightedOneOf<std::vector<int64_t>>(
      {{3, rc::gen::map(rc::gen::inRange<int64_t>(1, 10), [](int64_t h) { return std::vector<int64_t>{h}; })},
       {1, rc::gen::map(rc::gen::pair(rc::gen::inRange<int64_t>(1, 5), rc::gen::element<int64_t>(1, 3, 16)),
                        [](const std::pair<int64_t, int64_t>& p) { return std::vector<int64_t>{p.first, p.second}; })}});
}

int64_t PackDecodeCase::T() const { return std::accumulate(decode_lens.begin(), decode_lens.end(), int64_t{0}); }
int64_t PackDecodeCase::row_elements() const {
  return std::accumulate(row_shape.begin(), row_shape.end(), int64_t{1}, std::multiplies<int64_t>());
}
std::vector<int32_t> PackDecodeCase::query_start_loc() const { return prefix_sums(decode_lens); }
int64_t TopkToGlobalCase::T() const { return std::accumulate(decode_lens.begin(), decode_lens.end(), int64_t{0}); }
std::vector<int32_t> TopkToGlobalCase::query_start_loc() const { return prefix_sums(decode_lens); }

void showValue(const CopyRowsCase& c, std::ostream& os) {
  os << "n " << c.n << " extra " << c.extra << " H " << c.H << " dtype " << dtype_name(c.dtype) << " src_lead_rows "
     << c.src_lead_rows << " src_row_pad " << c.src_row_pad << " dst_row_pad " << c.dst_row_pad << " dst_tail_rows "
     << c.dst_tail_rows << " seed " << c.seed;
}

void pack_decode_to_text(const PackDecodeCase& c, CaseText& out) { write_case(c, out); }

PackDecodeCase pack_decode_from_text(const CaseText& t) { return read_case<PackDecodeCase>(t); }

void topk_to_global_to_text(const TopkToGlobalCase& c, CaseText& out) { write_case(c, out); }

TopkToGlobalCase topk_to_global_from_text(const CaseText& t) { return read_case<TopkToGlobalCase>(t); }

int64_t TopkToGlobalCase::row_room() const {
  constexpr int64_t kMaxElements = int64_t{1} << 24;
  return T() == 0 ? kMaxElements : kMaxElements / T();  // >= 4096: T <= 256 x 16
}

std::vector<int64_t> TopkToGlobalCase::table_lows() const {
  std::vector<int64_t> lows(static_cast<size_t>(B() * W), std::numeric_limits<int32_t>::min());
  for (int64_t b = 0; b < B(); ++b) {
    const int32_t need = pages_needed(seq_lens[static_cast<size_t>(b)], page);
    for (int32_t w = 0; w < need; ++w) lows[static_cast<size_t>(b * W + w)] = 0;
  }
  return lows;
}

std::string TopkToGlobalCase::table_pages_problem() const {
  const int64_t max_page = (int64_t{std::numeric_limits<int32_t>::max()} - page + 1) / page;
  const std::vector<int64_t> lows = table_lows();
  for (size_t i = 0; i < lows.size() && i < block_table.size(); ++i) {
    if (lows[i] >= 0 && block_table[i] > max_page) {
      const size_t b = i / static_cast<size_t>(W), w = i % static_cast<size_t>(W);
      return "block_table[" + std::to_string(b) + ", " + std::to_string(w) + "] = " + std::to_string(block_table[i]) +
             " is not a page in [0, " + std::to_string(max_page) + "] (request " + std::to_string(b) + " reads it)";
    }
  }
  return "";
}

// 1 to 8 requests of 0 to next_n tokens, next_n in [1, 4].
std::vector<int32_t> draw_global_decode_lens() {
  const int64_t B = *rc::gen::inRange<int64_t>(1, 9);
  const int32_t next_n = *rc::gen::inRange(1, 5);
  return *rc::gen::container<std::vector<int32_t>>(static_cast<size_t>(B), rc::gen::inRange(0, next_n + 1));
}

// Lengths on and around page boundaries, or anywhere up to 4 pages (0 for a padding request),
// within the table's W pages.
std::vector<int32_t> draw_global_seq_lens(const TopkToGlobalCase& c) {
  std::vector<int32_t> lens;
  for (int64_t b = 0; b < c.B(); ++b) {
    const int64_t L = c.decode_lens[static_cast<size_t>(b)] == 0
                          ? 0
                          : *rc::gen::weightedOneOf<int64_t>(
                                {{2, rc::gen::map(rc::gen::pair(rc::gen::inRange<int64_t>(1, 4), rc::gen::inRange<int64_t>(-1, 2)),
                                                  [page = c.page](const std::pair<int64_t, int64_t>& p) {
                                                    return std::max<int64_t>(0, p.first * page + p.second);
                                                  })},
                                 {2, rc::gen::inRange<int64_t>(0, 4 * c.page + 1)}});
    lens.push_back(static_cast<int32_t>(std::min<int64_t>(L, c.W * c.page)));
  }
  return lens;
}

// Shuffled, shared pages for the columns each request reads (block_table_gen.h), garbage past them.
std::vector<int32_t> draw_global_block_table(const TopkToGlobalCase& c) {
  std::vector<int64_t> needed;
  for (int32_t L : c.seq_lens) needed.push_back(pages_needed(L, c.page));
  return (*gen::paged_block_table(needed, c.W)).table;
}

std::vector<int32_t> topk_to_global_locals(const TopkToGlobalCase& c) {
  std::mt19937_64 rng(c.seed);
  auto pick = [&](int64_t m) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(m, 1))); };
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(c.T() * c.k));
  const int64_t past = c.W * c.page;  // the first index whose column is past the table
  for (int64_t b = 0; b < c.B(); ++b) {
    const int64_t L = c.seq_lens[static_cast<size_t>(b)];
    for (int32_t j = 0; j < c.decode_lens[static_cast<size_t>(b)]; ++j) {
      for (int64_t i = 0; i < c.k; ++i) {
        int64_t x = -1;
        const int64_t kind = pick(10);
        switch (c.locals == TopkToGlobalCase::Locals::kInRange && kind < 3 ? 4 : kind) {
          case 0: x = -1; break;
          case 1: x = -1 - pick(3); break;
          case 2: x = past + pick(c.page + 2); break;  // becomes -1
          case 3: x = L > 0 ? std::min(L - 1, (pick(L) / c.page + 1) * c.page - pick(2)) : -1; break;  // page edges
          default: x = L > 0 ? pick(L) : -1; break;
        }
        out.push_back(static_cast<int32_t>(std::min<int64_t>(x, std::numeric_limits<int32_t>::max())));
      }
    }
  }
  return out;
}

namespace gen {

rc::Gen<PackDecodeCase> pack_decode_case() { return draw_case<PackDecodeCase>(3); }

rc::Gen<TopkToGlobalCase> topk_to_global_case() { return draw_case<TopkToGlobalCase>(3); }

rc::Gen<CopyRowsCase> copy_rows_case() {
  return rc::gen::exec([] {
    CopyRowsCase c;
    c.n = *rc::gen::inRange<int64_t>(0, 9);
    c.extra = *rc::gen::inRange<int64_t>(0, 4);
    c.H = *rc::gen::inRange<int64_t>(1, 9);
    c.dtype = *rc::gen::elementOf(std::vector<DType>(std::begin(kRowDTypes), std::end(kRowDTypes)));
    c.src_lead_rows = *rc::gen::inRange<int64_t>(0, 3);
    c.src_row_pad = *rc::gen::inRange<int64_t>(0, 4);
    c.dst_row_pad = *rc::gen::inRange<int64_t>(0, 4);
    c.dst_tail_rows = *rc::gen::inRange<int64_t>(0, 4);
    c.seed = *rc::gen::arbitrary<uint64_t>();
    return c;
  });
}

}  // namespace gen
}  // namespace mlacheck
