// Cases of the indexer decode step: the generator's own draws and the text form's wrappers
// (properties/decode_step_gen.h).
#include "properties/decode_step_gen.h"

#include "kernels/mqa_logits.h"

namespace mlacheck {

int64_t decode_step_max_head_dim(int64_t H) {
  int64_t D = 576;
  while (D > 1 && kernels::logits_shared_bytes(1, H, D) > kernels::kLogitsSharedBudget) --D;
  return D;
}

int64_t draw_decode_step_head_dim() {
  return *rc::gen::weightedOneOf<int64_t>(
      {{3, rc::gen::element<int64_t>(16, 32, 64, 128)}, {1, rc::gen::inRange<int64_t>(1, 41)}});
}

int64_t draw_decode_step_topk() {
  return *rc::gen::weightedOneOf<int64_t>(
      {{6, rc::gen::element<int64_t>(1, 2, 3, 7, 16, 64)}, {1, rc::gen::just<int64_t>(kernels::kTopkFastK)}});
}

int64_t draw_decode_step_max_len(int64_t k) {
  const int64_t max_len = k + *rc::gen::element<int64_t>(1, 2, 8, 60, 200);
  return k == kernels::kTopkFastK ? std::min<int64_t>(max_len, k + 8) : max_len;
}

// 1 to max_requests requests: half the time uniform, else each 0 (a padding request) to next_n.
std::vector<int32_t> draw_decode_step_decode_lens(const DecodeStepEngine& e) {
  const auto B = static_cast<size_t>(*rc::gen::inRange<int64_t>(1, e.max_requests + 1));
  if (*rc::gen::arbitrary<bool>()) return std::vector<int32_t>(B, *rc::gen::inRange(1, e.next_n + 1));
  return *rc::gen::container<std::vector<int32_t>>(B, rc::gen::inRange(0, e.next_n + 1));
}

// A length for a request with d tokens: around k (so a token row is k - 1, k or k + 1 long), short
// (even shorter than d: the first tokens get length 0), or anywhere up to the engine's longest; 0
// for a padding request.
std::vector<int32_t> draw_decode_step_seq_lens(const DecodeStepEngine& e, const std::vector<int32_t>& decode_lens) {
  const auto hi = static_cast<int32_t>(e.max_len);
  std::vector<int32_t> lens;
  for (int32_t d : decode_lens) {
    const int32_t around_k = static_cast<int32_t>(e.k) + d - 1;  // the last token's row is k long
    lens.push_back(d == 0 ? 0
                          : *rc::gen::weightedOneOf<int32_t>(
                                {{3, rc::gen::map(rc::gen::inRange(-1, 2),
                                                  [=](int32_t x) { return std::clamp(around_k + x, 0, hi); })},
                                 {1, rc::gen::inRange(0, std::min(d + 1, hi + 1))},
                                 {3, rc::gen::inRange(0, hi + 1)}}));
  }
  return lens;
}

void decode_step_to_text(const DecodeStepEngine& e, const DecodeStepCase& c, CaseText& out) {
  write_case(DecodeStepEngineCase{e, c}, out);
}

std::pair<DecodeStepEngine, DecodeStepCase> decode_step_from_text(const CaseText& t) {
  DecodeStepEngineCase c = read_case<DecodeStepEngineCase>(t);
  return {c.engine, c.step};
}

namespace gen {

rc::Gen<DecodeStepEngine> decode_step_engine() {
  return rc::gen::map(draw_case<DecodeStepEngineCase>(), [](const DecodeStepEngineCase& c) { return c.engine; });
}

rc::Gen<DecodeStepCase> decode_step_case(const DecodeStepEngine& e) {
  return rc::gen::exec([e] {
    DecodeStepCase c;
    CaseDrawer d;
    batch_fields(d, c, e);
    step_fields(d, c, e);
    return c;
  });
}

}  // namespace gen
}  // namespace mlacheck
