// Tests of oracle/mqa_logits.h (docs/ops.md 2): a hand-worked paged case, brute-force scalar loops on
// random paged and prefill inputs, unclean-mode positions, and clear errors for malformed inputs.
#include "oracle/mqa_logits.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "core/fp8.h"

namespace mlacheck::oracle {
namespace {

uint8_t f8(float x) { return float_to_fp8_e4m3(x); }

// Host storage for one paged case. The cache's block stride and the block table's row stride are
// padded; the padding holds bytes that must never be read.
struct PagedCase {
  int64_t B = 1, next_n = 1, H = 1, D = 1, bs = 1, num_blocks = 1, stride = 0, W = 1, max_ctx = 0;
  std::vector<uint8_t> q, cache;
  std::vector<float> weights;
  std::vector<int32_t> ctx, table;
  bool two_d = false;

  void allocate() {
    stride = (bs * (D + 4) + 7) / 4 * 4;  // room to spare, still a multiple of 4
    q.assign(static_cast<size_t>(B * next_n * H * D), 0);
    cache.assign(static_cast<size_t>(num_blocks * stride), f8(-448.0f));
    weights.assign(static_cast<size_t>(B * next_n * H), 0.0f);
    table.assign(static_cast<size_t>(B * (W + 3)), 1 << 30);  // row padding: an impossible page
    ctx.assign(static_cast<size_t>(two_d ? B * next_n : B), 0);
  }
  int32_t& page(int64_t b, int64_t w) { return table[static_cast<size_t>(b * (W + 3) + w)]; }
  PagedIndexerCache kv() {
    return {HostTensor(cache.data(), View(DType::kU8, {num_blocks, bs * (D + 4)}, {stride, 1})), bs, D};
  }
  PagedMqaLogitsInputs inputs() {
    return {HostTensor(q.data(), View::contiguous(DType::kFP8E4M3, {B, next_n, H, D})), kv(),
            HostTensor(weights.data(), View::contiguous(DType::kF32, {B * next_n, H})),
            HostTensor(ctx.data(), two_d ? View::contiguous(DType::kI32, {B, next_n}) : View::contiguous(DType::kI32, {B})),
            HostTensor(table.data(), View::padded_rows(DType::kI32, {B, W}, W + 3)), max_ctx};
  }
  int64_t row_len(int64_t b, int64_t j) const {
    return two_d ? ctx[static_cast<size_t>(b * next_n + j)] : std::max<int64_t>(0, ctx[static_cast<size_t>(b)] - next_n + j + 1);
  }
  // docs/ops.md 2.1 as a scalar loop over the raw bytes.
  double brute_force(int64_t b, int64_t j, int64_t t) {
    const int32_t p = page(b, t / bs);
    const uint8_t* block = cache.data() + p * stride;
    float scale;
    std::memcpy(&scale, block + bs * D + 4 * (t % bs), 4);
    double sum = 0;
    for (int64_t h = 0; h < H; ++h) {
      double dot = 0;
      for (int64_t d = 0; d < D; ++d) {
        dot += double(fp8_e4m3_to_float(q[static_cast<size_t>(((b * next_n + j) * H + h) * D + d)])) *
               fp8_e4m3_to_float(block[(t % bs) * D + d]);
      }
      sum += double(weights[static_cast<size_t>((b * next_n + j) * H + h)]) * std::max(dot, 0.0);
    }
    return scale * sum;
  }
};

// One request, next_n 2, two heads of dimension 2, block size 2, pages [3, 1]:
//   keys t0 = (1, 2) scale 0.5, t1 = (-1, 1) scale 2 in page 3; t2 = (2, 0) scale 1 in page 1.
//   token 0: heads (1, 0), (0, 1), weights (1, 2); token 1: heads (1, 1), (-1, 0), weights (0.5, -1).
// Row 0 (ctx 2): t0: 0.5 * (1*relu(1) + 2*relu(2)) = 2.5;  t1: 2 * (1*relu(-1) + 2*relu(1)) = 4.
// Row 1 (ctx 3): t0: 0.5 * (0.5*3 - 1*0) = 0.75;  t1: 2 * (0.5*0 - 1*1) = -2;  t2: 1 * (0.5*2 - 1*0) = 1.
PagedCase hand_worked() {
  PagedCase c;
  c.next_n = 2, c.H = 2, c.D = 2, c.bs = 2, c.num_blocks = 4, c.W = 2, c.max_ctx = 4;
  c.allocate();
  c.q = {f8(1), f8(0), f8(0), f8(1), f8(1), f8(1), f8(-1), f8(0)};
  c.weights = {1, 2, 0.5f, -1};
  c.page(0, 0) = 3, c.page(0, 1) = 1;
  const PagedIndexerCache kv = c.kv();
  const uint8_t t0[] = {f8(1), f8(2)}, t1[] = {f8(-1), f8(1)}, t2[] = {f8(2), f8(0)};
  store_indexer_token(kv, 3, 0, t0, 0.5f);
  store_indexer_token(kv, 3, 1, t1, 2.0f);
  store_indexer_token(kv, 1, 0, t2, 1.0f);
  c.ctx = {3};
  return c;
}

TEST(PagedMqaLogits, HandWorkedRequestWithOneDimensionalLengths) {
  PagedCase c = hand_worked();
  const LogitsResult r = paged_mqa_logits(c.inputs());
  const double inf = HUGE_VAL;
  EXPECT_EQ(r.logits.shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(r.logits.values, (std::vector<double>{2.5, 4, -inf, -inf, 0.75, -2, 1, -inf}));
  EXPECT_EQ(r.row_end, (std::vector<int64_t>{2, 3}));
  // Unclean mode: only [0, ctx) of each row has one right value.
  EXPECT_TRUE(r.specified(0, 1, LogitsMode::kUnclean));
  EXPECT_FALSE(r.specified(0, 2, LogitsMode::kUnclean));
  EXPECT_TRUE(r.specified(0, 2, LogitsMode::kClean));
  EXPECT_FALSE(r.specified(1, 3, LogitsMode::kUnclean));
}

// A kernel whose q . k accumulator keeps 13 fraction bits (Hopper's fp8 tensor cores: fp22), each
// addition's result truncated, as the declaration "precision qk fp22" says. Its score of a key whose
// products are 448 * 448, then 126 of 1.125, then -448 * 448 is 0 (each 1.125 is lost against 2^17.6,
// whose fp22 step is 16) where the exact score is 141.75: far outside the table's tolerance, and
// inside the declared slack, gamma_128(2^-13) of the products' magnitudes (401,550) = 6,330.
TEST(PagedMqaLogits, ADeclaredFp22AccumulationAllowsWhatItCostsAndNoMore) {
  PagedCase c;
  c.D = 128, c.bs = 64, c.num_blocks = 1, c.W = 1, c.max_ctx = 1;
  c.allocate();
  std::vector<uint8_t> key(128, f8(1.0f));
  key[0] = f8(448.0f), key[127] = f8(448.0f);
  c.q.assign(128, f8(1.125f));
  c.q[0] = f8(448.0f), c.q[127] = f8(-448.0f);
  store_indexer_token(c.kv(), 0, 0, key.data(), 1.0f);
  c.page(0, 0) = 0, c.ctx = {1}, c.weights = {1.0f};
  const auto fp22 = [](double x) {  // truncated to 13 fraction bits
    if (x == 0) return 0.0;
    int e = 0;
    const double m = std::frexp(x, &e);  // x = m 2^e, 0.5 <= |m| < 1
    return std::ldexp(std::trunc(std::ldexp(m, 14)), e - 14);
  };
  double kernel = 0;
  for (int d = 0; d < 128; ++d) {
    kernel = fp22(kernel + double(fp8_e4m3_to_float(c.q[static_cast<size_t>(d)])) * fp8_e4m3_to_float(key[static_cast<size_t>(d)]));
  }
  kernel = std::max(kernel, 0.0);
  PagedMqaLogitsInputs in = c.inputs();
  const LogitsResult exact = paged_mqa_logits(in);
  EXPECT_TRUE(exact.slack.values.empty());  // nothing declared: the table alone
  EXPECT_EQ(exact.logits.at({0, 0}), 141.75);
  EXPECT_EQ(kernel, 0.0);
  const double err = std::fabs(kernel - exact.logits.at({0, 0})), table = 1e-3 + 1e-4 * 141.75;
  EXPECT_GT(err, table) << "undeclared, the kernel is reported";
  in.qk_unit = 0x1p-13;
  const LogitsResult declared = paged_mqa_logits(in);
  EXPECT_EQ(declared.logits.values, exact.logits.values);  // the answer does not change, only its slack
  const double magnitude = 2 * 448.0 * 448.0 + 126 * 1.125, gamma = 128 * 0x1p-13 / (1 - 128 * 0x1p-13);
  EXPECT_NEAR(declared.slack.at({0, 0}), gamma * magnitude, 1e-9 * magnitude);
  EXPECT_LE(err, declared.slack.at({0, 0}) + table);
  // A wrong answer of the size of the products themselves is still far outside it.
  EXPECT_LT(declared.slack.at({0, 0}), 0.02 * magnitude);
}

TEST(PagedMqaLogits, TwoDimensionalLengthsAreReadPerRow) {
  PagedCase c = hand_worked();
  c.two_d = true;
  c.ctx = {1, 3};
  const LogitsResult r = paged_mqa_logits(c.inputs());
  const double inf = HUGE_VAL;
  EXPECT_EQ(r.logits.values, (std::vector<double>{2.5, -inf, -inf, -inf, 0.75, -2, 1, -inf}));
  c.ctx = {0, 0};
  EXPECT_EQ(paged_mqa_logits(c.inputs()).row_end, (std::vector<int64_t>{0, 0}));
}

TEST(PagedMqaLogits, MatchesABruteForceLoopOnRandomCases) {
  std::mt19937 rng(7);
  const int64_t block_sizes[] = {1, 2, 53, 64};
  for (int trial = 0; trial < 26; ++trial) {
    PagedCase c;
    c.B = 1 + rng() % 4, c.next_n = 1 + rng() % 4, c.H = 1 + rng() % 8, c.D = 1 + rng() % 40;
    c.bs = block_sizes[rng() % 4], c.two_d = trial % 2 == 1;
    // The last two trials have rows longer than the oracle's 4096-key chunks.
    const int64_t max_len = trial < 24 ? 1 + rng() % 300 : 4096 + rng() % 6000;
    c.W = (max_len + c.bs - 1) / c.bs, c.num_blocks = c.B * c.W + 2, c.max_ctx = max_len + rng() % 5;
    c.allocate();
    std::uniform_real_distribution<float> value(-3, 3);
    for (auto& x : c.q) x = f8(value(rng));
    for (auto& x : c.weights) x = value(rng);
    for (auto& x : c.cache) x = f8(value(rng));  // also fills the scales' bytes; overwritten below
    std::vector<int32_t> pages(static_cast<size_t>(c.num_blocks));
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng);
    for (int64_t b = 0; b < c.B; ++b) {
      for (int64_t w = 0; w < c.W; ++w) c.page(b, w) = pages[static_cast<size_t>(b * c.W + w)];
    }
    for (int64_t p = 0; p < c.num_blocks; ++p) {
      for (int64_t s = 0; s < c.bs; ++s) {
        const float scale = std::ldexp(1.0f + float(rng() % 100) / 100, int(rng() % 9) - 4);
        std::memcpy(&c.cache[static_cast<size_t>(p * c.stride + c.bs * c.D + 4 * s)], &scale, 4);
      }
    }
    for (auto& x : c.ctx) x = static_cast<int32_t>(rng() % (max_len + 1));
    if (!c.two_d) c.ctx[0] = static_cast<int32_t>(max_len);
    const LogitsResult r = paged_mqa_logits(c.inputs());
    for (int64_t b = 0; b < c.B; ++b) {
      for (int64_t j = 0; j < c.next_n; ++j) {
        const int64_t row = b * c.next_n + j, n = c.row_len(b, j);
        ASSERT_EQ(r.row_end[static_cast<size_t>(row)], n);
        for (int64_t t = 0; t < c.max_ctx; ++t) {
          const double got = r.logits.at({row, t});
          if (t >= n) {
            ASSERT_EQ(got, -HUGE_VAL) << "row " << row << " column " << t;
            continue;
          }
          const double want = c.brute_force(b, j, t);
          ASSERT_NEAR(got, want, 1e-12 * (1 + std::fabs(want))) << "trial " << trial << " row " << row << " column " << t;
        }
      }
    }
  }
}

TEST(PagedMqaLogits, MalformedInputsAreRefusedWithAClearError) {
  auto expect_error = [](PagedCase c, const char* needle) {
    try {
      paged_mqa_logits(c.inputs());
      ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  PagedCase c = hand_worked();
  c.ctx = {5};  // needs 3 blocks of 2; the table has 2 columns
  c.max_ctx = 8;
  expect_error(c, "needs 3 blocks");
  c = hand_worked();
  c.page(0, 1) = 4;  // the cache has 4 blocks
  expect_error(c, "is not a block of the cache");
  c = hand_worked();
  c.max_ctx = 2;  // row 1 has 3 keys
  expect_error(c, "outside [0, max_context_len = 2]");
  c = hand_worked();
  c.two_d = true;
  c.ctx = {1, -1};
  expect_error(c, "context length -1");

  c = hand_worked();
  c.two_d = true;
  c.ctx = {1, 3, 0, 0};
  PagedMqaLogitsInputs in = c.inputs();
  in.context_lens = HostTensor(c.ctx.data(), View(DType::kI32, {1, 2}, {2, 2}));  // the slice of a wider tensor
  EXPECT_THROW(paged_mqa_logits(in), Error);
  in = c.inputs();
  in.weights.view = View::contiguous(DType::kF32, {2, 1});
  EXPECT_THROW(paged_mqa_logits(in), Error);
  in = c.inputs();
  in.kv.head_dim = 3;  // q has D = 2
  EXPECT_THROW(paged_mqa_logits(in), Error);
  in = c.inputs();
  in.kv.blocks.view = View(DType::kU8, {4, 11}, {c.stride, 1});  // too narrow for 2 * (2 + 4) bytes
  EXPECT_THROW(paged_mqa_logits(in), Error);
  const uint8_t codes[2] = {};
  EXPECT_THROW(store_indexer_token(c.kv(), 4, 0, codes, 1.0f), Error);
  EXPECT_THROW(store_indexer_token(c.kv(), 0, 2, codes, 1.0f), Error);
}

// Host storage for one prefill case: q [M, H, D], k [N, D] with scales, weights [M, H], ks/ke [M].
struct PrefillCase {
  int64_t M, H, D, N;
  std::vector<uint8_t> q, k;
  std::vector<float> k_scale, weights;
  std::vector<int32_t> ks, ke;
  MqaLogitsInputs inputs() {
    return {HostTensor(q.data(), View::contiguous(DType::kFP8E4M3, {M, H, D})),
            HostTensor(k.data(), View::contiguous(DType::kFP8E4M3, {N, D})),
            HostTensor(k_scale.data(), View::contiguous(DType::kF32, {N})),
            HostTensor(weights.data(), View::contiguous(DType::kF32, {M, H})),
            HostTensor(ks.data(), View::contiguous(DType::kI32, {M})), HostTensor(ke.data(), View::contiguous(DType::kI32, {M}))};
  }
};

// The hand-worked keys again, without pages: k = (1, 2) s 0.5, (-1, 1) s 2, (2, 0) s 1. Row 0 takes
// [1, 3) with token 1's query, row 1 takes the empty range [2, 2).
//   row 0: t1: 2 * (0.5*relu(0) - 1*relu(1)) = -2;  t2: 1 * (0.5*relu(2) - 1*relu(-2)) = 1.
TEST(MqaLogits, HandWorkedRaggedRows) {
  PrefillCase c{2, 2, 2, 3, {f8(1), f8(1), f8(-1), f8(0), f8(1), f8(1), f8(1), f8(1)}, {f8(1), f8(2), f8(-1), f8(1), f8(2), f8(0)},
                {0.5f, 2, 1}, {0.5f, -1, 1, 1}, {1, 2}, {3, 2}};
  const LogitsResult r = mqa_logits(c.inputs());
  const double inf = HUGE_VAL;
  EXPECT_EQ(r.logits.values, (std::vector<double>{-inf, -2, 1, -inf, -inf, -inf}));
  EXPECT_EQ(r.row_begin, (std::vector<int64_t>{1, 2}));
  EXPECT_FALSE(r.specified(0, 0, LogitsMode::kUnclean));
  EXPECT_TRUE(r.specified(0, 2, LogitsMode::kUnclean));
  c.ke[1] = 4;
  EXPECT_THROW(mqa_logits(c.inputs()), Error);
  c.ke[1] = 1;  // ks 2 > ke 1
  EXPECT_THROW(mqa_logits(c.inputs()), Error);
}

TEST(MqaLogits, MatchesABruteForceLoopOnRandomCases) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> value(-3, 3);
  for (int trial = 0; trial < 12; ++trial) {
    PrefillCase c{int64_t(1 + rng() % 6), int64_t(1 + rng() % 6), int64_t(1 + rng() % 33), int64_t(1 + rng() % 200), {}, {}, {}, {}, {}, {}};
    c.q.resize(static_cast<size_t>(c.M * c.H * c.D));
    c.k.resize(static_cast<size_t>(c.N * c.D));
    c.k_scale.resize(static_cast<size_t>(c.N));
    c.weights.resize(static_cast<size_t>(c.M * c.H));
    for (auto& x : c.q) x = f8(value(rng));
    for (auto& x : c.k) x = f8(value(rng));
    for (auto& x : c.k_scale) x = std::fabs(value(rng));
    for (auto& x : c.weights) x = value(rng);
    for (int64_t m = 0; m < c.M; ++m) {
      const int32_t a = static_cast<int32_t>(rng() % (c.N + 1)), b = static_cast<int32_t>(rng() % (c.N + 1));
      c.ks.push_back(std::min(a, b));
      c.ke.push_back(std::max(a, b));
    }
    const LogitsResult r = mqa_logits(c.inputs());
    for (int64_t m = 0; m < c.M; ++m) {
      for (int64_t n = 0; n < c.N; ++n) {
        if (n < c.ks[static_cast<size_t>(m)] || n >= c.ke[static_cast<size_t>(m)]) {
          ASSERT_EQ(r.logits.at({m, n}), -HUGE_VAL);
          continue;
        }
        double sum = 0;
        for (int64_t h = 0; h < c.H; ++h) {
          double dot = 0;
          for (int64_t d = 0; d < c.D; ++d) {
            dot += double(fp8_e4m3_to_float(c.q[static_cast<size_t>((m * c.H + h) * c.D + d)])) *
                   fp8_e4m3_to_float(c.k[static_cast<size_t>(n * c.D + d)]);
          }
          sum += double(c.weights[static_cast<size_t>(m * c.H + h)]) * std::max(dot, 0.0);
        }
        const double want = c.k_scale[static_cast<size_t>(n)] * sum;
        ASSERT_NEAR(r.logits.at({m, n}), want, 1e-12 * (1 + std::fabs(want))) << "row " << m << " column " << n;
      }
    }
  }
}

}  // namespace
}  // namespace mlacheck::oracle
