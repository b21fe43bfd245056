// Generators of decode metadata limits and steps, and their text form (properties/decode_metadata_gen.h).
#include "properties/decode_metadata_gen.h"

#include <cstdlib>
#include <limits>

#include "core/error.h"
#include "properties/schedule_gen.h"
#include "properties/block_table_gen.h"

namespace mlacheck {

using kernels::MetadataLayout;
using kernels::MetadataLimits;
using kernels::MetadataPathChoice;

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxElements = int64_t{1} << 23;  // per builder buffer: a hand-edited case stays small
constexpr int64_t kMaxPad = 64;                     // offsets and row pads, in elements

}  // namespace

void kernels::showValue(const MetadataLimits& l, std::ostream& os) {
  os << "next_n " << l.next_n << " max_requests " << l.max_requests << " table_width " << l.block_table_width
     << " max_tokens " << l.max_batched_tokens;
}

std::vector<int32_t> MetadataStep::query_start_loc() const {
  std::vector<int32_t> qsl{0};
  for (int32_t d : decode_lens) qsl.push_back(qsl.back() + d);
  return qsl;
}

std::vector<int32_t> MetadataStep::block_table() const {
  if (table == MetadataTable::kPaged) return paged_table;
  std::vector<int32_t> t(static_cast<size_t>(B() * W));
  for (int64_t b = 0; b < B(); ++b) {
    for (int64_t w = 0; w < W; ++w) t[static_cast<size_t>(b * W + w)] = table_base + static_cast<int32_t>(1000 * b + w);
  }
  return t;
}

void showValue(const MetadataStep& c, std::ostream& os) {
  os << (c.layout == MetadataLayout::kFlattened ? "flattened" : "native")
     << (c.path == MetadataPathChoice::kGeneral ? " general" : " auto") << " decode_lens [";
  for (int32_t d : c.decode_lens) os << ' ' << d;
  os << " ] seq_lens [";
  for (int32_t x : c.seq_lens) os << ' ' << x;
  os << " ] W " << c.W << " row pad " << c.table_row_pad << " +" << c.table_offset << " offsets " << c.seq_lens_offset
     << '/' << c.decode_lens_offset << '/' << c.qsl_offset
     << (c.table == MetadataTable::kPaged ? " paged " + std::to_string(c.page_size) : " distinct")
     << " padded " << c.num_padded_tokens << (c.give_num_decode_tokens ? "" : " no-T")
     << (c.give_host_seq_lens ? " host-seq" : "") << (c.give_query_start_loc ? "" : " no-qsl") << " warp "
     << c.warp_size << (c.shuffled ? " shuffled" : "");
}

