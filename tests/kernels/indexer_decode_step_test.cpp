// Tests of kernels/indexer_decode_step.h (SPEC.md 6, the indexer half): the whole step against
// oracle::indexer_decode_step on randomized batches (uniform, non-uniform, padding requests, graph
// padding, prefill rows sharing the top-k buffer, both layouts, both metadata paths), every buffer
// guarded; one step object driven through a sequence of batches; bad input refused before any
// launch; the same on cuda when a GPU is usable.
#include "kernels/indexer_decode_step.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/backend/host_executor.h"
#include "core/compare.h"
#include "core/error.h"
#include "core/fp8.h"
#include "core/tolerances.h"
#include "core/topk_check.h"
#include "kernels/registry.h"
#include "oracle/decode_step.h"
#include "oracle/quantize.h"
#include "oracle/topk.h"
#include "tests/support/staged_buffer.h"

namespace mlacheck::kernels {
namespace {

// ---- cases -------------------------------------------------------------------------------------

// What an engine configures once: the step's limits and the cache's page size.
struct Engine {
  int32_t next_n = 1;
  int64_t H = 1, D = 16, k = 1, block_size = 64;
  int64_t max_requests = 1, max_tokens = 1, W = 1;
  int64_t max_len = 1;           // the longest L_b a batch may have
  int64_t max_context_len = 1;   // the step's logits columns (>= max_len)

  IndexerDecodeStepLimits limits() const {
    IndexerDecodeStepLimits l;
    l.metadata = {max_tokens, max_requests, next_n, W};
    l.heads = H, l.head_dim = D, l.topk = k, l.max_context_len = max_context_len;
    return l;
  }
  friend void showValue(const Engine& e, std::ostream& os) {
    os << "next_n " << e.next_n << " H " << e.H << " D " << e.D << " k " << e.k << " block_size " << e.block_size
       << " max_requests " << e.max_requests << " max_tokens " << e.max_tokens << " W " << e.W << " max_len "
       << e.max_len << " max_context_len " << e.max_context_len;
  }
};

// One step's batch under an engine.
struct StepCase {
  std::vector<int32_t> decode_lens, seq_lens;  // [B]; d = 0 is a padding request with L = 0
  MetadataLayout layout = MetadataLayout::kFlattened;
  MetadataPathChoice path = MetadataPathChoice::kAuto;
  int64_t graph_padding = 0;   // flattened: rows of q and metadata past the tokens
  int64_t prefill_rows = 0;    // rows of the shared top-k buffer past the tokens
  int64_t max_context_len = 1; // this step's logits columns
  int64_t table_row_pad = 0;
  bool pass_host_seq_lens = false, ue8m0 = false;
  uint64_t seed = 0;
  int warp_size = 32;
  bool shuffled = false;

