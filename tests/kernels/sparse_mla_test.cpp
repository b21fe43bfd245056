// Tests of kernels/sparse_mla_glue.h (SPEC.md 4): sparse MLA decode against the oracle on randomized
// cases (host backend with 32- and 64-lane warps and shuffled schedules; cuda when a GPU is usable),
// every buffer guarded and every cache byte no counted valid index names poisoned; rows with no valid
// entry; a production-size case; and bad input refused before any launch.
#include "kernels/sparse_mla.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/backend/host_executor.h"
#include "core/compare.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/tolerances.h"
#include "kernels/sparse_mla_glue.h"
#include "oracle/quantize.h"
#include "oracle/sparse_mla.h"
#include "properties/staged_buffer.h"
#include "tests/support/refusal.h"

namespace mlacheck::kernels {
namespace {

constexpr int64_t kDim = kSparseMlaHeadDim, kLatent = kSparseMlaLatent, kToken = kSparseMlaTokenBytes;
constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();
// The output buffers around their views: a pattern no kernel would write.
constexpr uint8_t kOutFill = 0xA7;

// Uploads every buffer, declares each output's view as the only bytes its buffer may change, arms,
// launches and checks every guard. Returns "" or the first stray write; outputs' host bytes then
// hold the device's.
std::string run_guarded(Device& device, const std::vector<Buffer*>& inputs, const std::vector<Buffer*>& outputs,
                        const std::function<void()>& launch) {
  std::vector<Buffer*> all = inputs;
  all.insert(all.end(), outputs.begin(), outputs.end());
  for (Buffer* b : all) b->upload(device);
  for (Buffer* b : outputs) b->memory->declare_output(b->name, b->view);
  for (Buffer* b : all) b->memory->arm();
  launch();
  device.synchronize();
  for (Buffer* b : all) {
    const GuardReport r = b->memory->check();
    if (!r.ok()) return "guard of " + b->name + ": " + r.describe();
  }
  for (Buffer* b : outputs) b->download();
  return "";
}

// Fills every 4-byte word of a buffer (view and padding) with value.
void fill_words(Buffer& buf, int32_t value) {
  for (size_t at = 0; at + 4 <= buf.host.size(); at += 4) std::memcpy(buf.host.data() + at, &value, 4);
}

float uniform(std::mt19937_64& rng, float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); }

// ---- cases ---------------------------------------------------------------------------------------

struct SparseCase {
  int64_t B = 1, S = 1, H = 1, topk = 1, page = 64, num_blocks = 2;
  int64_t token_stride = kToken, block_stride = 64 * kToken, kv_offset = 0;                  // bytes, multiples of 16
  int64_t q_offset = 0, indices_offset = 0, out_offset = 0, lse_offset = 0, aux_offset = 0;  // elements
  std::vector<int32_t> indices;                                                              // [B, S, topk]
  bool has_length = false;
  std::vector<int32_t> lengths;  // [B]
  bool has_sink = false;
  std::vector<float> sink;  // [H]
  double softmax_scale = 0.0722;
  uint8_t poison = 0xFF;  // every byte of the cache no counted valid index names: fp8 NaN (and NaN
                          // or ~3e38 scales and rope)
  int32_t trap = 0;       // a slot of a spare block: the padding around indices names it
  uint64_t seed = 0;
  int warp_size = 32;
  bool shuffled = false;

  int64_t num_slots() const { return num_blocks * page; }
  int64_t row_length(int64_t b) const { return has_length ? lengths[static_cast<size_t>(b)] : topk; }
  int32_t index(int64_t b, int64_t s, int64_t i) const { return indices[static_cast<size_t>((b * S + s) * topk + i)]; }
  // Whether entry i of row (b, s) names a slot the kernel must read.
  bool counted_valid(int64_t b, int64_t s, int64_t i) const {
    return i < row_length(b) && oracle::sparse_mla_index_valid(index(b, s, i), num_slots());
  }

