// Tests of kernels/mla_decode_impl.h: eager calls against the oracle with scales changing between
// calls, a workspace that never moves or overflows, non-uniform query lengths refused, graph replay
// equal to an eager launch and to the oracle after the lengths grow and the block tables change, and
// a stateful test (rc::state) interleaving eager calls, captures and replays on one impl (host
// backend here; cuda too when a GPU is usable).
#include "kernels/mla_decode_impl.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

#include <algorithm>
#include <map>
#include <memory>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/compare.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/fp8.h"
#include "core/tolerances.h"
#include "kernels/mla_decode_glue.h"
#include "kernels/registry.h"
#include "oracle/mla_decode.h"

namespace mlacheck::kernels {
namespace {

// ---- a batch in host memory: q, a paged cache, block table, lengths ---------------------------

struct HostBatch {
  int64_t B = 1, q_len = 1, H = 1, page = 1, W = 1, num_blocks = 1;
  bool q_fp8 = false, kv_fp8 = false;
  std::vector<int32_t> seq_lens;  // [B]
  std::vector<int32_t> table;     // [B, W]
  std::vector<uint8_t> q, kv;     // raw bytes: [B, q_len, H, 576] and [num_blocks, page, 576]

  DType q_dtype() const { return q_fp8 ? DType::kFP8E4M3 : DType::kBF16; }
  DType kv_dtype() const { return kv_fp8 ? DType::kFP8E4M3 : DType::kBF16; }
  View q_view() const { return View::contiguous(q_dtype(), {B, q_len, H, kMlaHeadDim}); }
  View kv_view() const { return View::contiguous(kv_dtype(), {num_blocks, page, kMlaHeadDim}); }
};

// Random values in [-1, 1] as bf16 or fp8 codes (fp8 through a scale of 1: codes of the values).
void fill(std::vector<uint8_t>& bytes, int64_t n, bool fp8, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  bytes.resize(static_cast<size_t>(n * (fp8 ? 1 : 2)));
  for (int64_t i = 0; i < n; ++i) {
    if (fp8) {
      bytes[static_cast<size_t>(i)] = float_to_fp8_e4m3(2.0f * u(rng));
    } else {
      const uint16_t h = float_to_bf16(u(rng));
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
}

// B requests with lengths up to max_len over shuffled pages (every request its own pages, spare
// pages left over); table columns past what a request needs hold page 0.
HostBatch make_batch(int64_t B, int64_t q_len, int64_t H, int64_t page, int64_t W, const std::vector<int32_t>& lens,
                     bool q_fp8, bool kv_fp8, uint64_t seed) {
  std::mt19937_64 rng(seed);
  HostBatch h;
  h.B = B, h.q_len = q_len, h.H = H, h.page = page, h.W = W, h.q_fp8 = q_fp8, h.kv_fp8 = kv_fp8, h.seq_lens = lens;
  h.num_blocks = B * W + 2;
  std::vector<int32_t> pages(static_cast<size_t>(h.num_blocks));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);
  h.table.assign(static_cast<size_t>(B * W), 0);
  for (int64_t i = 0; i < B * W; ++i) h.table[static_cast<size_t>(i)] = pages[static_cast<size_t>(i)];
  fill(h.q, B * q_len * H * kMlaHeadDim, q_fp8, rng);
  fill(h.kv, h.num_blocks * page * kMlaHeadDim, kv_fp8, rng);
  return h;
}

oracle::MlaDecodeResult oracle_of(HostBatch& h, double base, double qs, double ks) {
  oracle::MlaDecodeInputs in;
  in.q = HostTensor(h.q.data(), h.q_view());
  in.kv_cache = HostTensor(h.kv.data(), h.kv_view());
  in.block_table = HostTensor(h.table.data(), View::contiguous(DType::kI32, {h.B, h.W}));
  in.seq_lens = HostTensor(h.seq_lens.data(), View::contiguous(DType::kI32, {h.B}));
  in.base_scale = base, in.q_scale = qs, in.k_scale = ks;
  return oracle::mla_decode(in);
}

// Device copies of a batch and its outputs.
struct DeviceBatch {
  std::unique_ptr<GuardedMemory> q, kv, table, lens, o, lse;
  MlaDecodeCall call(const HostBatch& h) const {
    MlaDecodeCall c;
    c.q = {q->data(), h.q_view()};
    c.kv_cache = {kv->data(), h.kv_view()};
    c.block_table = {table->data(), View::contiguous(DType::kI32, {h.B, h.W})};
    c.seq_lens = {lens->data(), View::contiguous(DType::kI32, {h.B})};
    c.o = {o->data(), View::contiguous(DType::kBF16, {h.B, h.q_len, h.H, kMlaValueDim})};
    c.lse = {lse->data(), View::contiguous(DType::kF32, {h.B, h.q_len, h.H})};
    c.host_query_lens.assign(static_cast<size_t>(h.B), static_cast<int32_t>(h.q_len));
    c.host_seq_lens = h.seq_lens;
    return c;
  }
};

DeviceBatch upload(Device& d, const HostBatch& h) {
  DeviceBatch b;
  auto put = [&](const char* name, const void* src, int64_t bytes) {
    auto m = d.allocate(name, bytes);
    if (src != nullptr) m->write(0, src, bytes);
    return m;
  };
  b.q = put("q", h.q.data(), static_cast<int64_t>(h.q.size()));
  b.kv = put("kv_cache", h.kv.data(), static_cast<int64_t>(h.kv.size()));
  b.table = put("block_table", h.table.data(), 4 * h.B * h.W);
  b.lens = put("seq_lens", h.seq_lens.data(), 4 * h.B);
  b.o = put("o", nullptr, 2 * h.B * h.q_len * h.H * kMlaValueDim);
  b.lse = put("lse", nullptr, 4 * h.B * h.q_len * h.H);
  return b;
}

// Reads o and lse back and compares them with the oracle. Returns "" or the first failure.
std::string compare(GuardedMemory& o, GuardedMemory& lse, const HostBatch& h, const oracle::MlaDecodeResult& want,
                    const char* what) {
  const int64_t rows = h.B * h.q_len * h.H;
  std::vector<uint16_t> got_o(static_cast<size_t>(rows * kMlaValueDim));
  std::vector<float> got_lse(static_cast<size_t>(rows));
  o.read(0, got_o.data(), static_cast<int64_t>(got_o.size() * 2));
  lse.read(0, got_lse.data(), static_cast<int64_t>(got_lse.size() * 4));
  const CompareReport ro =
      compare_close(HostTensor(got_o.data(), View::contiguous(DType::kBF16, {h.B, h.q_len, h.H, kMlaValueDim})),
                    want.o.tensor(), tolerance_for("mla_decode", "o"));
  if (!ro.ok) return std::string(what) + " o: " + ro.describe();
  const CompareReport rl = compare_close(HostTensor(got_lse.data(), View::contiguous(DType::kF32, {h.B, h.q_len, h.H})),
                                         want.lse.tensor(), tolerance_for("mla_decode", "lse"));
  if (!rl.ok) return std::string(what) + " lse: " + rl.describe();
  return "";
}

MlaDecodeImplConfig config_for(int64_t max_batch, int64_t max_q_len, int64_t H, int64_t W, int64_t page, bool q_fp8) {
  MlaDecodeImplConfig c;
  c.max_batch = max_batch, c.max_q_len = max_q_len, c.heads = H, c.max_splits = 8, c.block_table_width = W;
  c.page = page, c.q_dtype = q_fp8 ? DType::kFP8E4M3 : DType::kBF16;
  return c;
}

// ---- eager ----------------------------------------------------------------------------------------

// Calls on one impl with batches of changing size, q_len and lengths, and scales changing every
// call (vLLM #41778 cached them on the first call): each equals the oracle for its own scales; the
// workspace never moves and nothing is written outside it or the outputs.
void check_eager_sequence(Device& device) {
  const int64_t H = *rc::gen::inRange(1, 5), page = *rc::gen::element<int64_t>(1, 3, 16, 64);
  const int64_t max_q_len = *rc::gen::inRange(1, 5), max_len = *rc::gen::element<int64_t>(5, 70, 300);
  const int64_t W = (max_len + page - 1) / page, max_batch = *rc::gen::inRange(1, 5);
  const bool q_fp8 = *rc::gen::arbitrary<bool>(), kv_fp8 = *rc::gen::arbitrary<bool>();
  MlaDecodeImpl impl(device, config_for(max_batch, max_q_len, H, W, page, q_fp8));
  const uint8_t* workspace = impl.workspace_memory().data();
  const int calls = *rc::gen::inRange(2, 5);
  for (int i = 0; i < calls; ++i) {
    const int64_t B = *rc::gen::inRange<int64_t>(1, max_batch + 1), q_len = *rc::gen::inRange<int64_t>(1, max_q_len + 1);
    const auto lens = *rc::gen::container<std::vector<int32_t>>(static_cast<size_t>(B),
                                                               rc::gen::inRange(0, static_cast<int>(max_len) + 1));
    HostBatch h = make_batch(B, q_len, H, page, W, lens, q_fp8, kv_fp8, *rc::gen::arbitrary<uint64_t>());
    const double base = *rc::gen::element(0.5, 0.0721), qs = *rc::gen::element(1.0, 0.25, 3.0),
                 ks = *rc::gen::element(1.0, 0.5, 2.0);
    DeviceBatch d = upload(device, h);
    MlaDecodeCall call = d.call(h);
    call.base_scale = base, call.q_scale = qs, call.k_scale = ks;
    if (*rc::gen::arbitrary<bool>()) call.host_seq_lens.clear();  // splits from W * page instead
    d.o->declare_output("o", call.o.view);
    d.lse->declare_output("lse", call.lse.view);
    impl.workspace_memory().clear_outputs();
    impl.workspace_memory().declare_output("workspace",
                                           View::contiguous(DType::kU8, {impl.workspace_memory().size()}));
    for (GuardedMemory* m : {d.q.get(), d.kv.get(), d.table.get(), d.lens.get(), d.o.get(), d.lse.get(),
                             &impl.workspace_memory()}) {
      m->arm();
    }
    impl.forward(call);
    device.synchronize();
    for (GuardedMemory* m : {d.q.get(), d.kv.get(), d.table.get(), d.lens.get(), d.o.get(), d.lse.get(),
                             &impl.workspace_memory()}) {
      const GuardReport g = m->check();
      if (!g.ok()) RC_FAIL("call " + std::to_string(i) + ": " + g.describe());
    }
    const std::string failure = compare(*d.o, *d.lse, h, oracle_of(h, base, qs, ks), "eager");
    if (!failure.empty()) {
      RC_FAIL("call " + std::to_string(i) + " (B " + std::to_string(B) + ", q_len " + std::to_string(q_len) +
              ", splits " + std::to_string(impl.last_num_splits()) + "): " + failure);
    }
    RC_ASSERT(impl.workspace_memory().data() == workspace);
  }
}

RC_GTEST_PROP(MlaDecodeImpl, EagerCallsEqualTheOracleWithTheScalesOfEachCall, ()) {
  const auto device = make_device(Backend::kHost);
  check_eager_sequence(*device);
}

// The worst case the impl is configured for fits the workspace it allocated (vLLM #41778 sized it
// for a fixed q_len of 8 and grew it): max batch, max q_len, max splits, red zones intact.
TEST(MlaDecodeImpl, TheConfiguredWorstCaseFitsTheWorkspace) {
  const auto device = make_device(Backend::kHost);
  const int64_t H = 2, page = 2, W = 40, B = 3, q_len = kMlaMaxQueryLen;
  MlaDecodeImplConfig cfg = config_for(B, q_len, H, W, page, false);
  cfg.max_splits = 8;
  MlaDecodeImpl impl(*device, cfg);
  EXPECT_EQ(impl.workspace_memory().size(), 4 * mla_decode_workspace_floats(B, q_len, H, 8));
  EXPECT_EQ(impl.splits_for(B, q_len, W * page), std::min<int64_t>(8, mla_decode_num_splits(B, q_len, H, W * page, 16)));
  HostBatch h = make_batch(B, q_len, H, page, W, {80, 79, 3}, false, true, 5);
  DeviceBatch d = upload(*device, h);
  impl.workspace_memory().declare_output("workspace", View::contiguous(DType::kU8, {impl.workspace_memory().size()}));
  impl.workspace_memory().arm();
  impl.forward(d.call(h));
  EXPECT_TRUE(impl.workspace_memory().check().ok());
  EXPECT_EQ(compare(*d.o, *d.lse, h, oracle_of(h, 1.0, 1.0, 1.0), "worst case"), "");
}

TEST(MlaDecodeImpl, NonUniformQueryLengthsAreRefusedBeforeAnyLaunch) {
  const auto device = make_device(Backend::kHost);
  MlaDecodeImpl impl(*device, config_for(4, 4, 2, 4, 4, false));
  HostBatch h = make_batch(3, 2, 2, 4, 4, {9, 5, 12}, false, false, 1);
  DeviceBatch d = upload(*device, h);
  MlaDecodeCall call = d.call(h);
  call.host_query_lens = {2, 1, 3};  // 6 tokens over 3 requests: q cannot be [3, 2, ...] of them
  for (GuardedMemory* m : {d.o.get(), d.lse.get(), &impl.workspace_memory()}) m->arm();
  try {
    impl.forward(call);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("query lengths [2, 1, 3]"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  for (GuardedMemory* m : {d.o.get(), d.lse.get(), &impl.workspace_memory()}) EXPECT_TRUE(m->check().ok());
  // Too many requests, q_len past the configuration, a bad configuration.
  HostBatch big = make_batch(5, 1, 2, 4, 4, {1, 2, 3, 4, 5}, false, false, 2);
  DeviceBatch db = upload(*device, big);
  EXPECT_THROW(impl.forward(db.call(big)), Error);
  HostBatch long_q = make_batch(1, 5, 2, 4, 4, {9}, false, false, 3);
  DeviceBatch dl = upload(*device, long_q);
  EXPECT_THROW(impl.forward(dl.call(long_q)), Error);
  EXPECT_THROW(MlaDecodeImpl(*device, config_for(4, 9, 2, 4, 4, false)), Error);
  EXPECT_THROW(MlaDecodeImpl(*device, config_for(0, 1, 2, 4, 4, false)), Error);
}

// ---- graph capture and replay -------------------------------------------------------------------

// Captures a padded batch with short sequences, then writes longer sequences (up to what the table
// holds), new block tables and new q into the impl's buffers and replays: the replay equals an eager
// launch on the same buffers and the oracle (vLLM #42885 fixed the split bounds at capture), padding
// rows (seq_len 0) give o = 0 and lse = -inf, and no buffer address moves.
void check_replay(Device& device, uint64_t seed, int64_t H, int64_t page, int64_t W, int64_t B_pad, int64_t q_len,
                  int64_t live, bool q_fp8, bool kv_fp8) {
  MlaDecodeImpl impl(device, config_for(B_pad + 1, q_len, H, W, page, q_fp8));
  const std::vector<const void*> addresses = {impl.workspace_memory().data(), impl.graph_q_memory().data(),
                                              impl.graph_seq_lens_memory().data(),
                                              impl.graph_block_table_memory().data(), impl.graph_o_memory().data()};
  std::mt19937_64 rng(seed);
  // The cache is shared by every step; the steps differ in lengths, tables and q.
  HostBatch shape = make_batch(B_pad, q_len, H, page, W, std::vector<int32_t>(static_cast<size_t>(B_pad), 0), q_fp8,
                               kv_fp8, seed);
  auto kv = device.allocate("kv_cache", static_cast<int64_t>(shape.kv.size()));
  kv->write(0, shape.kv.data(), static_cast<int64_t>(shape.kv.size()));
  const DeviceTensor kv_t{kv->data(), shape.kv_view()};
  const double base = 0.0721, qs = 0.5, ks = 1.5;
  const MlaGraphBuffers g = impl.graph_buffers(B_pad, q_len);

  auto write_step = [&](HostBatch& h) {
    impl.graph_q_memory().write(0, h.q.data(), static_cast<int64_t>(h.q.size()));
    impl.graph_seq_lens_memory().write(0, h.seq_lens.data(), 4 * B_pad);
    impl.graph_block_table_memory().write(0, h.table.data(), 4 * B_pad * W);
  };
  auto step = [&](int64_t max_len) {
    std::vector<int32_t> lens(static_cast<size_t>(B_pad), 0);  // rows past `live` are graph padding
    for (int64_t b = 0; b < live; ++b) lens[static_cast<size_t>(b)] = static_cast<int32_t>(rng() % (max_len + 1));
    HostBatch h = make_batch(B_pad, q_len, H, page, W, lens, q_fp8, kv_fp8, rng());
    h.kv = shape.kv, h.num_blocks = shape.num_blocks;  // the one shared cache
    return h;
  };

  HostBatch first = step(std::min<int64_t>(4, W * page));  // short sequences at capture
  write_step(first);
  const auto graph = impl.capture(B_pad, q_len, kv_t, base, qs, ks);
  device.synchronize();
  graph->replay();
  device.synchronize();
  EXPECT_EQ(compare(impl.graph_o_memory(), impl.graph_lse_memory(), first, oracle_of(first, base, qs, ks),
                    "replay at capture lengths"),
            "");

  for (int i = 0; i < 2; ++i) {
    HostBatch later = step(W * page);  // longer sequences, new tables and q
    later.seq_lens[0] = static_cast<int32_t>(W * page);  // one as long as the table holds
    write_step(later);
    graph->replay();
    device.synchronize();
    const oracle::MlaDecodeResult want = oracle_of(later, base, qs, ks);
    EXPECT_EQ(compare(impl.graph_o_memory(), impl.graph_lse_memory(), later, want, "replay after growth"), "");
    // Padding rows: o exactly 0 and lse -inf.
    std::vector<float> lse(static_cast<size_t>(B_pad * q_len * H));
    impl.graph_lse_memory().read(0, lse.data(), static_cast<int64_t>(lse.size() * 4));
    for (int64_t r = live * q_len * H; r < B_pad * q_len * H; ++r) {
      EXPECT_TRUE(std::isinf(lse[static_cast<size_t>(r)]) && lse[static_cast<size_t>(r)] < 0) << "padding row " << r;
    }
    // An eager launch on the same buffers gives exactly what the replay gave.
    std::vector<uint16_t> replay_o(static_cast<size_t>(B_pad * q_len * H * kMlaValueDim)), eager_o(replay_o.size());
    impl.graph_o_memory().read(0, replay_o.data(), static_cast<int64_t>(replay_o.size() * 2));
    MlaDecodeCall call;
    call.q = g.q, call.kv_cache = kv_t, call.block_table = g.block_table, call.seq_lens = g.seq_lens;
    call.o = g.o, call.lse = g.lse, call.base_scale = base, call.q_scale = qs, call.k_scale = ks;
    // Same split count as the capture (the heuristic's choice for the table's longest sequence).
    call.host_seq_lens.clear();
    impl.forward(call);
    device.synchronize();
    impl.graph_o_memory().read(0, eager_o.data(), static_cast<int64_t>(eager_o.size() * 2));
    EXPECT_EQ(replay_o, eager_o) << "replay differs from an eager launch on the same buffers";
  }
  const std::vector<const void*> after = {impl.workspace_memory().data(), impl.graph_q_memory().data(),
                                          impl.graph_seq_lens_memory().data(), impl.graph_block_table_memory().data(),
                                          impl.graph_o_memory().data()};
  EXPECT_EQ(after, addresses);
}

TEST(MlaDecodeImpl, ReplayAfterTheLengthsGrowEqualsEagerAndTheOracle) {
  const auto device = make_device(Backend::kHost);
  check_replay(*device, 1, 2, 16, 20, 3, 2, 2, false, false);  // up to 320 keys, 1 padding row
  check_replay(*device, 2, 3, 3, 40, 2, 1, 2, true, true);     // fp8, odd page size
  check_replay(*device, 3, 1, 64, 5, 4, 4, 1, false, true);
}

// ---- stateful: an engine's life on one impl -------------------------------------------------------

// What the engine has configured and captured so far (the model), and the live objects (the system).
struct ImplModel {
  int64_t H = 2, page = 8, W = 8, max_batch = 3, max_q_len = 2;
  bool q_fp8 = false, kv_fp8 = true;
  std::map<std::pair<int64_t, int64_t>, std::array<double, 3>> graphs;  // (B_pad, q_len) -> capture scales
};
struct ImplSut {
  std::unique_ptr<Device> device = make_device(Backend::kHost);
  std::unique_ptr<MlaDecodeImpl> impl;
  std::unique_ptr<GuardedMemory> kv;
  HostBatch cache_shape;  // the one shared cache (host copy)
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<DeviceGraph>> graphs;
  const uint8_t* workspace = nullptr;
};
using ImplCommand = rc::state::Command<ImplModel, ImplSut>;

std::vector<int32_t> gen_lens(int64_t B, int64_t live, int64_t max_len) {
  std::vector<int32_t> lens(static_cast<size_t>(B), 0);
  for (int64_t b = 0; b < live; ++b) lens[static_cast<size_t>(b)] = *rc::gen::inRange(0, static_cast<int>(max_len) + 1);
  return lens;
}

// An eager call with its own batch and scales (which change from call to call).
struct EagerCall : ImplCommand {
  int64_t B, q_len;
  std::vector<int32_t> lens;
  double base, qs, ks;
  uint64_t seed;
  explicit EagerCall(const ImplModel& m)
      : B(*rc::gen::inRange<int64_t>(1, m.max_batch + 1)), q_len(*rc::gen::inRange<int64_t>(1, m.max_q_len + 1)),
        lens(gen_lens(B, B, m.W * m.page)), base(*rc::gen::element(0.0721, 0.5)), qs(*rc::gen::element(1.0, 0.25)),
        ks(*rc::gen::element(1.0, 2.0, 0.5)), seed(*rc::gen::arbitrary<uint64_t>()) {}
  void run(const ImplModel& m, ImplSut& sut) const override {
    HostBatch h = make_batch(B, q_len, m.H, m.page, m.W, lens, m.q_fp8, m.kv_fp8, seed);
    DeviceBatch d = upload(*sut.device, h);
    MlaDecodeCall call = d.call(h);
    call.base_scale = base, call.q_scale = qs, call.k_scale = ks;
    sut.impl->forward(call);
    const std::string failure = compare(*d.o, *d.lse, h, oracle_of(h, base, qs, ks), "eager");
    if (!failure.empty()) RC_FAIL(failure);
    RC_ASSERT(sut.impl->workspace_memory().data() == sut.workspace);
  }
  void show(std::ostream& os) const override {
    os << "eager B " << B << " q_len " << q_len << " scales " << base << "/" << qs << "/" << ks << " lens";
    for (int32_t l : lens) os << ' ' << l;
  }
};

// Capture a padded batch with the buffers' current (short) contents and these scales.
struct Capture : ImplCommand {
  int64_t B_pad, q_len;
  double base, qs, ks;
  explicit Capture(const ImplModel& m)
      : B_pad(*rc::gen::inRange<int64_t>(1, m.max_batch + 1)), q_len(*rc::gen::inRange<int64_t>(1, m.max_q_len + 1)),
        base(*rc::gen::element(0.0721, 0.5)), qs(*rc::gen::element(1.0, 0.25)), ks(*rc::gen::element(1.0, 2.0)) {}
  void apply(ImplModel& m) const override { m.graphs[{B_pad, q_len}] = {base, qs, ks}; }
  void run(const ImplModel&, ImplSut& sut) const override {
    const std::vector<int32_t> short_lens(static_cast<size_t>(B_pad), 3);
    sut.impl->graph_seq_lens_memory().write(0, short_lens.data(), 4 * B_pad);
    sut.graphs[{B_pad, q_len}] = sut.impl->capture(B_pad, q_len, {sut.kv->data(), sut.cache_shape.kv_view()}, base, qs, ks);
  }
  void show(std::ostream& os) const override {
    os << "capture B_pad " << B_pad << " q_len " << q_len << " scales " << base << "/" << qs << "/" << ks;
  }
};

// Write a new step (lengths up to the table, new tables and q, padding rows) into the buffers and
// replay one of the captured graphs.
struct Replay : ImplCommand {
  std::pair<int64_t, int64_t> key;
  int64_t live;
  std::vector<int32_t> lens;
  uint64_t seed;
  explicit Replay(const ImplModel& m) {
    RC_PRE(!m.graphs.empty());
    auto it = m.graphs.begin();
    std::advance(it, *rc::gen::inRange<size_t>(0, m.graphs.size()));
    key = it->first;
    live = *rc::gen::inRange<int64_t>(0, key.first + 1);
    lens = gen_lens(key.first, live, m.W * m.page);
    seed = *rc::gen::arbitrary<uint64_t>();
  }
  void checkPreconditions(const ImplModel& m) const override { RC_PRE(m.graphs.count(key) == 1); }
  void run(const ImplModel& m, ImplSut& sut) const override {
    const auto& scales = m.graphs.at(key);
    HostBatch h = make_batch(key.first, key.second, m.H, m.page, m.W, lens, m.q_fp8, m.kv_fp8, seed);
    h.kv = sut.cache_shape.kv, h.num_blocks = sut.cache_shape.num_blocks;
    sut.impl->graph_q_memory().write(0, h.q.data(), static_cast<int64_t>(h.q.size()));
    sut.impl->graph_seq_lens_memory().write(0, h.seq_lens.data(), 4 * key.first);
    sut.impl->graph_block_table_memory().write(0, h.table.data(), 4 * key.first * m.W);
    sut.graphs.at(key)->replay();
    sut.device->synchronize();
    const std::string failure = compare(sut.impl->graph_o_memory(), sut.impl->graph_lse_memory(), h,
                                        oracle_of(h, scales[0], scales[1], scales[2]), "replay");
    if (!failure.empty()) RC_FAIL(failure);
    RC_ASSERT(sut.impl->workspace_memory().data() == sut.workspace);
  }
  void show(std::ostream& os) const override {
    os << "replay B_pad " << key.first << " q_len " << key.second << " live " << live << " lens";
    for (int32_t l : lens) os << ' ' << l;
  }
};

// Eager calls, captures and replays interleaved on one impl, every step against the oracle (with
// the scales of that call, or of that graph's capture), the workspace never moving.
RC_GTEST_PROP(MlaDecodeImpl, AnEnginesSequenceOfCallsCapturesAndReplaysEqualsTheOracle, ()) {
  ImplModel model;
  model.kv_fp8 = *rc::gen::arbitrary<bool>();
  model.q_fp8 = *rc::gen::arbitrary<bool>();
  ImplSut sut;
  sut.impl = std::make_unique<MlaDecodeImpl>(*sut.device, config_for(model.max_batch, model.max_q_len, model.H,
                                                                     model.W, model.page, model.q_fp8));
  sut.workspace = sut.impl->workspace_memory().data();
  sut.cache_shape = make_batch(model.max_batch, 1, model.H, model.page, model.W,
                               std::vector<int32_t>(static_cast<size_t>(model.max_batch), 0), model.q_fp8,
                               model.kv_fp8, *rc::gen::arbitrary<uint64_t>());
  sut.kv = sut.device->allocate("kv_cache", static_cast<int64_t>(sut.cache_shape.kv.size()));
  sut.kv->write(0, sut.cache_shape.kv.data(), static_cast<int64_t>(sut.cache_shape.kv.size()));
  // Sequences of up to about 12 steps: long enough for capture, growth and re-capture, short
  // enough for 1000 cases on the host backend.
  const auto commands = *rc::gen::resize(
      12, rc::state::gen::commands(model, rc::state::gen::execOneOfWithArgs<EagerCall, Capture, Replay>()));
  rc::state::runAll(commands, model, sut);
}

TEST(MlaDecodeImpl, IsRegistered) {
  using Factory = std::unique_ptr<MlaDecodeImpl>(Device&, const MlaDecodeImplConfig&);
  const auto device = make_device(Backend::kHost);
  const auto impl = registry().find<Factory>("mla_decode_impl@ref")(*device, config_for(2, 1, 2, 4, 4, false));
  EXPECT_EQ(impl->config().heads, 2);
}

TEST(MlaDecodeImplOnCuda, EagerAndReplayWhenAGpuIsPresent) {
  std::string why;
  if (!device_usable(Backend::kCuda, &why)) GTEST_SKIP() << "skipped: no GPU (" << why << ")";
  const auto device = make_device(Backend::kCuda);
  EXPECT_TRUE(rc::check("eager calls on cuda equal the oracle", [&] { check_eager_sequence(*device); }));
  check_replay(*device, 1, 2, 16, 20, 3, 2, 2, false, false);
  check_replay(*device, 2, 3, 3, 40, 2, 1, 2, true, true);
  check_replay(*device, 4, 16, 64, 40, 8, 2, 6, false, true);  // 2560-key tables, 16 heads
}

}  // namespace
}  // namespace mlacheck::kernels
