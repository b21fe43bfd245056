// Generators and text form of dense MLA decode cases (properties/mla_decode_gen.h).
#include "properties/mla_decode_gen.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "properties/schedule_gen.h"
#include "properties/block_table_gen.h"

namespace mlacheck {

namespace {

constexpr int64_t kDim = kernels::kMlaHeadDim;
const double kDeepSeekScale = 1.0 / std::sqrt(192.0);

}  // namespace

int64_t MlaDecodeCase::max_len() const {
  return lens.empty() ? 0 : *std::max_element(lens.begin(), lens.end());
}
double MlaDecodeCase::launch_q_scale() const { return q_fp8 ? std::ldexp(q_scale, -magnitude_log2) : q_scale; }
double MlaDecodeCase::launch_k_scale() const { return kv_fp8 ? std::ldexp(k_scale, magnitude_log2) : k_scale; }

void showValue(const MlaDecodeCase& c, std::ostream& os) {
  CaseText t;
  mla_decode_to_text(c, t);
  os << t.format();
}

void fill_mla_decode_block_table(MlaDecodeCase& c) {
  std::vector<int64_t> needed;
  for (int64_t b = 0; b < c.B; ++b) needed.push_back(c.needed(b));
  const PagedBlockTable t = *gen::paged_block_table(needed, c.W);
  c.num_blocks = t.num_blocks;
  c.table = t.table;
}

// ---- text ----------------------------------------------------------------------------------------

void mla_decode_to_text(const MlaDecodeCase& c, CaseText& out) {
  out.set("batch", c.B).set("q_len", c.q_len).set("heads", c.H).set("page", c.page);
  out.set_list("seq_lens", c.lens);
  out.set("table_width", c.W).set("table_row_pad", c.table_row_pad).set("num_blocks", c.num_blocks);
  out.set_list("block_table", c.table);
  out.set("q_dtype", c.q_fp8 ? "fp8" : "bf16").set("kv_dtype", c.kv_fp8 ? "fp8" : "bf16");
  out.set("token_stride", c.token_stride).set("block_pad", c.block_pad);
  out.set("kv_offset", c.kv_offset).set("q_offset", c.q_offset).set("out_offset", c.out_offset);
  out.set_real("base_scale", c.base_scale).set_real("q_scale", c.q_scale).set_real("k_scale", c.k_scale);
  out.set("num_splits", c.num_splits).set("workspace_extra", c.workspace_extra);
  out.set("host_seq_lens", c.pass_host_lens).set("poison", int64_t{c.poison}).set("kv_tail", c.kv_tail);
  out.set("magnitude_log2", int64_t{c.magnitude_log2}).set("zero_rows", c.zero_rows);
  write_schedule(c, out);
}

namespace {

constexpr int64_t kMaxRows = 65536;                 // query rows: batch x q_len x heads
constexpr int64_t kMaxTable = 65535;                // values of one key in a case file: batch x table_width
constexpr int64_t kMaxCacheBytes = int64_t{1} << 28;  // what a case may stage for its cache
const double kScaleLo = std::ldexp(1.0, -120), kScaleHi = std::ldexp(1.0, 120);
// What a case draws: each scale and their product (the softmax scale) in [2^-20, 2^20], so that
// scores (up to 576 x 448^2 ~ 2^27 times it) stay finite in fp32 and the values behind an output
// scale of 2^40 do not underflow in its products. Wider draws (2^+-120, then 2^+-40) made the
// fuzzers report fp32 overflows and underflows of a correct kernel as violations.
const double kCaseScaleLo = std::ldexp(1.0, -20), kCaseScaleHi = std::ldexp(1.0, 20);
// k_scale x 2^magnitude_log2, the output's scale, inside [2^-110, 2^110]: o then stays below
// 2^110 x 448 < 2^119, finite in bf16 (a case with o past bf16's range has no finite answer).
const double kOutScaleLo = std::ldexp(1.0, -110), kOutScaleHi = std::ldexp(1.0, 110);


bool in_scale_range(double v) { return std::isfinite(v) && v >= kScaleLo && v <= kScaleHi; }

}  // namespace

void mla_decode_scales_from_text(const CaseText& t, const std::string& p, double& base_scale, double& q_scale,
                                 double& k_scale) {
  const char* const each = "a scale is in [2^-20, 2^20]";
  base_scale = with_reason(each, [&] { return t.real(p + "base_scale", kCaseScaleLo, kCaseScaleHi); });
  q_scale = with_reason(each, [&] { return t.real(p + "q_scale", kCaseScaleLo, kCaseScaleHi); });
  // base x q x k in range: k in [lo / (base x q), hi / (base x q)], nudged so that the product as the
  // checks compute it ((base x q) x k) is inside too.
  const double bq = base_scale * q_scale;
  double lo = std::max(kCaseScaleLo, kCaseScaleLo / bq), hi = std::min(kCaseScaleHi, kCaseScaleHi / bq);
  while (lo < hi && bq * lo < kCaseScaleLo) lo = std::nextafter(lo, kCaseScaleHi);
  while (hi > lo && bq * hi > kCaseScaleHi) hi = std::nextafter(hi, kCaseScaleLo);
  k_scale = with_reason("a scale, and base_scale x q_scale x k_scale, is in [2^-20, 2^20]",
                    [&] { return t.real(p + "k_scale", lo, hi); });
}

MlaDecodeCase mla_decode_from_text(const CaseText& t, const std::string& p, const MlaDecodeTextLimits& limits) {
  MlaDecodeCase c;
  // batch x q_len x heads query rows at most: each read's range leaves room for the next.
  const int64_t min_heads = limits.heads > 0 ? limits.heads : 1;
  c.B = t.integer(p + "batch", 1, std::min(limits.max_batch, kMaxRows / min_heads));
  c.q_len = t.integer(p + "q_len", 1, std::min(limits.max_q_len, kMaxRows / (min_heads * c.B)));
  if (limits.heads > 0) {
    c.H = with_reason("the configuration's heads", [&] { return t.integer(p + "heads", limits.heads, limits.heads); });
  } else {
    c.H = with_reason("batch x q_len x heads is at most 65536 query rows", [&] {
      return t.integer(p + "heads", 1, std::min<int64_t>(128, kMaxRows / (c.B * c.q_len)));
    });
  }
  MLA_REQUIRE(c.B * c.q_len * c.H <= kMaxRows, "case: ", p, "batch x q_len x heads is ", c.B * c.q_len * c.H,
              ", over 65536 query rows");
  c.page = t.integer(p + "page", 1, 1024);
  // Every request's pages fit the table, whose batch x table_width values fit one line of a case.
  const int64_t max_width = kMaxTable / c.B;
  const int64_t max_len = std::min<int64_t>(kMlaMaxCaseKeys, c.page * max_width);
  c.lens = with_reason("at most 65536 keys, and at most the pages of a table of 65535 / batch columns", [&] {
    return t.list_exactly<int32_t>(p + "seq_lens", 0, max_len, static_cast<size_t>(c.B));
  });
  int64_t longest = 0;  // the request that needs the most pages
  for (int64_t b = 1; b < c.B; ++b) longest = c.needed(b) > c.needed(longest) ? b : longest;
  c.W = with_reason(p + "seq_lens value " + std::to_string(longest) + " (" +
                    std::to_string(c.lens[static_cast<size_t>(longest)]) + ") needs " +
                    std::to_string(c.needed(longest)) + " pages; batch x table_width is at most 65535",
                [&] { return t.integer(p + "table_width", c.needed(longest), max_width); });
  for (int64_t b = 0; b < c.B; ++b) {
    MLA_REQUIRE(c.needed(b) <= c.W, "case: ", p, "seq_lens value ", b, " (", c.lens[static_cast<size_t>(b)], ") needs ",
                c.needed(b), " pages, table_width is ", c.W);
  }
  c.table_row_pad = t.integer(p + "table_row_pad", 0, 64);
  c.q_fp8 = t.choice(p + "q_dtype", {"bf16", "fp8"}) == 1;
  c.kv_fp8 = t.choice(p + "kv_dtype", {"bf16", "fp8"}) == 1;
  const int64_t es = c.kv_fp8 ? 1 : 2;
  c.token_stride = t.integer(p + "token_stride", kDim, 4096);
  c.block_pad = t.integer(p + "block_pad", 0, 4096);
  // Offsets of whole elements.
  c.kv_offset = t.multiple(p + "kv_offset", es, 0, 4096);
  c.q_offset = t.multiple(p + "q_offset", c.q_fp8 ? 1 : 2, 0, 4096);
  c.out_offset = t.multiple(p + "out_offset", 4, 0, 4096);
  mla_decode_scales_from_text(t, p, c.base_scale, c.q_scale, c.k_scale);
  // Every scale a launch takes, and their product, a normal float with room: the oracle takes them
  // in double, the kernel in fp32. magnitude_log2 moves into the fp8 tensors' scales, so its range
  // is where those stay inside (it holds 0: the scales' own ranges saw to that).
  const auto launch_ok = [&](int64_t m) {  // as launch_q_scale() and launch_k_scale() compute them
    const double q = c.q_fp8 ? std::ldexp(c.q_scale, static_cast<int>(-m)) : c.q_scale;
    const double k = c.kv_fp8 ? std::ldexp(c.k_scale, static_cast<int>(m)) : c.k_scale;
    const double out = std::ldexp(c.k_scale, static_cast<int>(m));
    return in_scale_range(q) && in_scale_range(k) && in_scale_range(c.base_scale * q * k) && out >= kOutScaleLo &&
           out <= kOutScaleHi;
  };
  int64_t m_lo = 0, m_hi = 0;
  while (m_lo > -100 && launch_ok(m_lo - 1)) --m_lo;
  while (m_hi < 100 && launch_ok(m_hi + 1)) ++m_hi;
  c.magnitude_log2 = static_cast<int>(
      with_reason("base_scale, q_scale, k_scale with magnitude_log2 must give launch scales in [2^-120, 2^120] "
                  "and an output scale k_scale x 2^magnitude_log2 in [2^-110, 2^110]",
              [&] { return t.integer(p + "magnitude_log2", m_lo, m_hi); }));
  for (const auto& [key, v] : {std::pair{"base_scale", c.base_scale}, {"q_scale", c.q_scale}, {"k_scale", c.k_scale}}) {
    MLA_REQUIRE(in_scale_range(v), "case: ", p, key, " is ", v, ", not in [2^-120, 2^120]");
  }
  const double softmax = c.base_scale * c.launch_q_scale() * c.launch_k_scale();
  for (const double v : {softmax, c.launch_q_scale(), c.launch_k_scale()}) {
    MLA_REQUIRE(in_scale_range(v), "case: ", p, "base_scale, q_scale, k_scale with magnitude_log2 ", c.magnitude_log2,
                " give a launch scale ", v, " outside [2^-120, 2^120]");
  }
  // The split workspace (rows x splits x 513 floats) stays within 256 MiB.
  const int64_t split_cap = kMaxCacheBytes / 4 / kernels::mla_decode_workspace_floats(c.B, c.q_len, c.H, 1);
  c.num_splits = with_reason("the split workspace, batch x q_len x heads x num_splits x 513 floats, is at most 256 MiB",
                             [&] { return t.integer(p + "num_splits", 1, std::clamp<int64_t>(split_cap, 1, kernels::kMlaMaxSplits)); });
  c.workspace_extra = t.integer(p + "workspace_extra", 0, 1 << 20);
  c.pass_host_lens = t.flag(p + "host_seq_lens");
  c.poison = static_cast<uint8_t>(t.integer(p + "poison", 0, 255));
  c.kv_tail = t.integer(p + "kv_tail", 0, 1 << 20);
  c.zero_rows = t.flag(p + "zero_rows");
  read_schedule(c, t, p);
  // The columns a request reads hold pages (>= 0; num_blocks, read next, covers them), the rest any
  // int32 (garbage the kernel must not read). The two come last: the cache's size takes the block
  // stride, and a table drawn from fuzz input bytes after the other keys takes fewer of them.
  std::vector<int64_t> lows(static_cast<size_t>(c.B * c.W), INT32_MIN);
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t w = 0; w < c.needed(b); ++w) lows[static_cast<size_t>(b * c.W + w)] = 0;
  }
  for (int64_t v : t.integers_from(p + "block_table", lows, INT32_MAX)) c.table.push_back(static_cast<int32_t>(v));
  int64_t top = -1;  // the entry of the highest page a request reads
  for (size_t i = 0; i < lows.size(); ++i) {
    if (lows[i] == 0 && (top < 0 || c.table[i] > c.table[static_cast<size_t>(top)])) top = static_cast<int64_t>(i);
  }
  // The cache holds every page read, in at most 256 MiB.
  const int64_t max_blocks = std::min<int64_t>(65536, kMaxCacheBytes / (es * c.block_stride()));
  const int64_t top_page = top < 0 ? -1 : c.table[static_cast<size_t>(top)];
  const std::string reads = top < 0 ? std::string()
                                    : p + "block_table value " + std::to_string(top) + " (request " +
                                          std::to_string(top / c.W) + " column " + std::to_string(top % c.W) +
                                          ") reads page " + std::to_string(top_page) + "; ";
  c.num_blocks = with_reason(reads + "num_blocks x block stride is at most 256 MiB", [&] {
    return t.integer(p + "num_blocks", std::max<int64_t>(1, top_page + 1), max_blocks);
  });
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t w = 0; w < c.needed(b); ++w) {
      const int32_t page = c.table[static_cast<size_t>(b * c.W + w)];
      MLA_REQUIRE(page >= 0 && page < c.num_blocks, "case: ", p, "block_table value ", b * c.W + w, " (request ", b,
                  " column ", w, ") is page ", page, ", outside the cache's ", c.num_blocks, " (the request reads it)");
    }
  }
  MLA_REQUIRE(c.num_blocks * c.block_stride() * es <= kMaxCacheBytes, "case: ", p, "num_blocks x ",
              "block stride is over the 256 MiB a case may stage");
  return c;
}

