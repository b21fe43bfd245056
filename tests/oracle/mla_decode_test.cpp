// Tests of oracle/mla_decode.h (docs/ops.md 5): hand-worked cases, a brute-force scalar loop on random
// batches, and clear errors for malformed inputs.
#include "oracle/mla_decode.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "core/fp8.h"
#include "oracle/quantize.h"

namespace mlacheck::oracle {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double e = std::exp(1.0);

// A view over a byte buffer of its own. Every dimension is padded by `pad` elements and the view
// starts `offset` bytes in; the bytes outside the view (and those never set) stay 0xFF: NaN in bf16
// and fp8, -1 in int32, so a read of padding shows up as NaN or a bad page id.
struct Buffer {
  std::vector<uint8_t> bytes;
  HostTensor t;
  Buffer(DType dtype, std::vector<int64_t> shape, int64_t pad = 0, int64_t offset = 0) {
    std::vector<int64_t> strides(shape.size(), 1);
    for (size_t d = shape.size() - 1; d-- > 0;) strides[d] = strides[d + 1] * (shape[d + 1] + pad);
    bytes.assign(static_cast<size_t>(offset + (shape[0] + pad) * strides[0] * int64_t(dtype_size(dtype))), 0xFF);
    t = HostTensor(bytes.data(), View(dtype, shape, strides, offset));
  }
  Buffer(const Buffer&) = delete;
  Buffer(Buffer&&) = default;  // the vector's storage moves with it, so t stays valid
  void set(const std::vector<int64_t>& coords, double v) { t.store(coords, v); }
  // The 576 values at prefix (a key or a query row): zero but for the given dims.
  void set_row(std::vector<int64_t> prefix, const std::map<int64_t, double>& values) {
    prefix.push_back(0);
    for (int64_t c = 0; c < 576; ++c) {
      prefix.back() = c;
      set(prefix, values.count(c) ? values.at(c) : 0.0);
    }
  }
};

Buffer seq_lens(const std::vector<int32_t>& lens) {
  Buffer b(DType::kI32, {static_cast<int64_t>(lens.size())});
  for (size_t i = 0; i < lens.size(); ++i) b.set({static_cast<int64_t>(i)}, lens[i]);
  return b;
}

// Rows padded to a row stride of W + 3; columns past each row's entries stay -1, as does the padding.
Buffer block_table(const std::vector<std::vector<int32_t>>& rows, int64_t W) {
  Buffer b(DType::kI32, {static_cast<int64_t>(rows.size()), W}, 3);
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t c = 0; c < rows[r].size(); ++c) b.set({static_cast<int64_t>(r), static_cast<int64_t>(c)}, rows[r][c]);
  }
  return b;
}

struct Case {
  Buffer q, kv, table, lens;
  double base_scale = 1, q_scale = 1, k_scale = 1;
  MlaDecodeInputs inputs() const { return {q.t, kv.t, table.t, lens.t, base_scale, q_scale, k_scale, {}}; }
  MlaDecodeResult run() const { return mla_decode(inputs()); }
};

void expect_no_nan(const MlaDecodeResult& r) {
  EXPECT_TRUE(std::none_of(r.o.values.begin(), r.o.values.end(), [](double x) { return std::isnan(x); }));
  EXPECT_TRUE(std::none_of(r.lse.values.begin(), r.lse.values.end(), [](double x) { return std::isnan(x); }));
}

// o[b, t, h, :] is `want` in its first dims and zero after them.
void expect_o(const MlaDecodeResult& r, int64_t b, int64_t t, int64_t h, const std::vector<double>& want) {
  for (int64_t c = 0; c < 512; ++c) {
    const double w = c < static_cast<int64_t>(want.size()) ? want[c] : 0.0;
    EXPECT_NEAR(r.o.at({b, t, h, c}), w, 1e-15 * (1 + std::fabs(w)))
        << "b " << b << " t " << t << " h " << h << " c " << c;
  }
}

void expect_empty_row(const MlaDecodeResult& r, int64_t b, int64_t t, int64_t h) {
  EXPECT_EQ(r.lse.at({b, t, h}), -kInf) << "b " << b << " t " << t << " h " << h;
  for (int64_t c = 0; c < 512; ++c) ASSERT_EQ(r.o.at({b, t, h, c}), 0.0) << "b " << b << " t " << t << " h " << h;
}

// Scores live in the rope dim 512 (outside V = K[:512]); V picks out latent dims, so o shows the
// softmax weights directly. Key 0: V = e0, rope 0. Key 1: V = e1, rope 1. q of head h is (h + 1) e512,
// so head h scores the keys [0, h + 1].
TEST(MlaDecode, CausalLengthsByHand) {
  Case c{Buffer(DType::kBF16, {1, 2, 2, 576}), Buffer(DType::kBF16, {1, 2, 576}), block_table({{0}}, 1), seq_lens({2})};
  c.kv.set_row({0, 0}, {{0, 1.0}});
  c.kv.set_row({0, 1}, {{1, 1.0}, {512, 1.0}});
  for (int64_t t = 0; t < 2; ++t) {
    for (int64_t h = 0; h < 2; ++h) c.q.set_row({0, t, h}, {{512, double(h + 1)}});
  }
  const MlaDecodeResult r = c.run();
  // Token 0 sits at position 0 (len = 2 - 2 + 0 + 1 = 1): only key 0, weight 1, lse = score 0.
  for (int64_t h = 0; h < 2; ++h) {
    expect_o(r, 0, 0, h, {1.0});
    EXPECT_EQ(r.lse.at({0, 0, h}), 0.0);
  }
  // Token 1 sees both keys: weights [1, e^s] / (1 + e^s) with s = 1 (head 0) or 2 (head 1).
  expect_o(r, 0, 1, 0, {1 / (1 + e), e / (1 + e)});
  EXPECT_NEAR(r.lse.at({0, 1, 0}), std::log(1 + e), 1e-15);
  expect_o(r, 0, 1, 1, {1 / (1 + e * e), e * e / (1 + e * e)});
  EXPECT_NEAR(r.lse.at({0, 1, 1}), std::log(1 + e * e), 1e-15);
}