  int64_t B() const { return static_cast<int64_t>(decode_lens.size()); }
  int64_t T() const { return std::accumulate(decode_lens.begin(), decode_lens.end(), int64_t{0}); }
  bool uniform() const {
    return std::all_of(decode_lens.begin(), decode_lens.end(), [&](int32_t d) { return d == decode_lens[0] && d > 0; });
  }
  friend void showValue(const StepCase& c, std::ostream& os) {
    os << (c.layout == MetadataLayout::kFlattened ? "flattened" : "native")
       << (c.path == MetadataPathChoice::kGeneral ? " general" : " auto") << " decode_lens [";
    for (int32_t d : c.decode_lens) os << ' ' << d;
    os << " ] seq_lens [";
    for (int32_t l : c.seq_lens) os << ' ' << l;
    os << " ] graph_padding " << c.graph_padding << " prefill_rows " << c.prefill_rows << " max_context_len "
       << c.max_context_len << " table_row_pad " << c.table_row_pad << (c.pass_host_seq_lens ? " host seq_lens" : "")
       << (c.ue8m0 ? " ue8m0" : "") << " seed " << c.seed << " warp " << c.warp_size << (c.shuffled ? " shuffled" : "");
  }
};

// Engines small enough for the host: k from 1 to 2048 (the fast path) with rows around k.
rc::Gen<Engine> gen_engine() {
  return rc::gen::exec([] {
    Engine e;
    e.next_n = *rc::gen::inRange(1, 5);
    e.H = *rc::gen::weightedOneOf<int64_t>({{6, rc::gen::inRange<int64_t>(1, 9)}, {1, rc::gen::just<int64_t>(64)}});
    e.D = *rc::gen::weightedOneOf<int64_t>(
        {{3, rc::gen::element<int64_t>(16, 32, 64, 128)}, {1, rc::gen::inRange<int64_t>(1, 41)}});
    e.k = *rc::gen::weightedOneOf<int64_t>(
        {{6, rc::gen::element<int64_t>(1, 2, 3, 7, 16, 64)}, {1, rc::gen::just<int64_t>(kTopkFastK)}});
    e.block_size = *rc::gen::element<int64_t>(1, 2, 3, 16, 53, 61, 64, 69);
    e.max_requests = *rc::gen::inRange(1, 7);
    e.max_tokens = e.max_requests * e.next_n + *rc::gen::inRange(0, 4);
    // Rows just under, at and over k, and some far past it.
    e.max_len = e.k + *rc::gen::element<int64_t>(1, 2, 8, 60, 200);
    if (e.k == kTopkFastK) e.max_len = std::min<int64_t>(e.max_len, e.k + 8);
    e.W = (e.max_len + e.block_size - 1) / e.block_size + *rc::gen::inRange(0, 3);
    e.max_context_len = e.max_len + *rc::gen::element<int64_t>(0, 1, 13, 70);
    return e;
  });
}

// A length for a request with d tokens: around k (so a token row is k - 1, k or k + 1 long), short
// (even shorter than d: the first tokens get length 0), or anywhere up to the engine's longest.
rc::Gen<int32_t> gen_seq_len(const Engine& e, int32_t d) {
  const int32_t hi = static_cast<int32_t>(e.max_len);
  const int32_t around_k = static_cast<int32_t>(e.k) + d - 1;  // the last token's row is k long
  return rc::gen::weightedOneOf<int32_t>(
      {{3, rc::gen::map(rc::gen::inRange(-1, 2), [=](int32_t x) { return std::clamp(around_k + x, 0, hi); })},
       {1, rc::gen::inRange(0, std::min(d + 1, hi + 1))},
       {3, rc::gen::inRange(0, hi + 1)}});
}

rc::Gen<StepCase> gen_step_case(const Engine& e) {
  return rc::gen::exec([e] {
    StepCase c;
    const int64_t B = *rc::gen::inRange<int64_t>(1, e.max_requests + 1);
    if (*rc::gen::arbitrary<bool>()) {
      c.decode_lens.assign(static_cast<size_t>(B), *rc::gen::inRange(1, e.next_n + 1));  // uniform
    } else {
      c.decode_lens = *rc::gen::container<std::vector<int32_t>>(static_cast<size_t>(B), rc::gen::inRange(0, e.next_n + 1));
    }
    for (int32_t d : c.decode_lens) c.seq_lens.push_back(d == 0 ? 0 : *gen_seq_len(e, d));
    c.layout = *rc::gen::arbitrary<bool>() ? MetadataLayout::kFlattened : MetadataLayout::kNative;
    c.path = *rc::gen::arbitrary<bool>() ? MetadataPathChoice::kAuto : MetadataPathChoice::kGeneral;
    if (c.layout == MetadataLayout::kFlattened) c.graph_padding = *rc::gen::inRange<int64_t>(0, e.max_tokens - c.T() + 1);
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

// ---- one guarded step ---------------------------------------------------------------------------

float uniform(std::mt19937_64& rng, float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); }

constexpr uint8_t kPoison = 0x7F;  // fp8 NaN: a key read where none was stored shows in the logits

// The device buffers of one step and the host bytes they came from.
struct StepBuffers {
  Buffer seq_lens, decode_lens, qsl, table, q, weights, kv, topk, global;
  std::vector<int32_t> host_table;  // [B, W] dense, for the oracle's conversion to global slots
  std::vector<Buffer*> all() { return {&seq_lens, &decode_lens, &qsl, &table, &q, &weights, &kv, &topk, &global}; }
};

StepBuffers make_buffers(const Engine& e, const StepCase& c) {
  std::mt19937_64 rng(c.seed);
  const int64_t B = c.B(), T = c.T(), H = e.H, D = e.D, bs = e.block_size, k = e.k, W = e.W;
  const int64_t q_rows = T + c.graph_padding;
  // Pages: every needed (request, column) gets its own shuffled page of a cache with spare pages;
  // columns past what a request needs hold -1 or a spare page (never read).
  int64_t needed_total = 0;
  std::vector<int64_t> needed(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) needed_total += needed[static_cast<size_t>(b)] = (c.seq_lens[static_cast<size_t>(b)] + bs - 1) / bs;
  const int64_t num_blocks = needed_total + 2;
  std::vector<int32_t> pages(static_cast<size_t>(num_blocks));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);
  const int64_t block_stride = (bs * (D + 4) + 15) / 16 * 16 + 16 * int64_t(rng() % 2);

  StepBuffers s{
      Buffer("seq_lens", View::contiguous(DType::kI32, {B}, 4), 8, kPoison),
      Buffer("decode_lens", View::contiguous(DType::kI32, {B}, 8), 8, kPoison),
      Buffer("query_start_loc", View::contiguous(DType::kI32, {B + 1}), 8, kPoison),
      Buffer("block_table", View::padded_rows(DType::kI32, {B, W}, W + c.table_row_pad, 4), 16, kPoison),
      Buffer("index_q", View::contiguous(DType::kFP8E4M3, {q_rows, H, D}, 16), 64, kPoison),
      Buffer("index_weights", View::contiguous(DType::kF32, {q_rows, H}, 8), 64, kPoison),
      Buffer("kv_blocks", View(DType::kU8, {num_blocks, block_stride}, {block_stride, 1}, 16), 64, kPoison),
      Buffer("topk_buffer", View::padded_rows(DType::kI32, {T + c.prefill_rows, k}, k + 1), 8, 0),
      Buffer("topk_global", View::padded_rows(DType::kI32, {T + 1, k}, k + 2, 4), 8, 0),
      {}};
  int32_t start = 0;
  s.qsl.put<int32_t>({0}, 0);
  for (int64_t b = 0; b < B; ++b) {
    s.seq_lens.put<int32_t>({b}, c.seq_lens[static_cast<size_t>(b)]);
    s.decode_lens.put<int32_t>({b}, c.decode_lens[static_cast<size_t>(b)]);
    s.qsl.put<int32_t>({b + 1}, start += c.decode_lens[static_cast<size_t>(b)]);
  }
  s.host_table.assign(static_cast<size_t>(B * W), -1);
  size_t next = 0;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t w = 0; w < W; ++w) {
      const int32_t page = w < needed[static_cast<size_t>(b)] ? pages[next++] : (rng() % 2 ? -1 : pages.back());
      s.host_table[static_cast<size_t>(b * W + w)] = page;
      s.table.put<int32_t>({b, w}, page);
    }
  }
  s.q.view.for_each_byte_offset([&](int64_t at) { s.q.host[static_cast<size_t>(at)] = float_to_fp8_e4m3(uniform(rng, -2, 2)); });
  s.weights.view.for_each_index([&](const std::vector<int64_t>& at) { s.weights.put(at, uniform(rng, -1, 1)); });
  // Keys for the tokens a request reads; every other byte of the cache stays poison.
  const oracle::PagedIndexerCache cache{s.kv.host_tensor(), bs, D};
  std::vector<float> x(static_cast<size_t>(bs * D));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t w = 0; w < needed[static_cast<size_t>(b)]; ++w) {
      const int64_t n = std::min(bs, c.seq_lens[static_cast<size_t>(b)] - w * bs);
      for (float& v : x) v = uniform(rng, -1, 1);
      const oracle::Fp8Rows keys = oracle::quantize_per_token_fp8(
          std::vector<float>(x.begin(), x.begin() + n * D), n, D,
          c.ue8m0 ? oracle::ScaleFormat::kUe8m0 : oracle::ScaleFormat::kFp32);
      for (int64_t i = 0; i < n; ++i) {
        oracle::store_indexer_token(cache, s.host_table[static_cast<size_t>(b * W + w)], i, keys.codes.data() + i * D,
                                    keys.scales[static_cast<size_t>(i)]);
      }
    }
  }
  // The shared buffer's rows all hold a pattern; rows >= T are prefill tokens' and must survive.
  s.topk.view.for_each_index([&](const std::vector<int64_t>& at) { s.topk.put<int32_t>(at, int32_t(100000 + at[0] * 1000 + at[1])); });
  return s;
}

