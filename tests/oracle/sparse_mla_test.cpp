// Tests of oracle/sparse_mla.h (docs/ops.md 4): hand-worked rows, a brute-force scalar loop on random inputs with
// padded and offset views, and clear errors for malformed inputs.
#include "oracle/sparse_mla.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "core/fp8.h"
#include "oracle/quantize.h"

namespace mlacheck::oracle {
namespace {

constexpr int64_t kHeadDim = 576;
constexpr int64_t kLatent = 512;
constexpr double kInf = HUGE_VAL;
const double e = std::exp(1.0);

// Host storage for one call. q rows are padded by q_pad bf16 values; index rows by index_pad entries; the KV
// cache starts kv_offset bytes into its buffer with tokens token_stride and blocks block_stride bytes apart. Every
// KV byte outside the tokens written (padding, the bytes before the view, a sentinel block after it) is 0x7F, an
// fp8 NaN, so an oracle that reads one gets NaN. Indices start as -1.
struct Problem {
  int64_t b = 1, s_q = 1, h = 1, topk = 1, num_blocks = 1, page = 1;
  int64_t q_pad = 0, index_pad = 0, kv_offset = 0, token_pad = 0, block_pad = 0;
  double softmax_scale = 1.0;
  std::vector<uint16_t> q;  // bf16 bits
  std::vector<uint8_t> kv;
  std::vector<int32_t> indices;
  std::optional<std::vector<int32_t>> topk_length;
  std::optional<std::vector<float>> sink;

  int64_t q_row() const { return kHeadDim + q_pad; }
  int64_t token_stride() const { return kDsMlaTokenBytes + token_pad; }
  int64_t block_stride() const { return page * token_stride() + block_pad; }
  int64_t num_slots() const { return num_blocks * page; }

  void allocate() {
    q.assign(static_cast<size_t>(b * s_q * h * q_row()), 0);
    kv.assign(static_cast<size_t>(kv_offset + (num_blocks + 1) * block_stride()), 0x7F);
    indices.assign(static_cast<size_t>(b * s_q * (topk + index_pad)), -1);
  }
  uint16_t& q_bits(int64_t bi, int64_t s, int64_t hi, int64_t c) {
    return q[static_cast<size_t>(((bi * s_q + s) * h + hi) * q_row() + c)];
  }
  double q_value(int64_t bi, int64_t s, int64_t hi, int64_t c) const {
    return bf16_to_float(q[static_cast<size_t>(((bi * s_q + s) * h + hi) * q_row() + c)]);
  }
  int32_t& index(int64_t bi, int64_t s, int64_t i) {
    return indices[static_cast<size_t>((bi * s_q + s) * (topk + index_pad) + i)];
  }
  int32_t index(int64_t bi, int64_t s, int64_t i) const { return const_cast<Problem*>(this)->index(bi, s, i); }
  const uint8_t* token(int64_t slot) const {
    return kv.data() + kv_offset + slot / page * block_stride() + slot % page * token_stride();
  }
  uint8_t* token(int64_t slot) { return const_cast<uint8_t*>(static_cast<const Problem*>(this)->token(slot)); }
  // Sets q[bi, s, hi] to `latent` in its 512 latent and `rope` in its 64 rope entries (both exact in bf16).
  void set_q(int64_t bi, int64_t s, int64_t hi, float latent, float rope) {
    for (int64_t c = 0; c < kHeadDim; ++c) q_bits(bi, s, hi, c) = float_to_bf16(c < kLatent ? latent : rope);
  }

