// Dense MLA decode cases: the generator's draws and the ranges the schema reads with
// (properties/mla_decode_gen.h).
#include "properties/mla_decode_gen.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "properties/block_table_gen.h"

namespace mlacheck {

namespace {

// Every scale a launch takes, and their product: a normal float with room (the oracle takes them
// in double, the kernel in fp32).
bool in_launch_range(double v) { return std::isfinite(v) && v >= std::ldexp(1.0, -120) && v <= std::ldexp(1.0, 120); }

}  // namespace

int64_t MlaDecodeCase::max_len() const {
  return lens.empty() ? 0 : *std::max_element(lens.begin(), lens.end());
}
double MlaDecodeCase::launch_q_scale() const { return q_fp8 ? std::ldexp(q_scale, -magnitude_log2) : q_scale; }
double MlaDecodeCase::launch_k_scale() const { return kv_fp8 ? std::ldexp(k_scale, magnitude_log2) : k_scale; }

int64_t MlaDecodeCase::most_pages() const { return (max_len() + page - 1) / page; }

std::string MlaDecodeCase::table_width_rule() const {
  const auto longest = std::max_element(lens.begin(), lens.end());
  const std::string which = longest == lens.end() ? std::string()
                                                  : "seq_lens value " + std::to_string(longest - lens.begin()) + " (" +
                                                        std::to_string(*longest) + ") needs " +
                                                        std::to_string(most_pages()) + " pages; ";
  return which + "batch x table_width is at most 65535";
}

std::pair<int64_t, int64_t> MlaDecodeCase::magnitude_range() const {
  const auto launch_ok = [&](int64_t m) {  // as launch_q_scale() and launch_k_scale() compute them
    const double q = q_fp8 ? std::ldexp(q_scale, static_cast<int>(-m)) : q_scale;
    const double k = kv_fp8 ? std::ldexp(k_scale, static_cast<int>(m)) : k_scale;
    const double out = std::ldexp(k_scale, static_cast<int>(m));
    return in_launch_range(q) && in_launch_range(k) && in_launch_range(base_scale * q * k) &&
           out >= std::ldexp(1.0, -110) && out <= std::ldexp(1.0, 110);
  };
  int64_t lo = 0, hi = 0;
  while (lo > -100 && launch_ok(lo - 1)) --lo;
  while (hi < 100 && launch_ok(hi + 1)) ++hi;
  return {lo, hi};
}

int64_t MlaDecodeCase::most_splits() const {
  const int64_t cap = kMlaMaxCacheBytes / 4 / kernels::mla_decode_workspace_floats(B, q_len, H, 1);
  return std::clamp<int64_t>(cap, 1, kernels::kMlaMaxSplits);
}

int64_t MlaDecodeCase::most_blocks(bool far) const {
  const int64_t block_bytes = (kv_fp8 ? 1 : 2) * block_stride();
  if (far) return std::min<int64_t>(INT32_MAX, (kMlaMaxReservedBytes - kv_offset) / block_bytes);
  return std::min<int64_t>(65536, kMlaMaxCacheBytes / block_bytes);
}

bool MlaDecodeCase::reserved_cache() const {
  return kv_offset + num_blocks * (kv_fp8 ? 1 : 2) * block_stride() > kMlaMaxCacheBytes;
}

std::vector<int64_t> mla_table_lows(const std::vector<int32_t>& lens, int64_t W, int64_t page) {
  std::vector<int64_t> lows(lens.size() * static_cast<size_t>(W), INT32_MIN);
  for (size_t b = 0; b < lens.size(); ++b) {
    for (int64_t w = 0; w < (lens[b] + page - 1) / page; ++w) lows[b * static_cast<size_t>(W) + static_cast<size_t>(w)] = 0;
  }
  return lows;
}

void note_highest_page(MlaPageRead& top, const std::vector<int32_t>& lens, const std::vector<int32_t>& table,
                       int64_t W, int64_t page, const std::string& prefix) {
  const std::vector<int64_t> lows = mla_table_lows(lens, W, page);
  for (size_t i = 0; i < lows.size() && i < table.size(); ++i) {
    if (lows[i] == 0 && table[i] > top.page) {
      top.page = table[i];
      top.where = prefix + "block_table value " + std::to_string(i) + " (request " + std::to_string(i / W) +
                  " column " + std::to_string(i % W) + ") reads page " + std::to_string(table[i]) + "; ";
    }
  }
}

std::pair<double, double> mla_k_scale_range(double bq) {
  // k in [lo / (base x q), hi / (base x q)], nudged so that the product as the checks compute it
  // ((base x q) x k) is inside too.
  double lo = std::max(kMlaScaleLo, kMlaScaleLo / bq), hi = std::min(kMlaScaleHi, kMlaScaleHi / bq);
  while (lo < hi && bq * lo < kMlaScaleLo) lo = std::nextafter(lo, kMlaScaleHi);
  while (hi > lo && bq * hi > kMlaScaleHi) hi = std::nextafter(hi, kMlaScaleLo);
  return {lo, hi};
}

void mla_decode_to_text(const MlaDecodeCase& c, CaseText& out) { write_case(c, out); }

MlaDecodeCase mla_decode_from_text(const CaseText& t) { return read_case<MlaDecodeCase>(t); }
MlaDecodeCase mla_decode_far_from_text(const CaseText& t) {
  MlaDecodeFamily far;
  far.far_pages = true;
  return read_case<MlaDecodeCase>(t, far);
}

// ---- the generator's draws -----------------------------------------------------------------------

MlaDecodeShape draw_mla_decode_shape(const MlaDecodeFamily& f) {
  const bool light = f.size != gen::MlaDecodeSize::kFull, few = f.size == gen::MlaDecodeSize::kSplits;
  MlaDecodeShape s;
  s.B = *rc::gen::inRange(1, 5);
  s.q_len = *rc::gen::weightedOneOf<int64_t>({{8, rc::gen::inRange<int64_t>(1, 5)}, {1, rc::gen::just<int64_t>(8)}});
  s.H = *rc::gen::weightedOneOf<int64_t>({{6, rc::gen::inRange<int64_t>(1, 9)}, {1, rc::gen::just<int64_t>(16)}});
  // 640: past 2 x 256 keys, so the split heuristic picks more than one split even on the host.
  s.max_len = *rc::gen::weightedOneOf<int>({{2, rc::gen::just(3)},
                                            {3, rc::gen::just(40)},
                                            {2, rc::gen::just(130)},
                                            {light ? 0 : 1, rc::gen::just(300)},
                                            {1, rc::gen::just(640)}});
  const int64_t most_programs =
      s.max_len == 640 || few ? 2 : s.max_len > 130 || (light && s.max_len > 40) ? 4 : light ? 8 : 16;
  const auto programs = [&] { return s.B * s.q_len * ((s.H + 3) / 4); };
  while (programs() > most_programs && s.B > 1) --s.B;
  while (programs() > most_programs && s.q_len > 1) s.q_len = s.q_len == 8 ? 4 : s.q_len - 1;
  while (programs() > most_programs) s.H -= 4;
  // Fitted to the family: fewer requests and tokens, its heads (an impl call: no more work).
  if (f.heads > 0) s.H = f.heads;
  s.B = std::min(s.B, f.max_batch);
  s.q_len = std::min(s.q_len, f.max_q_len);
  return s;
}

std::vector<int32_t> draw_mla_decode_lens(const MlaDecodeCase& c, int max_len) {
  const auto length = max_len == 640
                          ? rc::gen::weightedOneOf<int32_t>({{1, rc::gen::inRange(0, 41)}, {3, rc::gen::inRange(520, 641)}})
                          : rc::gen::weightedOneOf<int32_t>({{1, rc::gen::just(0)},
                                                             {1, rc::gen::inRange(1, 9)},
                                                             {1, rc::gen::element(31, 32, 33, 63, 64, 65)},
                                                             {4, rc::gen::inRange(0, max_len + 1)}});
  std::vector<int32_t> lens = *rc::gen::container<std::vector<int32_t>>(static_cast<size_t>(c.B), length);
  for (int32_t& l : lens) l = std::min(l, max_len);
  return lens;
}

void fill_mla_decode_block_table(MlaDecodeCase& c) {
  std::vector<int64_t> needed;
  for (int64_t b = 0; b < c.B; ++b) needed.push_back(c.needed(b));
  const PagedBlockTable t = *gen::paged_block_table(needed, c.W);
  c.num_blocks = c.page_base + t.num_blocks;
  c.table = t.table;
}

namespace gen {

rc::Gen<MlaDecodeCase> mla_decode_case(MlaDecodeSize size, bool far_pages) {
  MlaDecodeFamily f;
  f.size = size;
  f.far_pages = far_pages;
  return draw_case<MlaDecodeCase>(2, f);
}

}  // namespace gen
}  // namespace mlacheck