  friend void showValue(const SparseCase& c, std::ostream& os) {
    os << "B " << c.B << " s_q " << c.S << " H " << c.H << " topk " << c.topk << " page " << c.page << " num_blocks "
       << c.num_blocks << " token stride " << c.token_stride << " block stride " << c.block_stride << " kv offset "
       << c.kv_offset << " offsets q " << c.q_offset << " indices " << c.indices_offset << " out " << c.out_offset
       << " lse " << c.lse_offset << " aux " << c.aux_offset << " scale " << c.softmax_scale << " indices [";
    for (int32_t i : c.indices) os << ' ' << i;
    os << " ]";
    if (c.has_length) {
      os << " topk_length [";
      for (int32_t l : c.lengths) os << ' ' << l;
      os << " ]";
    }
    if (c.has_sink) {
      os << " attn_sink [";
      for (float v : c.sink) os << ' ' << v;
      os << " ]";
    }
    os << " poison 0x" << std::hex << int(c.poison) << std::dec << " trap " << c.trap << " seed " << c.seed << " warp "
       << c.warp_size << (c.shuffled ? " shuffled" : "");
  }
};

// Indices, lengths and sinks from the case's seed: the first `live` blocks of a shuffled order hold
// the slots counted entries name (the rest are spare and stay poison); each row mixes valid slots,
// duplicates of earlier entries, -1, other negatives and slots >= num_blocks * page in proportions
// set by invalid_mix (0: all valid .. 3: mostly invalid), and now and then has no valid entry at
// all; entries past topk_length name spare or live slots that must not be read.
void fill_entries(SparseCase& c, int64_t live, int invalid_mix, bool empty_rows) {
  std::mt19937_64 rng(c.seed ^ 0x5eed5eedULL);
  std::vector<int32_t> blocks(static_cast<size_t>(c.num_blocks));
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  const auto pick = [&](int64_t first, int64_t count) {
    return static_cast<int32_t>(blocks[static_cast<size_t>(first + static_cast<int64_t>(rng() % count))] * c.page +
                                static_cast<int64_t>(rng() % c.page));
  };
  c.trap = pick(live, c.num_blocks - live);
  if (c.has_length) {
    c.lengths.resize(static_cast<size_t>(c.B));
    for (int32_t& l : c.lengths) {
      const uint64_t kind = rng() % 6;
      l = static_cast<int32_t>(kind == 0 ? 0 : kind == 1 ? c.topk : static_cast<int64_t>(rng() % (c.topk + 1)));
    }
  }
  const int32_t slots = static_cast<int32_t>(c.num_slots());
  const std::array<int32_t, 8> invalid = {-1,
                                          -1,
                                          -2,
                                          std::numeric_limits<int32_t>::min(),
                                          -static_cast<int32_t>(c.page),
                                          slots,
                                          slots + static_cast<int32_t>(rng() % c.page),
                                          kInt32Max};
  const double invalid_p = std::array<double, 4>{0.0, 0.2, 0.5, 0.9}[static_cast<size_t>(invalid_mix)];
  c.indices.resize(static_cast<size_t>(c.B * c.S * c.topk));
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t s = 0; s < c.S; ++s) {
      const bool none_valid = empty_rows && rng() % 8 == 0;
      std::vector<int32_t> named;
      for (int64_t i = 0; i < c.topk; ++i) {
        int32_t& e = c.indices[static_cast<size_t>((b * c.S + s) * c.topk + i)];
        if (i >= c.row_length(b) && rng() % 2 == 0) {
          e = rng() % 2 == 0 ? pick(live, c.num_blocks - live) : pick(0, live);  // not counted: may be poison
        } else if (none_valid || std::uniform_real_distribution<double>(0, 1)(rng) < invalid_p) {
          e = invalid[rng() % invalid.size()];
        } else if (!named.empty() && rng() % 4 == 0) {
          e = named[rng() % named.size()];  // a duplicate counts twice
        } else {
          e = pick(0, live);
          named.push_back(e);
        }
      }
    }
  }
  if (c.has_sink) {
    c.sink.resize(static_cast<size_t>(c.H));
    for (float& v : c.sink) {
      const uint64_t kind = rng() % 12;
      v = kind == 0 ? HUGE_VALF : kind == 1 ? -HUGE_VALF : uniform(rng, -4, 8);
    }
  }
}

