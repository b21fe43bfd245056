// Tests of kernels/mla_decode_impl.h: the registered properties (eager calls against the oracle with
// scales changing between calls; graph replay after the lengths grow equal to the oracle and to an
// eager launch; an engine's sequence of eager calls, captures and replays on one impl), each catching
// a wrong impl (scratch freed after a capture, T3, among them); their case text; the configured
// worst case fitting the workspace; and non-uniform query lengths refused (host backend here; cuda too when a GPU is usable).
#include "kernels/mla_decode_impl.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <array>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/registry.h"
#include "properties/mla_decode_impl_gen.h"
#include "properties/mla_decode_impl_properties.h"
#include "properties/mla_decode_properties.h"
#include "properties/property_registry.h"
#include "harness/rc_verdict.h"

namespace mlacheck {
namespace {


using kernels::make_device;
using kernels::DeviceGraph;
using kernels::DeviceTensor;
using kernels::MlaDecodeCall;
using kernels::MlaDecodeImpl;
using kernels::MlaDecodeImplConfig;

MlaDecodeImplFactory* ref_impl() { return kernels::registry().find<MlaDecodeImplFactory>("mla_decode_impl@ref"); }

// "" when the property holds.
std::string failure(const Verdict& v) { return v ? *v : ""; }

CaseText calls_text(const MlaDecodeImplCallsCase& c) {
  CaseText t = case_header("mla_decode_impl.calls_equal_oracle", "mla_decode_impl@ref");
  mla_decode_impl_calls_to_text(c, t);
  return t;
}
CaseText replay_text(const MlaDecodeImplReplayCase& c) {
  CaseText t = case_header("mla_decode_impl.replay_equals_eager", "mla_decode_impl@ref");
  mla_decode_impl_replay_to_text(c, t);
  return t;
}
CaseText sequence_text(const MlaDecodeImplSequenceCase& c) {
  CaseText t = case_header("mla_decode_impl.engine_sequence", "mla_decode_impl@ref");
  mla_decode_impl_sequence_to_text(c, t);
  return t;
}

// ---- wrong impls: what real bugs did ------------------------------------------------------------

// vLLM #41778: the scales of the first call cached and used for every later one.
class CachedScaleImpl : public MlaDecodeImpl {
 public:
  using MlaDecodeImpl::MlaDecodeImpl;
  void forward(const MlaDecodeCall& call) override {
    if (!first_) first_ = std::array<double, 3>{call.base_scale, call.q_scale, call.k_scale};
    MlaDecodeCall c = call;
    c.base_scale = (*first_)[0], c.q_scale = (*first_)[1], c.k_scale = (*first_)[2];
    MlaDecodeImpl::forward(c);
  }

 private:
  std::optional<std::array<double, 3>> first_;
};

// A graph over copies of seq_lens and the block table taken at capture (metadata staged once):
// replays keep the capture-time lengths and pages. (Copying the table too keeps the wrong graph
// inside the cache: capture-time lengths over a later table would read its garbage columns.)
class FrozenLengthsImpl : public MlaDecodeImpl {
 public:
  using MlaDecodeImpl::MlaDecodeImpl;
  std::unique_ptr<DeviceGraph> capture(int64_t B, int64_t q_len, const DeviceTensor& kv_cache, double base_scale,
                                       double q_scale, double k_scale) override {
    const kernels::MlaGraphBuffers g = graph_buffers(B, q_len);
    MlaDecodeCall call;
    call.q = g.q, call.kv_cache = kv_cache, call.o = g.o, call.lse = g.lse;
    call.seq_lens = {freeze(graph_seq_lens_memory(), 4 * B), g.seq_lens.view};
    call.block_table = {freeze(graph_block_table_memory(), 4 * B * config_.block_table_width), g.block_table.view};
    call.base_scale = base_scale, call.q_scale = q_scale, call.k_scale = k_scale;
    const int64_t splits = splits_for(B, q_len, config_.block_table_width * config_.page);
    return device_.capture([&] { launch(call, splits); });
  }