// Scores 1000 and 1001: exp overflows double unless the max is subtracted first. Weights [1, e] / (1 + e),
// lse = 1000 + ln(1 + e). (1000 is exact in bf16: 1111101 x 2^3.)
TEST(MlaDecode, LargeScoresStayFinite) {
  Case c{Buffer(DType::kBF16, {1, 1, 1, 576}), Buffer(DType::kBF16, {1, 2, 576}), block_table({{0}}, 1), seq_lens({2})};
  c.kv.set_row({0, 0}, {{0, 1.0}, {512, 1000.0}});
  c.kv.set_row({0, 1}, {{1, 1.0}, {512, 1000.0}, {513, 1.0}});
  c.q.set_row({0, 0, 0}, {{512, 1.0}, {513, 1.0}});
  const MlaDecodeResult r = c.run();
  expect_o(r, 0, 0, 0, {1 / (1 + e), e / (1 + e)});
  EXPECT_NEAR(r.lse.at({0, 0, 0}), 1000 + std::log(1 + e), 1e-12);
}

// A row of 4096 keys whose exponentials are all equal but the first (1, then e^-0.03515625 over
// and over): a plain fp32 loop summing them rounds the same way at nearly every step, and its lse errs
// by far more than the bare 1e-5 tolerance (a plugin's impl did, at 62,265 keys). The row's
// lse_slack carries the sum's bound, gamma_(len + 2), so that loop passes, as an fp32 kernel must.
TEST(MlaDecode, LseSlackCoversAPlainFp32SumOfALongRow) {
  constexpr int64_t kKeys = 4096, kPage = 64;
  Case c{Buffer(DType::kBF16, {1, 1, 1, 576}), Buffer(DType::kBF16, {kKeys / kPage, kPage, 576}),
         block_table({[] {
                        std::vector<int32_t> pages(kKeys / kPage);
                        for (size_t i = 0; i < pages.size(); ++i) pages[i] = static_cast<int32_t>(i);
                        return pages;
                      }()},
                     kKeys / kPage),
         seq_lens({kKeys})};
  c.base_scale = 0.5;
  for (int64_t s = 0; s < kKeys; ++s) c.kv.set_row({s / kPage, s % kPage}, {{512, s == 0 ? 1.0 : 0.9296875}});
  c.q.set_row({0, 0, 0}, {{512, 1.0}});
  const MlaDecodeResult r = c.run();
  // The plain loop: scores 0.5 and 0.46484375 (exact in bf16 and fp32), max first, then one sum
  // after another.
  const float m = 0.5f;
  float l = 0.0f;
  for (int64_t s = 0; s < kKeys; ++s) l += std::exp((s == 0 ? 0.5f : 0.46484375f) - m);
  const double got = double(m + std::log(l)), want = r.lse.at({0, 0, 0});
  const double tolerance = 1e-5 + 1e-6 * std::fabs(want);  // mla_decode lse (core/tolerances.cpp)
  EXPECT_GT(std::fabs(got - want), tolerance) << "the plain loop no longer shows why the sum term is needed";
  EXPECT_LE(std::fabs(got - want), r.lse_slack.at({0, 0, 0}) + tolerance);
  EXPECT_GE(r.lse_slack.at({0, 0, 0}), (kKeys + 2) * 0x1p-24);
}

