// Cases of decode_metadata: their printers, readers of the odd fields and the generator's own draws
// (properties/decode_metadata_gen.h).
#include "properties/decode_metadata_gen.h"

#include <cstdlib>

#include "core/error.h"
#include "properties/block_table_gen.h"

namespace mlacheck {

using kernels::MetadataLayout;
using kernels::MetadataLimits;
using kernels::MetadataPathChoice;

namespace {
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
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

std::vector<int32_t> read_uniform_decode_lens(const CaseText& t, const std::string& key, const MetadataLimits& l) {
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

int64_t read_none_or_integer(const CaseText& t, const std::string& key, int64_t none, int64_t lo, int64_t hi) {
  bool given = false;
  if (t.drawing()) {
    given = t.code(0, 0, 1) == 1;
  } else {
    given = t.word(key) != std::to_string(none);
    t.code(given ? 1 : 0, 0, 1);
  }
  return given ? t.integer(key, lo, hi) : t.integer(key, none, none);
}

void decode_metadata_to_text(const MetadataLimits& l, const MetadataStep& c, CaseText& out) {
  write_case(MetadataCase{l, {c}}, out, MetadataFamily::kOneStep);
}

std::pair<MetadataLimits, MetadataStep> decode_metadata_from_text(const CaseText& t) {
  MetadataCase c = read_case<MetadataCase>(t, MetadataFamily::kOneStep);
  return {c.limits, c.steps[0]};
}

std::pair<MetadataLimits, MetadataStep> decode_metadata_uniform_from_text(const CaseText& t) {
  MetadataCase c = read_case<MetadataCase>(t, MetadataFamily::kUniform);
  return {c.limits, c.steps[0]};
}

void decode_metadata_steps_to_text(const MetadataLimits& l, const std::vector<MetadataStep>& steps, CaseText& out) {
  write_case(MetadataCase{l, steps}, out, MetadataFamily::kSteps);
}

std::pair<MetadataLimits, std::vector<MetadataStep>> decode_metadata_steps_from_text(const CaseText& t) {
  MetadataCase c = read_case<MetadataCase>(t, MetadataFamily::kSteps);
  return {c.limits, c.steps};
}

// One time in eight a native step can outgrow one 256-thread block.
int64_t draw_metadata_max_requests() {
  return *rc::gen::inRange(0, 8) == 7 ? *rc::gen::inRange<int64_t>(24, 49) : *rc::gen::inRange<int64_t>(1, 17);
}

// Past 32 (64) columns a lane of a 32 (64)-lane warp copies several; one time in eight past 256,
// where it copies several 16-byte quads. Half the time 16-byte rows.
int64_t draw_metadata_table_width() {
  const int64_t w = *rc::gen::inRange(0, 8) == 7 ? *rc::gen::inRange<int64_t>(60, 300) : *rc::gen::inRange<int64_t>(1, 41);
  return *rc::gen::arbitrary<bool>() ? (w + 3) / 4 * 4 : w;
}

// Usually room for any batch of the limits; one time in four exactly the most tokens a step has
// (the engine's token budget binds, and the batch fills the buffers to their last row).
int64_t draw_metadata_max_tokens(const MetadataLimits& l, int64_t most_tokens) {
  if (*rc::gen::inRange(0, 4) == 3) return most_tokens;
  return l.max_requests * l.next_n + *rc::gen::inRange<int64_t>(0, 4);
}

// Uniform, non-uniform without padding, or any (padding requests among them), as many requests as
// max_tokens holds.
std::vector<int32_t> draw_metadata_decode_lens(const MetadataLimits& l, bool uniform, int64_t max_tokens) {
  const int64_t B = *rc::gen::inRange<int64_t>(uniform ? 1 : 0, l.max_requests + 1);
  const int kind = uniform ? 0 : *rc::gen::inRange(0, 3);
  const int32_t d0 = *rc::gen::inRange<int32_t>(1, static_cast<int32_t>(std::min<int64_t>(l.next_n, max_tokens)) + 1);
  std::vector<int32_t> lens;
  int64_t T = 0;
  for (int64_t i = 0; i < B; ++i) {
    const int32_t d = kind == 0 ? d0 : *rc::gen::inRange(kind == 1 ? 1 : 0, l.next_n + 1);
    if (T + d > max_tokens) break;  // the token budget binds
    lens.push_back(d);
    T += d;
  }
  return lens;
}

// A length for a request with d tokens: short (the first tokens' ctx clamps at 0), around d (the
// clamp's edge: L = d - 1, d, d + 1), moderate, or near INT32_MAX (no int32 arithmetic may wrap); a
// padding request's length is 0 half the time.
std::vector<int32_t> draw_metadata_seq_lens(const MetadataStep& c) {
  std::vector<int32_t> lens;
  for (int32_t d : c.decode_lens) {
    if (d == 0 && *rc::gen::arbitrary<bool>()) {
      lens.push_back(0);
      continue;
    }
    lens.push_back(*rc::gen::weightedOneOf<int32_t>(
        {{3, rc::gen::inRange(0, 8)},
         {3, rc::gen::map(rc::gen::inRange(-2, 2), [d](int32_t x) { return std::max(0, d + x); })},
         {3, rc::gen::inRange(0, 400)},
         {1, rc::gen::map(rc::gen::inRange(0, 8), [](int32_t x) { return static_cast<int32_t>(kInt32Max - x); })}}));
  }
  return lens;
}

MetadataPathChoice draw_metadata_path() {
  return *rc::gen::inRange(0, 4) == 0 ? MetadataPathChoice::kGeneral : MetadataPathChoice::kAuto;
}

// Shuffled, shared pages for the columns each request reads, garbage past them (block_table_gen.h).
std::vector<int32_t> draw_metadata_paged_table(const MetadataStep& c) {
  std::vector<int64_t> needed;
  for (int32_t L : c.seq_lens) needed.push_back(std::min<int64_t>(c.W, (int64_t{L} + c.page_size - 1) / c.page_size));
  return (*gen::paged_block_table(needed, c.W)).table;
}

// Flattened: graph padding up to the last row, exactly to it, exactly T, or none. Native: T one
// time in eight (no padding), else none.
int64_t draw_metadata_num_padded_tokens(const MetadataStep& c, const MetadataLimits& l) {
  const int64_t T = c.T();
  if (c.layout == MetadataLayout::kNative) return *rc::gen::inRange(0, 8) == 0 ? T : -1;
  const int g = *rc::gen::inRange(0, 6);
  return g < 2 ? *rc::gen::inRange<int64_t>(T, l.max_batched_tokens + 1) : g == 2 ? l.max_batched_tokens : g == 3 ? T : -1;
}

void draw_metadata_step_order(std::vector<MetadataStep>& steps) {
  if (*rc::gen::arbitrary<bool>()) {
    std::stable_sort(steps.begin(), steps.end(), [](const MetadataStep& a, const MetadataStep& b) { return a.T() > b.T(); });
  }
}

namespace gen {

rc::Gen<MetadataLimits> metadata_limits() {
  return rc::gen::map(draw_case<MetadataCase>(2, MetadataFamily::kOneStep), [](const MetadataCase& c) { return c.limits; });
}

rc::Gen<MetadataStep> metadata_step(const MetadataLimits& l, MetadataMix mix) {
  return rc::gen::exec([l, mix] {
    MetadataStep c;
    CaseDrawer d;
    batch_fields(d, c, l, mix == MetadataMix::kUniform, l.max_batched_tokens);
    step_fields(d, c, l);
    return c;
  });
}

rc::Gen<std::vector<MetadataStep>> metadata_steps(const MetadataLimits& l) {
  return rc::gen::exec([l] {
    auto steps = *rc::gen::container<std::vector<MetadataStep>>(*rc::gen::inRange(2, 6), metadata_step(l));
    draw_metadata_step_order(steps);
    return steps;
  });
}

}  // namespace gen
}  // namespace mlacheck
