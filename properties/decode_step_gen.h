// RapidCheck generators for the indexer decode step (docs/ops.md 6): an engine (the step's limits and
// the cache's page size, fixed for a run) and batches under it: uniform and non-uniform decode
// lengths, padding requests, graph padding, prefill rows after the token rows of the shared top-k
// buffer, both metadata layouts and paths, lengths straddling k, k from 1 to the 2048 fast path.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <ostream>
#include <vector>

#include <rapidcheck.h>

#include "kernels/indexer_decode_step.h"
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

// The engine and the case as case-text keys, appended to out (after its property / impl / backend).
void decode_step_to_text(const DecodeStepEngine& e, const DecodeStepCase& c, CaseText& out);
// The inverse. Every value is checked against the limits the generators keep to (H <= 128, D <= 576
// and one query row of H x D within the logits kernel's shared memory, k <= 2048, pages 1..1024,
// lengths <= 65536) and against each other (one seq_len per request, a padding request of length 0,
// a request's length covered by the table, T + graph padding within max_tokens, ...): a hand-edited
// case that breaks one throws mlacheck::Error naming the key. Each value's range depends only on
// values read before it, so fuzz input bytes decode to a case (harness/case_text.h).
std::pair<DecodeStepEngine, DecodeStepCase> decode_step_from_text(const CaseText& t);

namespace gen {

// Engines small enough for the host backend: H up to 64, D up to 128, pages 1 to 69, k from 1 to
// 2048 with the longest rows just past k.
rc::Gen<DecodeStepEngine> decode_step_engine();
// One step's batch under the engine.
rc::Gen<DecodeStepCase> decode_step_case(const DecodeStepEngine& e);

}  // namespace gen
}  // namespace mlacheck