// A kernel that rounds P to bf16 before P.V (vLLM's Triton decode: `tl.dot(p.to(v.dtype), v)`) errs
// by up to 2^-8 of sum_s p_s |V_s|, far more than |o| where V cancels: the default slack reports it,
// the declared rounding (precision.p = 2^-8) allows it, and no more than the rounding can cost.
TEST(MlaDecode, ADeclaredBf16RoundingOfPAllowsWhatItCostsWhereVCancels) {
  Case c{Buffer(DType::kBF16, {1, 1, 1, 576}), Buffer(DType::kBF16, {1, 64, 576}), block_table({{0}}, 1),
         seq_lens({3})};
  const double v[3] = {851968, -851968, 1};           // V[0] of the keys: the first two cancel
  const double score[3] = {0.3125, 0.3203125, 0.0};   // exact in bf16; p0 and p1 close, not equal
  for (int64_t s = 0; s < 3; ++s) c.kv.set_row({0, s}, {{0, v[s]}, {512, score[s]}});
  c.q.set_row({0, 0, 0}, {{512, 1.0}});
  MlaDecodeInputs in = c.inputs();
  const MlaDecodeResult plain = mla_decode(in);
  in.precision.p = 0x1p-8;
  const MlaDecodeResult declared = mla_decode(in);
  // The kernel: exact probabilities, each rounded to bf16, times V in fp32.
  double l = 0, p[3];
  for (int s = 0; s < 3; ++s) l += p[s] = std::exp(score[s] - score[1]);
  double kernel = 0;
  for (int s = 0; s < 3; ++s) kernel += double(bf16_to_float(float_to_bf16(float(p[s] / l)))) * v[s];
  const double want = plain.o.at({0, 0, 0, 0}), err = std::fabs(kernel - want);
  const double table = 0x1p-10 + 0x1p-8 * std::fabs(want);  // mla_decode o (core/tolerances.cpp)
  EXPECT_EQ(declared.o.at({0, 0, 0, 0}), want);  // the answer does not change, only its slack
  EXPECT_GT(err, plain.o_slack.at({0, 0, 0, 0}) + table) << "the case no longer shows the rounding's cost";
  EXPECT_LE(err, declared.o_slack.at({0, 0, 0, 0}) + table);
  // Bounded by what the rounding can cost: 2^-8 of sum p |V| (about 851968, so 3328), with margin.
  EXPECT_LT(declared.o_slack.at({0, 0, 0, 0}), 2 * 0x1p-7 * 851968);
  EXPECT_EQ(declared.lse_slack.at({0, 0, 0}), plain.lse_slack.at({0, 0, 0}));  // P's rounding leaves lse alone
  // q and K rounded: the scores move, so lse's slack grows by (u_q + u_kv) sum |q K| times the scale.
  in.precision = MlaPrecision{0x1p-8, 0x1p-8, 0};
  EXPECT_NEAR(mla_decode(in).lse_slack.at({0, 0, 0}) - plain.lse_slack.at({0, 0, 0}), (0x1p-7 + 0x1p-16) * 0.3203125,
              1e-12);
}

// FlashMLA's fp8 dense decode rounds P to e4m3 for its fp8 P.V product (each probability as it holds
// it: exp of the score less the running maximum, at most 1) and divides by the unrounded sum. e4m3
// keeps 3 bits (2^-4 relative) and is subnormal below 2^-6 (a step of 2^-9, so up to 2^-10 off
// whatever the value). Two cases: where V cancels, the relative part is what the kernel costs, more
// than a bf16 declaration allows; where many keys sit 7 below the maximum (p = e^-7 < 2^-10, which
// e4m3 flushes to 0), the absolute part is, far more than the relative part alone allows.
TEST(MlaDecode, ADeclaredFp8RoundingOfPAllowsWhatItCostsRelativeAndSubnormal) {
  const auto e4m3 = [](double x) { return double(fp8_e4m3_to_float(float_to_fp8_e4m3(float(x)))); };
  {
    Case c{Buffer(DType::kBF16, {1, 1, 1, 576}), Buffer(DType::kBF16, {1, 64, 576}), block_table({{0}}, 1),
           seq_lens({3})};
    const double v[3] = {851968, -851968, 1};
    const double score[3] = {0.2890625, 0.3203125, 0.0};  // p0 = e^-1/32, near the middle of an e4m3 step
    for (int64_t s = 0; s < 3; ++s) c.kv.set_row({0, s}, {{0, v[s]}, {512, score[s]}});
    c.q.set_row({0, 0, 0}, {{512, 1.0}});
    MlaDecodeInputs in = c.inputs();
    const double want = mla_decode(in).o.at({0, 0, 0, 0});
    double l = 0, kernel = 0;
    for (int s = 0; s < 3; ++s) l += std::exp(score[s] - score[1]);
    for (int s = 0; s < 3; ++s) kernel += e4m3(std::exp(score[s] - score[1])) * v[s];
    const double err = std::fabs(kernel / l - want), table = 0x1p-10 + 0x1p-8 * std::fabs(want);
    in.precision = mla_precision_of({{"p", "bf16"}});
    EXPECT_GT(err, mla_decode(in).o_slack.at({0, 0, 0, 0}) + table) << "bf16 would hide e4m3's cost";
    in.precision = mla_precision_of({{"p", "fp8"}});
    const double slack = mla_decode(in).o_slack.at({0, 0, 0, 0});
    EXPECT_LE(err, slack + table);
    EXPECT_LT(slack, 2 * (0x1p-3 * 851968 + 0x1p-10 * 2 * 851968));  // what the rounding can cost, with margin
    // The same kernel's Q.K in an fp22 accumulator (13 fraction bits; "precision qk fp22"): every
    // score within gamma_578(2^-13) of sum_d |q_d K_d| (here 0.3203125: q is e_512) times the scale,
    // in place of fp32's gamma_578(2^-24).
    const double plain_lse = mla_decode(c.inputs()).lse_slack.at({0, 0, 0});
    in.precision = mla_precision_of({{"p", "fp8"}, {"qk", "fp22"}});
    const double gamma22 = 578 * 0x1p-13 / (1 - 578 * 0x1p-13), gamma32 = 578 * 0x1p-24 / (1 - 578 * 0x1p-24);
    EXPECT_NEAR(mla_decode(in).lse_slack.at({0, 0, 0}) - plain_lse, (gamma22 - gamma32) * 0.3203125, 1e-12);
  }
  {
    constexpr int kKeys = 60;  // key 0: score 0, V 0; keys 1..59: score -7, V 1000 (p = e^-7 < 2^-10)
    Case c{Buffer(DType::kBF16, {1, 1, 1, 576}), Buffer(DType::kBF16, {1, 64, 576}), block_table({{0}}, 1),
           seq_lens({kKeys})};
    for (int64_t s = 1; s < kKeys; ++s) c.kv.set_row({0, s}, {{0, 1000.0}, {512, -7.0}});
    c.kv.set_row({0, 0}, {{512, 0.0}});
    c.q.set_row({0, 0, 0}, {{512, 1.0}});
    MlaDecodeInputs in = c.inputs();
    const double want = mla_decode(in).o.at({0, 0, 0, 0});
    const double p = std::exp(-7.0), l = 1 + (kKeys - 1) * p;
    ASSERT_EQ(e4m3(p), 0.0);
    const double kernel = (kKeys - 1) * e4m3(p) * 1000.0 / l;
    const double err = std::fabs(kernel - want), table = 0x1p-10 + 0x1p-8 * std::fabs(want);
    in.precision = mla_precision_of({{"p", "fp8"}});
    const MlaDecodeResult declared = mla_decode(in);
    EXPECT_LE(err, declared.o_slack.at({0, 0, 0, 0}) + table);
    in.precision.p_abs = 0;  // the relative part alone
    EXPECT_GT(err, mla_decode(in).o_slack.at({0, 0, 0, 0}) + table) << "the case no longer shows the subnormal step";
  }
}