 private:
  // A copy of the first bytes of m, alive as long as the impl (a graph may be replayed until then).
  uint8_t* freeze(GuardedMemory& m, int64_t bytes) {
    std::vector<uint8_t> host(static_cast<size_t>(bytes));
    m.read(0, host.data(), bytes);
    frozen_.push_back(device_.allocate("frozen graph metadata", bytes));
    frozen_.back()->write(0, host.data(), bytes);
    return frozen_.back()->data();
  }
  std::vector<std::unique_ptr<GuardedMemory>> frozen_;
};

template <class Impl>
std::unique_ptr<MlaDecodeImpl> make_impl(kernels::Device& device, const MlaDecodeImplConfig& config) {
  return std::make_unique<Impl>(device, config);
}

// ---- the registered properties ------------------------------------------------------------------

RC_GTEST_PROP(MlaDecodeImpl, EagerCallsEqualTheOracleWithTheScalesOfEachCall, ()) {
  const auto device = make_device(Backend::kHost);
  const MlaDecodeImplCallsCase c = *gen::mla_decode_impl_calls_case();
  rc_require(mla_decode_impl_calls_equal_oracle(*device, ref_impl(), c), calls_text(c));
}

RC_GTEST_PROP(MlaDecodeImpl, ReplayAfterTheLengthsGrowEqualsEagerAndTheOracle, ()) {
  const auto device = make_device(Backend::kHost);
  const MlaDecodeImplReplayCase c = *gen::mla_decode_impl_replay_case();
  rc_require(mla_decode_impl_replay_equals_eager(*device, ref_impl(), c), replay_text(c));
}

TEST(MlaDecodeImplWrong, ACachedScaleFailsCallsEqualOracle) {
  EXPECT_FALSE(rc::check("an impl that caches the first call's scales", [] {
    const auto device = make_device(Backend::kHost);
    const MlaDecodeImplCallsCase c = *gen::mla_decode_impl_calls_case();
    if (Verdict v = mla_decode_impl_calls_equal_oracle(*device, &make_impl<CachedScaleImpl>, c)) RC_FAIL(*v);
  }));
}

TEST(MlaDecodeImplWrong, AGraphKeepingTheCaptureLengthsFailsReplayEqualsEager) {
  EXPECT_FALSE(rc::check("a graph over the capture-time seq_lens", [] {
    const auto device = make_device(Backend::kHost);
    const MlaDecodeImplReplayCase c = *gen::mla_decode_impl_replay_case();
    if (Verdict v = mla_decode_impl_replay_equals_eager(*device, &make_impl<FrozenLengthsImpl>, c)) RC_FAIL(*v);
  }));
}

// ---- hand-made cases -----------------------------------------------------------------------------

// A dense case over contiguous views: B requests of lens over pages in order (request b's column w
// is page b * W + w).
MlaDecodeCase hand_call(int64_t B, int64_t q_len, int64_t H, int64_t page, int64_t W, std::vector<int32_t> lens,
                        bool kv_fp8, uint64_t seed) {
  MlaDecodeCase c;
  c.B = B, c.q_len = q_len, c.H = H, c.page = page, c.W = W, c.lens = std::move(lens), c.kv_fp8 = kv_fp8;
  c.num_blocks = B * W, c.seed = seed, c.pass_host_lens = true;
  c.table.resize(static_cast<size_t>(B * W));
  std::iota(c.table.begin(), c.table.end(), 0);
  return c;
}

// A graph over B_pad rows, `live` of them requests, a table of W pages of `page` tokens: step 0 with
// lengths up to 4, then two steps up to what the table holds (the first request at the most), each
// over shuffled pages.
MlaDecodeImplReplayCase hand_replay(uint64_t seed, int64_t H, int64_t page, int64_t W, int64_t B_pad, int64_t q_len,
                                    int64_t live, bool q_fp8, bool kv_fp8) {
  std::mt19937_64 rng(seed);
  MlaDecodeImplReplayCase c;
  c.config.max_batch = B_pad + 1, c.config.max_q_len = q_len, c.config.heads = H, c.config.max_splits = 8;
  c.config.block_table_width = W, c.config.page = page;
  c.config.q_dtype = q_fp8 ? DType::kFP8E4M3 : DType::kBF16;
  c.padded_batch = B_pad, c.q_len = q_len, c.num_blocks = B_pad * W + 2, c.kv_fp8 = kv_fp8;
  c.base_scale = 0.0721, c.q_scale = 0.5, c.k_scale = 1.5;
  for (const int64_t max_len : {std::min<int64_t>(4, W * page), W * page, W * page}) {
    MlaDecodeImplReplayStep s;
    s.lens.assign(static_cast<size_t>(B_pad), 0);
    for (int64_t b = 0; b < live; ++b) s.lens[static_cast<size_t>(b)] = static_cast<int32_t>(rng() % (max_len + 1));
    if (max_len > 4 && live > 0) s.lens[0] = static_cast<int32_t>(max_len);
    std::vector<int32_t> pages(static_cast<size_t>(c.num_blocks));
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng);
    s.table.assign(pages.begin(), pages.begin() + B_pad * W);
    s.seed = rng();
    c.steps.push_back(std::move(s));
  }
  return c;
}

TEST(MlaDecodeImpl, ReplayOnFixedGraphs) {
  const auto device = make_device(Backend::kHost);
  for (const MlaDecodeImplReplayCase& c : {hand_replay(1, 2, 16, 20, 3, 2, 2, false, false),  // 320 keys, 1 padding row
                                           hand_replay(2, 3, 3, 40, 2, 1, 2, true, true),     // fp8, odd page size
                                           hand_replay(3, 1, 64, 5, 4, 4, 1, false, true)}) {
    EXPECT_EQ(failure(mla_decode_impl_replay_equals_eager(*device, ref_impl(), c)), "") << replay_text(c).format();
    EXPECT_NE(failure(mla_decode_impl_replay_equals_eager(*device, &make_impl<FrozenLengthsImpl>, c)), "");
  }
}

// The worst case the impl is configured for fits the workspace it allocated (vLLM #41778 sized it
// for a fixed q_len of 8 and grew it): max batch, max q_len, max splits, red zones intact.
TEST(MlaDecodeImpl, TheConfiguredWorstCaseFitsTheWorkspace) {
  const auto device = make_device(Backend::kHost);
  const int64_t H = 2, page = 2, W = 40, B = 3, q_len = kernels::kMlaMaxQueryLen;
  MlaDecodeImplConfig cfg;
  cfg.max_batch = B, cfg.max_q_len = q_len, cfg.heads = H, cfg.max_splits = 8, cfg.block_table_width = W;
  cfg.page = page;
  MlaDecodeImpl impl(*device, cfg);
  EXPECT_EQ(impl.workspace_memory().size(), 4 * kernels::mla_decode_workspace_floats(B, q_len, H, 8));
  EXPECT_EQ(impl.splits_for(B, q_len, W * page),
            std::min<int64_t>(8, kernels::mla_decode_num_splits(B, q_len, H, W * page, 16)));
  EXPECT_EQ(failure(mla_decode_impl_eager_call(*device, impl, hand_call(B, q_len, H, page, W, {80, 79, 3}, true, 5))),
            "");
}

// The registered property of the same contract: @ref refuses and writes nothing; the K2 variant
// (q viewed as one token per row) launches and is caught, with the lengths in the verdict; a case
// whose first and last lengths are equal is refused as a case.
TEST(MlaDecodeImpl, NonUniformQueryLengthsPropertyCatchesAnImplThatLaunches) {
  const auto device = make_device(Backend::kHost);
  MlaDecodeImplNonUniformCase c;
  c.config.max_batch = 8, c.config.max_q_len = 3, c.config.heads = 2, c.config.block_table_width = 2;
  c.config.page = 4, c.config.max_splits = 2;
  c.query_lens = {2, 1, 3}, c.seq_lens = {5, 3, 8};
  const auto find = [](const char* impl) { return kernels::registry().find<MlaDecodeImplFactory>(impl); };
  EXPECT_EQ(mla_decode_impl_nonuniform_refused(*device, find("mla_decode_impl@ref"), c).value_or(""), "");
  const Verdict v = mla_decode_impl_nonuniform_refused(*device, find("mla_decode_impl@K2"), c);
  ASSERT_TRUE(v.has_value());
  EXPECT_NE(v->find("forward accepted query lengths [2 1 3] of 3 requests with q [6, 1, 2, 576]"), std::string::npos)
      << *v;
  CaseText t = case_header("mla_decode_impl.nonuniform_query_lengths_refused", "mla_decode_impl@ref");
  c.query_lens = {2, 1, 2};
  mla_decode_impl_nonuniform_to_text(c, t);
  EXPECT_THROW(mla_decode_impl_nonuniform_from_text(CaseText::parse(t.format())), Error);
}

TEST(MlaDecodeImpl, NonUniformQueryLengthsAreRefusedBeforeAnyLaunch) {
  const auto device = make_device(Backend::kHost);
  MlaDecodeImplConfig cfg;
  cfg.max_batch = 4, cfg.max_q_len = 4, cfg.heads = 2, cfg.block_table_width = 4, cfg.page = 4;
  MlaDecodeImpl impl(*device, cfg);
  const auto staged_call = [&](MlaDecodeBuffers& st, const MlaDecodeCase& c) {
    for (Buffer* b : {&st.q, &st.kv, &st.table, &st.lens, &st.workspace, &st.o, &st.lse}) b->upload(*device);
    const kernels::MlaDecodeArgs a = st.args(c);
    MlaDecodeCall call;
    call.q = a.q, call.kv_cache = a.kv_cache, call.block_table = a.block_table, call.seq_lens = a.seq_lens;
    call.o = a.o, call.lse = a.lse, call.host_seq_lens = c.lens;
    call.host_query_lens.assign(static_cast<size_t>(c.B), static_cast<int32_t>(c.q_len));
    return call;
  };
  const MlaDecodeCase c = hand_call(3, 2, 2, 4, 4, {9, 5, 12}, false, 1);
  MlaDecodeBuffers st(c);
  MlaDecodeCall call = staged_call(st, c);
  call.host_query_lens = {2, 1, 3};  // 6 tokens over 3 requests: q cannot be [3, 2, ...] of them
  for (GuardedMemory* m : {st.o.memory.get(), st.lse.memory.get(), &impl.workspace_memory()}) m->arm();
  try {
    impl.forward(call);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("query lengths [2, 1, 3]"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  for (GuardedMemory* m : {st.o.memory.get(), st.lse.memory.get(), &impl.workspace_memory()}) {
    EXPECT_TRUE(m->check().ok());
  }
  // Too many requests, q_len past the configuration, a bad configuration.
  const MlaDecodeCase big = hand_call(5, 1, 2, 4, 4, {1, 2, 3, 4, 5}, false, 2);
  MlaDecodeBuffers sb(big);
  EXPECT_THROW(impl.forward(staged_call(sb, big)), Error);
  const MlaDecodeCase long_q = hand_call(1, 5, 2, 4, 4, {9}, false, 3);
  MlaDecodeBuffers sl(long_q);
  EXPECT_THROW(impl.forward(staged_call(sl, long_q)), Error);
  for (const auto& [batch, q_len] : std::vector<std::pair<int64_t, int64_t>>{{4, 9}, {0, 1}}) {
    MlaDecodeImplConfig bad = cfg;
    bad.max_batch = batch, bad.max_q_len = q_len;
    EXPECT_THROW(MlaDecodeImpl(*device, bad), Error);
  }
}

// ---- case text -----------------------------------------------------------------------------------

RC_GTEST_PROP(MlaDecodeImplCaseText, EveryCaseKindRoundTripsAndCallsReplaysAndSequencesRunFromTheirText, ()) {
  const MlaDecodeImplCallsCase calls = *gen::mla_decode_impl_calls_case();
  const CaseText ct = calls_text(calls);
  const CaseText ct_back = CaseText::parse(ct.format());
  RC_ASSERT(calls_text(mla_decode_impl_calls_from_text(ct_back)) == ct);
  const MlaDecodeImplReplayCase replay = *gen::mla_decode_impl_replay_case();
  const CaseText rt = replay_text(replay);
  const CaseText rt_back = CaseText::parse(rt.format());
  RC_ASSERT(replay_text(mla_decode_impl_replay_from_text(rt_back)) == rt);
  const MlaDecodeImplSequenceCase sequence = *gen::mla_decode_impl_sequence_case();
  const CaseText st = sequence_text(sequence);
  const CaseText st_back = CaseText::parse(st.format());
  RC_ASSERT(sequence_text(mla_decode_impl_sequence_from_text(st_back)) == st);
  const MlaDecodeImplNonUniformCase nonuniform = *gen::mla_decode_impl_nonuniform_case();
  CaseText nt;
  mla_decode_impl_nonuniform_to_text(nonuniform, nt);
  CaseText nt_again;
  mla_decode_impl_nonuniform_to_text(mla_decode_impl_nonuniform_from_text(CaseText::parse(nt.format())), nt_again);
  RC_ASSERT(nt_again == nt);
  if (*rc::gen::inRange(0, 32) == 0) {  // running is the slow part: one case in 32
    for (const CaseText* t : {&ct_back, &rt_back, &st_back}) {
      const ReproResult r = run_case_text(*t);
      if (r.verdict) RC_FAIL(*r.verdict);
    }
  }
}

// The case a failing property prints reproduces: parsed back, it fails on the wrong impl again and
// passes on @ref (what `mlacheck repro` runs).
TEST(MlaDecodeImplCaseText, AFailingPropertyPrintsACaseThatReproduces) {
  std::string printed;
  rc::check("cached scales, for the printed case", [&printed] {
    const auto device = make_device(Backend::kHost);
    const MlaDecodeImplCallsCase c = *gen::mla_decode_impl_calls_case();
    if (Verdict v = mla_decode_impl_calls_equal_oracle(*device, &make_impl<CachedScaleImpl>, c)) {
      printed = calls_text(c).format();
      RC_FAIL(*v);
    }
  });
  ASSERT_FALSE(printed.empty());
  const CaseText t = CaseText::parse(printed);
  const auto device = make_device(Backend::kHost);
  const MlaDecodeImplCallsCase parsed = mla_decode_impl_calls_from_text(t);
  EXPECT_TRUE(mla_decode_impl_calls_equal_oracle(*device, &make_impl<CachedScaleImpl>, parsed).has_value());
  EXPECT_FALSE(run_case_text(t).verdict.has_value()) << printed;
}

// A hand-edited case with a value out of range or inconsistent is refused with one line.
TEST(MlaDecodeImplCaseText, MalformedCasesAreRefusedWithOneLine) {
  MlaDecodeImplCallsCase calls;
  calls.config.max_batch = 3, calls.config.max_q_len = 2, calls.config.heads = 2, calls.config.max_splits = 8;
  calls.config.block_table_width = 4, calls.config.page = 4;
  calls.calls = {hand_call(2, 2, 2, 4, 4, {9, 5}, false, 1), hand_call(3, 1, 2, 4, 4, {16, 0, 3}, true, 2)};
  const MlaDecodeImplReplayCase replay = hand_replay(1, 2, 4, 3, 2, 1, 2, false, true);
  const std::string good_calls = calls_text(calls).format(), good_replay = replay_text(replay).format();
  EXPECT_NO_THROW(mla_decode_impl_calls_from_text(CaseText::parse(good_calls)));
  EXPECT_NO_THROW(mla_decode_impl_replay_from_text(CaseText::parse(good_replay)));
  // kind: 0 calls, 1 replay, 2 sequence.
  const auto refused = [](const std::string& good, const std::string& from, const std::string& to, int kind) {
    std::string text = good;
    const size_t at = text.find("\n" + from + "\n");  // a whole line: "q_len 1" is not "max_q_len 1"
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at + 1, from.size(), to);
    try {
      const CaseText t = CaseText::parse(text);
      for (const char* key : {"property", "impl", "backend"}) t.word(key);  // read by run_case_text
      if (kind == 0) mla_decode_impl_calls_from_text(t);
      if (kind == 1) mla_decode_impl_replay_from_text(t);
      if (kind == 2) mla_decode_impl_sequence_from_text(t);
      t.expect_all_read();
      ADD_FAILURE() << to << ": accepted";
    } catch (const Error& err) {
      EXPECT_EQ(std::string(err.what()).find('\n'), std::string::npos) << err.what();
    }
  };
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"calls 2", "calls 0"},          {"calls 2", "calls 3"},          {"c0.heads 2", "c0.heads 3"},
           {"c1.batch 3", "c1.batch 4"},    {"c0.q_len 2", "c0.q_len 3"},    {"c1.seq_lens 16 0 3", "c1.seq_lens 16 0"},
           {"c0.seq_lens 9 5", "c0.seq_lens 9 17"}, {"max_q_len 2", "max_q_len 9"}, {"c1.warp 32", "c1.warp 48"},
           {"c0.k_scale 1", "c0.k_scale 0"}, {"c0.seed 0x1", "c0.sed 0x1"},  {"max_splits 8", "max_splits 65"}}) {
    refused(good_calls, from, to, 0);
  }
  const std::string lens0 = "s0.seq_lens " + std::to_string(replay.steps[0].lens[0]) + " " +
                            std::to_string(replay.steps[0].lens[1]);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"steps 3", "steps 4"},          {"steps 3", "steps 0"},           {"padded_batch 2", "padded_batch 4"},
           {lens0, "s0.seq_lens 1"},        {lens0, "s0.seq_lens 13 0"},      {"q_len 1", "q_len 2"},
           {"num_blocks 8", "num_blocks 2"}, {"kv_dtype fp8", "kv_dtype fp4"},
           {"graph_q_dtype bf16", "graph_q_dtype x"},
           {"page 4", "page 0"},            {"table_width 3", "table_width 2"}}) {
    refused(good_replay, from, to, 1);
  }
  // An engine's sequence: a capture, then a replay of it.
  MlaDecodeImplSequenceCase sequence;
  sequence.shape = replay;
  MlaDecodeImplCommand capture;
  capture.kind = MlaDecodeImplCommand::kCapture, capture.padded_batch = 2, capture.q_len = 1;
  MlaDecodeImplCommand again = capture;
  again.kind = MlaDecodeImplCommand::kReplay, again.step = replay.steps[1];
  sequence.commands = {capture, again};
  const std::string good_sequence = sequence_text(sequence).format();
  EXPECT_NO_THROW(mla_decode_impl_sequence_from_text(CaseText::parse(good_sequence)));
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"m1.padded_batch 2", "m1.padded_batch 1"},  // replays a graph never captured
           {"m0.command capture", "m0.command dance"},
           {"m0.k_scale 1", "m0.k_scale 0"},
           {"commands 2", "commands 3"}}) {
    refused(good_sequence, from, to, 2);
  }
}

