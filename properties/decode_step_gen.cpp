// Generators of indexer decode step engines and batches (properties/decode_step_gen.h).
#include "properties/decode_step_gen.h"

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
    c.seed = *rc::gen::arbitrary<uint64_t>();
    c.warp_size = *rc::gen::element(32, 64);
    c.shuffled = *rc::gen::arbitrary<bool>();
    return c;
  });
}

}  // namespace mlacheck::gen