// A declared accumulation so coarse against the scores that e^(2d) overflows (fp22 on products of
// 10^4: d = 756): key 2's products cancel to a score of 0 but set d, and key 1 sits at -1000, a
// probability of 0 in double that a score error of d could still lift to almost all of the weight.
// o's slack must say so where key 1's V is 1 (about 1, not 0 and not inf), and stay 0 where every V
// is 0 (not inf * 0 = NaN, which reported FlashMLA's fp8 decode wrong there on an H100).
TEST(MlaDecode, AScoreSlackBeyondExpsRangeGivesAFiniteSlackThatCoversEveryKey) {
  Case c{Buffer(DType::kBF16, {1, 1, 1, 576}), Buffer(DType::kBF16, {1, 64, 576}), block_table({{0}}, 1),
         seq_lens({3})};
  c.kv.set_row({0, 0}, {{512, 0.0}});                      // score 0, V 0
  c.kv.set_row({0, 1}, {{1, 1.0}, {512, -1000.0}});        // score -1000, V e1
  c.kv.set_row({0, 2}, {{512, 4992.0}, {513, -4992.0}});   // score 0, sum |q K| 9984, V 0
  c.q.set_row({0, 0, 0}, {{512, 1.0}, {513, 1.0}});
  MlaDecodeInputs in = c.inputs();
  in.precision = mla_precision_of({{"qk", "fp22"}});
  const MlaDecodeResult r = mla_decode(in);
  EXPECT_EQ(r.o.at({0, 0, 0, 1}), 0.0);
  EXPECT_GT(2 * r.lse_slack.at({0, 0, 0}), 1000.0);
  EXPECT_EQ(r.o_slack.at({0, 0, 0, 0}), 0.0);  // every V of column 0 is 0
  EXPECT_TRUE(std::isfinite(r.o_slack.at({0, 0, 0, 1})));
  EXPECT_GT(r.o_slack.at({0, 0, 0, 1}), 0.99);  // key 1 may take nearly all the weight
  EXPECT_LT(r.o_slack.at({0, 0, 0, 1}), 1.1);   // and no more than all of it
}

// The same regime the other way round: key 0 holds all the weight in exact arithmetic and key 1 sits
// 35 below it, well within a score slack of 2d > 600, so a kernel may hand all the weight to key 1
// (FlashMLA's fp8 dense decode did so on an H100 with two scores 34.5 apart near 10^5: o was key 1's
// V, docs/findings.md 15). o's slack must cover key 0's weight falling to 0 (it allowed key 0 only
// to grow before, capped at 1: the kernel was reported 36x to 206x past it), and no more than that.
TEST(MlaDecode, AScoreSlackBeyondExpsRangeLetsTheHeaviestKeyLoseItsWeight) {
  Case c{Buffer(DType::kBF16, {1, 1, 1, 576}), Buffer(DType::kBF16, {1, 64, 576}), block_table({{0}}, 1),
         seq_lens({3})};
  c.kv.set_row({0, 0}, {{0, 1.0}});                        // score 0, V e0
  c.kv.set_row({0, 1}, {{1, 1.0}, {512, -35.0}});          // score -35, V e1
  c.kv.set_row({0, 2}, {{512, 4992.0}, {513, -6016.0}});   // score -1024, sum |q K| 11008, V 0
  c.q.set_row({0, 0, 0}, {{512, 1.0}, {513, 1.0}});
  MlaDecodeInputs in = c.inputs();
  in.precision = mla_precision_of({{"qk", "fp22"}});
  const MlaDecodeResult r = mla_decode(in);
  ASSERT_GT(2 * r.lse_slack.at({0, 0, 0}), 600.0);
  ASSERT_NEAR(r.o.at({0, 0, 0, 0}), 1.0, 1e-12);
  const double kernel[2] = {0.0, 1.0};  // all the weight on key 1: o = V_1
  for (int64_t col = 0; col < 2; ++col) {
    const double err = std::fabs(kernel[col] - r.o.at({0, 0, 0, col}));
    EXPECT_LE(err, r.o_slack.at({0, 0, 0, col})) << "column " << col;
    EXPECT_LT(r.o_slack.at({0, 0, 0, col}), 1.01) << "column " << col;  // no more than all of the weight
  }
  EXPECT_EQ(r.o_slack.at({0, 0, 0, 2}), 0.0);  // every V of column 2 is 0
}