  SparseMlaInputs inputs() {
    const int64_t ir = topk + index_pad;
    SparseMlaInputs in{
        HostTensor(q.data(), View(DType::kBF16, {b, s_q, h, kHeadDim}, {s_q * h * q_row(), h * q_row(), q_row(), 1})),
        HostTensor(kv.data(), View(DType::kU8, {num_blocks, page, kDsMlaTokenBytes},
                                   {block_stride(), token_stride(), 1}, kv_offset)),
        HostTensor(indices.data(), View(DType::kI32, {b, s_q, topk}, {s_q * ir, ir, 1})),
        std::nullopt, softmax_scale, std::nullopt, MlaPrecision{}};
    if (topk_length) in.topk_length = HostTensor(topk_length->data(), View::contiguous(DType::kI32, {b}));
    if (sink) in.attn_sink = HostTensor(sink->data(), View::contiguous(DType::kF32, {h}));
    return in;
  }
};

// Writes a token whose latent value c is `latent` * scales[c / 128] and whose 64 rope values are `rope`; latent
// must be an fp8 value and rope a bf16 value, so the decoded key is exactly that.
void put_token(Problem& p, int64_t slot, float latent, std::array<float, 4> scales, float rope) {
  uint8_t* t = p.token(slot);
  const uint8_t code = float_to_fp8_e4m3(latent);
  ASSERT_EQ(fp8_e4m3_to_float(code), latent) << "not an fp8 value";
  ASSERT_EQ(bf16_to_float(float_to_bf16(rope)), rope) << "not a bf16 value";
  std::memset(t, code, kLatent);
  std::memcpy(t + kLatent, scales.data(), 16);
  const uint16_t r = float_to_bf16(rope);
  for (int i = 0; i < 64; ++i) std::memcpy(t + kLatent + 16 + 2 * i, &r, 2);
}

void expect_close(double actual, double expected, const std::string& where) {
  if (std::isinf(expected)) {
    EXPECT_EQ(actual, expected) << where;
  } else {
    EXPECT_NEAR(actual, expected, 1e-13 * std::max(1.0, std::fabs(expected))) << where;
  }
}

// Every latent entry of out[bi, s, hi] is `value`.
void expect_out_row(const SparseMlaResult& r, int64_t bi, int64_t s, int64_t hi, double value) {
  for (int64_t c = 0; c < kLatent; ++c) {
    const double got = r.out.at({bi, s, hi, c});
    if (std::fabs(got - value) > 1e-13 * std::max(1.0, std::fabs(value))) {
      ADD_FAILURE() << "out[" << bi << ", " << s << ", " << hi << ", " << c << "] = " << got << ", want " << value;
      return;
    }
  }
}

// The hand-worked problems below share two tokens in a cache of 2 blocks of 2 slots (4 slots; slots 1 and 2 are
// NaN bytes and must never be read):
//   slot 0: A, latent all 1, rope 0;   slot 3: B, latent all 2 (fp8 1.0 times tile scale 2), rope 0.
// With q latent all x, rope anything, and softmax_scale 1/512, score_A = x and score_B = 2x; for x = 1 that is 1 and
// 2, so lse = ln(e + e^2) and out = (e * 1 + e^2 * 2) / (e + e^2) = (1 + 2e) / (1 + e) in every column.
Problem two_token_problem(int64_t b, int64_t s_q, int64_t h, int64_t topk) {
  Problem p;
  p.b = b, p.s_q = s_q, p.h = h, p.topk = topk, p.num_blocks = 2, p.page = 2;
  p.index_pad = 1, p.kv_offset = 24, p.token_pad = 16, p.block_pad = 8;
  p.softmax_scale = 1.0 / 512;
  p.allocate();
  put_token(p, 0, 1.0f, {1, 1, 1, 1}, 0.0f);
  put_token(p, 3, 1.0f, {2, 2, 2, 2}, 0.0f);
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t s = 0; s < s_q; ++s) {
      for (int64_t hi = 0; hi < h; ++hi) p.set_q(bi, s, hi, 1.0f, 3.0f);
    }
  }
  return p;
}

void set_row(Problem& p, int64_t bi, int64_t s, const std::vector<int32_t>& row) {
  ASSERT_EQ(static_cast<int64_t>(row.size()), p.topk);
  for (int64_t i = 0; i < p.topk; ++i) p.index(bi, s, i) = row[static_cast<size_t>(i)];
}

