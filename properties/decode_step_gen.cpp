// Generators of indexer decode step engines and batches (properties/decode_step_gen.h).
#include "properties/decode_step_gen.h"

#include "core/error.h"
#include "properties/schedule_gen.h"
#include "kernels/mqa_logits.h"

namespace mlacheck::gen {
namespace {

// A length for a request with d tokens: around k (so a token row is k - 1, k or k + 1 long), short
// (even shorter than d: the first tokens get length 0), or anywhere up to the engine's longest.
rc::Gen<int32_t> seq_len_around_k(const DecodeStepEngine& e, int32_t d) {
  const int32_t hi = static_cast<int32_t>(e.max_len);
  const int32_t around_k = static_cast<int32_t>(e.k) + d - 1;  // the last token's row is k long
  return rc::gen::weightedOneOf<int32_t>(
      {{3, rc::gen::map(rc::gen::inRange(-1, 2), [=](int32_t x) { return std::clamp(around_k + x, 0, hi); })},
       {1, rc::gen::inRange(0, std::min(d + 1, hi + 1))},
       {3, rc::gen::inRange(0, hi + 1)}});
}

}  // namespace

rc::Gen<DecodeStepEngine> decode_step_engine() {
  return rc::gen::exec([] {
    DecodeStepEngine e;
    e.next_n = *rc::gen::inRange(1, 5);
    e.H = *rc::gen::weightedOneOf<int64_t>({{6, rc::gen::inRange<int64_t>(1, 9)}, {1, rc::gen::just<int64_t>(64)}});
    e.D = *rc::gen::weightedOneOf<int64_t>(
        {{3, rc::gen::element<int64_t>(16, 32, 64, 128)}, {1, rc::gen::inRange<int64_t>(1, 41)}});
    e.k = *rc::gen::weightedOneOf<int64_t>(
        {{6, rc::gen::element<int64_t>(1, 2, 3, 7, 16, 64)}, {1, rc::gen::just<int64_t>(kernels::kTopkFastK)}});
    e.block_size = *rc::gen::element<int64_t>(1, 2, 3, 16, 53, 61, 64, 69);
    e.max_requests = *rc::gen::inRange(1, 7);
    e.max_tokens = e.max_requests * e.next_n + *rc::gen::inRange(0, 4);
    // Rows just under, at and over k, and some far past it.
    e.max_len = e.k + *rc::gen::element<int64_t>(1, 2, 8, 60, 200);
    if (e.k == kernels::kTopkFastK) e.max_len = std::min<int64_t>(e.max_len, e.k + 8);
    e.W = (e.max_len + e.block_size - 1) / e.block_size + *rc::gen::inRange(0, 3);
    e.max_context_len = e.max_len + *rc::gen::element<int64_t>(0, 1, 13, 70);
    return e;
  });
}

rc::Gen<DecodeStepCase> decode_step_case(const DecodeStepEngine& e) {
  return rc::gen::exec([e] {
    DecodeStepCase c;
    const int64_t B = *rc::gen::inRange<int64_t>(1, e.max_requests + 1);
    if (*rc::gen::arbitrary<bool>()) {
      c.decode_lens.assign(static_cast<size_t>(B), *rc::gen::inRange(1, e.next_n + 1));  // uniform
    } else {
      c.decode_lens = *rc::gen::container<std::vector<int32_t>>(static_cast<size_t>(B), rc::gen::inRange(0, e.next_n + 1));
    }
    for (int32_t d : c.decode_lens) c.seq_lens.push_back(d == 0 ? 0 : *seq_len_around_k(e, d));
    c.layout = *rc::gen::arbitrary<bool>() ? kernels::MetadataLayout::kFlattened : kernels::MetadataLayout::kNative;
    c.path = *rc::gen::arbitrary<bool>() ? kernels::MetadataPathChoice::kAuto : kernels::MetadataPathChoice::kGeneral;
    if (c.layout == kernels::MetadataLayout::kFlattened) c.graph_padding = *rc::gen::inRange<int64_t>(0, e.max_tokens - c.T() + 1);
    c.prefill_rows = *rc::gen::inRange(0, 4);
    const int64_t longest = *std::max_element(c.seq_lens.begin(), c.seq_lens.end());
    c.max_context_len = *rc::gen::inRange<int64_t>(longest, e.max_context_len + 1);
    c.table_row_pad = *rc::gen::inRange(0, 3);
    c.pass_host_seq_lens = *rc::gen::arbitrary<bool>();
    c.ue8m0 = *rc::gen::arbitrary<bool>();
    draw_schedule(c);
    return c;
  });
}

}  // namespace mlacheck::gen