// The log-space branch is taken for every head of a token once one head needs it: a head beside it
// whose own score slack is small (q of 2^-20: 2d about 0.0016) must keep a slack of its own size,
// close to what it gets alone, not every weight's whole value (letting each weight fall to 0 where
// 2d is small gave it a third of |V|).
TEST(MlaDecode, AHeadOfSmallScoreSlackKeepsItsOwnSlackBesideAVastOne) {
  const auto slack_of_small_head = [](bool beside_vast) {
    const int64_t heads = beside_vast ? 2 : 1;
    Case c{Buffer(DType::kBF16, {1, 1, heads, 576}), Buffer(DType::kBF16, {1, 64, 576}), block_table({{0}}, 1),
           seq_lens({3})};
    c.kv.set_row({0, 0}, {{0, 1.0}});                        // V e0
    c.kv.set_row({0, 1}, {{1, 1.0}, {512, -35.0}});          // V e1
    c.kv.set_row({0, 2}, {{512, 4992.0}, {513, -6016.0}});   // V 0, sum |K| 11008
    c.q.set_row({0, 0, heads - 1}, {{512, 0x1p-20}, {513, 0x1p-20}});
    if (beside_vast) c.q.set_row({0, 0, 0}, {{512, 1.0}, {513, 1.0}});
    MlaDecodeInputs in = c.inputs();
    in.precision = mla_precision_of({{"qk", "fp22"}});
    const MlaDecodeResult r = mla_decode(in);
    if (beside_vast) EXPECT_GT(2 * r.lse_slack.at({0, 0, 0}), 600.0);
    EXPECT_LT(2 * r.lse_slack.at({0, 0, heads - 1}), 0.01);
    return r.o_slack.at({0, 0, heads - 1, 0});
  };
  const double alone = slack_of_small_head(false), beside = slack_of_small_head(true);
  EXPECT_GT(alone, 0.0);
  EXPECT_GT(beside, 0.0);
  EXPECT_LT(beside, 2 * alone) << "alone " << alone;
  EXPECT_LT(beside, 0.01);
}

// Key 1 of two is NaN (never set) in every dim. Token 0 of q_len 2 sees key 0 only and must not
// notice (a 0 * NaN from a masked key would); token 1 sees the NaN, as it should.
TEST(MlaDecode, AKeyAfterATokensPositionNeverReachesIt) {
  for (DType dtype : {DType::kBF16, DType::kFP8E4M3}) {
    Case c{Buffer(dtype, {1, 2, 2, 576}), Buffer(dtype, {1, 2, 576}), block_table({{0}}, 1), seq_lens({2})};
    c.kv.set_row({0, 0}, {{0, 1.0}, {512, 1.0}});
    for (int64_t t = 0; t < 2; ++t) {
      for (int64_t h = 0; h < 2; ++h) c.q.set_row({0, t, h}, {{3, 1.0}, {512, 1.0}});
    }
    const MlaDecodeResult r = c.run();
    for (int64_t h = 0; h < 2; ++h) {
      expect_o(r, 0, 0, h, {1.0});
      EXPECT_EQ(r.lse.at({0, 0, h}), 1.0);
      EXPECT_TRUE(std::isnan(r.lse.at({0, 1, h})));
    }
  }
}

// q_len 3. Request 0 has one key, so tokens 0 and 1 see none (len = max(0, 1 - 3 + t + 1) = 0, 0, 1);
// request 1 has no keys at all (and only garbage in its table row); request 2 has three keys, so its
// tokens see 1, 2 and 3 of them. Unset key slots are NaN: reading past a length would show.
TEST(MlaDecode, EmptyRowsAreZeroWithMinusInfLseAndLeaveOtherRowsAlone) {
  Case c{Buffer(DType::kBF16, {3, 3, 1, 576}), Buffer(DType::kBF16, {3, 2, 576}), block_table({{2}, {}, {0, 1}}, 2),
         seq_lens({1, 0, 3})};
  c.kv.set_row({2, 0}, {{0, 5.0}});               // request 0's key: V = 5 e0, score 0
  c.kv.set_row({0, 0}, {{0, 1.0}});               // request 2, key 0: V = e0, score 0
  c.kv.set_row({0, 1}, {{1, 1.0}, {512, 1.0}});   // key 1: V = e1, score 1
  c.kv.set_row({1, 0}, {{2, 1.0}, {512, 2.0}});   // key 2: V = e2, score 2
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t t = 0; t < 3; ++t) c.q.set_row({b, t, 0}, {{512, 1.0}});
  }
  const MlaDecodeResult r = c.run();
  expect_no_nan(r);
  expect_empty_row(r, 0, 0, 0);
  expect_empty_row(r, 0, 1, 0);
  expect_o(r, 0, 2, 0, {5.0});
  EXPECT_EQ(r.lse.at({0, 2, 0}), 0.0);
  for (int64_t t = 0; t < 3; ++t) expect_empty_row(r, 1, t, 0);
  expect_o(r, 2, 0, 0, {1.0});
  EXPECT_EQ(r.lse.at({2, 0, 0}), 0.0);
  expect_o(r, 2, 1, 0, {1 / (1 + e), e / (1 + e)});
  EXPECT_NEAR(r.lse.at({2, 1, 0}), std::log(1 + e), 1e-15);
  const double l = 1 + e + e * e;
  expect_o(r, 2, 2, 0, {1 / l, e / l, e * e / l});
  EXPECT_NEAR(r.lse.at({2, 2, 0}), std::log(l), 1e-15);
}

