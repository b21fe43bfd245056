// Tests of kernels/indexer_decode_step.h (docs/ops.md 6, the indexer half): the whole step against
// oracle::indexer_decode_step on randomized batches (uniform, non-uniform, padding requests, graph
// padding, prefill rows sharing the top-k buffer, both layouts, both metadata paths), every buffer
// guarded; one step object driven through a sequence of batches; bad input refused before any
// launch; the same on cuda when a GPU is usable.
#include "kernels/indexer_decode_step.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/pack_decode_glue.h"
#include "kernels/registry.h"
#include "properties/decode_step_properties.h"
#include "properties/permutation_gen.h"
#include "properties/property_registry.h"
#include "harness/rc_verdict.h"
#include "harness/staged_buffer.h"

namespace mlacheck::kernels {
namespace {

using Engine = DecodeStepEngine;
using StepCase = DecodeStepCase;

std::string check_step(Device& device, IndexerDecodeStep& step, const Engine& e, const StepCase& c,
                       IndexerDecodeStepResult* result = nullptr) {
  return decode_step_equals_oracle(device, step, e, c, result).value_or("");
}
std::string route(const IndexerDecodeStepResult& r) { return decode_step_route(r); }
rc::Gen<Engine> gen_engine() { return gen::decode_step_engine(); }
rc::Gen<StepCase> gen_step_case(const Engine& e) { return gen::decode_step_case(e); }

// The case as a file `mlacheck repro` runs.
CaseText case_text(const char* property, const Engine& e, const StepCase& c) {
  CaseText t = case_header(property, "indexer_decode_step@ref");
  decode_step_to_text(e, c, t);
  return t;
}

RC_GTEST_PROP(IndexerDecodeStep, EveryTokenEqualsTheOracleAndOnlyItsRowsAreWritten, ()) {
  const Engine e = *gen_engine();
  const StepCase c = *gen_step_case(e);
  const auto device = make_device(Backend::kHost);
  IndexerDecodeStep step(*device, e.limits());
  IndexerDecodeStepResult r;
  const Verdict v = decode_step_equals_oracle(*device, step, e, c, &r);
  RC_TAG(route(r));
  rc_require(v, case_text("indexer_decode_step.equals_oracle", e, c));
}

// Reordering the requests of a batch reorders its tokens' results and changes nothing else.
RC_GTEST_PROP(IndexerDecodeStep, PermutingTheRequestsPermutesTheResults, ()) {
  const Engine e = *gen_engine();
  const StepCase c = *gen_step_case(e);
  const std::vector<int> perm = *gen::permutation(static_cast<int>(c.B()));
  const auto device = make_device(Backend::kHost);
  IndexerDecodeStep step(*device, e.limits());
  CaseText t = case_text("indexer_decode_step.permutation_commutes", e, c);
  t.set_list("permutation", perm);
  rc_require(decode_step_permutation_commutes(*device, step, e, c, perm), t);
}

// ---- one step object driven like an engine (rc::state) -----------------------------------------

// The model: the engine and the batch the last command ran (commands derive the next from it).
struct StepModel {
  Engine e;
  StepCase last;
  bool ran = false;
};
// The system under test: one step object for the whole sequence, and its scratch addresses.
struct StepSut {
  std::unique_ptr<Device> device;
  std::unique_ptr<IndexerDecodeStep> step;
  std::vector<uintptr_t> addresses;
  std::vector<uintptr_t> scratch() const {
    std::vector<uintptr_t> a;
    for (GuardedMemory* m : {&step->logits_memory(), &step->packed_q_memory(), &step->packed_weights_memory(),
                             &step->padded_topk_memory(), &step->workspace_memory(),
                             &step->metadata_builder().seq_lens_memory()}) {
      a.push_back(reinterpret_cast<uintptr_t>(m->data()));
    }
    return a;
  }
};
using StepCommand = rc::state::Command<StepModel, StepSut>;

// Keeps a derived batch inside the engine: graph padding within max_tokens, columns >= the longest.
StepCase fit(const Engine& e, StepCase c) {
  if (c.layout == MetadataLayout::kNative) c.graph_padding = 0;
  c.graph_padding = std::min<int64_t>(c.graph_padding, e.max_tokens - c.T());
  const int64_t longest = *std::max_element(c.seq_lens.begin(), c.seq_lens.end());
  c.max_context_len = std::clamp<int64_t>(c.max_context_len, longest, e.max_context_len);
  return c;
}

// Runs the batch on the one step object: equal to the oracle, no scratch address moved.
struct RunBatch : StepCommand {
  enum Kind { kFresh, kGrow, kShrink, kNewLengths, kNewContents } kind;
  StepCase c;
  explicit RunBatch(const StepModel& m) {
    kind = m.ran ? *rc::gen::element(kFresh, kGrow, kShrink, kNewLengths, kNewContents) : kFresh;
    // Full-sized batches: the command list is kept short by its own size, not each batch.
    const StepCase fresh = *rc::gen::resize(40, gen_step_case(m.e));
    c = m.ran ? m.last : fresh;
    switch (kind) {
      case kFresh: c = fresh; break;
      case kGrow:  // one more request, from the fresh batch
        RC_PRE(c.B() < m.e.max_requests && c.T() + fresh.decode_lens[0] <= m.e.max_tokens);
        c.decode_lens.push_back(fresh.decode_lens[0]);
        c.seq_lens.push_back(fresh.seq_lens[0]);
        break;
      case kShrink:
        RC_PRE(c.B() > 1);
        c.decode_lens.pop_back();
        c.seq_lens.pop_back();
        break;
      case kNewLengths:  // the same requests, other decode lengths and sequence lengths
        RC_PRE(fresh.B() >= c.B());
        c.decode_lens.assign(fresh.decode_lens.begin(), fresh.decode_lens.begin() + c.B());
        c.seq_lens.assign(fresh.seq_lens.begin(), fresh.seq_lens.begin() + c.B());
        break;
      case kNewContents:  // the same shapes, new data and scale format
        c.seed = fresh.seed;
        c.ue8m0 = !c.ue8m0;
        break;
    }
    c = fit(m.e, c);
  }
  void apply(StepModel& m) const override {
    m.last = c;
    m.ran = true;
  }
  void run(const StepModel& m, StepSut& sut) const override {
    IndexerDecodeStepResult r;
    const Verdict v = decode_step_equals_oracle(*sut.device, *sut.step, m.e, c, &r);
    static const char* names[] = {"fresh", "grow", "shrink", "new lengths", "new contents"};
    RC_TAG(names[kind]);
    rc_require(v, case_text("indexer_decode_step.equals_oracle", m.e, c));
    RC_ASSERT(reinterpret_cast<uintptr_t>(r.logits.base) == sut.addresses[0]);
    if (r.metadata.layout == MetadataLayout::kFlattened) {
      RC_ASSERT(reinterpret_cast<uintptr_t>(r.metadata.seq_lens.base) == sut.addresses[5]);
    }
    RC_ASSERT(sut.scratch() == sut.addresses);
  }
  void show(std::ostream& os) const override {
    static const char* names[] = {"fresh", "grow", "shrink", "new lengths", "new contents"};
    os << names[kind] << " batch: ";
    showValue(c, os);
  }
};

// Batches grow and shrink, decode lengths and layouts change, the same shapes come back with new
// contents and the other scale format; every step equals the oracle on the same step object, whose
// scratch never moves.
using StepFactory = std::function<std::unique_ptr<IndexerDecodeStep>(Device&, const IndexerDecodeStepLimits&)>;
void drive_like_an_engine(const StepFactory& make) {
  StepModel model;
  model.e = *gen_engine();
  StepSut sut;
  sut.device = make_device(Backend::kHost);
  sut.step = make(*sut.device, model.e.limits());
  sut.addresses = sut.scratch();
  const auto commands = *rc::gen::resize(8, rc::state::gen::commands(model, rc::state::gen::execOneOfWithArgs<RunBatch>()));
  rc::state::runAll(commands, model, sut);
}

RC_GTEST_PROP(IndexerDecodeStep, OneStepObjectDrivenLikeAnEngineEqualsTheOracleAtEveryStep, ()) {
  drive_like_an_engine([](Device& d, const IndexerDecodeStepLimits& l) { return std::make_unique<IndexerDecodeStep>(d, l); });
}

RC_GTEST_PROP(IndexerDecodeStep, DoublingTheWeightsDoublesEveryLogitExactly, ()) {
  const Engine e = *gen_engine();
  const StepCase c = *gen_step_case(e);
  const auto device = make_device(Backend::kHost);
  IndexerDecodeStep step(*device, e.limits());
  rc_require(decode_step_weights_scale_exactly(*device, step, e, c),
             case_text("indexer_decode_step.weights_scale_exactly", e, c));
}

// ---- the properties catch wrong implementations ---------------------------------------------------

// Runs the correct step, then does one wrong thing a glue bug would do, through the public glue.
class WrongStep : public IndexerDecodeStep {
 public:
  enum Bug {
    kWritesPastTheTokenRows,  // vLLM #42072: top-k rows past T land in the prefill rows of the buffer
    kSwapsTokenRows,          // vLLM #42072's reshape(batch, -1, k): token rows regrouped
    kShiftsTheLogits,         // an affine slip in the logits (x * 1.001 + 0.001): top-k still plausible
    kStaleTokenCount,         // copies out as many rows as the first call had tokens: a cached size
    kStridedContextLens,      // hands out context_lens [B, next_n'] with the row stride of next_n
  };
  WrongStep(Device& d, const IndexerDecodeStepLimits& l, Bug bug) : IndexerDecodeStep(d, l), bug_(bug) {}
  IndexerDecodeStepResult run(const IndexerDecodeStepInputs& in) override {
    IndexerDecodeStepResult r = IndexerDecodeStep::run(in);
    const int64_t T = r.num_decode_tokens, k = limits().topk;
    const View& b = in.topk_buffer.view;
    auto rows = [&](const DeviceTensor& t, int64_t first, int64_t n) {
      return DeviceTensor{t.base, View(t.view.dtype(), {n, k}, t.view.strides(),
                                       t.view.byte_offset() + first * t.view.stride(0) * 4)};
    };
    if (bug_ == kWritesPastTheTokenRows && T >= 1 && b.size(0) > T) {
      copy_rows(device_, rows(in.topk_global, 0, 1), rows(in.topk_buffer, T, 1));
    } else if (bug_ == kSwapsTokenRows && T >= 2) {
      copy_rows(device_, rows(in.topk_global, 0, 1), rows(in.topk_buffer, 1, 1));  // any row: not token 1's
    } else if (bug_ == kStaleTokenCount) {
      if (first_tokens_ < 0) first_tokens_ = T;
      for (int64_t row = T; row < std::min(first_tokens_, b.size(0)); ++row) {
        copy_rows(device_, rows(in.topk_global, 0, 1), rows(in.topk_buffer, row, 1));
      }
    } else if (bug_ == kStridedContextLens && r.metadata.layout == MetadataLayout::kNative) {
      View& v = r.metadata.context_lens.view;
      if (v.size(0) > 1 && v.size(1) < limits().metadata.next_n) {
        v = View(DType::kI32, v.shape(), {limits().metadata.next_n, 1}, v.byte_offset());
      }
    } else if (bug_ == kShiftsTheLogits && r.rows > 0) {
      std::vector<float> logits(static_cast<size_t>(logits_memory().size() / 4));
      logits_memory().read(0, logits.data(), logits_memory().size());
      for (float& x : logits) x = x * 1.001f + 0.001f;
      logits_memory().write(0, logits.data(), logits_memory().size());
    }
    return r;
  }