// ---- an engine's life on one impl -----------------------------------------------------------------

// Eager calls, captures and replays interleaved on one impl, every step against the oracle (with
// the scales of that call, or of that graph's capture), no buffer moving. (Once an rc::state test;
// now a generated case, so a failure prints a file `mlacheck repro` runs.)
RC_GTEST_PROP(MlaDecodeImpl, AnEnginesSequenceOfCallsCapturesAndReplaysEqualsTheOracle, ()) {
  const auto device = make_device(Backend::kHost);
  const MlaDecodeImplSequenceCase c = *gen::mla_decode_impl_sequence_case();
  rc_require(mla_decode_impl_engine_sequence(*device, ref_impl(), c), sequence_text(c));
}

// An impl's declared precision reaches every dense call and replay its properties compare.
RC_GTEST_PROP(MlaDecodeImpl, ADeclaredPrecisionReachesEveryCallAndReplay, ()) {
  MlaDecodeImplSequenceCase c = *gen::mla_decode_impl_sequence_case();
  const oracle::MlaPrecision u{0, 0x1p-8, 0x1p-8};
  declare_precision(c, u);
  for (const MlaDecodeImplCommand& m : c.commands) {
    if (m.kind == MlaDecodeImplCommand::kEager) RC_ASSERT(m.eager.precision.p == u.p && m.eager.precision.kv == u.kv);
    if (m.kind == MlaDecodeImplCommand::kReplay) RC_ASSERT(c.graph(m).step_case(0).precision.p == u.p);
  }
  MlaDecodeImplCallsCase calls = *gen::mla_decode_impl_calls_case();
  declare_precision(calls, u);
  for (const MlaDecodeCase& call : calls.calls) RC_ASSERT(call.precision.kv == u.kv);
}