// fp8 q and kv. Raw (unscaled) values: q = 2 e512; key 0: V = e0, rope 0; key 1: V = 3 e1, rope 1.
// The raw dot products are [0, 2]; score = base * q_scale * k_scale * [0, 2] and o = k_scale * P V.
TEST(MlaDecode, Fp8ScalesApplyAsTheFormulaSays) {
  Case c{Buffer(DType::kFP8E4M3, {1, 1, 1, 576}), Buffer(DType::kFP8E4M3, {1, 2, 576}), block_table({{0}}, 1),
         seq_lens({2})};
  c.q.set_row({0, 0, 0}, {{512, 2.0}});
  c.kv.set_row({0, 0}, {{0, 1.0}});
  c.kv.set_row({0, 1}, {{1, 3.0}, {512, 1.0}});
  auto run = [&](double q_scale, double k_scale) {
    c.base_scale = 0.5, c.q_scale = q_scale, c.k_scale = k_scale;
    return c.run();
  };
  // 0.5 * 0.5 * 2 * [0, 2] = [0, 1]: weights [1, e] / (1 + e), o = 2 * [1, 3e] / (1 + e).
  const MlaDecodeResult r = run(0.5, 2);
  expect_o(r, 0, 0, 0, {2 / (1 + e), 6 * e / (1 + e)});
  EXPECT_NEAR(r.lse.at({0, 0, 0}), std::log(1 + e), 1e-15);
  // Doubling k_scale doubles the scores to [0, 2] and the output scale to 4.
  const MlaDecodeResult k2 = run(0.5, 4);
  expect_o(k2, 0, 0, 0, {4 / (1 + e * e), 12 * e * e / (1 + e * e)});
  EXPECT_NEAR(k2.lse.at({0, 0, 0}), std::log(1 + e * e), 1e-15);
  // Doubling q_scale doubles the scores only.
  const MlaDecodeResult q2 = run(1, 2);
  expect_o(q2, 0, 0, 0, {2 / (1 + e * e), 6 * e * e / (1 + e * e)});
  EXPECT_NEAR(q2.lse.at({0, 0, 0}), std::log(1 + e * e), 1e-15);
  // k_scale x2 with q_scale / 2 keeps the softmax scale (0.5 * 0.25 * 4 = 0.5 * 0.5 * 2) exactly, so
  // only o's scale doubles, exactly.
  const MlaDecodeResult same = run(0.25, 4);
  EXPECT_EQ(same.lse.values, r.lse.values);
  for (int64_t i = 0; i < r.o.numel(); ++i) ASSERT_EQ(same.o.values[i], 2 * r.o.values[i]) << i;
}

// q = 0 makes every visible key weigh the same: o = mean of the V rows, lse = ln(len). Key (page p,
// slot i) carries V[0] = 10 p + i and V[1] = 1, so o[0] names the keys that were read. Pages are
// shuffled and repeated, the table rows are padded (and hold -1 past each row's pages), the kv
// view is padded in every dimension and offset, and page 0 is never set (NaN).
TEST(MlaDecode, ShuffledRepeatedPagesPaddedTableAndPaddedKvStrides) {
  Case c{Buffer(DType::kBF16, {3, 1, 1, 576}, 5, 32), Buffer(DType::kBF16, {5, 2, 576}, 24, 64),
         block_table({{3, 1}, {2, 2}, {4}}, 3), seq_lens({3, 4, 2})};
  ASSERT_EQ(c.kv.t.view.stride(1), 600);
  ASSERT_EQ(c.table.t.view.stride(0), 6);
  for (int64_t p = 1; p < 5; ++p) {
    for (int64_t i = 0; i < 2; ++i) c.kv.set_row({p, i}, {{0, 10.0 * p + i}, {1, 1.0}});
  }
  for (int64_t b = 0; b < 3; ++b) c.q.set_row({b, 0, 0}, {});
  const MlaDecodeResult r = c.run();
  expect_o(r, 0, 0, 0, {(30 + 31 + 10) / 3.0, 1.0});  // pages 3, 1: keys (3,0), (3,1), (1,0)
  expect_o(r, 1, 0, 0, {(20 + 21 + 20 + 21) / 4.0, 1.0});  // page 2 twice
  expect_o(r, 2, 0, 0, {(40 + 41) / 2.0, 1.0});
  EXPECT_NEAR(r.lse.at({0, 0, 0}), std::log(3.0), 1e-15);
  EXPECT_NEAR(r.lse.at({1, 0, 0}), std::log(4.0), 1e-15);
  EXPECT_NEAR(r.lse.at({2, 0, 0}), std::log(2.0), 1e-15);
}