namespace {

void limits_to_text(const MetadataLimits& l, CaseText& out) {
  out.set("next_n", int64_t{l.next_n}).set("max_requests", l.max_requests);
  out.set("table_width", l.block_table_width).set("max_tokens", l.max_batched_tokens);
}

void step_to_text(const MetadataStep& c, const std::string& p, CaseText& out) {
  out.set(p + "layout", c.layout == MetadataLayout::kFlattened ? "flattened" : "native");
  out.set(p + "path", c.path == MetadataPathChoice::kGeneral ? "general" : "auto");
  out.set_list(p + "decode_lens", c.decode_lens).set_list(p + "seq_lens", c.seq_lens);
  out.set(p + "table_cols", c.W).set(p + "table_row_pad", c.table_row_pad).set(p + "table_offset", c.table_offset);
  out.set(p + "seq_lens_offset", c.seq_lens_offset).set(p + "decode_lens_offset", c.decode_lens_offset);
  out.set(p + "qsl_offset", c.qsl_offset);
  if (c.table == MetadataTable::kDistinct) {
    out.set(p + "table", "distinct").set(p + "table_base", int64_t{c.table_base});
  } else {
    out.set(p + "table", "paged").set(p + "page_size", c.page_size).set_list(p + "block_table", c.paged_table);
  }
  out.set(p + "num_padded_tokens", c.num_padded_tokens).set(p + "num_decode_tokens", c.give_num_decode_tokens);
  out.set(p + "host_seq_lens", c.give_host_seq_lens).set(p + "query_start_loc", c.give_query_start_loc);
  write_schedule(c, out, p);
}

// `none`, or a value in [lo, hi] (none < lo): whether it is none is drawn when drawing, read from
// the text otherwise (its bytes recorded when encoding), then the value is read in its range.
int64_t none_or_integer(const CaseText& t, const std::string& key, int64_t none, int64_t lo, int64_t hi) {
  bool given = false;
  if (t.drawing()) {
    given = t.code(0, 0, 1) == 1;
  } else {
    given = t.word(key) != std::to_string(none);
    t.code(given ? 1 : 0, 0, 1);
  }
  return given ? t.integer(key, lo, hi) : t.integer(key, none, none);
}

// Each value's range depends only on values read before it, so that fuzz input bytes decode to a
// case almost always (harness/case_text.h). The limits' next_n and max_requests come first, then
// each step's batch, then the limits' table_width and max_tokens (which hold every step's tokens),
// then the rest of each step.
MetadataLimits request_limits_from_text(const CaseText& t) {
  MetadataLimits l;
  l.next_n = static_cast<int32_t>(t.integer("next_n", 1, 64));
  l.max_requests = t.integer("max_requests", 1, 65536);  // x next_n <= 2^22 context_lens elements
  return l;
}

// A uniform batch (every decode length equal, none 0, at least one request): how many requests and
// their length are drawn when drawing; otherwise read from the text (refused unless uniform), their
// bytes recorded when encoding. Then the list is read as exactly that many values of that length.
std::vector<int32_t> uniform_decode_lens(const CaseText& t, const std::string& key, const MetadataLimits& l) {
  int64_t B = 1, d = 1;
  if (t.drawing()) {
    B = t.code(0, 1, l.max_requests);
    d = t.code(0, 1, l.next_n);
  } else {
    const std::vector<std::string>& words = t.words(key, static_cast<size_t>(l.max_requests));
    std::vector<long long> v;
    for (const std::string& w : words) v.push_back(std::strtoll(w.c_str(), nullptr, 0));
    MLA_REQUIRE(!v.empty() && v[0] > 0 && std::count(v.begin(), v.end(), v[0]) == static_cast<int64_t>(v.size()),
                "case: fast_path_equals_general_path needs a uniform batch (every decode length equal, none 0)");
    MLA_REQUIRE(v[0] <= l.next_n, "case: '", key, "' is ", v[0], " for every request, more than next_n ", l.next_n);
    B = static_cast<int64_t>(v.size()), d = v[0];
    t.code(B, 1, l.max_requests);
    t.code(d, 1, l.next_n);
  }
  return t.list_exactly<int32_t>(key, d, d, static_cast<size_t>(B));
}

void batch_from_text(const CaseText& t, const std::string& p, const MetadataLimits& l, MetadataStep& c,
                     bool uniform = false) {
  c.decode_lens = uniform ? uniform_decode_lens(t, p + "decode_lens", l)
                          : t.list<int32_t>(p + "decode_lens", 0, l.next_n, static_cast<size_t>(l.max_requests));
  c.seq_lens = t.list_exactly<int32_t>(p + "seq_lens", 0, kInt32Max, c.decode_lens.size());  // one per request
}

// table_width and max_tokens, once the steps' batches are read: max_tokens x table_width block-table
// elements fit kMaxElements, and max_tokens holds every step's tokens.
void token_limits_from_text(const CaseText& t, const std::vector<MetadataStep>& steps, MetadataLimits& l) {
  int64_t most = 1;
  for (const MetadataStep& c : steps) most = std::max(most, c.T());
  l.block_table_width = t.integer("table_width", 1, std::min<int64_t>(65536, kMaxElements / most));
  l.max_batched_tokens = t.integer("max_tokens", most, kMaxElements / l.block_table_width);
}

void step_from_text(const CaseText& t, const std::string& p, const MetadataLimits& l, MetadataStep& c) {
  c.layout = t.choice(p + "layout", {"flattened", "native"}) == 0 ? MetadataLayout::kFlattened : MetadataLayout::kNative;
  c.path = t.choice(p + "path", {"auto", "general"}) == 0 ? MetadataPathChoice::kAuto : MetadataPathChoice::kGeneral;
  c.table = t.choice(p + "table", {"distinct", "paged"}) == 0 ? MetadataTable::kDistinct : MetadataTable::kPaged;
  // A case file's line holds at most 65536 values: a paged table's B x table_cols among them.
  const int64_t most_cols = c.table == MetadataTable::kPaged && c.B() > 0 ? 65536 / c.B() : l.block_table_width;
  c.W = t.integer(p + "table_cols", 1, std::min(l.block_table_width, most_cols));
  c.table_row_pad = t.integer(p + "table_row_pad", 0, kMaxPad);
  c.table_offset = t.integer(p + "table_offset", 0, kMaxPad);
  c.seq_lens_offset = t.integer(p + "seq_lens_offset", 0, kMaxPad);
  c.decode_lens_offset = t.integer(p + "decode_lens_offset", 0, kMaxPad);
  c.qsl_offset = t.integer(p + "qsl_offset", 0, kMaxPad);
  if (c.table == MetadataTable::kDistinct) {
    c.table_base = static_cast<int32_t>(t.integer(p + "table_base", 0, 1000000000));
  } else {
    c.page_size = t.integer(p + "page_size", 1, 1024);
    c.paged_table = t.list_exactly<int32_t>(p + "block_table", -kInt32Max - 1, kInt32Max, static_cast<size_t>(c.B() * c.W));
  }
  // -1 (none), or at least the step's tokens; graph padding pads flattened rows only.
  const bool flat = c.layout == MetadataLayout::kFlattened;
  c.num_padded_tokens = none_or_integer(t, p + "num_padded_tokens", -1, c.T(), flat ? l.max_batched_tokens : c.T());
  c.give_num_decode_tokens = t.flag(p + "num_decode_tokens");
  c.give_host_seq_lens = t.flag(p + "host_seq_lens");
  // The flattened layout's general path reads query_start_loc.
  c.give_query_start_loc = t.integer(p + "query_start_loc", flat ? 1 : 0, 1) != 0;
  read_schedule(c, t, p);
}

}  // namespace