// Small cases: b 1..3, s_q 1..2, h 1..8, 16 or 17..20 (a second, partial head group), topk 1..64
// (tile boundaries 32 and 64 included), odd and production page sizes, spare blocks, padded token
// and block strides, offset views, topk_length and attn_sink present or not.
rc::Gen<SparseCase> gen_sparse_case() {
  return rc::gen::exec([] {
    SparseCase c;
    c.B = *rc::gen::inRange(1, 4);
    c.S = *rc::gen::inRange(1, 3);
    c.H = *rc::gen::weightedOneOf<int64_t>({{6, rc::gen::inRange<int64_t>(1, 9)},
                                            {2, rc::gen::just<int64_t>(16)},
                                            {1, rc::gen::inRange<int64_t>(17, 21)}});
    c.topk = *rc::gen::weightedOneOf<int64_t>(
        {{6, rc::gen::inRange<int64_t>(1, 65)}, {1, rc::gen::element<int64_t>(1, 31, 32, 33, 63, 64)}});
    c.page = *rc::gen::element<int64_t>(1, 2, 3, 16, 61, 64);
    const int64_t live = *rc::gen::inRange(1, 5);
    c.num_blocks = live + *rc::gen::inRange(1, 4);
    c.token_stride = kToken + 16 * *rc::gen::inRange(0, 3);
    c.block_stride = c.page * c.token_stride + 16 * *rc::gen::inRange(0, 3);
    c.kv_offset = 16 * *rc::gen::inRange(0, 4);
    c.q_offset = *rc::gen::inRange(0, 9);
    c.indices_offset = *rc::gen::inRange(0, 5);
    c.out_offset = *rc::gen::inRange(0, 9);
    c.lse_offset = *rc::gen::inRange(0, 5);
    c.aux_offset = *rc::gen::inRange(0, 5);
    c.has_length = *rc::gen::arbitrary<bool>();
    c.has_sink = *rc::gen::arbitrary<bool>();
    c.softmax_scale = *rc::gen::element(0.0722, 0.0417, 0.25);  // 192^-0.5, 576^-0.5, larger
    c.poison = *rc::gen::element<uint8_t>(0x7F, 0xFF);
    c.seed = *rc::gen::arbitrary<uint64_t>();
    c.warp_size = *rc::gen::element(32, 64);
    c.shuffled = *rc::gen::arbitrary<bool>();
    fill_entries(c, live, *rc::gen::inRange(0, 4), true);
    return c;
  });
}

// ---- running a case ------------------------------------------------------------------------------

struct Outcome {
  std::string failure;        // a guard failure or the comparison with the oracle; "" when both pass
  std::vector<uint16_t> out;  // the kernel's out, dense [B, S, H, 512] bf16 bits
  std::vector<float> lse;     // the kernel's lse, dense [B, H, S]
};