// ---- Brute force on random batches -----------------------------------------------------------

double decode(const Buffer& b, const std::vector<int64_t>& coords) {
  const uint8_t* p = b.bytes.data() + b.t.view.byte_offset_of(coords);
  if (b.t.view.dtype() == DType::kFP8E4M3) return fp8_e4m3_to_float(*p);
  uint16_t h;
  std::memcpy(&h, p, 2);
  return bf16_to_float(h);
}

int32_t read_int32(const Buffer& b, const std::vector<int64_t>& coords) {
  int32_t v;
  std::memcpy(&v, b.bytes.data() + b.t.view.byte_offset_of(coords), 4);
  return v;
}

// Fills every element of the view with N(0, 1) values as stored: bf16 rounds them (scale 1), fp8 is
// production's per-tensor quantization; returns the scale.
double fill_random(Buffer& buf, std::mt19937& rng) {
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(buf.t.view.numel()));
  for (float& v : x) v = n(rng);
  if (buf.t.view.dtype() == DType::kBF16) {
    size_t i = 0;
    buf.t.view.for_each_byte_offset([&](int64_t byte) { store_element(DType::kBF16, &buf.bytes[byte], x[i++]); });
    return 1.0;
  }
  const PerTensorFp8 f = quantize_per_tensor_fp8(x);
  size_t i = 0;
  buf.t.view.for_each_byte_offset([&](int64_t byte) { buf.bytes[static_cast<size_t>(byte)] = f.codes[i++]; });
  return f.scale;
}

// docs/ops.md 5 as plain loops: for each (b, t, h), the keys [0, len) through the block table,
// score_s = base * q_scale * k_scale * q . K_s, lse = m + ln sum exp(score - m),
// o = k_scale * sum exp(score_s - lse) K_s[:512]. Compares o and lse with the oracle's.
void check_against_brute_force(const Case& c, const MlaDecodeResult& r, const std::string& what) {
  const View& qv = c.q.t.view;
  const int64_t B = qv.size(0), q_len = qv.size(1), H = qv.size(2), page = c.kv.t.view.size(1);
  double worst = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t seq_len = read_int32(c.lens, {b});
    std::vector<std::vector<double>> K(static_cast<size_t>(seq_len), std::vector<double>(576));
    for (int64_t s = 0; s < seq_len; ++s) {
      const int64_t block = read_int32(c.table, {b, s / page});
      for (int64_t d = 0; d < 576; ++d) K[s][d] = decode(c.kv, {block, s % page, d});
    }
    for (int64_t t = 0; t < q_len; ++t) {
      const int64_t len = std::max<int64_t>(0, seq_len - q_len + t + 1);
      for (int64_t h = 0; h < H; ++h) {
        if (len == 0) {
          ASSERT_EQ(r.lse.at({b, t, h}), -kInf) << what;
          for (int64_t d = 0; d < 512; ++d) ASSERT_EQ(r.o.at({b, t, h, d}), 0.0) << what;
          continue;
        }
        std::vector<double> q(576), score(static_cast<size_t>(len));
        for (int64_t d = 0; d < 576; ++d) q[d] = decode(c.q, {b, t, h, d});
        double m = -kInf;
        for (int64_t s = 0; s < len; ++s) {
          double dot = 0;
          for (int64_t d = 0; d < 576; ++d) dot += q[d] * K[s][d];
          score[s] = c.base_scale * c.q_scale * c.k_scale * dot;
          m = std::max(m, score[s]);
        }
        double l = 0;
        for (int64_t s = 0; s < len; ++s) l += std::exp(score[s] - m);
        const double lse = m + std::log(l);
        worst = std::max(worst, std::fabs(r.lse.at({b, t, h}) - lse) / std::max(1.0, std::fabs(lse)));
        for (int64_t d = 0; d < 512; ++d) {
          double o = 0, magnitude = 0;  // magnitude: sum |p_s K_s,d|, the size rounding scales with
          for (int64_t s = 0; s < len; ++s) {
            o += std::exp(score[s] - lse) * K[s][d];
            magnitude += std::exp(score[s] - lse) * std::fabs(K[s][d]);
          }
          o *= c.k_scale;
          magnitude *= c.k_scale;
          worst = std::max(worst, std::fabs(r.o.at({b, t, h, d}) - o) / std::max(magnitude, 1e-300));
        }
      }
    }
  }
  EXPECT_LE(worst, 1e-12) << what;
}

