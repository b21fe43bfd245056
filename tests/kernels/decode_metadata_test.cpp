// Tests of kernels/metadata_builder.h (docs/ops.md 1) through the shared properties
// (properties/decode_metadata_properties.h): both layouts against the oracle, fast path against
// general path, flattened against native, the views' contract, sequences of steps and a stateful
// engine on one builder; wrong builds each caught; case text round trips; hand-worked cases,
// production sizes and refused input; on the host device always and on cuda when usable.
// Why one file past 500 lines: a test file per public header (docs/design.md, "Style").
#include "kernels/metadata_builder.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <tuple>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/registry.h"
#include "properties/decode_metadata_properties.h"
#include "properties/property_registry.h"
#include "harness/rc_verdict.h"

namespace mlacheck::kernels {
namespace {

using gen::MetadataMix;

// The case as a file `mlacheck repro` runs.
CaseText case_text(const std::string& property, const MetadataLimits& l, const MetadataStep& c) {
  CaseText t = case_header(property, "decode_metadata@ref");
  decode_metadata_to_text(l, c, t);
  return t;
}
CaseText steps_text(const MetadataLimits& l, const std::vector<MetadataStep>& steps) {
  CaseText t = case_header("decode_metadata.steps_equal_oracle", "decode_metadata@ref");
  decode_metadata_steps_to_text(l, steps, t);
  return t;
}

// ---- properties on the reference build ----------------------------------------------------------

void equals_oracle(Device& device, MetadataBuildFn* build = &metadata_build_ref) {
  const MetadataLimits l = *gen::metadata_limits();
  const MetadataStep c = *gen::metadata_step(l);
  MetadataBuilder builder(device, l);
  MetadataOutcome o;
  const Verdict v = decode_metadata_equals_oracle(device, build, builder, c, &o);
  RC_CLASSIFY(o.result.path == MetadataPath::kUniform, "uniform path");
  RC_CLASSIFY(c.W >= 4 && (c.W + c.table_row_pad) % 4 == 0 && c.table_offset % 4 == 0 && l.block_table_width % 4 == 0,
              "16-byte rows");
  rc_require(v, case_text("decode_metadata.equals_oracle", l, c));
}

void views_as_declared(Device& device, MetadataBuildFn* build = &metadata_build_ref) {
  const MetadataLimits l = *gen::metadata_limits();
  const MetadataStep c = *gen::metadata_step(l);
  MetadataBuilder builder(device, l);
  rc_require(decode_metadata_views_as_declared(device, build, builder, c),
             case_text("decode_metadata.views_as_declared", l, c));
}

void fast_path_equals_general_path(Device& device, MetadataBuildFn* build = &metadata_build_ref) {
  const MetadataLimits l = *gen::metadata_limits();
  MetadataStep c = *gen::metadata_step(l, MetadataMix::kUniform);
  c.layout = MetadataLayout::kFlattened, c.path = MetadataPathChoice::kAuto, c.give_query_start_loc = true;  // as run
  MetadataBuilder builder(device, l);
  rc_require(decode_metadata_fast_path_equals_general_path(device, build, builder, c),
             case_text("decode_metadata.fast_path_equals_general_path", l, c));
}

void layouts_agree(Device& device, MetadataBuildFn* build = &metadata_build_ref) {
  const MetadataLimits l = *gen::metadata_limits();
  const MetadataStep c = *gen::metadata_step(l);
  MetadataBuilder builder(device, l);
  rc_require(decode_metadata_layouts_agree(device, build, builder, c), case_text("decode_metadata.layouts_agree", l, c));
}

void steps_equal_oracle(Device& device, MetadataBuildFn* build = &metadata_build_ref) {
  const MetadataLimits l = *gen::metadata_limits();
  const std::vector<MetadataStep> steps = *gen::metadata_steps(l);
  MetadataBuilder builder(device, l);
  rc_require(decode_metadata_steps_equal_oracle(device, build, builder, steps), steps_text(l, steps));
}

RC_GTEST_PROP(DecodeMetadata, EveryBufferEqualsTheOracleInEitherLayout, ()) { equals_oracle(*make_device(Backend::kHost)); }

RC_GTEST_PROP(DecodeMetadata, EveryViewIsWhatItClaimsInsideItsBuffer, ()) {
  views_as_declared(*make_device(Backend::kHost));
}

RC_GTEST_PROP(DecodeMetadata, UniformFastPathIsBitIdenticalToGeneralPath, ()) {
  fast_path_equals_general_path(*make_device(Backend::kHost));
}

RC_GTEST_PROP(DecodeMetadata, FlattenedAndNativeGiveTheSamePerTokenContextAndRequest, ()) {
  layouts_agree(*make_device(Backend::kHost));
}

RC_GTEST_PROP(DecodeMetadata, ASequenceOfStepsLeavesNoStaleRowsAndKeepsAddresses, ()) {
  steps_equal_oracle(*make_device(Backend::kHost));
}

// ---- stateful: one builder driven like an engine ---------------------------------------------------

// The model: the engine's limits and the last step it ran. The system: one builder and one set of
// input buffers, refilled every step; the addresses the builder started with.
struct EngineModel {
  MetadataLimits limits;
  std::optional<MetadataStep> last;
};
struct EngineSut {
  std::unique_ptr<Device> device = make_device(Backend::kHost);
  std::unique_ptr<MetadataBuilder> builder;
  MetadataInputs inputs;
  MetadataBuildFn* build = &metadata_build_ref;
  std::vector<uintptr_t> addresses;
  std::vector<MetadataStep> history;  // every step so far: a failure prints them as one case
  std::vector<uintptr_t> input_addresses;  // the input buffers', from the first step on
};
using EngineCommand = rc::state::Command<EngineModel, EngineSut>;

void run_engine_step(const EngineModel& m, EngineSut& sut, const MetadataStep& c) {
  sut.history.push_back(c);
  MetadataOutcome o;
  Verdict v = run_metadata_step(*sut.device, sut.build, *sut.builder, c, sut.inputs, true, o);
  if (!v && metadata_buffer_addresses(*sut.builder) != sut.addresses) {
    v = "a persistent buffer's address changed since the builder was made";
  }
  // The engine's input buffers are refilled, never replaced (the harness's own contract).
  std::vector<uintptr_t> inputs;
  for (Buffer* b : sut.inputs.all()) inputs.push_back(reinterpret_cast<uintptr_t>(b->memory->data()));
  if (sut.input_addresses.empty()) sut.input_addresses = inputs;
  RC_ASSERT(inputs == sut.input_addresses);
  if (v) rc_require("step " + std::to_string(sut.history.size() - 1) + ": " + *v, steps_text(m.limits, sut.history));
}

// A step of its own: any size, layout, path, padding and table.
struct AnyStep : EngineCommand {
  MetadataStep c;
  explicit AnyStep(const EngineModel& m) : c(*gen::metadata_step(m.limits)) {}
  void apply(EngineModel& m) const override { m.last = c; }
  void run(const EngineModel& m, EngineSut& sut) const override { run_engine_step(m, sut, c); }
  void show(std::ostream& os) const override { showValue(c, os << "any: "); }
};

// A uniform batch (the fused fast path under kAuto).
struct UniformStep : EngineCommand {
  MetadataStep c;
  explicit UniformStep(const EngineModel& m) : c(*gen::metadata_step(m.limits, MetadataMix::kUniform)) {}
  void apply(EngineModel& m) const override { m.last = c; }
  void run(const EngineModel& m, EngineSut& sut) const override { run_engine_step(m, sut, c); }
  void show(std::ostream& os) const override { showValue(c, os << "uniform: "); }
};

// The last step's shapes and views with new contents: new lengths, a new table, a new schedule.
struct Refill : EngineCommand {
  MetadataStep c;
  explicit Refill(const EngineModel& m) {
    RC_PRE(m.last.has_value());
    c = *m.last;
    for (int32_t& L : c.seq_lens) L = *rc::gen::inRange(0, 1000);
    c.table = MetadataTable::kDistinct;
    c.table_base = *rc::gen::inRange(0, 1000000);
    c.seed = *rc::gen::arbitrary<uint64_t>();
  }
  void apply(EngineModel& m) const override { m.last = c; }
  void run(const EngineModel& m, EngineSut& sut) const override { run_engine_step(m, sut, c); }
  void show(std::ostream& os) const override { showValue(c, os << "refill: "); }
};

// The last batch minus its last requests, with other graph padding: the tail it leaves must be zero.
struct Shrink : EngineCommand {
  MetadataStep c;
  explicit Shrink(const EngineModel& m) {
    RC_PRE(m.last.has_value() && m.last->B() > 0);
    c = *m.last;
    const int64_t B = *rc::gen::inRange<int64_t>(0, c.B());
    c.decode_lens.resize(static_cast<size_t>(B));
    c.seq_lens.resize(static_cast<size_t>(B));
    if (c.table == MetadataTable::kPaged) c.paged_table.resize(static_cast<size_t>(B * c.W));
    const bool flat = c.layout == MetadataLayout::kFlattened;
    c.num_padded_tokens = flat && *rc::gen::arbitrary<bool>()
                              ? *rc::gen::inRange<int64_t>(c.T(), m.limits.max_batched_tokens + 1) : -1;
  }
  void apply(EngineModel& m) const override { m.last = c; }
  void run(const EngineModel& m, EngineSut& sut) const override { run_engine_step(m, sut, c); }
  void show(std::ostream& os) const override { showValue(c, os << "shrink: "); }
};

// Up to about 8 steps: growing, shrinking, uniform and not, both layouts, graph padding changing.
void engine(MetadataBuildFn* build) {
  EngineModel model;
  model.limits = *gen::metadata_limits();
  EngineSut sut;
  sut.builder = std::make_unique<MetadataBuilder>(*sut.device, model.limits);
  sut.build = build;
  sut.addresses = metadata_buffer_addresses(*sut.builder);
  const auto commands = *rc::gen::resize(
      8, rc::state::gen::commands(model, rc::state::gen::execOneOfWithArgs<AnyStep, UniformStep, Refill, Shrink>()));
  rc::state::runAll(commands, model, sut);
}

RC_GTEST_PROP(DecodeMetadata, AnEnginesStepsOnOneBuilderEachEqualTheOracle, ()) { engine(&metadata_build_ref); }

// ---- the properties catch wrong builds -------------------------------------------------------------
// Each runs the reference build and then does one wrong thing a real bug would do (host only: they
// read the batch's device tensors directly).

std::vector<int32_t> host_seq_lens(const MetadataBatch& b) {
  const int32_t* p = b.seq_lens.data<int32_t>();
  return std::vector<int32_t>(p, p + b.seq_lens.view.size(0));
}
void write_int(GuardedMemory& m, int64_t element, int32_t x) { m.write(4 * element, &x, 4); }

// ctx = L - d + t + 1 without max(0, .): a short request gets a negative length.
MetadataResult unclamped_context(MetadataBuilder& m, const MetadataBatch& batch) {
  MetadataResult r = m.build(batch);
  const std::vector<int32_t> L = host_seq_lens(batch);
  int64_t row = 0;
  for (size_t b = 0; b < L.size(); ++b) {
    const int32_t d = batch.host_decode_lens[b];
    for (int32_t t = 0; t < d; ++t, ++row) {
      const auto ctx = static_cast<int32_t>(int64_t{L[b]} - d + t + 1);
      if (r.layout == MetadataLayout::kFlattened) write_int(m.seq_lens_memory(), row, ctx);
      else write_int(m.context_lens_memory(), static_cast<int64_t>(b) * r.next_n_live + t, ctx);
    }
  }
  return r;
}

// vLLM's native context: L - next_n' + j + 1 in every slot, right only for uniform batches.
MetadataResult native_context_of_next_n_live(MetadataBuilder& m, const MetadataBatch& batch) {
  MetadataResult r = m.build(batch);
  if (r.layout != MetadataLayout::kNative) return r;
  const std::vector<int32_t> L = host_seq_lens(batch);
  const int32_t n = r.next_n_live;
  for (size_t b = 0; b < L.size(); ++b) {
    for (int32_t j = 0; j < n; ++j) {
      write_int(m.context_lens_memory(), static_cast<int64_t>(b) * n + j, std::max<int32_t>(0, L[b] - n + j + 1));
    }
  }
  return r;
}

// vLLM's non-contiguous context_lens: rows of the configured next_n, not of next_n'.
MetadataResult native_rows_of_next_n(MetadataBuilder& m, const MetadataBatch& batch) {
  MetadataResult r = m.build(batch);
  if (r.layout == MetadataLayout::kNative) {
    const View& v = r.context_lens.view;
    r.context_lens.view = View(DType::kI32, v.shape(), {m.limits().next_n, 1});
  }
  return r;
}

// The flattened block table's view strided by the source's W instead of the buffer's width.
MetadataResult flat_table_stride_of_w(MetadataBuilder& m, const MetadataBatch& batch) {
  MetadataResult r = m.build(batch);
  if (r.layout == MetadataLayout::kFlattened) {
    const View& v = r.block_table.view;
    r.block_table.view = View(DType::kI32, v.shape(), {v.size(1), 1});
  }
  return r;
}

// The fused kernel placing row r at request r / next_n (the configured one, not the batch's d).
MetadataResult fast_path_rows_of_next_n(MetadataBuilder& m, const MetadataBatch& batch) {
  MetadataResult r = m.build(batch);
  if (r.path != MetadataPath::kUniform) return r;
  const View& src = batch.block_table.view;
  const int64_t B = src.size(0), W = src.size(1), width = m.limits().block_table_width;
  for (int64_t row = 0; row < r.num_decode_tokens; ++row) {
    const int64_t b = std::min<int64_t>(row / m.limits().next_n, B - 1);
    m.block_table_memory().write(4 * row * width, batch.block_table.data<int32_t>() + b * src.stride(0), 4 * W);
  }
  return r;
}

// The tail reset skipped: rows a larger step dirtied keep whatever they held.
MetadataResult stale_tail(MetadataBuilder& m, const MetadataBatch& batch) {
  const int64_t dirty = m.flat_dirty_rows(), width = m.limits().block_table_width;
  std::vector<int32_t> seq(static_cast<size_t>(dirty)), table(static_cast<size_t>(dirty * width));
  m.seq_lens_memory().read(0, seq.data(), 4 * dirty);
  m.block_table_memory().read(0, table.data(), 4 * dirty * width);
  MetadataResult r = m.build(batch);
  if (r.layout == MetadataLayout::kFlattened && dirty > r.num_decode_tokens) {
    const int64_t T = r.num_decode_tokens;
    m.seq_lens_memory().write(4 * T, seq.data() + T, 4 * (dirty - T));
    m.block_table_memory().write(4 * T * width, table.data() + T * width, 4 * (dirty - T) * width);
  }
  return r;
}

TEST(DecodeMetadata, EachPropertyReportsItsWrongBuild) {
  const auto device = make_device(Backend::kHost);
  Device& d = *device;
  EXPECT_FALSE(rc::check("equals_oracle: unclamped context", [&] { equals_oracle(d, &unclamped_context); }));
  EXPECT_FALSE(rc::check("views_as_declared: native rows of next_n", [&] { views_as_declared(d, &native_rows_of_next_n); }));
  EXPECT_FALSE(rc::check("views_as_declared: table stride W", [&] { views_as_declared(d, &flat_table_stride_of_w); }));
  EXPECT_FALSE(rc::check("fast path: rows of next_n", [&] { fast_path_equals_general_path(d, &fast_path_rows_of_next_n); }));
  EXPECT_FALSE(rc::check("layouts: vLLM native context", [&] { layouts_agree(d, &native_context_of_next_n_live); }));
  EXPECT_FALSE(rc::check("steps: stale tail", [&] { steps_equal_oracle(d, &stale_tail); }));
  EXPECT_FALSE(rc::check("engine: stale tail", [] { engine(&stale_tail); }));
}

// A result whose views are not what the contract says is reported, naming the view: wrong dtype,
// shape, strides, base, a view past its buffer, a view the layout leaves empty.
TEST(DecodeMetadata, AResultWithAWrongViewIsReported) {
  const auto device = make_device(Backend::kHost);
  MetadataLimits l;
  l.max_batched_tokens = 12, l.max_requests = 4, l.next_n = 4, l.block_table_width = 5;
  MetadataBuilder builder(*device, l);
  MetadataStep c;
  c.decode_lens = {3, 1, 2}, c.seq_lens = {10, 7, 12}, c.W = 3;
  MetadataInputs s;
  MetadataOutcome o;
  ASSERT_EQ(run_metadata_step(*device, &metadata_build_ref, builder, c, s, true, o).value_or(""), "");
  const DeviceTensor table = metadata_batch(s, c).block_table;
  using Break = std::function<void(MetadataResult&)>;
  const std::vector<std::pair<const char*, Break>> flat = {
      {"seq_lens", [](MetadataResult& r) { r.seq_lens.view = View::contiguous(DType::kF32, {6}); }},
      {"seq_lens", [](MetadataResult& r) { r.seq_lens.view = View::contiguous(DType::kI32, {5}); }},
      {"decode_lens", [](MetadataResult& r) { r.decode_lens.view = View(DType::kI32, {6}, {2}); }},
      {"decode_lens", [](MetadataResult& r) { r.decode_lens.base = static_cast<uint8_t*>(r.decode_lens.base) + 4; }},
      {"block_table", [](MetadataResult& r) { r.block_table.view = View(DType::kI32, {6, 3}, {5, 1}, 4); }},
      {"block_table", [](MetadataResult& r) { r.block_table.view = View(DType::kI32, {6, 3}, {1, 6}); }},
      {"context_lens", [&](MetadataResult& r) { r.context_lens = {builder.context_lens_memory().data(), View::contiguous(DType::kI32, {3, 3})}; }},
      {"path", [](MetadataResult& r) { r.path = MetadataPath::kUniform; }},
      {"rows", [](MetadataResult& r) { r.rows = 7; }},
  };
  for (const auto& [what, breaks] : flat) {
    MetadataResult r = o.result;
    breaks(r);
    const Verdict v = metadata_result_as_declared(builder, c, r, table);
    ASSERT_TRUE(v.has_value()) << what;
    EXPECT_NE(v->find(what), std::string::npos) << *v;
  }
  c.layout = MetadataLayout::kNative;
  ASSERT_EQ(run_metadata_step(*device, &metadata_build_ref, builder, c, s, true, o).value_or(""), "");
  const std::vector<std::pair<const char*, Break>> native = {
      {"context_lens", [](MetadataResult& r) { r.context_lens.view = View(DType::kI32, {3, 3}, {4, 1}); }},
      {"context_lens", [](MetadataResult& r) { r.context_lens.view = View(DType::kI32, {3, 3}, {1, 3}); }},
      {"context_lens", [](MetadataResult& r) { r.context_lens.view = View::contiguous(DType::kI32, {3, 4}); }},
      {"context_lens", [](MetadataResult& r) { r.context_lens.view = View::contiguous(DType::kI32, {9, 3}); }},
      {"block_table", [](MetadataResult& r) { r.block_table.view = View::contiguous(DType::kI32, {3, 2}); }},
      {"block_table", [](MetadataResult& r) { r.block_table.view = View(DType::kI32, {3, 3}, {3, 1}, 4); }},
      {"seq_lens", [&](MetadataResult& r) { r.seq_lens = {builder.seq_lens_memory().data(), View::contiguous(DType::kI32, {6})}; }},
  };
  for (const auto& [what, breaks] : native) {
    MetadataResult r = o.result;
    breaks(r);
    const Verdict v = metadata_result_as_declared(builder, c, r, table);
    ASSERT_TRUE(v.has_value()) << what;
    EXPECT_NE(v->find(what), std::string::npos) << *v;
  }
}

// ---- case text ---------------------------------------------------------------------------------------

// A case printed as text reads back to the same case, and runs through the registry.
RC_GTEST_PROP(DecodeMetadataCaseText, RoundTripsAndRunsThroughTheRegistry, ()) {
  const MetadataLimits l = *gen::metadata_limits();
  const MetadataStep c = *gen::metadata_step(l);
  std::vector<std::string> properties = {"decode_metadata.equals_oracle", "decode_metadata.views_as_declared",
                                         "decode_metadata.layouts_agree"};
  if (c.uniform()) properties.push_back("decode_metadata.fast_path_equals_general_path");
  const std::string property = *rc::gen::elementOf(properties);
  const CaseText t = case_text(property, l, c);
  const CaseText back = CaseText::parse(t.format());
  RC_ASSERT(back == t);
  const auto [l2, c2] = decode_metadata_from_text(back);
  RC_ASSERT(case_text(property, l2, c2) == t);
  if (*rc::gen::inRange(0, 8) == 0) {  // running is the slow part: one case in eight
    const ReproResult r = run_case_text(back);
    if (r.verdict) RC_FAIL(*r.verdict);
  }
}

RC_GTEST_PROP(DecodeMetadataCaseText, StepsRoundTripAndRunThroughTheRegistry, ()) {
  const MetadataLimits l = *gen::metadata_limits();
  const std::vector<MetadataStep> steps = *gen::metadata_steps(l);
  const CaseText t = steps_text(l, steps);
  const CaseText back = CaseText::parse(t.format());
  const auto [l2, steps2] = decode_metadata_steps_from_text(back);
  RC_ASSERT(steps_text(l2, steps2) == t);
  if (*rc::gen::inRange(0, 8) == 0) {  // running is the slow part: one case in eight
    const ReproResult r = run_case_text(back);
    if (r.verdict) RC_FAIL(*r.verdict);
  }
}

// Every family's case as the schema draws it (limits and batches together, max_tokens after the
// batches) writes, reads back through that family's reader and writes the same text.
RC_GTEST_PROP(DecodeMetadataCaseText, EveryFamilysDrawnCaseReadsBackAsItself, ()) {
  const MetadataFamily f = *rc::gen::element(MetadataFamily::kOneStep, MetadataFamily::kUniform, MetadataFamily::kSteps);
  const MetadataCase c = *draw_case<MetadataCase>(2, f);
  RC_ASSERT(f != MetadataFamily::kUniform || c.steps[0].uniform());
  int64_t most = 1;
  for (const MetadataStep& s : c.steps) most = std::max(most, s.T());
  RC_TAG(c.limits.max_batched_tokens == most ? "last row filled" : "room");
  CaseText t;
  write_case(c, t, f);
  CaseText again;
  write_case(read_case<MetadataCase>(CaseText::parse(t.format()), f), again, f);
  RC_ASSERT(again.format() == t.format());
}

// The case a failing property prints is the failing case: parsed back it fails again on the wrong
// build; on the reference (what `mlacheck repro` runs) it passes.
TEST(DecodeMetadataCaseText, AFailingPropertyPrintsACaseThatReproduces) {
  std::string printed;
  const auto device = make_device(Backend::kHost);
  rc::check("unclamped context, for its printed case", [&] {
    const MetadataLimits l = *gen::metadata_limits();
    const MetadataStep c = *gen::metadata_step(l);
    MetadataBuilder builder(*device, l);
    const CaseText t = case_text("decode_metadata.equals_oracle", l, c);
    const Verdict v = decode_metadata_equals_oracle(*device, &unclamped_context, builder, c);
    if (v) printed = t.format();
    rc_require(v, t);
  });
  ASSERT_FALSE(printed.empty()) << "the wrong build was never caught";
  const CaseText t = CaseText::parse(printed);
  const auto [l, c] = decode_metadata_from_text(t);
  MetadataBuilder builder(*device, l);
  const Verdict again = decode_metadata_equals_oracle(*device, &unclamped_context, builder, c);
  ASSERT_TRUE(again.has_value()) << printed;
  EXPECT_NE(again->find("outside [0, L"), std::string::npos) << *again;
  EXPECT_FALSE(run_case_text(t).verdict.has_value()) << printed;
}

// A hand-edited case with a value out of range or inconsistent is refused with one line.
TEST(DecodeMetadataCaseText, MalformedCasesAreRefusedWithOneLine) {
  MetadataLimits l;
  l.max_batched_tokens = 8, l.max_requests = 3, l.next_n = 3, l.block_table_width = 4;
  MetadataStep c;
  c.decode_lens = {2, 1}, c.seq_lens = {12, 5}, c.W = 3;
  const CaseText good = case_text("decode_metadata.equals_oracle", l, c);
  EXPECT_NO_THROW(decode_metadata_from_text(good));
  MetadataStep p = c;
  p.table = MetadataTable::kPaged, p.paged_table = {1, 2, 3, 4, 5, 6};
  const CaseText paged = case_text("decode_metadata.equals_oracle", l, p);
  EXPECT_NO_THROW(decode_metadata_from_text(paged));
  const std::vector<std::tuple<const CaseText*, std::string, std::string>> edits = {
      {&good, "seq_lens 12 5", "seq_lens 12"},         {&good, "decode_lens 2 1", "decode_lens 4 1"},
      {&good, "decode_lens 2 1", "decode_lens 1 1 1 1"}, {&good, "seq_lens 12 5", "seq_lens 12 -5"},
      {&good, "table_cols 3", "table_cols 5"},          {&good, "table_cols 3", "table_cols 0"},
      {&good, "warp 32", "warp 48"},                    {&good, "layout flattened", "layout sideways"},
      {&good, "num_padded_tokens -1", "num_padded_tokens 2"}, {&good, "num_padded_tokens -1", "num_padded_tokens 9"},
      {&good, "query_start_loc 1", "query_start_loc 0"}, {&good, "table_offset 0", "table_offset 65"},
      {&good, "max_tokens 8", "max_tokens 2"},          {&good, "next_n 3", "next_n 0"},
      {&good, "seed 0x0", "seed -1"},                   {&paged, "block_table 1 2 3 4 5 6", "block_table 1 2 3 4 5"},
      {&good, "table_width 4", "table_width 4194304"},
  };
  for (const auto& [base, from, to] : edits) {
    std::string text = base->format();
    const size_t at = text.find(from + "\n");
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    try {
      decode_metadata_from_text(CaseText::parse(text));
      ADD_FAILURE() << to << ": accepted";
    } catch (const Error& err) {
      EXPECT_EQ(std::string(err.what()).find('\n'), std::string::npos) << err.what();
    }
  }
  // A native batch with graph padding, and the fast-path property on a non-uniform batch.
  std::string text = good.format();
  text.replace(text.find("layout flattened"), 16, "layout native");
  text.replace(text.find("num_padded_tokens -1"), 20, "num_padded_tokens 5");
  EXPECT_THROW(decode_metadata_from_text(CaseText::parse(text)), Error);
  CaseText fast = case_text("decode_metadata.fast_path_equals_general_path", l, c);
  EXPECT_THROW(run_case_text(fast), Error);
}

// ---- plain cases ---------------------------------------------------------------------------------

MetadataLimits limits(int64_t tokens, int64_t requests, int32_t next_n, int64_t width) {
  MetadataLimits l;
  l.max_batched_tokens = tokens;
  l.max_requests = requests;
  l.next_n = next_n;
  l.block_table_width = width;
  return l;
}

MetadataStep make_step(std::vector<int32_t> seq_lens, std::vector<int32_t> decode_lens, int64_t W,
                       MetadataLayout layout = MetadataLayout::kFlattened) {
  MetadataStep c;
  c.seq_lens = std::move(seq_lens);
  c.decode_lens = std::move(decode_lens);
  c.W = W;
  c.layout = layout;
  return c;
}

// One step on the reference build, checked against the oracle; the outcome.
MetadataOutcome step(Device& device, MetadataBuilder& builder, const MetadataStep& c) {
  MetadataInputs s;
  MetadataOutcome o;
  const Verdict v = run_metadata_step(device, &metadata_build_ref, builder, c, s, true, o);
  EXPECT_EQ(v.value_or(""), "");
  return o;
}

// Production sizes: 256 requests, next_n 4, 2560 block-table columns (163,840 tokens in pages of 64),
// uniform (fast path, aligned rows) and non-uniform with padding, native, then a smaller step.
void production_steps(Device& device) {
  const MetadataLimits l = limits(1024, 256, 4, 2560);
  MetadataBuilder builder(device, l);
  std::vector<int32_t> seq(256), uniform(256, 2), mixed(256);
  for (int i = 0; i < 256; ++i) {
    seq[i] = i % 17 == 0 ? 0 : 1 + (i * 7919) % 163840;
    mixed[i] = seq[i] == 0 ? 0 : 1 + i % 4;
  }
  MetadataStep u = make_step(seq, uniform, 2560);
  u.table_row_pad = 4;
  MetadataStep m = make_step(seq, mixed, 2560);
  m.table_row_pad = 1, m.table_offset = 3, m.num_padded_tokens = 1000;
  MetadataStep n = m;
  n.layout = MetadataLayout::kNative, n.num_padded_tokens = -1;
  const std::vector<MetadataStep> steps = {u, m, n, make_step({100, 200}, {4, 4}, 2000)};
  EXPECT_EQ(decode_metadata_steps_equal_oracle(device, &metadata_build_ref, builder, steps).value_or(""), "");
}

TEST(DecodeMetadata, ProductionSizes) { production_steps(*make_device(Backend::kHost)); }

TEST(DecodeMetadata, OnCudaWhenAGpuIsPresent) {
  std::string why;
  if (!device_usable(Backend::kCuda, &why)) GTEST_SKIP() << "skipped: no GPU (" << why << ")";
  const auto device = make_device(Backend::kCuda);
  Device& d = *device;
  EXPECT_TRUE(rc::check("equals the oracle on cuda", [&] { equals_oracle(d); }));
  EXPECT_TRUE(rc::check("views as declared on cuda", [&] { views_as_declared(d); }));
  EXPECT_TRUE(rc::check("fast path == general path on cuda", [&] { fast_path_equals_general_path(d); }));
  EXPECT_TRUE(rc::check("layouts agree on cuda", [&] { layouts_agree(d); }));
  EXPECT_TRUE(rc::check("steps on cuda", [&] { steps_equal_oracle(d); }));
  production_steps(d);
}

TEST(DecodeMetadata, HandWorkedBatch) {
  // seq_lens [10, 7, 12, 0], decode_lens [3, 1, 4, 0]: ctx = max(0, L - d + t + 1).
  const auto device = make_device(Backend::kHost);
  MetadataBuilder builder(*device, limits(12, 4, 4, 3));
  MetadataStep c = make_step({10, 7, 12, 0}, {3, 1, 4, 0}, 3);
  const MetadataOutcome flat = step(*device, builder, c);
  EXPECT_EQ(flat.result.path, MetadataPath::kGeneral);
  EXPECT_EQ(std::vector<int32_t>(flat.seq_lens.begin(), flat.seq_lens.begin() + 8),
            (std::vector<int32_t>{8, 9, 10, 7, 9, 10, 11, 12}));
  EXPECT_EQ(std::vector<int32_t>(flat.decode_lens.begin(), flat.decode_lens.begin() + 9),
            (std::vector<int32_t>{1, 1, 1, 1, 1, 1, 1, 1, 0}));
  const std::vector<int32_t> rows{0, 0, 0, 1, 2, 2, 2, 2};  // each token's request
  for (size_t r = 0; r < rows.size(); ++r) EXPECT_EQ(flat.block_table[r * 3 + 2], 1000 * rows[r] + 2) << r;
  c.layout = MetadataLayout::kNative;
  const MetadataOutcome native = step(*device, builder, c);
  EXPECT_EQ(std::vector<int32_t>(native.context_lens.begin(), native.context_lens.begin() + 16),
            (std::vector<int32_t>{8, 9, 10, 0, 7, 0, 0, 0, 9, 10, 11, 12, 0, 0, 0, 0}));
}

TEST(DecodeMetadata, FastPathOnlyForEqualNonZeroDecodeLengths) {
  const auto device = make_device(Backend::kHost);
  MetadataBuilder builder(*device, limits(16, 4, 4, 2));
  EXPECT_EQ(step(*device, builder, make_step({5, 6}, {2, 2}, 2)).result.path, MetadataPath::kUniform);
  // Non-uniform with max > 1 (vLLM #39458 took the fast kernel here), and uniform plus padding.
  EXPECT_EQ(step(*device, builder, make_step({5, 6}, {1, 2}, 2)).result.path, MetadataPath::kGeneral);
  EXPECT_EQ(step(*device, builder, make_step({5, 6, 0}, {2, 2, 0}, 2)).result.path, MetadataPath::kGeneral);
}

TEST(DecodeMetadata, GraphPaddingRowsAreZeroAfterALargerStep) {
  const auto device = make_device(Backend::kHost);
  MetadataBuilder builder(*device, limits(16, 4, 4, 2));
  step(*device, builder, make_step({9, 9, 9, 9}, {4, 4, 4, 4}, 2));
  MetadataStep small = make_step({3, 0}, {2, 0}, 2);
  small.num_padded_tokens = 8;  // the consumer reads 8 rows; rows 2..7 held the last step's tokens
  const MetadataOutcome o = step(*device, builder, small);
  EXPECT_EQ(o.result.rows, 8);
  for (int r = 2; r < 16; ++r) EXPECT_EQ(o.seq_lens[r], 0) << r;
  EXPECT_EQ(builder.flat_dirty_rows(), 2);
}

TEST(DecodeMetadata, ConstructionZeroesEveryBuffer) {
  const auto device = make_device(Backend::kHost);
  MetadataBuilder builder(*device, limits(7, 3, 2, 5));
  for (GuardedMemory* m : {&builder.seq_lens_memory(), &builder.decode_lens_memory(), &builder.block_table_memory(),
                           &builder.context_lens_memory()}) {
    std::vector<int32_t> all(static_cast<size_t>(m->size() / 4));
    m->read(0, all.data(), m->size());
    for (int32_t x : all) ASSERT_EQ(x, 0) << m->name();
  }
  EXPECT_EQ(builder.flat_dirty_rows(), 0);
  EXPECT_EQ(builder.native_dirty_elements(), 0);
}

TEST(DecodeMetadata, IsRegistered) {
  const auto device = make_device(Backend::kHost);
  const auto builder = registry().find<MetadataBuilderFactory>("decode_metadata@ref")(*device, limits(4, 2, 2, 3));
  EXPECT_EQ(builder->limits().block_table_width, 3);
}

// ---- refused input ---------------------------------------------------------------------------------

// A valid host batch whose fields an error test breaks one at a time.
struct HostBatch {
  std::vector<int32_t> seq{10, 7}, dec{3, 1}, qsl{0, 3, 4}, table{1, 2, 3, 4, 5, 6, 7, 8};
  MetadataBatch batch() {
    MetadataBatch b;
    b.seq_lens = {seq.data(), View::contiguous(DType::kI32, {2})};
    b.decode_lens = {dec.data(), View::contiguous(DType::kI32, {2})};
    b.query_start_loc = {qsl.data(), View::contiguous(DType::kI32, {3})};
    b.block_table = {table.data(), View::contiguous(DType::kI32, {2, 4})};
    b.host_decode_lens = dec;
    b.host_seq_lens = seq;
    return b;
  }
};

TEST(DecodeMetadata, BadInputIsRefusedWithOneLineBeforeAnyLaunch) {
  const auto device = make_device(Backend::kHost);
  MetadataBuilder builder(*device, limits(6, 2, 4, 4));
  HostBatch h;
  ASSERT_NO_THROW(builder.build(h.batch()));
  GuardedMemory* buffers[] = {&builder.seq_lens_memory(), &builder.decode_lens_memory(), &builder.block_table_memory(),
                              &builder.context_lens_memory()};
  const auto refused = [&](MetadataBatch b, const char* what) {
    for (GuardedMemory* m : buffers) {
      m->clear_outputs();
      m->arm();
    }
    const int64_t dirty = builder.flat_dirty_rows();
    try {
      builder.build(b);
      ADD_FAILURE() << what << ": accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << what << ": " << e.what();
    }
    for (GuardedMemory* m : buffers) EXPECT_TRUE(m->check().ok()) << what << ": " << m->check().describe();
    EXPECT_EQ(builder.flat_dirty_rows(), dirty) << what;
  };
  std::vector<int32_t> wide(16, 1);
  using Break = std::function<void(MetadataBatch&)>;
  const std::vector<std::pair<const char*, Break>> cases = {
      {"B > max_requests",
       [&](MetadataBatch& b) {
         b.seq_lens.view = b.decode_lens.view = View::contiguous(DType::kI32, {3});
         b.query_start_loc.view = View::contiguous(DType::kI32, {4});
         b.block_table = {wide.data(), View::contiguous(DType::kI32, {3, 4})};
         b.host_decode_lens = b.host_seq_lens = {1, 1, 1};
       }},
      {"tokens > max_batched_tokens", [](MetadataBatch& b) { b.host_decode_lens = {4, 4}; }},
      {"padded tokens > max_batched_tokens", [](MetadataBatch& b) { b.num_padded_tokens = 7; }},
      {"padded tokens < num_decode_tokens", [](MetadataBatch& b) { b.num_padded_tokens = 3; }},
      {"padded tokens in the native layout",
       [](MetadataBatch& b) { b.layout = MetadataLayout::kNative, b.num_padded_tokens = 6; }},
      {"W > configured width",
       [&](MetadataBatch& b) { b.block_table = {wide.data(), View::contiguous(DType::kI32, {2, 5})}; }},
      {"decode_len > next_n", [](MetadataBatch& b) { b.host_decode_lens = {5, 0}; }},
      {"negative decode_len", [](MetadataBatch& b) { b.host_decode_lens = {-1, 5}; }},
      {"non-unit column stride", [](MetadataBatch& b) { b.block_table.view = View(DType::kI32, {2, 2}, {4, 2}); }},
      {"negative seq_len", [](MetadataBatch& b) { b.host_seq_lens = {10, -1}; }},
      {"num_decode_tokens != sum of decode_lens", [](MetadataBatch& b) { b.num_decode_tokens = 5; }},
      {"host decode_lens of the wrong length", [](MetadataBatch& b) { b.host_decode_lens = {3}; }},
      {"host seq_lens of the wrong length", [](MetadataBatch& b) { b.host_seq_lens = {3, 4, 5}; }},
      {"decode_lens view of the wrong length",
       [](MetadataBatch& b) { b.decode_lens.view = View::contiguous(DType::kI32, {1}); }},
      {"query_start_loc of the wrong length",
       [](MetadataBatch& b) { b.query_start_loc.view = View::contiguous(DType::kI32, {2}); }},
      {"flattened without query_start_loc", [](MetadataBatch& b) { b.query_start_loc = {}; }},
      {"block_table rows != B", [](MetadataBatch& b) { b.block_table.view = View::contiguous(DType::kI32, {1, 4}); }},
      {"fp32 seq_lens", [](MetadataBatch& b) { b.seq_lens.view = View::contiguous(DType::kF32, {2}); }},
      {"strided seq_lens", [](MetadataBatch& b) { b.seq_lens.view = View(DType::kI32, {2}, {2}); }},
      {"int64 block_table", [](MetadataBatch& b) { b.block_table.view = View::contiguous(DType::kI64, {2, 2}); }},
  };
  for (const auto& [what, breaks] : cases) {
    MetadataBatch b = h.batch();
    breaks(b);
    refused(b, what);
  }
  // A refused step leaves the builder usable.
  EXPECT_EQ(builder.build(h.batch()).num_decode_tokens, 4);
  EXPECT_THROW(MetadataBuilder(*device, limits(0, 2, 4, 4)), Error);
  EXPECT_THROW(MetadataBuilder(*device, limits(4, 2, 0, 4)), Error);
  EXPECT_THROW(MetadataBuilder(*device, limits(4, 2, 4, 0)), Error);
}

}  // namespace
}  // namespace mlacheck::kernels