 private:
  Bug bug_;
  int64_t first_tokens_ = -1;
};

// A size cached from the first call is invisible to any one call; the engine-like sequence finds it
// once a batch shrinks.
TEST(IndexerDecodeStep, TheEngineSequenceReportsAStaleTokenCount) {
  EXPECT_FALSE(rc::check("engine sequence on a step with a stale token count", [] {
    drive_like_an_engine([](Device& d, const IndexerDecodeStepLimits& l) -> std::unique_ptr<IndexerDecodeStep> {
      return std::make_unique<WrongStep>(d, l, WrongStep::kStaleTokenCount);
    });
  }));
  // One call alone cannot see it.
  EXPECT_TRUE(rc::check("a single call on the same step", [] {
    const Engine e = *gen_engine();
    const StepCase c = *gen_step_case(e);
    const auto device = make_device(Backend::kHost);
    WrongStep step(*device, e.limits(), WrongStep::kStaleTokenCount);
    if (const Verdict v = decode_step_equals_oracle(*device, step, e, c)) RC_FAIL(*v);
  }));
}

// Each wrong step is reported, with its shrunk case printed (rc::check prints it).
TEST(IndexerDecodeStep, ThePropertyReportsEachWrongStep) {
  for (const WrongStep::Bug bug :
       {WrongStep::kWritesPastTheTokenRows, WrongStep::kSwapsTokenRows, WrongStep::kShiftsTheLogits,
        WrongStep::kStridedContextLens}) {
    const bool holds = rc::check("decode step property on a wrong step", [bug] {
      const Engine e = *gen_engine();
      const StepCase c = *gen_step_case(e);
      const auto device = make_device(Backend::kHost);
      WrongStep step(*device, e.limits(), bug);
      const Verdict v = decode_step_equals_oracle(*device, step, e, c);
      if (v) RC_FAIL(*v);
    });
    EXPECT_FALSE(holds) << "bug " << bug << " went unreported";
  }
  // The metamorphic relation needs no oracle and still sees the affine slip.
  EXPECT_FALSE(rc::check("weights x 2 on a wrong step", [] {
    const Engine e = *gen_engine();
    const StepCase c = *gen_step_case(e);
    const auto device = make_device(Backend::kHost);
    WrongStep step(*device, e.limits(), WrongStep::kShiftsTheLogits);
    const Verdict v = decode_step_weights_scale_exactly(*device, step, e, c);
    if (v) RC_FAIL(*v);
  }));
}

// Rows [0, T) of the shared buffer are not the tokens': a request moved elsewhere in the batch no
// longer gets its own row. The permutation property needs no oracle to see it.
TEST(IndexerDecodeStep, ThePermutationPropertyReportsAWrongStep) {
  EXPECT_FALSE(rc::check("permutation on a wrong step", [] {
    const Engine e = *gen_engine();
    const StepCase c = *gen_step_case(e);
    const std::vector<int> perm = *gen::permutation(static_cast<int>(c.B()));
    const auto device = make_device(Backend::kHost);
    WrongStep step(*device, e.limits(), WrongStep::kSwapsTokenRows);
    if (const Verdict v = decode_step_permutation_commutes(*device, step, e, c, perm)) RC_FAIL(*v);
  }));
}

// A case printed as text reads back to the same engine and batch, and runs through the registry.
RC_GTEST_PROP(IndexerDecodeStepCaseText, RoundTripsAndRunsThroughTheRegistry, ()) {
  const Engine e = *gen_engine();
  const StepCase c = *gen_step_case(e);
  const CaseText t = case_text("indexer_decode_step.equals_oracle", e, c);
  const CaseText back = CaseText::parse(t.format());
  RC_ASSERT(back == t);
  const auto [e2, c2] = decode_step_from_text(back);
  RC_ASSERT(case_text("indexer_decode_step.equals_oracle", e2, c2) == t);
  if (*rc::gen::inRange(0, 8) == 0) {  // running is the slow part: one case in eight
    const ReproResult r = run_case_text(back);
    if (r.verdict) RC_FAIL(*r.verdict);
  }
}

// A case as the schema draws it (the engine's max_tokens after the batch) writes, reads back and
// writes the same text.
RC_GTEST_PROP(IndexerDecodeStepCaseText, TheDrawnCaseReadsBackAsItself, ()) {
  const DecodeStepEngineCase c = *draw_case<DecodeStepEngineCase>();
  CaseText t;
  write_case(c, t);
  CaseText again;
  write_case(read_case<DecodeStepEngineCase>(CaseText::parse(t.format())), again);
  RC_ASSERT(again.format() == t.format());
}

// The case a failing property prints is the failing case: parsed back and rerun on the wrong step,
// it fails again; on the correct step (what `mlacheck repro` runs) it passes.
TEST(IndexerDecodeStepCaseText, AFailingPropertyPrintsACaseThatReproduces) {
  std::string printed;
  rc::check("wrong step, for its printed case", [&printed] {
    const Engine e = *gen_engine();
    const StepCase c = *gen_step_case(e);
    const auto device = make_device(Backend::kHost);
    WrongStep step(*device, e.limits(), WrongStep::kWritesPastTheTokenRows);
    const CaseText t = case_text("indexer_decode_step.equals_oracle", e, c);
    const Verdict v = decode_step_equals_oracle(*device, step, e, c);
    if (v) printed = t.format();
    rc_require(v, t);
  });
  ASSERT_FALSE(printed.empty()) << "the wrong step was never caught";
  const CaseText t = CaseText::parse(printed);
  const auto [e, c] = decode_step_from_text(t);
  const auto device = make_device(Backend::kHost);
  WrongStep wrong(*device, e.limits(), WrongStep::kWritesPastTheTokenRows);
  const Verdict again = decode_step_equals_oracle(*device, wrong, e, c);
  ASSERT_TRUE(again.has_value()) << printed;
  EXPECT_NE(again->find("decode rows"), std::string::npos) << *again;
  EXPECT_FALSE(run_case_text(t).verdict.has_value()) << printed;
}

// A hand-edited case with a value out of range or inconsistent is refused with one line.
TEST(IndexerDecodeStepCaseText, MalformedCasesAreRefusedWithOneLine) {
  Engine e;
  e.next_n = 2, e.k = 3, e.block_size = 4, e.max_requests = 2, e.max_tokens = 4, e.max_len = 12, e.W = 3;
  e.max_context_len = 12;
  StepCase c;
  c.decode_lens = {2, 1}, c.seq_lens = {12, 5}, c.max_context_len = 12;
  const CaseText good = case_text("indexer_decode_step.equals_oracle", e, c);
  EXPECT_NO_THROW(decode_step_from_text(good));
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"seq_lens 12 5", "seq_lens 12"},        {"decode_lens 2 1", "decode_lens 3 1"},
      {"topk 3", "topk 0"},                    {"warp 32", "warp 48"},
      {"layout flattened", "layout sideways"}, {"table_width 3", "table_width 2"},
      {"graph_padding 0", "graph_padding 2"},  {"seed 0x0", "seed -1"},
      {"max_context_len 12", "max_context_len 11"},
  };
  for (const auto& [from, to] : edits) {
    std::string text = good.format();
    const size_t at = text.find(from + "\n");
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    try {
      decode_step_from_text(CaseText::parse(text));
      ADD_FAILURE() << to << ": accepted";
    } catch (const Error& err) {
      EXPECT_EQ(std::string(err.what()).find('\n'), std::string::npos) << err.what();
    }
  }
}