namespace mlacheck {

void decode_step_to_text(const DecodeStepEngine& e, const DecodeStepCase& c, CaseText& out) {
  out.set("next_n", int64_t{e.next_n}).set("heads", e.H).set("head_dim", e.D).set("topk", e.k);
  out.set("block_size", e.block_size).set("max_requests", e.max_requests).set("max_tokens", e.max_tokens);
  out.set("table_width", e.W).set("max_len", e.max_len).set("engine_max_context_len", e.max_context_len);
  out.set("layout", c.layout == kernels::MetadataLayout::kFlattened ? "flattened" : "native");
  out.set("path", c.path == kernels::MetadataPathChoice::kGeneral ? "general" : "auto");
  out.set_list("decode_lens", c.decode_lens).set_list("seq_lens", c.seq_lens);
  out.set("graph_padding", c.graph_padding).set("prefill_rows", c.prefill_rows);
  out.set("max_context_len", c.max_context_len).set("table_row_pad", c.table_row_pad);
  out.set("host_seq_lens", c.pass_host_seq_lens).set("ue8m0", c.ue8m0);
  write_schedule(c, out);
}

namespace {


// The widest head a query row of H heads may have: one row of H x D must fit the paged logits
// kernel's shared memory (kernels/mqa_logits.h), or the step refuses the engine.
int64_t max_head_dim(int64_t H) {
  int64_t D = 576;
  while (D > 1 && kernels::logits_shared_bytes(1, H, D) > kernels::kLogitsSharedBudget) --D;
  return D;
}

}  // namespace

// Each value's range depends only on values read before it, so that fuzz input bytes decode to a
// case almost always (harness/case_text.h): seq_lens before decode_lens (a request with a
// length has tokens), the batch before max_tokens (it holds the batch's tokens).
std::pair<DecodeStepEngine, DecodeStepCase> decode_step_from_text(const CaseText& t) {
  DecodeStepEngine e;
  e.next_n = static_cast<int32_t>(t.integer("next_n", 1, 16));
  e.H = t.integer("heads", 1, 128);
  e.D = t.integer("head_dim", 1, max_head_dim(e.H));
  e.k = t.integer("topk", 1, kernels::kTopkFastK);
  e.block_size = t.integer("block_size", 1, 1024);
  e.max_requests = t.integer("max_requests", 1, 256);
  e.W = t.integer("table_width", 1, 65536);
  // table_width x block_size pages hold the longest request.
  e.max_len = t.integer("max_len", 1, std::min<int64_t>(65536, e.W * e.block_size));
  e.max_context_len = t.integer("engine_max_context_len", e.max_len, 65536);
  DecodeStepCase c;
  c.layout = t.choice("layout", {"flattened", "native"}) == 0 ? kernels::MetadataLayout::kFlattened
                                                               : kernels::MetadataLayout::kNative;
  c.path = t.choice("path", {"auto", "general"}) == 0 ? kernels::MetadataPathChoice::kAuto
                                                       : kernels::MetadataPathChoice::kGeneral;
  // A batch has at least one request; one seq_len and one decode length each.
  const size_t B = t.list_length("seq_lens", 1, static_cast<size_t>(e.max_requests));
  c.seq_lens = t.list_exactly<int32_t>("seq_lens", 0, e.max_len, B);
  // A request without tokens (a padding request) has length 0: one with a length has a token.
  std::vector<int64_t> lowest_d;
  for (int32_t L : c.seq_lens) lowest_d.push_back(L > 0 ? 1 : 0);
  for (int64_t d : t.integers_from("decode_lens", lowest_d, e.next_n)) c.decode_lens.push_back(static_cast<int32_t>(d));
  // T <= 256 x 16 = 4096: max_tokens holds the batch's tokens, and graph padding fits after them.
  e.max_tokens = t.integer("max_tokens", std::max<int64_t>(1, c.T()), 4096);
  const bool flat = c.layout == kernels::MetadataLayout::kFlattened;
  c.graph_padding = t.integer("graph_padding", 0, flat ? e.max_tokens - c.T() : 0);  // it pads flattened rows only
  c.prefill_rows = t.integer("prefill_rows", 0, 4096);
  const int64_t longest = *std::max_element(c.seq_lens.begin(), c.seq_lens.end());
  c.max_context_len = t.integer("max_context_len", longest, e.max_context_len);
  c.table_row_pad = t.integer("table_row_pad", 0, 64);
  c.pass_host_seq_lens = t.flag("host_seq_lens");
  c.ue8m0 = t.flag("ue8m0");
  read_schedule(c, t);
  return {e, c};
}

}  // namespace mlacheck