Outcome run_case(Device& device, const SparseCase& c) {
  std::mt19937_64 rng(c.seed);
  const int64_t B = c.B, S = c.S, H = c.H;
  Buffer q("q", View::contiguous(DType::kBF16, {B, S, H, kDim}, 2 * c.q_offset), 64, c.poison);
  q.view.for_each_index([&](const std::vector<int64_t>& at) { q.put(at, float_to_bf16(uniform(rng, -2, 2))); });

  // The cache: every byte poison, then the tokens counted valid entries name.
  Buffer kv("kv_cache",
            View(DType::kU8, {c.num_blocks, c.page, kToken}, {c.block_stride, c.token_stride, 1}, c.kv_offset), 64,
            c.poison);
  std::set<int32_t> named;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t s = 0; s < S; ++s) {
      for (int64_t i = 0; i < c.topk; ++i) {
        if (c.counted_valid(b, s, i)) named.insert(c.index(b, s, i));
      }
    }
  }
  for (const int32_t slot : named) {
    float latent[kLatent], rope[kSparseMlaRope];
    for (int tile = 0; tile < kLatent / kSparseMlaScaleTile; ++tile) {
      const float magnitude = std::ldexp(1.0f, static_cast<int>(rng() % 5) - 2);  // tile scales 2^-2 .. 2^2
      for (int e = 0; e < kSparseMlaScaleTile; ++e)
        latent[tile * kSparseMlaScaleTile + e] = magnitude * uniform(rng, -1, 1);
    }
    for (float& r : rope) r = uniform(rng, -1, 1);
    const auto token = oracle::pack_ds_mla_token(latent, rope);
    std::memcpy(kv.host.data() + kv.view.byte_offset_of({slot / c.page, slot % c.page, 0}), token.data(), token.size());
  }

  Buffer indices("indices", View::contiguous(DType::kI32, {B, S, c.topk}, 4 * c.indices_offset), 64, 0);
  fill_words(indices, c.trap);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t s = 0; s < S; ++s) {
      for (int64_t i = 0; i < c.topk; ++i) indices.put({b, s, i}, c.index(b, s, i));
    }
  }
  Buffer lengths("topk_length", View::contiguous(DType::kI32, {B}, 4 * c.aux_offset), 64, 0);
  fill_words(lengths, static_cast<int32_t>(c.topk));  // a neighbour's word would count the poisoned tail
  if (c.has_length) {
    for (int64_t b = 0; b < B; ++b) lengths.put({b}, c.lengths[static_cast<size_t>(b)]);
  }
  Buffer sink("attn_sink", View::contiguous(DType::kF32, {H}, 4 * c.aux_offset), 64, c.poison);
  if (c.has_sink) {
    for (int64_t h = 0; h < H; ++h) sink.put({h}, c.sink[static_cast<size_t>(h)]);
  }
  Buffer out("out", View::contiguous(DType::kBF16, {B, S, H, kLatent}, 2 * c.out_offset), 64, kOutFill);
  Buffer lse("lse", View::contiguous(DType::kF32, {B, H, S}, 4 * c.lse_offset), 64, kOutFill);

  oracle::SparseMlaInputs in{q.host_tensor(), kv.host_tensor(), indices.host_tensor(),
                             std::nullopt,    c.softmax_scale,  std::nullopt};
  if (c.has_length) in.topk_length = lengths.host_tensor();
  if (c.has_sink) in.attn_sink = sink.host_tensor();
  const oracle::SparseMlaResult want = oracle::sparse_mla_decode(in);

  simt::host::Options options;
  options.warp_size = c.warp_size;
  options.schedule = c.shuffled ? simt::host::Schedule::kShuffled : simt::host::Schedule::kOrdered;
  options.seed = c.seed;
  simt::host::ScopedOptions scope(options);
  Outcome o;
  std::vector<Buffer*> inputs = {&q, &kv, &indices};
  if (c.has_length) inputs.push_back(&lengths);
  if (c.has_sink) inputs.push_back(&sink);
  o.failure = run_guarded(device, inputs, {&out, &lse}, [&] {
    SparseMlaArgs a;
    a.q = q.device_tensor();
    a.kv_cache = kv.device_tensor();
    a.indices = indices.device_tensor();
    if (c.has_length) a.topk_length = lengths.device_tensor();
    if (c.has_sink) a.attn_sink = sink.device_tensor();
    a.softmax_scale = c.softmax_scale;
    a.out = out.device_tensor();
    a.lse = lse.device_tensor();
    sparse_mla_decode(device, a);
  });
  if (!o.failure.empty()) return o;
  o.out.resize(static_cast<size_t>(out.view.numel()));
  std::memcpy(o.out.data(), out.host.data() + out.view.byte_offset(), 2 * o.out.size());
  o.lse.resize(static_cast<size_t>(lse.view.numel()));
  std::memcpy(o.lse.data(), lse.host.data() + lse.view.byte_offset(), 4 * o.lse.size());

  const CompareReport r_out =
      compare_close(out.host_tensor(), want.out.tensor(), tolerance_for("sparse_mla_decode", "out"));
  const CompareReport r_lse =
      compare_close(lse.host_tensor(), want.lse.tensor(), tolerance_for("sparse_mla_decode", "lse"));
  if (!r_out.ok) o.failure = "out: " + r_out.describe();
  if (!r_lse.ok) o.failure += (o.failure.empty() ? "lse: " : "; lse: ") + r_lse.describe();
  return o;
}