void decode_metadata_to_text(const MetadataLimits& l, const MetadataStep& c, CaseText& out) {
  limits_to_text(l, out);
  step_to_text(c, "", out);
}

namespace {

std::pair<MetadataLimits, MetadataStep> one_step_from_text(const CaseText& t, bool uniform) {
  MetadataLimits l = request_limits_from_text(t);
  std::vector<MetadataStep> steps(1);
  batch_from_text(t, "", l, steps[0], uniform);
  token_limits_from_text(t, steps, l);
  step_from_text(t, "", l, steps[0]);
  return {l, steps[0]};
}

}  // namespace

std::pair<MetadataLimits, MetadataStep> decode_metadata_from_text(const CaseText& t) {
  return one_step_from_text(t, false);
}

std::pair<MetadataLimits, MetadataStep> decode_metadata_uniform_from_text(const CaseText& t) {
  return one_step_from_text(t, true);
}

void decode_metadata_steps_to_text(const MetadataLimits& l, const std::vector<MetadataStep>& steps, CaseText& out) {
  limits_to_text(l, out);
  out.set("steps", static_cast<int64_t>(steps.size()));
  for (size_t i = 0; i < steps.size(); ++i) step_to_text(steps[i], "s" + std::to_string(i) + ".", out);
}

std::pair<MetadataLimits, std::vector<MetadataStep>> decode_metadata_steps_from_text(const CaseText& t) {
  MetadataLimits l = request_limits_from_text(t);
  std::vector<MetadataStep> steps(static_cast<size_t>(t.integer("steps", 1, 64)));
  for (size_t i = 0; i < steps.size(); ++i) batch_from_text(t, "s" + std::to_string(i) + ".", l, steps[i]);
  token_limits_from_text(t, steps, l);
  for (size_t i = 0; i < steps.size(); ++i) step_from_text(t, "s" + std::to_string(i) + ".", l, steps[i]);
  return {l, steps};
}