TEST(MlaDecodeImplWrong, CachedScalesAndFrozenLengthsFailTheEngineSequence) {
  EXPECT_FALSE(rc::check("an engine's sequence on an impl that caches the first call's scales", [] {
    const auto device = make_device(Backend::kHost);
    const MlaDecodeImplSequenceCase c = *gen::mla_decode_impl_sequence_case();
    if (Verdict v = mla_decode_impl_engine_sequence(*device, &make_impl<CachedScaleImpl>, c)) RC_FAIL(*v);
  }));
  EXPECT_FALSE(rc::check("an engine's sequence on graphs over the capture-time seq_lens", [] {
    const auto device = make_device(Backend::kHost);
    const MlaDecodeImplSequenceCase c = *gen::mla_decode_impl_sequence_case();
    if (Verdict v = mla_decode_impl_engine_sequence(*device, &make_impl<FrozenLengthsImpl>, c)) RC_FAIL(*v);
  }));
}

// T3 (TensorRT-LLM #15534, #16290): the capture's split workspace is scratch freed when capture()
// returns. Every replay result is right (the replay writes the freed scratch and reads it back);
// what is wrong is that the bytes belong to the allocator. The device quarantines them while the
// graph lives, and the replay's write to them is the verdict, naming the scratch.
MlaDecodeImplFactory* scratch_freed_after_capture() {
  return kernels::registry().find<MlaDecodeImplFactory>("mla_decode_impl@T3");
}