TEST(SparseMlaDecode, OneTokenGivesItsValueAndItsScoreWithPerTileScalesAndRope) {
  Problem p;
  p.h = 2, p.topk = 1, p.softmax_scale = 1.0 / 1024;
  p.allocate();
  put_token(p, 0, 1.0f, {1, 2, 4, 8}, 0.5f);  // latent column c is 2^(c / 128); rope 0.5
  p.set_q(0, 0, 0, 1.0f, 2.0f);
  p.set_q(0, 0, 1, -1.0f, 0.0f);
  p.index(0, 0, 0) = 0;
  const SparseMlaResult r = sparse_mla_decode(p.inputs());
  ASSERT_EQ(r.out.shape, (std::vector<int64_t>{1, 1, 2, 512}));
  ASSERT_EQ(r.lse.shape, (std::vector<int64_t>{1, 2, 1}));
  // Head 0: q . K = 128 * (1 + 2 + 4 + 8) + 64 * 0.5 * 2 = 1984, times 1/1024 = 1.9375 (the rope counts).
  // Head 1: -1920 / 1024 = -1.875. One token: softmax weight exp(score - lse) = 1, lse = score, out = V exactly.
  EXPECT_DOUBLE_EQ(r.lse.at({0, 0, 0}), 1.9375);
  EXPECT_DOUBLE_EQ(r.lse.at({0, 1, 0}), -1.875);
  // lse's fp32 rounding slack: |scale| gamma_578 sum_d |q_d K_d| + 4u |score|; no term cancels
  // here, so sum_d |q_d K_d| * scale is |score| itself.
  const double u = 0x1p-24, gamma = 578 * u / (1 - 578 * u);
  EXPECT_DOUBLE_EQ(r.lse_slack.at({0, 0, 0}), 1.9375 * gamma + 4 * u * 1.9375);
  EXPECT_DOUBLE_EQ(r.lse_slack.at({0, 1, 0}), 1.875 * gamma + 4 * u * 1.875);
  for (int64_t hi = 0; hi < 2; ++hi) {
    for (int64_t c = 0; c < kLatent; ++c) ASSERT_EQ(r.out.at({0, 0, hi, c}), std::ldexp(1.0, int(c / 128))) << c;
  }
}

// A declared rounding of P to bf16 (as a kernel taking P.V in bf16 computes) where V cancels: the
// rounding's cost exceeds the table's tolerance, which is all an undeclared kernel gets (out_slack
// 0: today's behaviour); the declared slack covers it and stays a few 2^-8 of sum p |V|, far below a
// wrong answer's error.
TEST(SparseMlaDecode, ADeclaredBf16RoundingOfPAllowsWhatItCostsWhereVCancels) {
  Problem p;
  p.topk = 3, p.num_blocks = 1, p.page = 3, p.softmax_scale = 1.0 / 64;
  p.allocate();
  const double v[3] = {851968, -851968, 1};          // latent of the three keys: the first two cancel
  const float score[3] = {0.3125f, 0.3203125f, 0.0f};  // rope values (exact in bf16): score = rope
  put_token(p, 0, 1.0f, {851968, 851968, 851968, 851968}, score[0]);
  put_token(p, 1, -1.0f, {851968, 851968, 851968, 851968}, score[1]);
  put_token(p, 2, 1.0f, {1, 1, 1, 1}, score[2]);
  p.set_q(0, 0, 0, 0.0f, 1.0f);  // latent 0, rope 1: score_i = 64 * rope_i / 64
  set_row(p, 0, 0, {0, 1, 2});
  SparseMlaInputs in = p.inputs();
  const SparseMlaResult plain = sparse_mla_decode(in);
  in.precision.p = 0x1p-8;
  const SparseMlaResult declared = sparse_mla_decode(in);
  double l = 0, w[3];
  for (int i = 0; i < 3; ++i) l += w[i] = std::exp(double(score[i]) - double(score[1]));
  double kernel = 0;
  for (int i = 0; i < 3; ++i) kernel += double(bf16_to_float(float_to_bf16(float(w[i] / l)))) * v[i];
  const double want = plain.out.at({0, 0, 0, 0}), err = std::fabs(kernel - want);
  const double table = 0x1p-10 + 0x1p-8 * std::fabs(want);  // sparse_mla_decode out (core/tolerances.cpp)
  EXPECT_EQ(declared.out.at({0, 0, 0, 0}), want);  // the answer does not change, only its slack
  EXPECT_EQ(plain.out_slack.at({0, 0, 0, 0}), 0.0) << "nothing declared: the table alone, as before";
  EXPECT_GT(err, table) << "the case no longer shows the rounding's cost";
  EXPECT_LE(err, declared.out_slack.at({0, 0, 0, 0}) + table);
  EXPECT_LT(declared.out_slack.at({0, 0, 0, 0}), 2 * 0x1p-7 * 851968);
  EXPECT_EQ(declared.lse_slack.at({0, 0, 0}), plain.lse_slack.at({0, 0, 0}));  // P's rounding leaves lse alone
  // q and K declared rounded: lse's slack grows by (u_q + u_kv + u_q u_kv) sum |q K| times the scale.
  in.precision = MlaPrecision{0x1p-8, 0x1p-8, 0};
  EXPECT_NEAR(sparse_mla_decode(in).lse_slack.at({0, 0, 0}) - plain.lse_slack.at({0, 0, 0}),
              (0x1p-7 + 0x1p-16) * 0.3203125, 1e-12);
  // A wrong answer (one key dropped: V[1] left out) is still far outside the declared slack.
  const double dropped = (w[0] * v[0] + w[2] * v[2]) / (w[0] + w[2]);
  EXPECT_GT(std::fabs(dropped - want), 100 * (declared.out_slack.at({0, 0, 0, 0}) + table));
}

