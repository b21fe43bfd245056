// Generators and text form of dense MLA decode cases (properties/mla_decode_gen.h).
#include "properties/mla_decode_gen.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
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
  out.set("seed", c.seed).set("warp", int64_t{c.warp_size}).set("shuffled", c.shuffled);
}

MlaDecodeCase mla_decode_from_text(const CaseText& t) {
  MlaDecodeCase c;
  c.B = t.integer("batch", 1, 1024);
  c.q_len = t.integer("q_len", 1, kernels::kMlaMaxQueryLen);
  c.H = t.integer("heads", 1, 128);
  MLA_REQUIRE(c.B * c.q_len * c.H <= 65536, "case: batch x q_len x heads is ", c.B * c.q_len * c.H,
              ", over 65536 query rows");
  c.page = t.integer("page", 1, 1024);
  c.lens = t.list<int32_t>("seq_lens", 0, 1 << 20, static_cast<size_t>(c.B));
  MLA_REQUIRE(c.lens.size() == static_cast<size_t>(c.B), "case: seq_lens has ", c.lens.size(), " values, not batch ",
              c.B);
  c.W = t.integer("table_width", 0, 65536);
  for (int64_t b = 0; b < c.B; ++b) {
    MLA_REQUIRE(c.needed(b) <= c.W, "case: seq_lens value ", b, " (", c.lens[static_cast<size_t>(b)], ") needs ",
                c.needed(b), " pages, table_width is ", c.W);
  }
  c.table_row_pad = t.integer("table_row_pad", 0, 64);
  c.num_blocks = t.integer("num_blocks", 1, 65536);
  c.table = t.list<int32_t>("block_table", INT32_MIN, INT32_MAX, static_cast<size_t>(c.B * c.W));
  MLA_REQUIRE(c.table.size() == static_cast<size_t>(c.B * c.W), "case: block_table has ", c.table.size(),
              " values, not batch x table_width = ", c.B * c.W);
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t w = 0; w < c.needed(b); ++w) {
      const int32_t page = c.table[static_cast<size_t>(b * c.W + w)];
      MLA_REQUIRE(page >= 0 && page < c.num_blocks, "case: block_table value ", b * c.W + w, " (request ", b,
                  " column ", w, ") is page ", page, ", outside the cache's ", c.num_blocks, " (the request reads it)");
    }
  }
  c.q_fp8 = t.choice("q_dtype", {"bf16", "fp8"}) == 1;
  c.kv_fp8 = t.choice("kv_dtype", {"bf16", "fp8"}) == 1;
  c.token_stride = t.integer("token_stride", kDim, 4096);
  c.block_pad = t.integer("block_pad", 0, 4096);
  MLA_REQUIRE(c.num_blocks * c.block_stride() * (c.kv_fp8 ? 1 : 2) <= (int64_t{1} << 28), "case: num_blocks x ",
              "block stride is over the 256 MiB a case may stage");
  c.kv_offset = t.integer("kv_offset", 0, 4096);
  c.q_offset = t.integer("q_offset", 0, 4096);
  c.out_offset = t.integer("out_offset", 0, 4096);
  MLA_REQUIRE(c.kv_offset % (c.kv_fp8 ? 1 : 2) == 0, "case: kv_offset ", c.kv_offset, " is not a multiple of 2 (bf16)");
  MLA_REQUIRE(c.q_offset % (c.q_fp8 ? 1 : 2) == 0, "case: q_offset ", c.q_offset, " is not a multiple of 2 (bf16)");
  MLA_REQUIRE(c.out_offset % 4 == 0, "case: out_offset ", c.out_offset, " is not a multiple of 4");
  c.base_scale = t.real("base_scale");
  c.q_scale = t.real("q_scale");
  c.k_scale = t.real("k_scale");
  c.magnitude_log2 = static_cast<int>(t.integer("magnitude_log2", -100, 100));
  // Every scale a launch takes, and their product, a normal float with room: the oracle takes them
  // in double, the kernel in fp32.
  const double lo = std::ldexp(1.0, -120), hi = std::ldexp(1.0, 120);
  for (const auto& [key, v] : {std::pair{"base_scale", c.base_scale}, {"q_scale", c.q_scale}, {"k_scale", c.k_scale}}) {
    MLA_REQUIRE(std::isfinite(v) && v >= lo && v <= hi, "case: ", key, " is ", v, ", not in [2^-120, 2^120]");
  }
  const double softmax = c.base_scale * c.launch_q_scale() * c.launch_k_scale();
  for (const double v : {softmax, c.launch_q_scale(), c.launch_k_scale()}) {
    MLA_REQUIRE(v >= lo && v <= hi, "case: base_scale, q_scale, k_scale with magnitude_log2 ", c.magnitude_log2,
                " give a launch scale ", v, " outside [2^-120, 2^120]");
  }
  c.num_splits = t.integer("num_splits", 1, kernels::kMlaMaxSplits);
  c.workspace_extra = t.integer("workspace_extra", 0, 1 << 20);
  c.pass_host_lens = t.flag("host_seq_lens");
  c.poison = static_cast<uint8_t>(t.integer("poison", 0, 255));
  c.kv_tail = t.integer("kv_tail", 0, 1 << 20);
  c.zero_rows = t.flag("zero_rows");
  c.seed = t.unsigned_integer("seed");
  c.warp_size = static_cast<int>(t.integer("warp", 32, 64));
  MLA_REQUIRE(c.warp_size == 32 || c.warp_size == 64, "case: warp is ", c.warp_size, ", not 32 or 64");
  c.shuffled = t.flag("shuffled");
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
    c.seed = *rc::gen::arbitrary<uint64_t>();
    c.warp_size = *rc::gen::element(32, 64);
    c.shuffled = *rc::gen::arbitrary<bool>();
    return c;
  });
}

}  // namespace gen
}  // namespace mlacheck