TEST(MlaDecode, RandomBatchesAgreeWithABruteForceLoop) {
  const int64_t pages[] = {1, 3, 16, 64};
  const DType dtypes[] = {DType::kBF16, DType::kFP8E4M3};
  for (uint32_t seed = 0; seed < 24; ++seed) {
    std::mt19937 rng(seed);
    const int64_t B = 1 + rng() % 3, q_len = 1 + rng() % 8, H = 1 + rng() % 4, page = pages[rng() % 4];
    const DType q_dtype = dtypes[seed % 2], kv_dtype = dtypes[(seed / 2) % 2];
    std::vector<int32_t> lens(static_cast<size_t>(B));
    int64_t W = 0;
    for (int32_t& L : lens) {
      const uint32_t kind = rng() % 4;  // 0, shorter than q_len, or up to 150
      L = kind == 0 ? 0 : kind == 1 ? static_cast<int32_t>(rng() % q_len) : static_cast<int32_t>(rng() % 151);
      W = std::max<int64_t>(W, (L + page - 1) / page);
    }
    W += rng() % 2;
    const int64_t num_blocks = 1 + B * W / 2;  // fewer pages than table slots: pages repeat
    std::vector<std::vector<int32_t>> rows(static_cast<size_t>(B));
    for (size_t b = 0; b < rows.size(); ++b) {
      for (int64_t col = 0; col < (lens[b] + page - 1) / page; ++col) rows[b].push_back(rng() % num_blocks);
    }
    const int64_t pad = rng() % 3, offset = 16 * (rng() % 3);
    Case c{Buffer(q_dtype, {B, q_len, H, 576}, pad, offset), Buffer(kv_dtype, {num_blocks, page, 576}, pad, offset),
           block_table(rows, W), seq_lens(lens)};
    c.q_scale = fill_random(c.q, rng);
    c.k_scale = fill_random(c.kv, rng);
    c.base_scale = std::pow(192.0, -0.5) * (1 + (rng() % 100) / 100.0);
    const std::string what = "seed " + std::to_string(seed) + ": q " + c.q.t.view.to_string() + " kv " +
                             c.kv.t.view.to_string() + " page " + std::to_string(page);
    const MlaDecodeResult r = c.run();
    expect_no_nan(r);
    check_against_brute_force(c, r, what);
  }
}

// ---- Malformed inputs ----------------------------------------------------------------------------

// Two requests with page 2: request 1 has 3 keys on pages 1 and 0.
Case valid_case() {
  Case c{Buffer(DType::kBF16, {2, 1, 1, 576}), Buffer(DType::kBF16, {2, 2, 576}), block_table({{0}, {1, 0}}, 3),
         seq_lens({2, 3})};
  for (int64_t b = 0; b < 2; ++b) c.q.set_row({b, 0, 0}, {});
  for (int64_t p = 0; p < 2; ++p) {
    for (int64_t i = 0; i < 2; ++i) c.kv.set_row({p, i}, {});
  }
  return c;
}

// The error message of the call, "" when it returned.
std::string error_of(const MlaDecodeInputs& in) {
  try {
    mla_decode(in);
  } catch (const Error& err) {
    return err.what();
  }
  return "";
}

void expect_error(const MlaDecodeInputs& in, const std::vector<std::string>& mentions) {
  const std::string what = error_of(in);
  ASSERT_NE(what, "") << "no error";
  EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  for (const std::string& m : mentions) EXPECT_NE(what.find(m), std::string::npos) << "no '" << m << "' in: " << what;
}

TEST(MlaDecode, MalformedInputsAreClearErrors) {
  Case c = valid_case();
  ASSERT_EQ(error_of(c.inputs()), "");
  // Unused table columns (past ceil(len / page)) may hold anything: -1 in column 2 of both rows.
  c.table.set({1, 2}, 99);
  ASSERT_EQ(error_of(c.inputs()), "");

  MlaDecodeInputs in = c.inputs();
  in.block_table.view = View(DType::kI32, {2, 1}, {6, 1});  // request 1 needs 2 columns
  expect_error(in, {"request 1", "needs 2", "int32[2, 1]"});
  for (int32_t bad : {2, -1}) {  // num_blocks is 2
    c.table.set({1, 1}, bad);
    expect_error(c.inputs(), {"row 1", "column 1", "page " + std::to_string(bad), "bf16[2, 2, 576]"});
  }
  c.table.set({1, 1}, 0);
  ASSERT_EQ(error_of(c.inputs()), "");

  in = c.inputs();
  in.q.view = in.q.view.slice(3, 0, 512);
  expect_error(in, {"q must be", "bf16[2, 1, 1, 512]"});
  in = c.inputs();
  in.kv_cache.view = in.kv_cache.view.slice(2, 0, 512);
  expect_error(in, {"kv_cache must be"});
  in = c.inputs();
  in.seq_lens.view = in.seq_lens.view.slice(0, 0, 1);
  expect_error(in, {"seq_lens must be int32 [2]"});
  in = c.inputs();
  in.q.view = View::contiguous(DType::kF16, {2, 1, 1, 576});
  expect_error(in, {"q must be", "fp16"});
  in = c.inputs();
  in.kv_cache.view = View::contiguous(DType::kF32, {1, 2, 576});
  expect_error(in, {"kv_cache must be", "fp32"});
  in = c.inputs();
  in.block_table.view = View::contiguous(DType::kI64, {2, 1});
  expect_error(in, {"block_table must be"});
  in = c.inputs();
  in.block_table.view = View(DType::kI32, {2, 2}, {6, 2});
  expect_error(in, {"unit column stride"});
  c.lens.set({0}, -1);
  expect_error(c.inputs(), {"seq_lens", "entry 0 is -1"});
}

}  // namespace
}  // namespace mlacheck::oracle