// Declared roundings so wide against the scores that e^(2d) overflows: key 2's products cancel to a
// score of 0 but sum to 29.4M (d = 3,584 with q and K declared bf16), key 1 sits at -1000. o's slack
// must be finite and cover the weight moving anywhere between the keys: o is 14,336 (key 2's V half
// weighted), any mix of the three V (0, 1, 28,672) lies within 14,336 of it, and no further.
TEST(SparseMlaDecode, AScoreSlackBeyondExpsRangeGivesAFiniteSlackThatCoversEveryKey) {
  Problem p;
  p.topk = 3, p.num_blocks = 1, p.page = 3, p.softmax_scale = 1.0 / 64;
  p.allocate();
  put_token(p, 0, 0.0f, {1, 1, 1, 1}, 0.0f);                  // score 0, V 0
  put_token(p, 1, 1.0f, {1, 1, 1, 1}, -1008.0f);              // score (512 - 64 * 1008) / 64 = -1000, V 1
  put_token(p, 2, 448.0f, {64, 64, 64, 64}, -229376.0f);      // score (512 * 28672 - 64 * 229376) / 64 = 0
  p.set_q(0, 0, 0, 1.0f, 1.0f);
  set_row(p, 0, 0, {0, 1, 2});
  SparseMlaInputs in = p.inputs();
  in.precision = MlaPrecision{0x1p-8, 0x1p-8, 0};
  const SparseMlaResult r = sparse_mla_decode(in);
  EXPECT_NEAR(r.out.at({0, 0, 0, 0}), 14336.0, 1e-6);
  EXPECT_GT(2 * r.lse_slack.at({0, 0, 0}), 600.0);
  const double slack = r.out_slack.at({0, 0, 0, 0});
  EXPECT_TRUE(std::isfinite(slack)) << slack;
  EXPECT_GT(slack, 14000.0);
  EXPECT_LT(slack, 15000.0);
}

// Key 0 holds all the weight in exact arithmetic, key 1 sits 35 below it and key 2's products set
// 2d past 600: a kernel may hand all the weight to key 1, so o's slack must cover key 0's V falling
// out of o entirely (mla_weight_slack.h; the dense oracle's test of the same name says where it was
// met), and no more.
TEST(SparseMlaDecode, AScoreSlackBeyondExpsRangeLetsTheHeaviestKeyLoseItsWeight) {
  Problem p;
  p.topk = 3, p.num_blocks = 1, p.page = 3, p.softmax_scale = 1.0 / 64;
  p.allocate();
  put_token(p, 0, 1.0f, {1, 1, 1, 1}, -8.0f);                 // score (512 - 64 * 8) / 64 = 0, V 1
  put_token(p, 1, 0.0f, {1, 1, 1, 1}, -35.0f);                // score -35, V 0
  put_token(p, 2, 0.0f, {64, 64, 64, 64}, -229376.0f);        // score -229376 (its rope alone), V 0
  p.set_q(0, 0, 0, 1.0f, 1.0f);
  set_row(p, 0, 0, {0, 1, 2});
  SparseMlaInputs in = p.inputs();
  in.precision = MlaPrecision{0x1p-8, 0x1p-8, 0};
  const SparseMlaResult r = sparse_mla_decode(in);
  ASSERT_GT(2 * r.lse_slack.at({0, 0, 0}), 600.0);
  ASSERT_NEAR(r.out.at({0, 0, 0, 0}), 1.0, 1e-9);
  const double slack = r.out_slack.at({0, 0, 0, 0});
  EXPECT_GE(slack, 1.0);   // o = V_1 = 0: key 0's weight fallen to 0
  EXPECT_LT(slack, 1.01);  // and no more than all of it
}