namespace gen {
namespace {

// A length for a request with d tokens: short (the first tokens' ctx clamps at 0), around d (the
// clamp's edge: L = d - 1, d, d + 1), moderate, or near INT32_MAX (no int32 arithmetic may wrap).
rc::Gen<int32_t> seq_len_for(int32_t d) {
  return rc::gen::weightedOneOf<int32_t>(
      {{3, rc::gen::inRange(0, 8)},
       {3, rc::gen::map(rc::gen::inRange(-2, 2), [d](int32_t x) { return std::max(0, d + x); })},
       {3, rc::gen::inRange(0, 400)},
       {1, rc::gen::map(rc::gen::inRange(0, 8), [](int32_t x) { return static_cast<int32_t>(kInt32Max - x); })}});
}

}  // namespace

rc::Gen<MetadataLimits> metadata_limits() {
  return rc::gen::exec([] {
    MetadataLimits l;
    l.next_n = *rc::gen::inRange(1, 9);
    // One time in eight a native step can outgrow one 256-thread block.
    l.max_requests = *rc::gen::inRange(0, 8) == 7 ? *rc::gen::inRange(24, 49) : *rc::gen::inRange(1, 17);
    // Past 32 (64) columns a lane of a 32 (64)-lane warp copies several; one time in eight past 256,
    // where it copies several 16-byte quads.
    l.block_table_width = *rc::gen::inRange(0, 8) == 7 ? *rc::gen::inRange(60, 300) : *rc::gen::inRange(1, 41);
    if (*rc::gen::arbitrary<bool>()) l.block_table_width = (l.block_table_width + 3) / 4 * 4;  // 16-byte rows
    // Usually room for any batch; one time in four fewer tokens than requests x next_n (the
    // engine's token budget binds, and a batch fills the buffers to their last row).
    l.max_batched_tokens = l.max_requests * l.next_n + *rc::gen::inRange(0, 4);
    if (*rc::gen::inRange(0, 4) == 3) l.max_batched_tokens = *rc::gen::inRange<int64_t>(1, l.max_batched_tokens + 1);
    return l;
  });
}

rc::Gen<MetadataStep> metadata_step(const MetadataLimits& l, MetadataMix mix) {
  return rc::gen::exec([l, mix] {
    MetadataStep c;
    const bool uniform = mix == MetadataMix::kUniform;
    const int64_t B = *rc::gen::inRange<int64_t>(uniform ? 1 : 0, l.max_requests + 1);
    const int kind = uniform ? 0 : *rc::gen::inRange(0, 3);  // uniform, non-uniform without padding, any
    const int32_t d0 = *rc::gen::inRange<int32_t>(1, static_cast<int32_t>(std::min<int64_t>(l.next_n, l.max_batched_tokens)) + 1);
    for (int64_t i = 0; i < B; ++i) {
      c.decode_lens.push_back(kind == 0 ? d0 : *rc::gen::inRange(kind == 1 ? 1 : 0, l.next_n + 1));
    }
    while (c.T() > l.max_batched_tokens) c.decode_lens.pop_back();  // the token budget binds
    for (int32_t d : c.decode_lens) c.seq_lens.push_back(d == 0 && *rc::gen::arbitrary<bool>() ? 0 : *seq_len_for(d));
    c.layout = *rc::gen::arbitrary<bool>() ? MetadataLayout::kFlattened : MetadataLayout::kNative;
    c.path = *rc::gen::inRange(0, 4) == 0 ? MetadataPathChoice::kGeneral : MetadataPathChoice::kAuto;
    c.W = *rc::gen::inRange<int64_t>(1, l.block_table_width + 1);
    c.table_row_pad = *rc::gen::inRange(0, 6);
    c.table_offset = *rc::gen::inRange(0, 6);
    if (*rc::gen::arbitrary<bool>()) {  // 16-byte aligned source rows: the quad copy
      c.table_row_pad = (c.W + c.table_row_pad + 3) / 4 * 4 - c.W;
      c.table_offset = c.table_offset / 4 * 4;
    }
    c.seq_lens_offset = *rc::gen::inRange(0, 4);
    c.decode_lens_offset = *rc::gen::inRange(0, 4);
    c.qsl_offset = *rc::gen::inRange(0, 4);
    if (*rc::gen::arbitrary<bool>()) {
      c.table = MetadataTable::kDistinct;
      c.table_base = *rc::gen::inRange(0, 1000000);
    } else {
      c.table = MetadataTable::kPaged;
      c.page_size = *rc::gen::element<int64_t>(1, 2, 53, 61, 64, 69);
      std::vector<int64_t> needed;
      for (int32_t L : c.seq_lens) needed.push_back(std::min<int64_t>(c.W, (int64_t{L} + c.page_size - 1) / c.page_size));
      c.paged_table = (*paged_block_table(needed, c.W)).table;
    }
    const int64_t T = c.T();
    if (c.layout == MetadataLayout::kFlattened) {
      const int g = *rc::gen::inRange(0, 6);  // graph padding up to the last row, or exactly T, or none
      c.num_padded_tokens = g < 2 ? *rc::gen::inRange<int64_t>(T, l.max_batched_tokens + 1)
                            : g == 2 ? l.max_batched_tokens : g == 3 ? T : -1;
    } else {
      c.num_padded_tokens = *rc::gen::inRange(0, 8) == 0 ? T : -1;
      c.give_query_start_loc = *rc::gen::arbitrary<bool>();
    }
    c.give_num_decode_tokens = *rc::gen::inRange(0, 4) != 0;
    c.give_host_seq_lens = *rc::gen::arbitrary<bool>();
    draw_schedule(c);
    return c;
  });
}

rc::Gen<std::vector<MetadataStep>> metadata_steps(const MetadataLimits& l) {
  return rc::gen::exec([l] {
    auto steps = *rc::gen::container<std::vector<MetadataStep>>(*rc::gen::inRange(2, 6), metadata_step(l));
    if (*rc::gen::arbitrary<bool>()) {
      std::stable_sort(steps.begin(), steps.end(), [](const MetadataStep& a, const MetadataStep& b) { return a.T() > b.T(); });
    }
    return steps;
  });
}

}  // namespace gen
}  // namespace mlacheck