// ---- generators ----------------------------------------------------------------------------------

namespace gen {

rc::Gen<MlaDecodeCase> mla_decode_case(MlaDecodeSize size) {
  const bool light = size != MlaDecodeSize::kFull, few = size == MlaDecodeSize::kSplits;
  return rc::gen::exec([light, few] {
    MlaDecodeCase c;
    c.B = *rc::gen::inRange(1, 5);
    c.q_len = *rc::gen::weightedOneOf<int64_t>({{8, rc::gen::inRange<int64_t>(1, 5)}, {1, rc::gen::just<int64_t>(8)}});
    c.H = *rc::gen::weightedOneOf<int64_t>({{6, rc::gen::inRange<int64_t>(1, 9)}, {1, rc::gen::just<int64_t>(16)}});
    // 640: past 2 x 256 keys, so the split heuristic picks more than one split even on the host.
    const int max_len = *rc::gen::weightedOneOf<int>({{2, rc::gen::just(3)},
                                                      {3, rc::gen::just(40)},
                                                      {2, rc::gen::just(130)},
                                                      {light ? 0 : 1, rc::gen::just(300)},
                                                      {1, rc::gen::just(640)}});
    const int64_t most_programs = max_len == 640 || few ? 2 : max_len > 130 || (light && max_len > 40) ? 4 : light ? 8 : 16;
    const auto programs = [&] { return c.B * c.q_len * ((c.H + 3) / 4); };
    while (programs() > most_programs && c.B > 1) --c.B;
    while (programs() > most_programs && c.q_len > 1) c.q_len = c.q_len == 8 ? 4 : c.q_len - 1;
    while (programs() > most_programs) c.H -= 4;
    c.page = *rc::gen::element<int64_t>(1, 2, 3, 16, 53, 61, 64, 69);
    const auto length = max_len == 640
                            ? rc::gen::weightedOneOf<int32_t>({{1, rc::gen::inRange(0, 41)}, {3, rc::gen::inRange(520, 641)}})
                            : rc::gen::weightedOneOf<int32_t>({{1, rc::gen::just(0)},
                                                               {1, rc::gen::inRange(1, 9)},
                                                               {1, rc::gen::element(31, 32, 33, 63, 64, 65)},
                                                               {4, rc::gen::inRange(0, max_len + 1)}});
    c.lens = *rc::gen::container<std::vector<int32_t>>(static_cast<size_t>(c.B), length);
    for (int32_t& l : c.lens) l = std::min(l, max_len);
    int64_t needed = 0;
    for (int64_t b = 0; b < c.B; ++b) needed = std::max(needed, c.needed(b));
    c.W = needed + *rc::gen::inRange(0, 3);
    c.table_row_pad = *rc::gen::inRange(0, 3);
    fill_mla_decode_block_table(c);
    c.q_fp8 = *rc::gen::arbitrary<bool>();
    c.kv_fp8 = *rc::gen::arbitrary<bool>();
    const int64_t es = c.kv_fp8 ? 1 : 2;
    const bool aligned = *rc::gen::arbitrary<bool>();  // lets the kernel take its 16-byte key loads
    c.token_stride = kDim + (aligned ? 16 / es * *rc::gen::inRange(0, 3) : *rc::gen::inRange(0, 5));
    c.block_pad = aligned ? 16 / es * *rc::gen::inRange(0, 2) : *rc::gen::inRange(0, 7);
    c.kv_offset = aligned ? 16 * *rc::gen::inRange(0, 3) : es * *rc::gen::inRange(0, 9);
    c.q_offset = (c.q_fp8 ? 1 : 2) * *rc::gen::inRange(0, 9);
    c.out_offset = 4 * *rc::gen::inRange(0, 5);
    c.base_scale = *rc::gen::element(kDeepSeekScale, 1.0 / 24.0, 0.25);
    // Any fp32 value, or a power of two (ue8m0-style per-tensor scales).
    c.q_scale = *rc::gen::element(0.5, 1.0, 1.7, 0.8123, 0.125);
    c.k_scale = *rc::gen::element(0.25, 1.0, 1.3, 0.0625, 0.015625);
    c.num_splits = *rc::gen::weightedOneOf<int64_t>(
        {{8, rc::gen::inRange<int64_t>(1, 9)},
         {1, rc::gen::just<int64_t>(c.B * c.q_len * c.H <= 16 ? kernels::kMlaMaxSplits : 8)}});
    c.workspace_extra = *rc::gen::element<int64_t>(0, 0, 1, 600);
    c.pass_host_lens = *rc::gen::arbitrary<bool>();
    c.poison = *rc::gen::element<uint8_t>(0xFF, 0x7F);
    c.magnitude_log2 = *rc::gen::weightedOneOf<int>({{6, rc::gen::just(0)}, {1, rc::gen::element(-100, -40, 40, 100)}});
    c.zero_rows = *rc::gen::inRange(0, 4) == 0;
    draw_schedule(c);
    return c;
  });
}

}  // namespace gen
}  // namespace mlacheck