// Every route, by name: each must be reachable and pass (the property reaches them at random).
TEST(IndexerDecodeStep, EachRouteOnAFixedBatch) {
  Engine e;
  e.next_n = 2, e.H = 4, e.D = 32, e.k = 5, e.block_size = 3, e.max_requests = 4, e.max_tokens = 10, e.max_len = 40;
  e.W = 14, e.max_context_len = 48;
  const auto device = make_device(Backend::kHost);
  IndexerDecodeStep step(*device, e.limits());
  struct Route {
    std::vector<int32_t> decode_lens, seq_lens;
    MetadataLayout layout;
    int64_t graph_padding;
    const char* want;
  };
  const std::vector<Route> routes = {
      {{2, 2, 2}, {40, 6, 1}, MetadataLayout::kFlattened, 0, "flattened general"},
      {{2, 0, 1}, {40, 0, 5}, MetadataLayout::kFlattened, 3, "flattened padded top-k general"},
      {{2, 2, 2}, {40, 6, 5}, MetadataLayout::kNative, 0, "native general"},
      {{2, 0, 1, 1}, {7, 0, 40, 3}, MetadataLayout::kNative, 0, "native packed padded top-k general"},
  };
  for (const Route& x : routes) {
    StepCase c;
    c.decode_lens = x.decode_lens, c.seq_lens = x.seq_lens, c.layout = x.layout, c.graph_padding = x.graph_padding;
    c.prefill_rows = 2, c.max_context_len = 41, c.pass_host_seq_lens = true, c.seed = 7;
    IndexerDecodeStepResult r;
    EXPECT_EQ(check_step(*device, step, e, c, &r), "") << x.want;
    EXPECT_EQ(route(r), x.want);
  }
}

