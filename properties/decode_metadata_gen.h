// Cases of decode_metadata (docs/ops.md 1): builder limits and decode steps under them (uniform and
// non-uniform decode lengths, padding requests, graph padding, both layouts and both paths, lengths
// straddling d and near INT32_MAX, offset inputs, row-padded block tables of distinct or paged
// entries). The case is described once, by its schema (fields() below, harness/case_schema.h): the
// generators, the case-file readers (also the fuzz decoders) and the writers all follow from it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <rapidcheck.h>

#include "kernels/metadata_builder.h"
#include "harness/case_schema.h"
#include "harness/case_text.h"
#include "harness/schedule.h"

namespace mlacheck {
namespace kernels {
// RapidCheck's printer for limits (found by argument-dependent lookup).
void showValue(const MetadataLimits& l, std::ostream& os);
}  // namespace kernels

// What the block-table entries are: distinct (entry (b, w) = base + 1000 b + w, so a row copied
// from the wrong request or column shows) or a paged table (properties/block_table_gen.h: shuffled
// pages, some shared, garbage past what a request needs; the builder copies it all the same).
enum class MetadataTable { kDistinct, kPaged };

// One step's decode batch under a builder's limits, with the layout of its device inputs.
struct MetadataStep : CaseSchedule {  // seed: the host schedule's
  std::vector<int32_t> seq_lens, decode_lens;  // [B]; d = 0 is a padding request
  kernels::MetadataLayout layout = kernels::MetadataLayout::kFlattened;
  kernels::MetadataPathChoice path = kernels::MetadataPathChoice::kAuto;
  int64_t W = 1;                                   // block-table columns
  int64_t table_row_pad = 0, table_offset = 0;     // elements: row stride W + pad, view offset
  int64_t seq_lens_offset = 0, decode_lens_offset = 0, qsl_offset = 0;  // elements
  MetadataTable table = MetadataTable::kDistinct;
  int32_t table_base = 0;                          // kDistinct
  int64_t page_size = 64;                          // kPaged: pages of the table's cache
  std::vector<int32_t> paged_table;                // kPaged: [B, W] row-major
  int64_t num_padded_tokens = -1;                  // MetadataBatch::num_padded_tokens (-1 or >= T)
  bool give_num_decode_tokens = true;              // else -1: the builder takes the sum
  bool give_host_seq_lens = true;                  // the optional host copy of seq_lens
  bool give_query_start_loc = true;                // native may omit it (its kernel never reads it)