std::string check_case(Device& device, const SparseCase& c) { return run_case(device, c).failure; }

RC_GTEST_PROP(SparseMlaDecode, EqualsTheOracleAndWritesOnlyOutAndLse, ()) {
  const SparseCase c = *gen_sparse_case();
  RC_TAG(c.topk > kSparseMlaTileKeys ? "several tiles" : "one tile",
         c.H > kSparseMlaHeadsPerBlock ? "two head groups" : "one head group",
         c.has_length ? "topk_length" : "full rows", c.has_sink ? "sink" : "no sink");
  const auto device = make_device(Backend::kHost);
  const std::string failure = check_case(*device, c);
  if (!failure.empty()) RC_FAIL(failure);
}

// Rows with no valid entry (all invalid indices, topk_length 0, entries valid only past the length)
// among rows with valid ones: out exactly +0, lse +inf, and the other rows as the oracle says.
TEST(SparseMlaDecode, RowsWithoutValidEntriesGiveZeroAndInfinity) {
  const auto device = make_device(Backend::kHost);
  SparseCase c;
  c.B = 3, c.S = 2, c.H = 20, c.topk = 40, c.page = 16, c.num_blocks = 4, c.block_stride = 16 * kToken;
  c.has_length = true, c.lengths = {40, 0, 7}, c.has_sink = true, c.seed = 5;
  c.sink.assign(20, 0.5f);
  c.trap = 3 * 16;
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t s = 0; s < 2; ++s) {
      for (int64_t i = 0; i < 40; ++i) c.indices.push_back(static_cast<int32_t>((b * 2 + s + 5 * i) % 48));
    }
  }
  // Row (0, 1): only invalid entries; row (2, 0): valid slots only past topk_length 7.
  for (int64_t i = 0; i < 40; ++i)
    c.indices[static_cast<size_t>(40 + i)] = i % 2 == 0 ? -1 : 64 + static_cast<int32_t>(i);
  for (int64_t i = 0; i < 7; ++i) c.indices[static_cast<size_t>(4 * 40 + i)] = -5;
  const std::vector<std::pair<int64_t, int64_t>> empty = {{0, 1}, {1, 0}, {1, 1}, {2, 0}};
  const Outcome o = run_case(*device, c);
  EXPECT_EQ(o.failure, "");
  ASSERT_FALSE(o.out.empty());
  for (const auto& [b, s] : empty) {
    for (int64_t h = 0; h < c.H; ++h) {
      for (int64_t d = 0; d < kLatent; ++d) {
        ASSERT_EQ(o.out[static_cast<size_t>(((b * c.S + s) * c.H + h) * kLatent + d)], 0)
            << "row (" << b << ", " << s << ") head " << h << " column " << d;
      }
      EXPECT_EQ(o.lse[static_cast<size_t>((b * c.H + h) * c.S + s)], HUGE_VALF) << "row (" << b << ", " << s << ")";
    }
  }
  for (int64_t h = 0; h < c.H; ++h) EXPECT_TRUE(std::isfinite(o.lse[static_cast<size_t>(h * c.S)]));  // row (0, 0)
}