TEST(SparseMlaDecode, TwoTokensWorkedByHandSkippingEveryInvalidIndex) {
  Problem p = two_token_problem(1, 1, 1, 7);
  // -1, slot 4 == num_slots, other negatives and a far slot are skipped: only A (slot 0) and B (slot 3) count.
  set_row(p, 0, 0, {-1, 0, 4, 3, -5, 1000, -2147483647 - 1});
  const SparseMlaResult r = sparse_mla_decode(p.inputs());
  expect_close(r.lse.at({0, 0, 0}), std::log(e + e * e), "lse");
  expect_out_row(r, 0, 0, 0, (1 + 2 * e) / (1 + e));
}

TEST(SparseMlaDecode, DuplicateIndexCountsTwice) {
  Problem p = two_token_problem(1, 1, 1, 3);
  set_row(p, 0, 0, {0, 3, 3});
  const SparseMlaResult r = sparse_mla_decode(p.inputs());
  // B listed twice weighs 2 e^2: lse = ln(e + 2e^2), out = (e * 1 + 2e^2 * 2) / (e + 2e^2) = (1 + 4e) / (1 + 2e).
  expect_close(r.lse.at({0, 0, 0}), std::log(e + 2 * e * e), "lse");
  expect_out_row(r, 0, 0, 0, (1 + 4 * e) / (1 + 2 * e));
}

TEST(SparseMlaDecode, TopkLengthCutsEachBatchRow) {
  Problem p = two_token_problem(2, 2, 1, 3);
  for (int64_t s = 0; s < 2; ++s) {
    set_row(p, 0, s, {0, 3, 3});
    set_row(p, 1, s, {3, 0, 3});
  }
  p.topk_length = std::vector<int32_t>{1, 2};
  const SparseMlaResult r = sparse_mla_decode(p.inputs());
  for (int64_t s = 0; s < 2; ++s) {
    // Batch 0 keeps A only: lse = score_A = 1, out = 1. Batch 1 keeps B and A once each, not the second B.
    expect_close(r.lse.at({0, 0, s}), 1.0, "batch 0 lse");
    expect_out_row(r, 0, s, 0, 1.0);
    expect_close(r.lse.at({1, 0, s}), std::log(e + e * e), "batch 1 lse");
    expect_out_row(r, 1, s, 0, (1 + 2 * e) / (1 + e));
  }
}

TEST(SparseMlaDecode, AttnSinkScalesOutButLseIsReportedWithoutIt) {
  Problem p = two_token_problem(1, 1, 2, 2);
  set_row(p, 0, 0, {0, 3});
  p.sink = std::vector<float>{0.5f, -1.0f};
  const SparseMlaResult r = sparse_mla_decode(p.inputs());
  const double lse = std::log(e + e * e);
  for (int64_t hi = 0; hi < 2; ++hi) {
    // The sink joins the softmax's denominator with weight exp(sink): out *= e^lse / (e^lse + e^sink).
    const double sink = (*p.sink)[static_cast<size_t>(hi)];
    expect_close(r.lse.at({0, hi, 0}), lse, "lse of head " + std::to_string(hi));
    expect_out_row(r, 0, 0, hi, (1 + 2 * e) / (1 + e) * std::exp(lse) / (std::exp(lse) + std::exp(sink)));
  }
}

TEST(SparseMlaDecode, RowWithoutValidIndexGivesZeroOutAndInfiniteLseWithOrWithoutSink) {
  for (bool with_sink : {false, true}) {
    SCOPED_TRACE(with_sink ? "with sink" : "without sink");
    Problem p = two_token_problem(3, 1, 2, 3);
    set_row(p, 0, 0, {-1, 4, -7});  // nothing valid
    set_row(p, 1, 0, {0, 3, 0});    // valid, but topk_length 0
    set_row(p, 2, 0, {0, -1, 3});   // A and B
    p.topk_length = std::vector<int32_t>{3, 0, 3};
    if (with_sink) p.sink = std::vector<float>{0.0f, 2.0f};
    const SparseMlaResult r = sparse_mla_decode(p.inputs());
    for (int64_t bi = 0; bi < 2; ++bi) {
      for (int64_t hi = 0; hi < 2; ++hi) {
        EXPECT_EQ(r.lse.at({bi, hi, 0}), kInf) << "batch " << bi << " head " << hi;
        expect_out_row(r, bi, 0, hi, 0.0);
      }
    }
    const double lse = std::log(e + e * e);
    const double sink_factor = with_sink ? 1 / (1 + std::exp(2.0 - lse)) : 1.0;
    expect_close(r.lse.at({2, 1, 0}), lse, "batch 2 lse");
    expect_out_row(r, 2, 0, 1, (1 + 2 * e) / (1 + e) * sink_factor);
  }
}