  int64_t B() const { return static_cast<int64_t>(decode_lens.size()); }
  int64_t T() const { return std::accumulate(decode_lens.begin(), decode_lens.end(), int64_t{0}); }
  int32_t next_n_live() const { return decode_lens.empty() ? 0 : *std::max_element(decode_lens.begin(), decode_lens.end()); }
  // The batches the fused kernel may take (docs/ops.md 1): every d equal, none 0, at least one request.
  bool uniform() const {
    return !decode_lens.empty() &&
           std::all_of(decode_lens.begin(), decode_lens.end(), [&](int32_t d) { return d == decode_lens[0] && d > 0; });
  }
  // The rows the flattened views cover: num_padded_tokens, or T.
  int64_t rows() const { return num_padded_tokens < 0 ? T() : num_padded_tokens; }
  // query_start_loc [B + 1]: prefix sums of decode_lens.
  std::vector<int32_t> query_start_loc() const;
  // The block table [B, W] row-major: distinct entries or the paged table.
  std::vector<int32_t> block_table() const;
  friend void showValue(const MetadataStep& c, std::ostream& os);
};

// A case file's limits and steps: one step, or a sequence of steps on one builder.
struct MetadataCase {
  kernels::MetadataLimits limits;
  std::vector<MetadataStep> steps;
};

// Which cases a property reads: one step of any batch, one step of a uniform batch (the fast path's
// property: a batch that is not uniform is refused, fuzz bytes decode to uniform batches), or a
// sequence ("steps N", then step i's keys prefixed "s<i>.").
enum class MetadataFamily { kOneStep, kUniform, kSteps };

// Staging's bounds: a builder buffer of at most 2^23 elements (a hand-edited case stays small),
// offsets and row pads of at most 64 elements.
constexpr int64_t kMetadataMaxElements = int64_t{1} << 23;
constexpr int64_t kMetadataMaxPad = 64;

// The readers of the fields no kind of field says (decode_metadata_gen.cpp), each reading key of t:
// - a uniform batch's decode lengths (every one equal, none 0, at least one request): how many and
//   their length are drawn as two codes when fuzzing, read from the text otherwise (refused unless
//   uniform) with their bytes recorded when encoding;
// - `none`, or a value in [lo, hi] (none < lo): whether it is none is a code of its own.
std::vector<int32_t> read_uniform_decode_lens(const CaseText& t, const std::string& key,
                                              const kernels::MetadataLimits& l);
int64_t read_none_or_integer(const CaseText& t, const std::string& key, int64_t none, int64_t lo, int64_t hi);

// The generator's own draws (decode_metadata_gen.cpp).
int64_t draw_metadata_max_requests();
int64_t draw_metadata_table_width();
int64_t draw_metadata_max_tokens(const kernels::MetadataLimits& l, int64_t most_tokens);
std::vector<int32_t> draw_metadata_decode_lens(const kernels::MetadataLimits& l, bool uniform, int64_t max_tokens);
std::vector<int32_t> draw_metadata_seq_lens(const MetadataStep& c);
kernels::MetadataPathChoice draw_metadata_path();
std::vector<int32_t> draw_metadata_paged_table(const MetadataStep& c);
int64_t draw_metadata_num_padded_tokens(const MetadataStep& c, const kernels::MetadataLimits& l);
// Half the time, the steps ordered by shrinking token count (stale rows show then).
void draw_metadata_step_order(std::vector<MetadataStep>& steps);

// A step's batch under the limits' next_n and max_requests: decode lengths (uniform ones only when
// uniform) and one seq_len per request. Drawn with at most max_tokens tokens.
template <class V>
void batch_fields(V& v, MetadataStep& c, const kernels::MetadataLimits& l, bool uniform, int64_t max_tokens) {
  if (uniform) {
    v.bespoke(
        "decode_lens", [&](const CaseText& t, const std::string& k) { c.decode_lens = read_uniform_decode_lens(t, k, l); },
        [&](CaseText& out, const std::string& k) { out.set_list(k, c.decode_lens); },
        [&] { c.decode_lens = draw_metadata_decode_lens(l, true, max_tokens); });
  } else {
    v.list("decode_lens", c.decode_lens, Length{0, l.max_requests}, 0, l.next_n,
           [&] { return draw_metadata_decode_lens(l, false, max_tokens); });
  }
  v.list("seq_lens", c.seq_lens, c.B(), 0, std::numeric_limits<int32_t>::max(), [&] { return draw_metadata_seq_lens(c); });
}

// The rest of a step, under the whole limits: its layout and path, its block table and the layout
// of its device inputs, graph padding and the optional inputs.
template <class V>
void step_fields(V& v, MetadataStep& c, const kernels::MetadataLimits& l) {
  using kernels::MetadataLayout;
  using kernels::MetadataPathChoice;
  v.choice("layout", c.layout, {"flattened", "native"});
  const bool flat = c.layout == MetadataLayout::kFlattened;
  v.choice("path", c.path, {"auto", "general"}, draw_metadata_path);
  v.choice("table", c.table, {"distinct", "paged"});
  // A case file's line holds at most 65536 values: a paged table's B x table_cols among them.
  const bool paged = c.table == MetadataTable::kPaged;
  v.integer("table_cols", c.W, 1, std::min(l.block_table_width, paged && c.B() > 0 ? 65536 / c.B() : l.block_table_width));
  // Half the time 16-byte aligned source rows (the quad copy): the row stride a multiple of 4, the
  // offset too.
  bool aligned = false;
  v.integer("table_row_pad", c.table_row_pad, 0, kMetadataMaxPad, [&] {
    aligned = *rc::gen::arbitrary<bool>();
    const int64_t pad = *rc::gen::inRange<int64_t>(0, 6);
    return aligned ? (c.W + pad + 3) / 4 * 4 - c.W : pad;
  });
  v.integer("table_offset", c.table_offset, 0, kMetadataMaxPad, [&] {
    const int64_t offset = *rc::gen::inRange<int64_t>(0, 6);
    return aligned ? offset / 4 * 4 : offset;
  });
  v.integer("seq_lens_offset", c.seq_lens_offset, 0, kMetadataMaxPad, UpTo{3});
  v.integer("decode_lens_offset", c.decode_lens_offset, 0, kMetadataMaxPad, UpTo{3});
  v.integer("qsl_offset", c.qsl_offset, 0, kMetadataMaxPad, UpTo{3});
  if (!paged) {
    v.integer("table_base", c.table_base, 0, 1000000000, UpTo{999999});
  } else {
    v.integer("page_size", c.page_size, 1, 1024, [] { return *rc::gen::element<int64_t>(1, 2, 53, 61, 64, 69); });
    v.list("block_table", c.paged_table, c.B() * c.W, std::numeric_limits<int32_t>::min(),
           std::numeric_limits<int32_t>::max(), [&] { return draw_metadata_paged_table(c); });
  }
  // -1 (none), or at least the step's tokens; graph padding pads flattened rows only.
  v.bespoke(
      "num_padded_tokens",
      [&](const CaseText& t, const std::string& k) {
        c.num_padded_tokens = read_none_or_integer(t, k, -1, c.T(), flat ? l.max_batched_tokens : c.T());
      },
      [&](CaseText& out, const std::string& k) { out.set(k, c.num_padded_tokens); },
      [&] { c.num_padded_tokens = draw_metadata_num_padded_tokens(c, l); });
  v.integer("num_decode_tokens", c.give_num_decode_tokens, 0, 1, Favor{1});
  v.flag("host_seq_lens", c.give_host_seq_lens);
  // The flattened layout's general path reads query_start_loc.
  v.integer("query_start_loc", c.give_query_start_loc, flat ? 1 : 0, 1);
  v.schedule(c);
}

// The schema of a case (harness/case_schema.h). Each range depends only on the fields before it,
// so fuzz bytes decode to a case: the limits' next_n and max_requests, then every step's batch, then
// the limits' table_width and max_tokens (max_tokens x table_width block-table elements within
// 2^23, max_tokens holding every step's tokens), then the rest of each step. A drawn case draws its
// limits' max_tokens after the batches: room for any batch of the limits, or (one time in four)
// exactly the most tokens a step has, which fills the buffers to their last row.
template <class V>
void fields(V& v, MetadataCase& c, MetadataFamily f) {
  kernels::MetadataLimits& l = c.limits;
  v.integer("next_n", l.next_n, 1, 64, UpTo{8});
  v.integer("max_requests", l.max_requests, 1, 65536, draw_metadata_max_requests);  // x next_n <= 2^22
  int64_t n = f == MetadataFamily::kSteps ? static_cast<int64_t>(c.steps.size()) : 1;
  if (f == MetadataFamily::kSteps) v.integer("steps", n, 1, 64, [] { return *rc::gen::inRange<int64_t>(2, 6); });
  c.steps.resize(static_cast<size_t>(n));
  const auto each_step = [&](auto&& step_part) {
    for (size_t i = 0; i < c.steps.size(); ++i) {
      v.prefixed(f == MetadataFamily::kSteps ? "s" + std::to_string(i) + "." : "", [&] { step_part(c.steps[i]); });
    }
  };
  each_step([&](MetadataStep& s) {
    batch_fields(v, s, l, f == MetadataFamily::kUniform, l.max_requests * int64_t{l.next_n});
  });
  int64_t most = 1;
  for (const MetadataStep& s : c.steps) most = std::max(most, s.T());
  v.integer("table_width", l.block_table_width, 1, std::min<int64_t>(65536, kMetadataMaxElements / most), [&] {
    if (f == MetadataFamily::kSteps) draw_metadata_step_order(c.steps);  // the batches are all drawn by now
    return draw_metadata_table_width();
  });
  v.integer("max_tokens", l.max_batched_tokens, most, kMetadataMaxElements / l.block_table_width,
            [&] { return draw_metadata_max_tokens(l, most); });
  each_step([&](MetadataStep& s) { step_fields(v, s, l); });
}

// The limits and the step as case-text keys, appended to out after its header.
void decode_metadata_to_text(const kernels::MetadataLimits& l, const MetadataStep& c, CaseText& out);
// The inverse. Every value is checked against the limits the builder accepts (decode lengths in
// [0, next_n], B <= max_requests, W <= table_width, T + graph padding <= max_tokens, padding only in
// the flattened layout, ...) and against what staging needs (one seq_len per request, a paged table
// of B x W entries, offsets and pads <= 64, buffers of at most 2^23 elements): a hand-edited case
// that breaks one throws mlacheck::Error naming the key.
std::pair<kernels::MetadataLimits, MetadataStep> decode_metadata_from_text(const CaseText& t);
// The same, for a property that takes uniform batches only (MetadataFamily::kUniform).
std::pair<kernels::MetadataLimits, MetadataStep> decode_metadata_uniform_from_text(const CaseText& t);

// A sequence of steps on one builder (MetadataFamily::kSteps).
void decode_metadata_steps_to_text(const kernels::MetadataLimits& l, const std::vector<MetadataStep>& steps,
                                   CaseText& out);
std::pair<kernels::MetadataLimits, std::vector<MetadataStep>> decode_metadata_steps_from_text(const CaseText& t);

namespace gen {

// Which batches metadata_step makes.
enum class MetadataMix { kAny, kUniform };

// Limits small enough for the host backend (up to 16 requests of up to 8 tokens, up to 40 block-table
// columns, a multiple of 4 half the time), one time in eight more requests than a 256-thread block
// covers in the native layout, and one time in eight 60 to 299 columns (several per lane): a drawn
// one-step case's limits.
rc::Gen<kernels::MetadataLimits> metadata_limits();
// A step under l, drawn by the schema's step fields: uniform, non-uniform without padding, or with
// padding requests (as many requests as l's token budget holds); lengths short (ctx clamps at 0),
// around d, long and near INT32_MAX; inputs offset, table rows padded (16-byte aligned half the
// time); graph padding; either layout and path; optional host copies.
rc::Gen<MetadataStep> metadata_step(const kernels::MetadataLimits& l, MetadataMix mix = MetadataMix::kAny);
// 2 to 5 steps under l, sorted by shrinking token count half the time (stale rows show then).
rc::Gen<std::vector<MetadataStep>> metadata_steps(const kernels::MetadataLimits& l);

}  // namespace gen
}  // namespace mlacheck
