// Cases of the indexer decode step (docs/ops.md 6): an engine (the step's limits and the cache's page
// size, fixed for a run) and batches under it: uniform and non-uniform decode lengths, padding
// requests, graph padding, prefill rows after the token rows of the shared top-k buffer, both
// metadata layouts and paths, lengths straddling k, k from 1 to the 2048 fast path. The case is
// described once, by its schema (fields() below, harness/case_schema.h): the generators, the
// case-file reader (also the fuzz decoder) and the writer all follow from it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <rapidcheck.h>

#include "kernels/indexer_decode_step.h"
#include "kernels/topk.h"
#include "harness/case_schema.h"
#include "harness/case_text.h"
#include "harness/schedule.h"

namespace mlacheck {

// What an engine configures once: the step's limits and the cache's page size.
struct DecodeStepEngine {
  int32_t next_n = 1;
  int64_t H = 1, D = 16, k = 1, block_size = 64;
  int64_t max_requests = 1, max_tokens = 1, W = 1;
  int64_t max_len = 1;           // the longest L_b a batch may have
  int64_t max_context_len = 1;   // the step's logits columns (>= max_len)

  kernels::IndexerDecodeStepLimits limits() const {
    kernels::IndexerDecodeStepLimits l;
    l.metadata = {max_tokens, max_requests, next_n, W};
    l.heads = H, l.head_dim = D, l.topk = k, l.max_context_len = max_context_len;
    return l;
  }
  friend void showValue(const DecodeStepEngine& e, std::ostream& os) {
    os << "next_n " << e.next_n << " H " << e.H << " D " << e.D << " k " << e.k << " block_size " << e.block_size
       << " max_requests " << e.max_requests << " max_tokens " << e.max_tokens << " W " << e.W << " max_len "
       << e.max_len << " max_context_len " << e.max_context_len;
  }
};

// One step's batch under an engine.
struct DecodeStepCase : CaseSchedule {
  std::vector<int32_t> decode_lens, seq_lens;  // [B]; d = 0 is a padding request with L = 0
  kernels::MetadataLayout layout = kernels::MetadataLayout::kFlattened;
  kernels::MetadataPathChoice path = kernels::MetadataPathChoice::kAuto;
  int64_t graph_padding = 0;   // flattened: rows of q and metadata past the tokens
  int64_t prefill_rows = 0;    // rows of the shared top-k buffer past the tokens
  int64_t max_context_len = 1; // this step's logits columns
  int64_t table_row_pad = 0;
  bool pass_host_seq_lens = false, ue8m0 = false;