TEST(SparseMlaDecode, LseIsLaidOutBatchHeadQuery) {
  Problem p = two_token_problem(1, 2, 3, 2);
  set_row(p, 0, 0, {0, 3});
  set_row(p, 0, 1, {3, 0});
  // q latent x = (3s + h + 1) / 8 (exact in bf16) makes score_A = x and score_B = 2x, distinct per (s, h):
  // lse = ln(e^x + e^2x), out = (e^x + 2 e^2x) / (e^x + e^2x) = (1 + 2 e^x) / (1 + e^x).
  auto x = [](int64_t s, int64_t hi) { return (3.0 * s + hi + 1) / 8; };
  for (int64_t s = 0; s < 2; ++s) {
    for (int64_t hi = 0; hi < 3; ++hi) p.set_q(0, s, hi, static_cast<float>(x(s, hi)), 0.0f);
  }
  const SparseMlaResult r = sparse_mla_decode(p.inputs());
  ASSERT_EQ(r.lse.shape, (std::vector<int64_t>{1, 3, 2}));
  ASSERT_EQ(r.out.shape, (std::vector<int64_t>{1, 2, 3, 512}));
  for (int64_t s = 0; s < 2; ++s) {
    for (int64_t hi = 0; hi < 3; ++hi) {
      const double ex = std::exp(x(s, hi));
      // Row-major [b, h, s_q]: lse of (s, h) sits at h * s_q + s.
      expect_close(r.lse.values[static_cast<size_t>(hi * 2 + s)], std::log(ex + ex * ex),
                   "lse s " + std::to_string(s) + " h " + std::to_string(hi));
      expect_out_row(r, 0, s, hi, (1 + 2 * ex) / (1 + ex));
    }
  }
}

// docs/ops.md 4 as plain loops, decoding the token bytes with core/fp8.h and core/fp16.h directly: scores of the valid
// entries, lse = ln sum exp(score), out = sum exp(score - lse) V, then the sink factor.
// out is [b, s_q, h, 512] and lse [b, h, s_q], row-major.
struct Expected {
  std::vector<double> out, lse;
};
Expected brute_force(const Problem& p) {
  Expected x{std::vector<double>(static_cast<size_t>(p.b * p.s_q * p.h * kLatent), 0.0),
             std::vector<double>(static_cast<size_t>(p.b * p.h * p.s_q), kInf)};
  for (int64_t bi = 0; bi < p.b; ++bi) {
    const int64_t length = p.topk_length ? (*p.topk_length)[static_cast<size_t>(bi)] : p.topk;
    for (int64_t s = 0; s < p.s_q; ++s) {
      for (int64_t hi = 0; hi < p.h; ++hi) {
        std::vector<double> scores;
        std::vector<std::vector<double>> values;
        for (int64_t i = 0; i < length; ++i) {
          const int64_t slot = p.index(bi, s, i);
          if (slot < 0 || slot >= p.num_slots()) continue;
          const uint8_t* t = p.token(slot);
          std::vector<double> key(kHeadDim);
          for (int64_t c = 0; c < kLatent; ++c) {
            float scale;
            std::memcpy(&scale, t + kLatent + 4 * (c / 128), 4);
            key[static_cast<size_t>(c)] = double(fp8_e4m3_to_float(t[c])) * scale;
          }
          for (int64_t r = 0; r < 64; ++r) {
            uint16_t bits;
            std::memcpy(&bits, t + kLatent + 16 + 2 * r, 2);
            key[static_cast<size_t>(kLatent + r)] = bf16_to_float(bits);
          }
          double dot = 0;
          for (int64_t c = 0; c < kHeadDim; ++c) dot += p.q_value(bi, s, hi, c) * key[static_cast<size_t>(c)];
          scores.push_back(p.softmax_scale * dot);
          values.push_back(key);
        }
        if (scores.empty()) continue;
        double sum = 0;
        for (double sc : scores) sum += std::exp(sc);
        const double lse = std::log(sum);
        const double sink_factor = p.sink ? 1 / (1 + std::exp((*p.sink)[static_cast<size_t>(hi)] - lse)) : 1.0;
        x.lse[static_cast<size_t>((bi * p.h + hi) * p.s_q + s)] = lse;
        for (int64_t c = 0; c < kLatent; ++c) {
          double o = 0;
          for (size_t i = 0; i < scores.size(); ++i) o += std::exp(scores[i] - lse) * values[i][static_cast<size_t>(c)];
          x.out[static_cast<size_t>(((bi * p.s_q + s) * p.h + hi) * kLatent + c)] = o * sink_factor;
        }
      }
    }
  }
  return x;
}

