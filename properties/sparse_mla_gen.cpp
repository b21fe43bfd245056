// Generators and text form of sparse MLA decode cases (properties/sparse_mla_gen.h).
#include "properties/sparse_mla_gen.h"

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <random>
#include <string>

#include "core/error.h"
#include "oracle/sparse_mla.h"

namespace mlacheck {

namespace {

constexpr int64_t kToken = kernels::kSparseMlaTokenBytes;
constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();

float uniform(std::mt19937_64& rng, float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); }

}  // namespace

bool SparseMlaCase::counted_valid(int64_t b, int64_t s, int64_t i) const {
  return i < row_length(b) && oracle::sparse_mla_index_valid(index(b, s, i), num_slots());
}

void showValue(const SparseMlaCase& c, std::ostream& os) {
  CaseText t;
  sparse_mla_to_text(c, t);
  os << t.format();
}

void fill_sparse_mla_entries(SparseMlaCase& c, int64_t live, int invalid_mix, bool empty_rows) {
  std::mt19937_64 rng(c.seed ^ 0x5eed5eedULL);
  std::vector<int32_t> blocks(static_cast<size_t>(c.num_blocks));
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  const auto pick = [&](int64_t first, int64_t count) {
    return static_cast<int32_t>(blocks[static_cast<size_t>(first + static_cast<int64_t>(rng() % count))] * c.page +
                                static_cast<int64_t>(rng() % c.page));
  };
  c.trap = pick(live, c.num_blocks - live);
  if (c.has_length) {
    c.lengths.resize(static_cast<size_t>(c.B));
    for (int32_t& l : c.lengths) {
      const uint64_t kind = rng() % 6;
      l = static_cast<int32_t>(kind == 0 ? 0 : kind == 1 ? c.topk : static_cast<int64_t>(rng() % (c.topk + 1)));
    }
  }
  const int32_t slots = static_cast<int32_t>(c.num_slots());
  const std::array<int32_t, 8> invalid = {-1,
                                          -1,
                                          -2,
                                          std::numeric_limits<int32_t>::min(),
                                          -static_cast<int32_t>(c.page),
                                          slots,
                                          slots + static_cast<int32_t>(rng() % c.page),
                                          kInt32Max};
  const double invalid_p = std::array<double, 4>{0.0, 0.2, 0.5, 0.9}[static_cast<size_t>(invalid_mix)];
  c.indices.resize(static_cast<size_t>(c.B * c.S * c.topk));
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t s = 0; s < c.S; ++s) {
      const bool none_valid = empty_rows && rng() % 8 == 0;
      std::vector<int32_t> named;
      for (int64_t i = 0; i < c.topk; ++i) {
        int32_t& e = c.indices[static_cast<size_t>((b * c.S + s) * c.topk + i)];
        if (i >= c.row_length(b) && rng() % 2 == 0) {
          e = rng() % 2 == 0 ? pick(live, c.num_blocks - live) : pick(0, live);  // not counted: may be poison
        } else if (none_valid || std::uniform_real_distribution<double>(0, 1)(rng) < invalid_p) {
          e = invalid[rng() % invalid.size()];
        } else if (!named.empty() && rng() % 4 == 0) {
          e = named[rng() % named.size()];  // a duplicate counts twice
        } else {
          e = pick(0, live);
          named.push_back(e);
        }
      }
    }
  }
  if (c.has_sink) {
    c.sink.resize(static_cast<size_t>(c.H));
    for (float& v : c.sink) {
      const uint64_t kind = rng() % 12;
      v = kind == 0 ? HUGE_VALF : kind == 1 ? -HUGE_VALF : uniform(rng, -4, 8);
    }
  }
}

// ---- text ----------------------------------------------------------------------------------------