// Runs the case on `step` (made for the engine) with every buffer guarded and compares each token
// with the oracle. Returns "" or the first failure; *route says which route the step took.
std::string check_step(Device& device, IndexerDecodeStep& step, const Engine& e, const StepCase& c,
                       IndexerDecodeStepResult* result = nullptr) {
  StepBuffers s = make_buffers(e, c);
  const int64_t B = c.B(), T = c.T(), k = e.k;
  for (Buffer* b : s.all()) b->upload(device);
  s.topk.memory->declare_output("decode rows", View::padded_rows(DType::kI32, {T, k}, k + 1));
  s.global.memory->declare_output("global rows", View::padded_rows(DType::kI32, {T, k}, k + 2, 4));
  for (Buffer* b : s.all()) b->memory->arm();

  IndexerDecodeStepInputs in;
  in.batch.seq_lens = s.seq_lens.device_tensor();
  in.batch.decode_lens = s.decode_lens.device_tensor();
  in.batch.query_start_loc = s.qsl.device_tensor();
  in.batch.block_table = s.table.device_tensor();
  in.batch.host_decode_lens = c.decode_lens;
  if (c.pass_host_seq_lens) in.batch.host_seq_lens = c.seq_lens;
  in.batch.num_decode_tokens = T;
  if (c.layout == MetadataLayout::kFlattened) in.batch.num_padded_tokens = T + c.graph_padding;
  in.batch.layout = c.layout;
  in.batch.path = c.path;
  in.index_q = s.q.device_tensor();
  in.index_weights = s.weights.device_tensor();
  in.kv_blocks = s.kv.device_tensor();
  in.block_size = e.block_size;
  in.max_context_len = c.max_context_len;
  in.topk_buffer = s.topk.device_tensor();
  in.topk_global = s.global.device_tensor();

  simt::host::Options options;
  options.warp_size = c.warp_size;
  options.schedule = c.shuffled ? simt::host::Schedule::kShuffled : simt::host::Schedule::kOrdered;
  options.seed = c.seed;
  simt::host::ScopedOptions scope(options);
  const IndexerDecodeStepResult r = step.run(in);
  device.synchronize();
  if (result != nullptr) *result = r;
  for (Buffer* b : s.all()) {
    const GuardReport g = b->memory->check();
    if (!g.ok()) return "guard of " + b->name + ": " + g.describe();
    b->download();
  }

  // The oracle, over the token rows only.
  oracle::DecodeStepInputs o;
  o.batch = {s.seq_lens.host_tensor(), s.decode_lens.host_tensor(), s.table.host_tensor(), e.next_n};
  const View& qv = s.q.view;
  o.index_q = HostTensor(s.q.host.data(), View(qv.dtype(), {T, e.H, e.D}, qv.strides(), qv.byte_offset()));
  o.index_weights = HostTensor(s.weights.host.data(), View(DType::kF32, {T, e.H}, s.weights.view.strides(),
                                                           s.weights.view.byte_offset()));
  o.index_cache = {s.kv.host_tensor(), e.block_size, e.D};
  o.topk = k;
  const oracle::DecodeStepResult want = oracle::indexer_decode_step(o);

  // Logits: each token's row of the step's logits equals the oracle's over the token's length.
  if (static_cast<int64_t>(r.logits_row_of_token.size()) != T) return "the step mapped " + std::to_string(r.logits_row_of_token.size()) + " tokens, not " + std::to_string(T);
  const int64_t cols = c.max_context_len;
  std::vector<float> got(static_cast<size_t>(T * cols), 0.0f);
  std::vector<double> got64(static_cast<size_t>(T * cols)), want64(static_cast<size_t>(T * cols));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t row = r.logits_row_of_token[static_cast<size_t>(t)];
    const int64_t n = want.context_len[static_cast<size_t>(t)];
    if (n > 0) {
      step.logits_memory().read(r.logits.view.byte_offset_of({row, 0}), got.data() + t * cols, n * 4);
    }
    for (int64_t col = 0; col < cols; ++col) {
      const size_t i = static_cast<size_t>(t * cols + col);
      want64[i] = col < n ? want.logits.logits.values[static_cast<size_t>(t) * static_cast<size_t>(want.logits.logits.shape[1]) + static_cast<size_t>(col)] : 0.0;
      got64[i] = col < n ? double(got[i]) : 0.0;
    }
  }
  const CompareReport lr = compare_close(HostTensor(got64.data(), View::contiguous(DType::kF64, {T, cols})),
                                         HostTensor(want64.data(), View::contiguous(DType::kF64, {T, cols})),
                                         tolerance_for("paged_mqa_logits", "logits"));
  if (!lr.ok) return "token logits: " + lr.describe();

  // Top-k: the token rows of the shared buffer are a valid top-k of those logits.
  const HostTensor topk_rows(s.topk.host.data(), View::padded_rows(DType::kI32, {T, k}, k + 1));
  const std::vector<int64_t> lengths(want.context_len.begin(), want.context_len.end());
  const TopkReport tr = check_topk(topk_rows, HostTensor(got.data(), View::contiguous(DType::kF32, {T, cols})), lengths);
  if (!tr.ok) return "top-k rows of the shared buffer: " + tr.describe();

  // Global slots: the oracle's conversion of the step's own choice.
  const HostTensor host_table(s.host_table.data(), View::contiguous(DType::kI32, {B, e.W}));
  const HostTensor global_rows(s.global.host.data(), View::padded_rows(DType::kI32, {T, k}, k + 2, 4));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < k; ++i) {
      const int32_t w = oracle::topk_to_global(topk_rows.at<int32_t>({t, i}), host_table,
                                               want.request[static_cast<size_t>(t)], e.block_size);
      if (global_rows.at<int32_t>({t, i}) != w) {
        return "global slot of token " + std::to_string(t) + " position " + std::to_string(i) + ": " +
               std::to_string(global_rows.at<int32_t>({t, i})) + ", want " + std::to_string(w);
      }
    }
  }
  return "";
}