TEST(IndexerDecodeStep, IsRegisteredAndListed) {
  using Factory = std::unique_ptr<IndexerDecodeStep>(Device&, const IndexerDecodeStepLimits&);
  const auto device = make_device(Backend::kHost);
  Engine e;
  const auto step = registry().find<Factory>("indexer_decode_step@ref")(*device, e.limits());
  EXPECT_EQ(step->limits().topk, e.k);
}

// ---- bad input: refused with one line before any launch ---------------------------------------

TEST(IndexerDecodeStep, BadInputIsRefusedBeforeAnyLaunch) {
  Engine e;
  e.next_n = 2, e.H = 2, e.D = 16, e.k = 3, e.block_size = 4, e.max_requests = 2, e.max_tokens = 4, e.max_len = 12;
  e.W = 3, e.max_context_len = 12;
  const auto device = make_device(Backend::kHost);
  {
    IndexerDecodeStepLimits bad = e.limits();
    bad.topk = 0;
    EXPECT_THROW(IndexerDecodeStep(*device, bad), Error);
  }
  StepCase c;
  c.decode_lens = {2, 1}, c.seq_lens = {12, 5}, c.max_context_len = 12, c.prefill_rows = 1, c.pass_host_seq_lens = true;
  using Break = std::function<void(IndexerDecodeStepInputs&, DecodeStepBuffers&)>;
  const std::vector<std::pair<const char*, Break>> breaks = {
      {"index_q", [](IndexerDecodeStepInputs& in, DecodeStepBuffers&) { in.index_q.view = View::contiguous(DType::kFP8E4M3, {2, 2, 16}); }},
      {"index_q", [](IndexerDecodeStepInputs& in, DecodeStepBuffers&) { in.index_q.view = View::contiguous(DType::kBF16, {3, 2, 16}); }},
      {"index_weights", [](IndexerDecodeStepInputs& in, DecodeStepBuffers&) { in.index_weights.view = View::padded_rows(DType::kF32, {3, 2}, 3); }},
      {"kv_blocks", [](IndexerDecodeStepInputs& in, DecodeStepBuffers&) { in.block_size = 64; }},
      {"max_context_len", [](IndexerDecodeStepInputs& in, DecodeStepBuffers&) { in.max_context_len = 13; }},
      {"seq_len 12 > max_context_len", [](IndexerDecodeStepInputs& in, DecodeStepBuffers&) { in.max_context_len = 11; }},
      {"needs 3 blocks", [](IndexerDecodeStepInputs& in, DecodeStepBuffers&) { in.batch.block_table.view = View::padded_rows(DType::kI32, {2, 2}, 3, 4); }},
      {"decode length 3", [](IndexerDecodeStepInputs& in, DecodeStepBuffers&) { in.batch.host_decode_lens = {3, 0}; }},
      {"topk_buffer", [](IndexerDecodeStepInputs& in, DecodeStepBuffers&) { in.topk_buffer.view = View::contiguous(DType::kI32, {2, 3}); }},
      {"topk_buffer", [](IndexerDecodeStepInputs& in, DecodeStepBuffers&) { in.topk_buffer.view = View::contiguous(DType::kI32, {4, 2}); }},
      {"topk_global", [](IndexerDecodeStepInputs& in, DecodeStepBuffers&) { in.topk_global.view = View(DType::kI32, {3, 3}, {1, 3}); }},
      {"overlaps", [](IndexerDecodeStepInputs& in, DecodeStepBuffers&) { in.topk_global = in.topk_buffer; }},
      {"tokens", [](IndexerDecodeStepInputs& in, DecodeStepBuffers&) { in.batch.num_decode_tokens = 4; }},
  };
  for (const auto& [what, change] : breaks) {
    IndexerDecodeStep step(*device, e.limits());
    DecodeStepBuffers s = make_decode_step_buffers(e, c);
    for (Buffer* b : s.all()) b->upload(*device);
    IndexerDecodeStepInputs in = decode_step_inputs(s, e, c);
    change(in, s);
    // Everything a launch could write: the outputs and the builder's buffers.
    for (Buffer* b : {&s.topk, &s.global}) b->memory->arm();
    step.metadata_builder().seq_lens_memory().arm();
    try {
      step.run(in);
      ADD_FAILURE() << what << ": accepted";
    } catch (const Error& err) {
      const std::string msg = err.what();
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
    EXPECT_TRUE(s.topk.memory->check().ok()) << what;
    EXPECT_TRUE(s.global.memory->check().ok()) << what;
    EXPECT_TRUE(step.metadata_builder().seq_lens_memory().check().ok()) << what;
    EXPECT_EQ(step.metadata_builder().flat_dirty_rows(), 0) << what;
  }
}

// ---- cuda: the same checks on device buffers -------------------------------------------------

TEST(IndexerDecodeStepOnCuda, PropertiesWhenAGpuIsPresent) {
  std::string why;
  if (!device_usable(Backend::kCuda, &why)) GTEST_SKIP() << "skipped: no GPU (" << why << ")";
  const auto device = make_device(Backend::kCuda);
  EXPECT_TRUE(rc::check("the decode step on cuda equals the oracle", [&] {
    const Engine e = *gen_engine();
    IndexerDecodeStep step(*device, e.limits());
    const auto cases = *rc::gen::container<std::vector<StepCase>>(*rc::gen::inRange(1, 4), gen_step_case(e));
    for (const StepCase& c : cases) {
      IndexerDecodeStepResult r;
      const std::string failure = check_step(*device, step, e, c, &r);
      RC_TAG(route(r));
      if (!failure.empty()) RC_FAIL(route(r) + ": " + failure);
    }
  }));
}

}  // namespace
}  // namespace mlacheck::kernels