// A random problem: odd page sizes, padded and offset views, random fp8 codes (never NaN) with tile scales near
// 1/448, and rows mixing valid slots, -1, other negatives, slots at and past num_slots, and duplicates.
Problem random_problem(std::mt19937& rng) {
  auto pick = [&](std::vector<int64_t> choices) { return choices[rng() % choices.size()]; };
  Problem p;
  p.b = pick({1, 2, 3}), p.s_q = pick({1, 2, 3}), p.h = pick({1, 3, 16, 64});
  p.page = pick({1, 3, 64}), p.num_blocks = pick({1, 2, 5});
  p.topk = pick({0, 1, 7, 40, 130});
  p.q_pad = pick({0, 8}), p.index_pad = pick({0, 3}), p.kv_offset = pick({0, 13, 656});
  p.token_pad = pick({0, 16, 5}), p.block_pad = pick({0, 7, 656});
  p.softmax_scale = pick({0, 1}) ? 1 / std::sqrt(576.0) : 0.25;
  p.allocate();
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.5f, 2.0f);
  for (int64_t slot = 0; slot < p.num_slots(); ++slot) {
    uint8_t* t = p.token(slot);
    for (int c = 0; c < kLatent; ++c) {
      do t[c] = static_cast<uint8_t>(rng()); while ((t[c] & 0x7F) == 0x7F);
    }
    for (int tile = 0; tile < 4; ++tile) {
      const float scale = uniform(rng) / 448;
      std::memcpy(t + kLatent + 4 * tile, &scale, 4);
    }
    for (int r = 0; r < 64; ++r) {
      const uint16_t bits = float_to_bf16(normal(rng));
      std::memcpy(t + kLatent + 16 + 2 * r, &bits, 2);
    }
  }
  for (int64_t bi = 0; bi < p.b; ++bi) {
    for (int64_t s = 0; s < p.s_q; ++s) {
      for (int64_t hi = 0; hi < p.h; ++hi) {
        for (int64_t c = 0; c < kHeadDim; ++c) p.q_bits(bi, s, hi, c) = float_to_bf16(normal(rng));
      }
      const bool none_valid = rng() % 6 == 0;
      for (int64_t i = 0; i < p.topk; ++i) {
        const int kind = static_cast<int>(rng() % 20);
        int32_t& slot = p.index(bi, s, i);
        if (none_valid || kind < 3) slot = -1;
        else if (kind == 3) slot = -static_cast<int32_t>(1 + rng() % 1000);
        else if (kind == 4) slot = static_cast<int32_t>(p.num_slots() + (rng() % 2 ? 0 : rng() % 100));
        else if (kind < 8 && i > 0) slot = p.index(bi, s, static_cast<int64_t>(rng() % i));  // may repeat a slot
        else slot = static_cast<int32_t>(rng() % p.num_slots());
      }
    }
  }
  if (rng() % 2) {
    p.topk_length = std::vector<int32_t>(static_cast<size_t>(p.b));
    for (auto& n : *p.topk_length) n = static_cast<int32_t>(rng() % (p.topk + 1));
  }
  if (rng() % 2) {
    p.sink = std::vector<float>(static_cast<size_t>(p.h));
    for (auto& v : *p.sink) v = 2 * normal(rng);
  }
  return p;
}