// DeepSeek-V3.2 decode: 2 query tokens, 128 heads, top-k 2048 over pages of 64 in a shuffled cache;
// the second row has topk_length 1500 and -1 padding, both an attention sink.
SparseCase production_case() {
  SparseCase c;
  c.B = 2, c.S = 1, c.H = 128, c.topk = 2048, c.page = 64, c.num_blocks = 70, c.block_stride = 64 * kToken;
  c.has_length = true, c.has_sink = true, c.seed = 17;
  c.softmax_scale = 1.0 / std::sqrt(192.0);
  fill_entries(c, 66, 0, false);
  c.lengths = {2048, 1500};
  for (int64_t i = 0; i < 2048; ++i) {
    if (i % 97 == 3) c.indices[static_cast<size_t>(i)] = -1;                     // a few gaps in row 0
    if (i >= 1500 && i % 2 == 0) c.indices[static_cast<size_t>(2048 + i)] = -1;  // padding of row 1
  }
  return c;
}

TEST(SparseMlaDecode, ProductionSizeEqualsTheOracle) {
  const auto device = make_device(Backend::kHost);
  EXPECT_EQ(check_case(*device, production_case()), "");
}

// ---- cuda: the same checks on device buffers -----------------------------------------------------

TEST(SparseMlaDecodeOnCuda, PropertiesAndProductionSizeWhenAGpuIsPresent) {
  std::string why;
  if (!device_usable(Backend::kCuda, &why)) GTEST_SKIP() << "skipped: no GPU (" << why << ")";
  const auto device = make_device(Backend::kCuda);
  EXPECT_TRUE(rc::check("sparse MLA decode on cuda equals the oracle", [&] {
    const std::string failure = check_case(*device, *gen_sparse_case());
    if (!failure.empty()) RC_FAIL(failure);
  }));
  EXPECT_EQ(check_case(*device, production_case()), "");
}

// ---- bad input: refused with one line before any launch -----------------------------------------

// 16 bytes, so the cache vector starts 16-byte aligned as the kernel's loads need.
struct alignas(16) Chunk {
  uint8_t bytes[16];
};

// Small valid inputs in host memory: b 2, s_q 1, h 2, topk 4, 2 blocks of 2 tokens. out and lse
// hold sentinels, so any launch would show.
struct Inputs {
  static constexpr int64_t B = 2, S = 1, H = 2, topk = 4, page = 2, blocks = 2;
  std::vector<uint16_t> q = std::vector<uint16_t>(B * S * H * kDim, 0x3F80);
  std::vector<Chunk> kv = std::vector<Chunk>(blocks * page * kToken / 16, Chunk{{0x38}});
  std::vector<int32_t> indices = {0, 1, 2, -1, 3, 3, 9, 0}, lengths = {4, 2};
  std::vector<float> sink = std::vector<float>(H, 0.0f), lse = std::vector<float>(B * H * S, 7.0f);
  std::vector<uint16_t> out = std::vector<uint16_t>(B * S * H * kLatent, 0x4321);
  SparseMlaArgs args() {
    SparseMlaArgs a;
    a.q = {q.data(), View::contiguous(DType::kBF16, {B, S, H, kDim})};
    a.kv_cache = {kv.data(), View::contiguous(DType::kU8, {blocks, page, kToken})};
    a.indices = {indices.data(), View::contiguous(DType::kI32, {B, S, topk})};
    a.topk_length = {lengths.data(), View::contiguous(DType::kI32, {B})};
    a.attn_sink = {sink.data(), View::contiguous(DType::kF32, {H})};
    a.softmax_scale = 0.0722;
    a.out = {out.data(), View::contiguous(DType::kBF16, {B, S, H, kLatent})};
    a.lse = {lse.data(), View::contiguous(DType::kF32, {B, H, S})};
    return a;
  }
  bool untouched() const {
    return std::all_of(out.begin(), out.end(), [](uint16_t x) { return x == 0x4321; }) &&
           std::all_of(lse.begin(), lse.end(), [](float x) { return x == 7.0f; });
  }
};