void expect_freed_scratch_written(const Verdict& v) {
  EXPECT_NE(failure(v).find("replay: memory freed while a captured graph holds its address was written: "
                            "'mla capture scratch'"),
            std::string::npos)
      << failure(v);
}

TEST(MlaDecodeImplWrong, ScratchFreedWhenCaptureReturnsIsWrittenByEveryReplay) {
  const auto device = make_device(Backend::kHost);
  for (const MlaDecodeImplReplayCase& c : {hand_replay(1, 2, 16, 20, 3, 2, 2, false, false),
                                           hand_replay(3, 1, 64, 5, 4, 4, 1, false, true)}) {
    const Verdict v = mla_decode_impl_replay_equals_eager(*device, scratch_freed_after_capture(), c);
    EXPECT_NE(failure(v).find("step 0: "), std::string::npos) << failure(v);
    expect_freed_scratch_written(v);
  }
  EXPECT_FALSE(rc::check("an engine's sequence on an impl whose captures use freed scratch", [] {
    const auto device = make_device(Backend::kHost);
    const MlaDecodeImplSequenceCase c = *gen::mla_decode_impl_sequence_case();
    if (Verdict v = mla_decode_impl_engine_sequence(*device, scratch_freed_after_capture(), c)) RC_FAIL(*v);
  }));
}