TEST(SparseMlaDecode, RandomInputsAgreeWithABruteForceLoop) {
  int64_t valid_rows = 0, empty_rows = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    Problem p = random_problem(rng);
    SCOPED_TRACE("seed " + std::to_string(seed) + ": b " + std::to_string(p.b) + " s_q " + std::to_string(p.s_q) +
                 " h " + std::to_string(p.h) + " topk " + std::to_string(p.topk) + " page " + std::to_string(p.page));
    const SparseMlaResult r = sparse_mla_decode(p.inputs());
    const Expected x = brute_force(p);
    ASSERT_EQ(r.out.values.size(), x.out.size());
    ASSERT_EQ(r.lse.values.size(), x.lse.size());
    for (size_t i = 0; i < x.lse.size(); ++i) {
      (std::isinf(x.lse[i]) ? empty_rows : valid_rows)++;
      if (std::isinf(x.lse[i])) {
        ASSERT_EQ(r.lse.values[i], kInf) << "lse element " << i;
      } else {
        ASSERT_NEAR(r.lse.values[i], x.lse[i], 1e-12 * (1 + std::fabs(x.lse[i]))) << "lse element " << i;
      }
    }
    for (size_t i = 0; i < x.out.size(); ++i) {
      ASSERT_NEAR(r.out.values[i], x.out[i], 1e-12 * (1 + std::fabs(x.out[i]))) << "out element " << i;
    }
  }
  EXPECT_GT(valid_rows, 100) << "the generator must exercise rows with valid entries";
  EXPECT_GT(empty_rows, 10) << "and rows without any";
}

// Expects sparse_mla_decode to throw mlacheck::Error whose message names `view`.
void expect_error_naming(const SparseMlaInputs& in, const View& view) {
  try {
    sparse_mla_decode(in);
    ADD_FAILURE() << "accepted " << view.to_string();
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find(view.to_string()), std::string::npos) << err.what();
  }
}

TEST(SparseMlaDecode, MalformedInputsAreClearErrors) {
  Problem p = two_token_problem(2, 1, 2, 3);
  p.topk_length = std::vector<int32_t>{3, 3};
  p.sink = std::vector<float>{0.0f, 0.0f};
  EXPECT_NO_THROW(sparse_mla_decode(p.inputs()));

  SparseMlaInputs in = p.inputs();
  in.q.view = View::contiguous(DType::kBF16, {2, 1, 2, 575});  // last dim not 576
  expect_error_naming(in, in.q.view);
  in = p.inputs();
  in.q.view = View::contiguous(DType::kF32, {2, 1, 2, 576});  // fp32 q
  expect_error_naming(in, in.q.view);
  in = p.inputs();
  in.q.view = View::contiguous(DType::kBF16, {2, 2, 576});  // rank 3
  expect_error_naming(in, in.q.view);

  in = p.inputs();
  in.kv_cache.view = View::contiguous(DType::kU8, {2, 2, 655});  // token of 655 bytes
  expect_error_naming(in, in.kv_cache.view);
  in = p.inputs();
  in.kv_cache.view = View(DType::kU8, {1, 2, 656}, {2 * 1312, 1312, 2});  // bytes two apart
  expect_error_naming(in, in.kv_cache.view);
  in = p.inputs();
  in.kv_cache.view = View::contiguous(DType::kFP8E4M3, {2, 2, 656});  // not raw bytes
  expect_error_naming(in, in.kv_cache.view);

  in = p.inputs();
  in.indices.view = View::contiguous(DType::kI64, {2, 1, 3});  // int64 indices
  expect_error_naming(in, in.indices.view);
  in = p.inputs();
  in.indices.view = View::contiguous(DType::kI32, {1, 1, 3});  // batch 1, q has 2
  expect_error_naming(in, in.indices.view);
  in = p.inputs();
  in.indices.view = View::contiguous(DType::kI32, {2, 2, 3});  // s_q 2, q has 1
  expect_error_naming(in, in.indices.view);

  in = p.inputs();
  in.topk_length->view = View::contiguous(DType::kI32, {3});  // 3 lengths for 2 batches
  expect_error_naming(in, in.topk_length->view);
  for (int32_t bad : {4, -1}) {  // outside [0, topk = 3]
    (*p.topk_length)[1] = bad;
    EXPECT_THROW(sparse_mla_decode(p.inputs()), Error) << "topk_length " << bad;
  }
  (*p.topk_length)[1] = 3;

  in = p.inputs();
  in.attn_sink->view = View::contiguous(DType::kBF16, {2});  // bf16 sink
  expect_error_naming(in, in.attn_sink->view);
  in = p.inputs();
  in.attn_sink->view = View::contiguous(DType::kF32, {3});  // 3 sinks for 2 heads
  expect_error_naming(in, in.attn_sink->view);
}

}  // namespace
}  // namespace mlacheck::oracle