// Expects change(args) to be refused with a one-line Error that names `culprit`, and no launch.
void expect_refused(const std::function<void(Inputs&, SparseMlaArgs&)>& change, const char* what, const char* culprit) {
  const auto device = make_device(Backend::kHost);
  test_support::expect_refused_before_launch<Inputs>(
      [&](const SparseMlaArgs& a) { sparse_mla_decode(*device, a); }, change, what, culprit);
}

TEST(SparseMlaDecode, BadInputIsRefusedBeforeAnyLaunch) {
  {
    const auto device = make_device(Backend::kHost);
    Inputs in;
    EXPECT_NO_THROW(sparse_mla_decode(*device, in.args()));  // the baseline is valid
    EXPECT_FALSE(in.untouched());
  }
  using In = Inputs;
  using A = SparseMlaArgs;
  constexpr int64_t B = In::B, S = In::S, H = In::H;
  // q
  expect_refused([](In&, A& a) { a.q.view = View::contiguous(DType::kF32, {B, S, H, kDim}); }, "fp32 q", "q must be");
  expect_refused(
      [](In&, A& a) {
        a.q.view = View::contiguous(DType::kBF16, {B, S, H * 9, 64});
      },
      "q head dim 64", "q must be");
  expect_refused(
      [](In&, A& a) {
        a.q.view = View::contiguous(DType::kBF16, {B * S, H, kDim});
      },
      "rank-3 q", "q must be");
  expect_refused(
      [](In&, A& a) {
        a.q.view = View(DType::kBF16, {B, S, 1, kDim}, {H * kDim, H * kDim, kDim, 1});
      },
      "strided q", "q must be");
  // out and lse
  expect_refused(
      [](In&, A& a) {
        a.out.view = View::contiguous(DType::kF32, {B, S, H, kLatent});
      },
      "fp32 out", "out must be");
  expect_refused(
      [](In&, A& a) {
        a.out.view = View::contiguous(DType::kBF16, {B, S, 1, kLatent});
      },
      "out heads", "out must be");
  expect_refused(
      [](In&, A& a) {
        a.out.view = View::contiguous(DType::kBF16, {B, S, H, kDim});
      },
      "out of 576", "out must be");
  expect_refused(
      [](In&, A& a) {
        a.out.view = View(DType::kBF16, {B, S, H, 256}, {S * H * 512, H * 512, 512, 2});
      },
      "strided out", "out must be");
  expect_refused(
      [](In&, A& a) {
        a.lse.view = View::contiguous(DType::kF32, {B, S, H});
      },
      "lse [b, s_q, h]", "lse must be");
  expect_refused([](In&, A& a) { a.lse.view = View::contiguous(DType::kF32, {B, H}); }, "rank-2 lse", "lse must be");
  expect_refused([](In&, A& a) { a.lse.view = View::contiguous(DType::kF64, {B, H, S}); }, "fp64 lse", "lse must be");
  expect_refused(
      [](In&, A& a) {
        a.lse.view = View(DType::kF32, {B, H, S}, {1, B, B * H});
      },
      "transposed lse", "lse must be");
  // indices and topk_length
  expect_refused(
      [](In&, A& a) {
        a.indices.view = View::contiguous(DType::kI64, {B, S, 4});
      },
      "int64 indices", "indices must be");
  expect_refused(
      [](In&, A& a) {
        a.indices.view = View::contiguous(DType::kI32, {B, 2, 2});
      },
      "indices s_q", "indices must be");
  expect_refused(
      [](In&, A& a) {
        a.indices.view = View::contiguous(DType::kI32, {B * S, 4});
      },
      "rank-2 indices", "indices must be");
  expect_refused(
      [](In&, A& a) {
        a.indices.view = View(DType::kI32, {B, S, 2}, {4, 4, 2});
      },
      "strided indices", "indices must be");
  expect_refused([](In&, A& a) { a.topk_length.view = View::contiguous(DType::kI32, {B + 1}); }, "topk_length of 3",
                 "topk_length must be");
  expect_refused([](In&, A& a) { a.topk_length.view = View::contiguous(DType::kI32, {1}); }, "topk_length of 1",
                 "topk_length must be");
  expect_refused([](In&, A& a) { a.topk_length.view = View::contiguous(DType::kI64, {B}); }, "int64 topk_length",
                 "topk_length must be");
  // kv_cache
  expect_refused(
      [](In&, A& a) {
        a.kv_cache.view = View(DType::kU8, {1, 2, kToken}, {2 * 664, 664, 1});
      },
      "token stride 664", "token stride >= 656");
  expect_refused(
      [](In&, A& a) {
        a.kv_cache.view = View(DType::kU8, {2, 1, kToken}, {672, 640, 1});
      },
      "token stride 640", "token stride >= 656");
  expect_refused(
      [](In&, A& a) {
        a.kv_cache.view = View(DType::kU8, {2, 1, kToken}, {664, 656, 1});
      },
      "block stride 664", "token stride >= 656");
  expect_refused(
      [](In&, A& a) {
        a.kv_cache.view = View(DType::kU8, {2, 2, kToken}, {1312 - 16, 656, 1});
      },
      "overlapping blocks", "block stride >= page");
  expect_refused(
      [](In&, A& a) {
        a.kv_cache.view = View::contiguous(DType::kU8, {2, 2, 640});
      },
      "640-byte tokens", "kv_cache must be");
  expect_refused(
      [](In&, A& a) {
        a.kv_cache.view = View(DType::kU8, {1, 1, kToken}, {2 * 1312, 1312, 2});
      },
      "byte stride 2", "kv_cache must be");
  expect_refused(
      [](In&, A& a) {
        a.kv_cache.view = View::contiguous(DType::kU8, {2, 2, kToken}, 8);
      },
      "misaligned cache", "16-byte aligned");
  expect_refused(
      [](In&, A& a) {
        a.kv_cache.view = View::contiguous(DType::kFP8E4M3, {2, 2, kToken});
      },
      "fp8 cache", "kv_cache must be");
  expect_refused(
      [](In&, A& a) {
        a.kv_cache.view = View::contiguous(DType::kU8, {2, 0, kToken});
      },
      "page 0", "page of at least one token");
  // attn_sink, softmax_scale
  expect_refused([](In&, A& a) { a.attn_sink.view = View::contiguous(DType::kF32, {H + 1}); }, "sink of 3",
                 "attn_sink must be");
  expect_refused([](In&, A& a) { a.attn_sink.view = View::contiguous(DType::kF64, {H}); }, "fp64 sink",
                 "attn_sink must be");
  expect_refused([](In&, A& a) { a.softmax_scale = std::nan(""); }, "NaN scale", "softmax_scale");
  expect_refused([](In&, A& a) { a.softmax_scale = 1e300; }, "scale past fp32", "softmax_scale");
  // overlaps
  expect_refused(
      [](In& in, A& a) {
        a.out = {in.q.data(), View::contiguous(DType::kBF16, {B, S, H, kLatent})};
      },
      "out over q", "overlaps q");
  expect_refused(
      [](In& in, A& a) {
        a.lse = {in.indices.data(), View::contiguous(DType::kF32, {B, H, S})};
      },
      "lse over indices", "overlaps indices");
  expect_refused(
      [](In& in, A& a) {
        a.lse = {in.out.data(), View::contiguous(DType::kF32, {B, H, S}, 64)};
      },
      "lse inside out", "overlaps lse");
  // grid limits
  expect_refused(
      [](In&, A& a) {
        a.q.view = View::contiguous(DType::kBF16, {70000, 1, 1, kDim});
      },
      "b past the grid", "65535");
}

}  // namespace
}  // namespace mlacheck::kernels