// T4: each launch's workspace is scratch allocated and freed inside the call, so a captured call
// frees it before its capture even ends. The quarantine covers the capture from its start: the
// first replay's write to the scratch is the verdict, though every result is right.
TEST(MlaDecodeImplWrong, ScratchFreedInsideTheCapturedCallIsWrittenByEveryReplay) {
  const auto device = make_device(Backend::kHost);
  auto* t4 = kernels::registry().find<MlaDecodeImplFactory>("mla_decode_impl@T4");
  for (const MlaDecodeImplReplayCase& c : {hand_replay(1, 2, 16, 20, 3, 2, 2, false, false),
                                           hand_replay(3, 1, 64, 5, 4, 4, 1, false, true)}) {
    const Verdict v = mla_decode_impl_replay_equals_eager(*device, t4, c);
    EXPECT_NE(failure(v).find("step 0: "), std::string::npos) << failure(v);
    EXPECT_NE(failure(v).find("replay: memory freed while a captured graph holds its address was written: "
                              "'mla per-call scratch'"),
              std::string::npos)
        << failure(v);
  }
  EXPECT_FALSE(rc::check("an engine's sequence on an impl whose launches use per-call scratch", [t4] {
    const auto device = make_device(Backend::kHost);
    const MlaDecodeImplSequenceCase c = *gen::mla_decode_impl_sequence_case();
    if (Verdict v = mla_decode_impl_engine_sequence(*device, t4, c)) RC_FAIL(*v);
  }));
}