void sparse_mla_to_text(const SparseMlaCase& c, CaseText& out) {
  out.set("batch", c.B).set("s_q", c.S).set("heads", c.H).set("topk", c.topk);
  out.set("page", c.page).set("num_blocks", c.num_blocks);
  out.set("token_stride", c.token_stride).set("block_stride", c.block_stride).set("kv_offset", c.kv_offset);
  out.set("q_offset", c.q_offset).set("indices_offset", c.indices_offset).set("out_offset", c.out_offset);
  out.set("lse_offset", c.lse_offset).set("aux_offset", c.aux_offset);
  out.set_list("indices", c.indices);
  out.set("has_topk_length", c.has_length).set_list("topk_length", c.has_length ? c.lengths : std::vector<int32_t>{});
  std::vector<std::string> sink;
  for (float v : c.has_sink ? c.sink : std::vector<float>{}) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", double(v));  // 9 digits read back as the same float
    sink.push_back(buf);
  }
  out.set("has_attn_sink", c.has_sink).set_words("attn_sink", sink);
  out.set_real("softmax_scale", c.softmax_scale);
  out.set("poison", int64_t{c.poison}).set("trap", int64_t{c.trap});
  out.set("scale_format", c.scale_format == SparseMlaScaleFormat::kFp32 ? "fp32" : "ue8m0");
  out.set("magnitude_log2", int64_t{c.magnitude_log2}).set("zero_rows", c.zero_rows);
  out.set("seed", c.seed).set("warp", int64_t{c.warp_size}).set("shuffled", c.shuffled);
}

SparseMlaCase sparse_mla_from_text(const CaseText& t) {
  SparseMlaCase c;
  c.B = t.integer("batch", 1, 1024);
  c.S = t.integer("s_q", 1, 16);
  c.H = t.integer("heads", 1, 128);
  c.topk = t.integer("topk", 1, 8192);
  MLA_REQUIRE(c.B * c.S * c.H <= 65536, "case: batch x s_q x heads is ", c.B * c.S * c.H, ", over 65536 query rows");
  MLA_REQUIRE(c.B * c.S * c.topk <= 65536, "case: batch x s_q x topk is ", c.B * c.S * c.topk, ", over 65536 entries");
  c.page = t.integer("page", 1, 1024);
  c.num_blocks = t.integer("num_blocks", 1, 65536);
  MLA_REQUIRE(c.num_slots() <= kInt32Max, "case: num_blocks x page is past int32 slots");
  c.token_stride = t.integer("token_stride", kToken, 4096);
  MLA_REQUIRE(c.token_stride % 16 == 0, "case: token_stride ", c.token_stride, " is not a multiple of 16");
  c.block_stride = t.integer("block_stride", c.page * c.token_stride, int64_t{1} << 28);
  MLA_REQUIRE(c.block_stride % 16 == 0, "case: block_stride ", c.block_stride, " is not a multiple of 16");
  MLA_REQUIRE(c.num_blocks * c.block_stride <= (int64_t{1} << 28), "case: num_blocks x block_stride is ",
              c.num_blocks * c.block_stride, " bytes, over the 256 MiB a case may stage");
  c.kv_offset = t.integer("kv_offset", 0, 4096);
  MLA_REQUIRE(c.kv_offset % 16 == 0, "case: kv_offset ", c.kv_offset, " is not a multiple of 16");
  c.q_offset = t.integer("q_offset", 0, 64);
  c.indices_offset = t.integer("indices_offset", 0, 64);
  c.out_offset = t.integer("out_offset", 0, 64);
  c.lse_offset = t.integer("lse_offset", 0, 64);
  c.aux_offset = t.integer("aux_offset", 0, 64);
  const size_t entries = static_cast<size_t>(c.B * c.S * c.topk);
  c.indices = t.list<int32_t>("indices", std::numeric_limits<int32_t>::min(), kInt32Max, entries);
  MLA_REQUIRE(c.indices.size() == entries, "case: indices has ", c.indices.size(), " values, not batch x s_q x topk = ",
              entries);
  c.has_length = t.flag("has_topk_length");
  c.lengths = t.list<int32_t>("topk_length", 0, c.topk, static_cast<size_t>(c.B));
  MLA_REQUIRE(c.lengths.size() == (c.has_length ? static_cast<size_t>(c.B) : 0u), "case: topk_length has ",
              c.lengths.size(), " values, not ", c.has_length ? c.B : 0, " (one per request when has_topk_length)");
  c.has_sink = t.flag("has_attn_sink");
  const auto& sink = t.words("attn_sink", static_cast<size_t>(c.H));
  MLA_REQUIRE(sink.size() == (c.has_sink ? static_cast<size_t>(c.H) : 0u), "case: attn_sink has ", sink.size(),
              " values, not ", c.has_sink ? c.H : 0, " (one per head when has_attn_sink)");
  for (size_t h = 0; h < sink.size(); ++h) {
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(sink[h].c_str(), &end);
    MLA_REQUIRE(*end == '\0' && !std::isnan(v) && (std::isinf(v) || std::fabs(v) <= 3.4e38), "case: attn_sink value ",
                h, " is '", sink[h], "', not a float (+-inf allowed, NaN not)");
    c.sink.push_back(static_cast<float>(v));
  }
  c.softmax_scale = t.real("softmax_scale");
  MLA_REQUIRE(std::isfinite(c.softmax_scale) && std::fabs(c.softmax_scale) <= 3.4e38, "case: softmax_scale ",
              c.softmax_scale, " is not a finite float");
  c.poison = static_cast<uint8_t>(t.integer("poison", 0, 255));
  c.trap = static_cast<int32_t>(t.integer("trap", std::numeric_limits<int32_t>::min(), kInt32Max));
  c.scale_format = t.choice("scale_format", {"fp32", "ue8m0"}) == 0 ? SparseMlaScaleFormat::kFp32
                                                                    : SparseMlaScaleFormat::kUe8m0;
  c.magnitude_log2 = static_cast<int>(t.integer("magnitude_log2", -100, 100));
  c.zero_rows = t.flag("zero_rows");
  c.seed = t.unsigned_integer("seed");
  c.warp_size = static_cast<int>(t.integer("warp", 32, 64));
  MLA_REQUIRE(c.warp_size == 32 || c.warp_size == 64, "case: warp is ", c.warp_size, ", not 32 or 64");
  c.shuffled = t.flag("shuffled");
  return c;
}

