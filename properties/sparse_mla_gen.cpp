// Generators and text form of sparse MLA decode cases (properties/sparse_mla_gen.h).
#include "properties/sparse_mla_gen.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <string>

#include "core/error.h"
#include "properties/schedule_gen.h"
#include "oracle/sparse_mla.h"
#include "properties/random_values.h"

namespace mlacheck {

namespace {

constexpr int64_t kToken = kernels::kSparseMlaTokenBytes;
constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int32_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kMaxRows = 65536;                    // query rows (batch x s_q x heads)
constexpr int64_t kMaxCacheBytes = int64_t{1} << 28;  // what a case may stage
// The largest |softmax_scale|: lse's tolerance (core/tolerances.cpp) bounds fp32 log-sum-exp
// rounding only, not the scores' own fp32 rounding, which grows with the scale: on random cases
// sparse_mla_decode@ref exceeds it at |scale| 0.5 (1.5x) and far past it at 2 and more. The
// generators' largest scale is 0.25; production's is 1 / sqrt(192) = 0.072 (x 1.87 with YaRN).
constexpr double kMaxSoftmaxScale = 0.25;
// The most values a case file's line holds (CaseText::parse: a key and at most 2^16 - 1 values).
constexpr int64_t kMaxListValues = (int64_t{1} << 16) - 1;

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
        } else if (none_valid || canonical_double(rng) < invalid_p) {
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
  write_schedule(c, out);
}

// Reads constructively (harness/case_text.h, "Fuzz inputs"): each value's range follows from the
// values read before it, so almost any fuzz input bytes make a case. heads and topk are bounded by
// the query rows and entries batch x s_q leave, the strides come before num_blocks (the cache is at
// most 256 MiB), the lists' lengths follow the shapes and flags. The scalars come first and the
// lists last: the bytes a fuzzer mutates first steer the case, the indices take the rest.
SparseMlaCase sparse_mla_from_text(const CaseText& t) {
  SparseMlaCase c;
  c.B = t.integer("batch", 1, 1024);
  c.S = t.integer("s_q", 1, 16);
  // batch x s_q x heads <= 65536 query rows; batch x s_q x topk entries fit one case file line.
  c.H = t.integer("heads", 1, std::min<int64_t>(128, kMaxRows / (c.B * c.S)));
  c.topk = t.integer("topk", 1, std::min<int64_t>(8192, kMaxListValues / (c.B * c.S)));
  c.page = t.integer("page", 1, 1024);
  c.token_stride = t.multiple("token_stride", 16, kToken, 4096);
  c.block_stride = t.multiple("block_stride", 16, c.page * c.token_stride, kMaxCacheBytes);
  // num_blocks x block_stride within the 256 MiB a case may stage (num_blocks x page <= 2^26 slots).
  c.num_blocks = t.integer("num_blocks", 1, std::min<int64_t>(65536, kMaxCacheBytes / c.block_stride));
  c.kv_offset = t.multiple("kv_offset", 16, 0, 4096);
  c.q_offset = t.integer("q_offset", 0, 64);
  c.indices_offset = t.integer("indices_offset", 0, 64);
  c.out_offset = t.integer("out_offset", 0, 64);
  c.lse_offset = t.integer("lse_offset", 0, 64);
  c.aux_offset = t.integer("aux_offset", 0, 64);
  c.softmax_scale = t.real("softmax_scale", -kMaxSoftmaxScale, kMaxSoftmaxScale);
  c.poison = static_cast<uint8_t>(t.integer("poison", 0, 255));
  c.trap = static_cast<int32_t>(t.integer("trap", kInt32Min, kInt32Max));
  c.scale_format = t.choice("scale_format", {"fp32", "ue8m0"}) == 0 ? SparseMlaScaleFormat::kFp32
                                                                    : SparseMlaScaleFormat::kUe8m0;
  c.magnitude_log2 = static_cast<int>(t.integer("magnitude_log2", -100, 100));
  c.zero_rows = t.flag("zero_rows");
  read_schedule(c, t);
  // topk_length: one per request when has_topk_length, else none (the key stays, empty); so too
  // attn_sink, one per head.
  c.has_length = t.flag("has_topk_length");
  c.lengths = t.list_exactly<int32_t>("topk_length", 0, c.topk, c.has_length ? static_cast<size_t>(c.B) : 0u);
  c.has_sink = t.flag("has_attn_sink");
  c.sink = t.floats_exactly("attn_sink", c.has_sink ? static_cast<size_t>(c.H) : 0u);
  for (size_t h = 0; h < c.sink.size(); ++h) {  // +-inf sinks are allowed; NaN is no range's edge
    MLA_REQUIRE(!std::isnan(c.sink[h]), "case: attn_sink value ", h, " is nan (+-inf allowed, NaN not)");
  }
  c.indices = t.list_exactly<int32_t>("indices", kInt32Min, kInt32Max, static_cast<size_t>(c.B * c.S * c.topk));
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
    draw_schedule(c);
    fill_sparse_mla_entries(c, live, *rc::gen::inRange(0, 4), true);
    return c;
  });
}

}  // namespace gen
}  // namespace mlacheck