TEST(MlaDecodeImpl, IsRegistered) {
  const auto device = make_device(Backend::kHost);
  MlaDecodeImplConfig cfg;
  cfg.max_batch = 2, cfg.heads = 2, cfg.block_table_width = 4, cfg.page = 4;
  EXPECT_EQ(ref_impl()(*device, cfg)->config().heads, 2);
  for (const char* name : {"mla_decode_impl.calls_equal_oracle", "mla_decode_impl.replay_equals_eager",
                           "mla_decode_impl.engine_sequence"}) {
    EXPECT_EQ(property_registry().find(name).op, "mla_decode_impl");
  }
}

TEST(MlaDecodeImplOnCuda, EagerAndReplayWhenAGpuIsPresent) {
  std::string why;
  if (!kernels::device_usable(Backend::kCuda, &why)) GTEST_SKIP() << "skipped: no GPU (" << why << ")";
  const auto device = make_device(Backend::kCuda);
  EXPECT_TRUE(rc::check("eager calls on cuda equal the oracle", [&] {
    const MlaDecodeImplCallsCase c = *gen::mla_decode_impl_calls_case();
    rc_require(mla_decode_impl_calls_equal_oracle(*device, ref_impl(), c), calls_text(c));
  }));
  EXPECT_TRUE(rc::check("graph replays on cuda equal the oracle and eager", [&] {
    const MlaDecodeImplReplayCase c = *gen::mla_decode_impl_replay_case();
    rc_require(mla_decode_impl_replay_equals_eager(*device, ref_impl(), c), replay_text(c));
  }));
  for (const MlaDecodeImplReplayCase& c : {hand_replay(1, 2, 16, 20, 3, 2, 2, false, false),
                                           hand_replay(2, 3, 3, 40, 2, 1, 2, true, true),
                                           hand_replay(4, 16, 64, 40, 8, 2, 6, false, true)}) {  // 2560 keys, 16 heads
    EXPECT_EQ(failure(mla_decode_impl_replay_equals_eager(*device, ref_impl(), c)), "") << replay_text(c).format();
  }
  expect_freed_scratch_written(mla_decode_impl_replay_equals_eager(*device, scratch_freed_after_capture(),
                                                                   hand_replay(1, 2, 16, 20, 3, 2, 2, false, false)));
}

}  // namespace
}  // namespace mlacheck