// ---- generators ----------------------------------------------------------------------------------

namespace gen {

rc::Gen<SparseMlaCase> sparse_mla_case() {
  return rc::gen::exec([] {
    SparseMlaCase c;
    c.B = *rc::gen::inRange(1, 4);
    c.S = *rc::gen::inRange(1, 3);
    c.H = *rc::gen::weightedOneOf<int64_t>({{6, rc::gen::inRange<int64_t>(1, 9)},
                                            {2, rc::gen::just<int64_t>(16)},
                                            {1, rc::gen::inRange<int64_t>(17, 21)}});
    c.topk = *rc::gen::weightedOneOf<int64_t>(
        {{6, rc::gen::inRange<int64_t>(1, 65)}, {1, rc::gen::element<int64_t>(1, 31, 32, 33, 63, 64)}});
    c.page = *rc::gen::element<int64_t>(1, 2, 3, 16, 53, 61, 64, 69);
    const int64_t live = *rc::gen::inRange(1, 5);
    c.num_blocks = live + *rc::gen::inRange(1, 4);
    c.token_stride = kToken + 16 * *rc::gen::inRange(0, 3);
    c.block_stride = c.page * c.token_stride + 16 * *rc::gen::inRange(0, 3);
    c.kv_offset = 16 * *rc::gen::inRange(0, 4);
    c.q_offset = *rc::gen::inRange(0, 9);
    c.indices_offset = *rc::gen::inRange(0, 5);
    c.out_offset = *rc::gen::inRange(0, 9);
    c.lse_offset = *rc::gen::inRange(0, 5);
    c.aux_offset = *rc::gen::inRange(0, 5);
    c.has_length = *rc::gen::arbitrary<bool>();
    c.has_sink = *rc::gen::arbitrary<bool>();
    c.softmax_scale = *rc::gen::element(0.0722, 0.0417, 0.25);  // 192^-0.5, 576^-0.5, larger
    c.poison = *rc::gen::element<uint8_t>(0x7F, 0xFF);
    c.scale_format = *rc::gen::element(SparseMlaScaleFormat::kFp32, SparseMlaScaleFormat::kUe8m0);
    c.magnitude_log2 = *rc::gen::weightedOneOf<int>({{6, rc::gen::just(0)}, {1, rc::gen::element(-100, -40, 40, 100)}});
    c.zero_rows = *rc::gen::inRange(0, 4) == 0;
    c.seed = *rc::gen::arbitrary<uint64_t>();
    c.warp_size = *rc::gen::element(32, 64);
    c.shuffled = *rc::gen::arbitrary<bool>();
    fill_sparse_mla_entries(c, live, *rc::gen::inRange(0, 4), true);
    return c;
  });
}

}  // namespace gen
}  // namespace mlacheck