  int64_t B() const { return static_cast<int64_t>(decode_lens.size()); }
  int64_t T() const { return std::accumulate(decode_lens.begin(), decode_lens.end(), int64_t{0}); }
  bool uniform() const {
    return std::all_of(decode_lens.begin(), decode_lens.end(), [&](int32_t d) { return d == decode_lens[0] && d > 0; });
  }
  friend void showValue(const DecodeStepCase& c, std::ostream& os) {
    os << (c.layout == kernels::MetadataLayout::kFlattened ? "flattened" : "native")
       << (c.path == kernels::MetadataPathChoice::kGeneral ? " general" : " auto") << " decode_lens [";
    for (int32_t d : c.decode_lens) os << ' ' << d;
    os << " ] seq_lens [";
    for (int32_t l : c.seq_lens) os << ' ' << l;
    os << " ] graph_padding " << c.graph_padding << " prefill_rows " << c.prefill_rows << " max_context_len "
       << c.max_context_len << " table_row_pad " << c.table_row_pad << (c.pass_host_seq_lens ? " host seq_lens" : "")
       << (c.ue8m0 ? " ue8m0" : "") << " seed " << c.seed << " warp " << c.warp_size << (c.shuffled ? " shuffled" : "");
  }
};

// A case file's engine and the step's batch under it.
struct DecodeStepEngineCase {
  DecodeStepEngine engine;
  DecodeStepCase step;
};

// The widest head a query row of H heads may have: one row of H x D must fit the paged logits
// kernel's shared memory (kernels/mqa_logits.h), or the step refuses the engine.
int64_t decode_step_max_head_dim(int64_t H);

// The generator's own draws (decode_step_gen.cpp).
int64_t draw_decode_step_head_dim();
int64_t draw_decode_step_topk();
// The longest L_b: rows just under, at and over k, and some far past it.
int64_t draw_decode_step_max_len(int64_t k);
std::vector<int32_t> draw_decode_step_decode_lens(const DecodeStepEngine& e);
std::vector<int32_t> draw_decode_step_seq_lens(const DecodeStepEngine& e, const std::vector<int32_t>& decode_lens);

// The engine's fields but max_tokens (which holds the batch's tokens, so is read after it). The
// longest request fits the table: max_len <= table_width x block_size.
template <class V>
void engine_fields(V& v, DecodeStepEngine& e) {
  v.integer("next_n", e.next_n, 1, 16, UpTo{4});
  v.integer("heads", e.H, 1, 128, [] {
    return *rc::gen::weightedOneOf<int64_t>({{6, rc::gen::inRange<int64_t>(1, 9)}, {1, rc::gen::just<int64_t>(64)}});
  });
  v.integer("head_dim", e.D, 1, decode_step_max_head_dim(e.H), draw_decode_step_head_dim);
  v.integer("topk", e.k, 1, kernels::kTopkFastK, draw_decode_step_topk);
  v.integer("block_size", e.block_size, 1, 1024, [] { return *rc::gen::element<int64_t>(1, 2, 3, 16, 53, 61, 64, 69); });
  v.integer("max_requests", e.max_requests, 1, 256, UpTo{6});
  // Drawn: the longest length first, then the pages that hold it and 0 to 2 more.
  int64_t max_len = 1;
  v.integer("table_width", e.W, 1, 65536, [&] {
    max_len = draw_decode_step_max_len(e.k);
    return (max_len + e.block_size - 1) / e.block_size + *rc::gen::inRange<int64_t>(0, 3);
  });
  v.integer("max_len", e.max_len, 1, std::min<int64_t>(65536, e.W * e.block_size), [&] { return max_len; });
  v.integer("engine_max_context_len", e.max_context_len, e.max_len, 65536,
            [&] { return e.max_len + *rc::gen::element<int64_t>(0, 1, 13, 70); });
}

// The batch: at least one request, one seq_len and one decode length each; seq_lens come first, as
// a request with a length has a token (a padding request has length 0).
template <class V>
void batch_fields(V& v, DecodeStepCase& c, const DecodeStepEngine& e) {
  v.choice("layout", c.layout, {"flattened", "native"});
  v.choice("path", c.path, {"auto", "general"});
  std::vector<int32_t> decode_lens;  // drawn with the lengths
  v.list("seq_lens", c.seq_lens, Length{1, e.max_requests}, 0, e.max_len, [&] {
    decode_lens = draw_decode_step_decode_lens(e);
    return draw_decode_step_seq_lens(e, decode_lens);
  });
  std::vector<int64_t> lowest_d;
  for (int32_t L : c.seq_lens) lowest_d.push_back(L > 0 ? 1 : 0);
  v.list_from("decode_lens", c.decode_lens, lowest_d, e.next_n, [&] { return decode_lens; });
}

// The rest of the step, once the engine's max_tokens holds the batch.
template <class V>
void step_fields(V& v, DecodeStepCase& c, const DecodeStepEngine& e) {
  const bool flat = c.layout == kernels::MetadataLayout::kFlattened;
  v.integer("graph_padding", c.graph_padding, 0, flat ? e.max_tokens - c.T() : 0);  // it pads flattened rows only
  v.integer("prefill_rows", c.prefill_rows, 0, 4096, UpTo{3});
  const int64_t longest = *std::max_element(c.seq_lens.begin(), c.seq_lens.end());
  v.integer("max_context_len", c.max_context_len, longest, e.max_context_len);
  v.integer("table_row_pad", c.table_row_pad, 0, 64, UpTo{2});
  v.flag("host_seq_lens", c.pass_host_seq_lens);
  v.flag("ue8m0", c.ue8m0);
  v.schedule(c);
}

// The schema (harness/case_schema.h): the engine, the batch, the engine's max_tokens (it holds the
// batch's tokens; T <= 256 x 16 = 4096), then the rest of the step. Each range depends only on
// the fields before it, so fuzz bytes decode to a case. The limits are the generators' (H <= 128,
// D <= 576 and one query row of H x D within the logits kernel's shared memory, k <= 2048, pages
// 1..1024, lengths <= 65536).
template <class V>
void fields(V& v, DecodeStepEngineCase& c) {
  engine_fields(v, c.engine);
  batch_fields(v, c.step, c.engine);
  v.integer("max_tokens", c.engine.max_tokens, std::max<int64_t>(1, c.step.T()), 4096,
            [&] { return c.engine.max_requests * c.engine.next_n + *rc::gen::inRange<int64_t>(0, 4); });
  step_fields(v, c.step, c.engine);
}

// The engine and the case as case-text keys, appended to out (after its property / impl / backend).
void decode_step_to_text(const DecodeStepEngine& e, const DecodeStepCase& c, CaseText& out);
// The inverse: a hand-edited case that breaks a range or a relation (one seq_len per request, a
// padding request of length 0, a request's length covered by the table, T + graph padding within
// max_tokens, ...) throws mlacheck::Error naming the key.
std::pair<DecodeStepEngine, DecodeStepCase> decode_step_from_text(const CaseText& t);

namespace gen {

// Engines small enough for the host backend: H up to 64, D up to 128, pages 1 to 69, k from 1 to
// 2048 with the longest rows just past k; room for any batch of the engine.
rc::Gen<DecodeStepEngine> decode_step_engine();
// One step's batch under the engine: uniform half the time, else any lengths with padding requests.
rc::Gen<DecodeStepCase> decode_step_case(const DecodeStepEngine& e);

}  // namespace gen
}  // namespace mlacheck
