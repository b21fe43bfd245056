// RapidCheck generators for decode_metadata (docs/ops.md 1): builder limits and decode steps under them
// (uniform and non-uniform decode lengths, padding requests, graph padding, both layouts and both
// paths, lengths straddling d and near INT32_MAX, offset inputs, row-padded block tables of distinct
// or paged entries), and their text form (harness/case_text.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <rapidcheck.h>

#include "kernels/metadata_builder.h"
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

// The limits and the step as case-text keys (limits first), appended to out after its header.
void decode_metadata_to_text(const kernels::MetadataLimits& l, const MetadataStep& c, CaseText& out);
// The inverse. Every value is checked against the limits the builder accepts (decode lengths in
// [0, next_n], B <= max_requests, W <= table_width, T + graph padding <= max_tokens, padding only in
// the flattened layout, ...) and against what staging needs (one seq_len per request, a paged table
// of B x W entries, offsets and pads <= 64, buffers of at most 2^23 elements): a hand-edited case
// that breaks one throws mlacheck::Error naming the key.
// Each value's range depends only on values read before it, so fuzz input bytes decode to a case
// (harness/case_text.h).
std::pair<kernels::MetadataLimits, MetadataStep> decode_metadata_from_text(const CaseText& t);
// The same, for a property that takes uniform batches only (MetadataStep::uniform): a batch that
// is not is refused, and fuzz input bytes decode to uniform batches.
std::pair<kernels::MetadataLimits, MetadataStep> decode_metadata_uniform_from_text(const CaseText& t);

// A sequence of steps on one builder: the limits, "steps N", then step i's keys prefixed "s<i>.".
void decode_metadata_steps_to_text(const kernels::MetadataLimits& l, const std::vector<MetadataStep>& steps,
                                   CaseText& out);
std::pair<kernels::MetadataLimits, std::vector<MetadataStep>> decode_metadata_steps_from_text(const CaseText& t);

namespace gen {

// Which batches metadata_step makes.
enum class MetadataMix { kAny, kUniform };

// Limits small enough for the host backend (up to 16 requests of up to 8 tokens, up to 40 block-table
// columns, a multiple of 4 half the time), one time in eight more requests than a 256-thread block
// covers in the native layout, and one time in eight 60 to 299 columns (several per lane).
rc::Gen<kernels::MetadataLimits> metadata_limits();
// A step under l: uniform, non-uniform without padding, or with padding requests; lengths short
// (ctx clamps at 0), around d, long and near INT32_MAX; inputs offset, table rows padded (16-byte
// aligned half the time); graph padding; either layout and path; optional host copies.
rc::Gen<MetadataStep> metadata_step(const kernels::MetadataLimits& l, MetadataMix mix = MetadataMix::kAny);
// 2 to 5 steps under l, sorted by shrinking token count half the time (stale rows show then).
rc::Gen<std::vector<MetadataStep>> metadata_steps(const kernels::MetadataLimits& l);

}  // namespace gen
}  // namespace mlacheck