// The route a result took, for RC_TAG and test names.
std::string route(const IndexerDecodeStepResult& r) {
  std::string s = r.metadata.layout == MetadataLayout::kFlattened ? "flattened" : "native";
  if (r.packed) s += " packed";
  if (r.padded_topk) s += " padded top-k";
  s += std::string(" ") + topk_path_name(r.topk_path);
  return s;
}

RC_GTEST_PROP(IndexerDecodeStep, EveryTokenEqualsTheOracleAndOnlyItsRowsAreWritten, ()) {
  const Engine e = *gen_engine();
  const StepCase c = *gen_step_case(e);
  const auto device = make_device(Backend::kHost);
  IndexerDecodeStep step(*device, e.limits());
  IndexerDecodeStepResult r;
  const std::string failure = check_step(*device, step, e, c, &r);
  RC_TAG(route(r));
  if (!failure.empty()) RC_FAIL(failure);
}

// One step object through a sequence of batches, as an engine runs it: batches grow and shrink, the
// layout and decode lengths change; every step is checked, and no scratch address ever moves.
RC_GTEST_PROP(IndexerDecodeStep, ASequenceOfBatchesOnOneStepObjectEachEqualsTheOracle, ()) {
  const Engine e = *gen_engine();
  const auto cases = *rc::gen::container<std::vector<StepCase>>(*rc::gen::inRange(2, 5), gen_step_case(e));
  const auto device = make_device(Backend::kHost);
  IndexerDecodeStep step(*device, e.limits());
  const auto scratch = [&step] {
    std::vector<uintptr_t> a;
    for (GuardedMemory* m : {&step.logits_memory(), &step.packed_q_memory(), &step.packed_weights_memory(),
                             &step.padded_topk_memory(), &step.workspace_memory(),
                             &step.metadata_builder().seq_lens_memory()}) {
      a.push_back(reinterpret_cast<uintptr_t>(m->data()));
    }
    return a;
  };
  const std::vector<uintptr_t> addresses = scratch();
  for (size_t i = 0; i < cases.size(); ++i) {
    IndexerDecodeStepResult r;
    const std::string failure = check_step(*device, step, e, cases[i], &r);
    if (!failure.empty()) RC_FAIL("step " + std::to_string(i) + " (" + route(r) + "): " + failure);
    if (r.metadata.layout == MetadataLayout::kFlattened) {
      RC_ASSERT(reinterpret_cast<uintptr_t>(r.metadata.seq_lens.base) == addresses[5]);
    }
    RC_ASSERT(reinterpret_cast<uintptr_t>(r.logits.base) == addresses[0]);
    RC_ASSERT(scratch() == addresses);
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
  using Break = std::function<void(IndexerDecodeStepInputs&, StepBuffers&)>;
  const std::vector<std::pair<const char*, Break>> breaks = {
      {"index_q", [](IndexerDecodeStepInputs& in, StepBuffers&) { in.index_q.view = View::contiguous(DType::kFP8E4M3, {2, 2, 16}); }},
      {"index_q", [](IndexerDecodeStepInputs& in, StepBuffers&) { in.index_q.view = View::contiguous(DType::kBF16, {3, 2, 16}); }},
      {"index_weights", [](IndexerDecodeStepInputs& in, StepBuffers&) { in.index_weights.view = View::padded_rows(DType::kF32, {3, 2}, 3); }},
      {"kv_blocks", [](IndexerDecodeStepInputs& in, StepBuffers&) { in.block_size = 64; }},
      {"max_context_len", [](IndexerDecodeStepInputs& in, StepBuffers&) { in.max_context_len = 13; }},
      {"seq_len 12 > max_context_len", [](IndexerDecodeStepInputs& in, StepBuffers&) { in.max_context_len = 11; }},
      {"needs 3 blocks", [](IndexerDecodeStepInputs& in, StepBuffers&) { in.batch.block_table.view = View::padded_rows(DType::kI32, {2, 2}, 3, 4); }},
      {"decode length 3", [](IndexerDecodeStepInputs& in, StepBuffers&) { in.batch.host_decode_lens = {3, 0}; }},
      {"topk_buffer", [](IndexerDecodeStepInputs& in, StepBuffers&) { in.topk_buffer.view = View::contiguous(DType::kI32, {2, 3}); }},
      {"topk_buffer", [](IndexerDecodeStepInputs& in, StepBuffers&) { in.topk_buffer.view = View::contiguous(DType::kI32, {4, 2}); }},
      {"topk_global", [](IndexerDecodeStepInputs& in, StepBuffers&) { in.topk_global.view = View(DType::kI32, {3, 3}, {1, 3}); }},
      {"overlaps", [](IndexerDecodeStepInputs& in, StepBuffers&) { in.topk_global = in.topk_buffer; }},
      {"tokens", [](IndexerDecodeStepInputs& in, StepBuffers&) { in.batch.num_decode_tokens = 4; }},
  };
  for (const auto& [what, change] : breaks) {
    IndexerDecodeStep step(*device, e.limits());
    StepBuffers s = make_buffers(e, c);
    for (Buffer* b : s.all()) b->upload(*device);
    IndexerDecodeStepInputs in;
    in.batch.seq_lens = s.seq_lens.device_tensor();
    in.batch.decode_lens = s.decode_lens.device_tensor();
    in.batch.query_start_loc = s.qsl.device_tensor();
    in.batch.block_table = s.table.device_tensor();
    in.batch.host_decode_lens = c.decode_lens;
    in.batch.host_seq_lens = c.seq_lens;
    in.index_q = s.q.device_tensor();
    in.index_weights = s.weights.device_tensor();
    in.kv_blocks = s.kv.device_tensor();
    in.block_size = e.block_size;
    in.max_context_len = c.max_context_len;
    in.topk_buffer = s.topk.device_tensor();
    in.topk_global = s.global.device_tensor();
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
