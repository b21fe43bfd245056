// Tests of oracle/decode_step.h (docs/ops.md 6): a hand-worked batch with padding, a non-uniform mix and a
// short row; the whole step against one brute-force scalar loop on random batches; clear errors.
#include "oracle/decode_step.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "core/fp8.h"
#include "oracle/quantize.h"

namespace mlacheck::oracle {
namespace {

// Host storage for one decode step: an indexer cache and an attention cache sharing one block table.
struct StepCase {
  std::vector<int32_t> seq_lens, decode_lens, table;
  int64_t next_n = 1, W = 1, page = 1, num_blocks = 1, topk = 1, H = 1, D = 1, heads = 1, T = 0;
  std::vector<uint8_t> index_q, index_cache, mla_cache;
  std::vector<float> weights, sink;
  std::vector<uint16_t> mla_q;
  double softmax_scale = 0.25;

  int64_t block_bytes() const { return (page * (D + 4) + 3) / 4 * 4; }  // a multiple of 4, as the layout asks
  void allocate() {
    T = std::accumulate(decode_lens.begin(), decode_lens.end(), int64_t{0});
    table.assign(seq_lens.size() * static_cast<size_t>(W), 0);
    index_q.assign(static_cast<size_t>(T * H * D), 0);
    weights.assign(static_cast<size_t>(T * H), 0.0f);
    index_cache.assign(static_cast<size_t>(num_blocks * block_bytes()), 0);
    mla_q.assign(static_cast<size_t>(T * heads * 576), 0);
    mla_cache.assign(static_cast<size_t>(num_blocks * page * kDsMlaTokenBytes), 0);
  }
  DecodeStepInputs inputs() {
    const int64_t B = static_cast<int64_t>(seq_lens.size());
    DecodeStepInputs in;
    in.batch = {HostTensor(seq_lens.data(), View::contiguous(DType::kI32, {B})),
                HostTensor(decode_lens.data(), View::contiguous(DType::kI32, {B})),
                HostTensor(table.data(), View::contiguous(DType::kI32, {B, W})), static_cast<int32_t>(next_n)};
    in.index_q = HostTensor(index_q.data(), View::contiguous(DType::kFP8E4M3, {T, H, D}));
    in.index_weights = HostTensor(weights.data(), View::contiguous(DType::kF32, {T, H}));
    in.index_cache = {HostTensor(index_cache.data(), View::contiguous(DType::kU8, {num_blocks, block_bytes()})), page, D};
    in.topk = topk;
    in.mla_q = HostTensor(mla_q.data(), View::contiguous(DType::kBF16, {T, heads, 576}));
    in.mla_cache = HostTensor(mla_cache.data(), View::contiguous(DType::kU8, {num_blocks, page, kDsMlaTokenBytes}));
    in.softmax_scale = softmax_scale;
    if (!sink.empty()) in.attn_sink = HostTensor(sink.data(), View::contiguous(DType::kF32, {heads}));
    return in;
  }
  // The slot of request-local position i of request b.
  int64_t slot(int64_t b, int64_t i) const { return table[static_cast<size_t>(b * W + i / page)] * page + i % page; }
  void fill_attention(std::mt19937& rng) {
    std::uniform_real_distribution<float> value(-1, 1);
    for (auto& x : mla_q) x = float_to_bf16(value(rng));
    std::vector<float> latent(kDsMlaLatent), rope(kDsMlaRope);
    for (int64_t s = 0; s < num_blocks * page; ++s) {
      for (auto& x : latent) x = value(rng);
      for (auto& x : rope) x = value(rng);
      const auto token = pack_ds_mla_token(latent.data(), rope.data());
      std::copy(token.begin(), token.end(), mla_cache.begin() + s * kDsMlaTokenBytes);
    }
  }
};

// Requests: 0 has L 5, d 2 (tokens with ctx 4 and 5); 1 is padding; 2 has L 4, d 1 (ctx 4); 3 has
// L 2, d 1 (ctx 2, shorter than k). Page size 2, k = 3, one indexer head of dimension 1 with q = w =
// scale = 1, so a token's logits are relu of its request's keys:
//   request 0 keys [1, 3, 0.5, 2, 4] on pages [7, 2, 5]; request 2 keys [2, 1, 0.5, 1.5] on pages
//   [4, 6]; request 3 keys [1, 1] on page 3.
StepCase hand_worked() {
  StepCase c;
  c.seq_lens = {5, 0, 4, 2}, c.decode_lens = {2, 0, 1, 1};
  c.next_n = 2, c.W = 3, c.page = 2, c.num_blocks = 8, c.topk = 3, c.heads = 2;
  c.allocate();
  c.table = {7, 2, 5, 0, 0, 0, 4, 6, 0, 3, 0, 0};
  std::fill(c.index_q.begin(), c.index_q.end(), float_to_fp8_e4m3(1.0f));
  std::fill(c.weights.begin(), c.weights.end(), 1.0f);
  const PagedIndexerCache kv = c.inputs().index_cache;
  auto put = [&](int64_t b, const std::vector<float>& keys) {
    for (size_t i = 0; i < keys.size(); ++i) {
      const uint8_t code = float_to_fp8_e4m3(keys[i]);
      store_indexer_token(kv, c.table[static_cast<size_t>(b * c.W) + i / 2], static_cast<int64_t>(i % 2), &code, 1.0f);
    }
  };
  put(0, {1, 3, 0.5f, 2, 4});
  put(2, {2, 1, 0.5f, 1.5f});
  put(3, {1, 1});
  std::mt19937 rng(3);
  c.fill_attention(rng);
  return c;
}

TEST(DecodeStep, HandWorkedBatchWithPaddingAndAShortRow) {
  StepCase c = hand_worked();
  const DecodeStepResult r = indexer_decode_step(c.inputs());
  EXPECT_EQ(r.request, (std::vector<int64_t>{0, 0, 2, 3}));
  EXPECT_EQ(r.context_len, (std::vector<int64_t>{4, 5, 4, 2}));
  const double inf = HUGE_VAL;
  EXPECT_EQ(std::vector<double>(r.logits.logits.values.begin(), r.logits.logits.values.begin() + 10),
            (std::vector<double>{1, 3, 0.5, 2, -inf, 1, 3, 0.5, 2, 4}));
  IntMatrix local(4, 3), global(4, 3);
  local << 1, 3, 0,  // values 3, 2, 1 of [1, 3, 0.5, 2]
      4, 1, 3,       // values 4, 3, 2
      0, 3, 1,       // values 2, 1.5, 1 of [2, 1, 0.5, 1.5]
      0, 1, -1;      // a row of 2 < k keeps its order and fills with -1
  global << 15, 5, 14,  // page 7 slot 1, page 2 slot 1, page 7 slot 0
      10, 15, 5,        // page 5 slot 0
      8, 13, 9,         // pages [4, 6]
      6, 7, -1;         // page 3
  EXPECT_EQ(r.topk_local, local);
  EXPECT_EQ(r.topk_global, global);

  // The attention is sparse MLA over exactly those slots, one query per token.
  const DecodeStepInputs in = c.inputs();
  const SparseMlaResult want =
      sparse_mla_decode({HostTensor(c.mla_q.data(), View::contiguous(DType::kBF16, {4, 1, 2, 576})), in.mla_cache,
                         HostTensor(global.data(), View::contiguous(DType::kI32, {4, 1, 3})), std::nullopt,
                         c.softmax_scale, std::nullopt, MlaPrecision{}});
  EXPECT_EQ(r.attention.out.values, want.out.values);
  EXPECT_EQ(r.attention.lse.values, want.lse.values);
  EXPECT_EQ(r.attention.out.shape, (std::vector<int64_t>{4, 1, 2, 512}));
  EXPECT_EQ(r.attention.lse.shape, (std::vector<int64_t>{4, 2, 1}));
}

TEST(DecodeStep, WithoutAttentionInputsTheStepStopsAtTheGlobalSlots) {
  StepCase c = hand_worked();
  const DecodeStepResult full = indexer_decode_step(c.inputs());
  DecodeStepInputs in = c.inputs();
  in.mla_q = HostTensor();
  in.mla_cache = HostTensor();  // not looked at either
  const DecodeStepResult indexer = indexer_decode_step(in);
  EXPECT_EQ(indexer.topk_local, full.topk_local);
  EXPECT_EQ(indexer.topk_global, full.topk_global);
  EXPECT_EQ(indexer.logits.logits.values, full.logits.logits.values);
  EXPECT_TRUE(indexer.attention.out.values.empty());
  EXPECT_FALSE(full.attention.out.values.empty());
}

TEST(DecodeStep, PrefillRowsOfTheSharedTopkBufferKeepTheirContents) {
  StepCase c = hand_worked();
  const DecodeStepResult r = indexer_decode_step(c.inputs());
  // 4 decode tokens, then 2 prefill tokens' rows; the buffer is a row-padded slice of a wider one.
  std::vector<int32_t> buffer(6 * 5, 77);
  for (int i = 0; i < 3; ++i) buffer[static_cast<size_t>(4 * 5 + i)] = 40 + i, buffer[static_cast<size_t>(5 * 5 + i)] = 50 + i;
  const IntMatrix after = topk_buffer_after(r, HostTensor(buffer.data(), View::padded_rows(DType::kI32, {6, 3}, 5)));
  IntMatrix want(6, 3);
  want << r.topk_local, (IntMatrix(2, 3) << 40, 41, 42, 50, 51, 52).finished();
  EXPECT_EQ(after, want);
  EXPECT_THROW(topk_buffer_after(r, HostTensor(buffer.data(), View::contiguous(DType::kI32, {3, 3}))), Error);
  EXPECT_THROW(topk_buffer_after(r, HostTensor(buffer.data(), View::contiguous(DType::kI32, {6, 4}))), Error);
}

TEST(DecodeStep, AttentionFollowsTheGivenChoiceOfSlots) {
  StepCase c = hand_worked();
  const DecodeStepInputs in = c.inputs();
  const DecodeStepResult r = indexer_decode_step(in);
  IntMatrix chosen = r.topk_global;
  // The order inside a row does not matter...
  std::swap(chosen(1, 0), chosen(1, 2));
  const SparseMlaResult same = decode_step_attention(in, HostTensor(chosen.data(), View::contiguous(DType::kI32, {4, 3})));
  for (size_t i = 0; i < same.out.values.size(); ++i) ASSERT_NEAR(same.out.values[i], r.attention.out.values[i], 1e-12);
  // ...but another set of slots gives another answer for that token only.
  chosen(1, 0) = 14;
  const SparseMlaResult other = decode_step_attention(in, HostTensor(chosen.data(), View::contiguous(DType::kI32, {4, 3})));
  EXPECT_NE(other.lse.at({1, 0, 0}), r.attention.lse.at({1, 0, 0}));
  EXPECT_EQ(other.lse.at({0, 0, 0}), r.attention.lse.at({0, 0, 0}));
}

// docs/ops.md 6 as one scalar loop per token: ctx, logits, a stable sort, global slots, attention.
struct BruteForceToken {
  std::vector<int32_t> local, global;
  std::vector<double> out, lse;  // [heads, 512], [heads]
};
BruteForceToken brute_force(const StepCase& c, int64_t b, int64_t t, int64_t token) {
  const int64_t L = c.seq_lens[static_cast<size_t>(b)], d = c.decode_lens[static_cast<size_t>(b)];
  const int64_t n = std::max<int64_t>(0, L - d + t + 1);
  std::vector<double> logit(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* block = c.index_cache.data() + c.table[static_cast<size_t>(b * c.W + i / c.page)] * c.block_bytes();
    float scale;
    std::memcpy(&scale, block + c.page * c.D + 4 * (i % c.page), 4);
    double sum = 0;
    for (int64_t h = 0; h < c.H; ++h) {
      double dot = 0;
      for (int64_t e = 0; e < c.D; ++e) {
        dot += double(fp8_e4m3_to_float(c.index_q[static_cast<size_t>((token * c.H + h) * c.D + e)])) *
               fp8_e4m3_to_float(block[(i % c.page) * c.D + e]);
      }
      sum += c.weights[static_cast<size_t>(token * c.H + h)] * std::max(0.0, dot);
    }
    logit[static_cast<size_t>(i)] = scale * sum;
  }
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (n > c.topk) std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return logit[x] > logit[y]; });
  BruteForceToken r;
  for (int64_t i = 0; i < c.topk; ++i) {
    const int32_t idx = i < n ? order[static_cast<size_t>(i)] : -1;
    r.local.push_back(idx);
    r.global.push_back(idx < 0 ? -1 : static_cast<int32_t>(c.slot(b, idx)));
  }
  for (int64_t h = 0; h < c.heads; ++h) {
    std::vector<double> scores, acc(512, 0.0);
    std::vector<std::vector<double>> values;
    for (int32_t s : r.global) {
      if (s < 0) continue;
      const uint8_t* tok = c.mla_cache.data() + int64_t(s) * kDsMlaTokenBytes;
      std::vector<double> k(576);
      for (int e = 0; e < 512; ++e) {
        float tile_scale;
        std::memcpy(&tile_scale, tok + 512 + 4 * (e / 128), 4);
        k[static_cast<size_t>(e)] = double(fp8_e4m3_to_float(tok[e])) * tile_scale;
      }
      for (int e = 0; e < 64; ++e) {
        uint16_t bits;
        std::memcpy(&bits, tok + 528 + 2 * e, 2);
        k[static_cast<size_t>(512 + e)] = bf16_to_float(bits);
      }
      double dot = 0;
      for (int e = 0; e < 576; ++e) dot += double(bf16_to_float(c.mla_q[static_cast<size_t>((token * c.heads + h) * 576 + e)])) * k[static_cast<size_t>(e)];
      scores.push_back(c.softmax_scale * dot);
      values.push_back(k);
    }
    double total = 0;
    for (double s : scores) total += std::exp(s);
    const double lse = scores.empty() ? HUGE_VAL : std::log(total);
    for (size_t i = 0; i < scores.size(); ++i) {
      for (int e = 0; e < 512; ++e) acc[static_cast<size_t>(e)] += std::exp(scores[i] - lse) * values[i][static_cast<size_t>(e)];
    }
    if (!c.sink.empty() && !scores.empty()) {
      for (double& x : acc) x /= 1 + std::exp(c.sink[static_cast<size_t>(h)] - lse);
    }
    r.out.insert(r.out.end(), acc.begin(), acc.end());
    r.lse.push_back(lse);
  }
  return r;
}

TEST(DecodeStep, MatchesABruteForceLoopOnRandomBatches) {
  std::mt19937 rng(5);
  const int64_t pages[] = {1, 2, 5, 64};
  for (int trial = 0; trial < 10; ++trial) {
    StepCase c;
    const int64_t B = 1 + rng() % 5;
    c.next_n = 1 + rng() % 4, c.page = pages[rng() % 4], c.topk = 1 + rng() % 40, c.H = 1 + rng() % 4;
    c.D = 1 + rng() % 16, c.heads = 1 + rng() % 3;
    const bool uniform = trial % 3 == 0;
    for (int64_t b = 0; b < B; ++b) {
      const int32_t d = uniform ? static_cast<int32_t>(c.next_n) : static_cast<int32_t>(rng() % (c.next_n + 1));
      c.decode_lens.push_back(d);
      c.seq_lens.push_back(d == 0 ? 0 : static_cast<int32_t>(rng() % 120));
    }
    const int32_t max_len = *std::max_element(c.seq_lens.begin(), c.seq_lens.end());
    c.W = std::max<int64_t>(1, (max_len + c.page - 1) / c.page), c.num_blocks = B * c.W;
    c.allocate();
    std::vector<int32_t> perm(static_cast<size_t>(c.num_blocks));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    c.table = perm;
    std::uniform_real_distribution<float> value(-2, 2);
    for (auto& x : c.index_q) x = float_to_fp8_e4m3(value(rng));
    for (auto& x : c.weights) x = value(rng);
    for (auto& x : c.index_cache) x = float_to_fp8_e4m3(value(rng));
    for (int64_t p = 0; p < c.num_blocks; ++p) {
      for (int64_t s = 0; s < c.page; ++s) {
        const float scale = std::fabs(value(rng)) + 0.01f;
        std::memcpy(&c.index_cache[static_cast<size_t>(p * c.block_bytes() + c.page * c.D + 4 * s)], &scale, 4);
      }
    }
    c.fill_attention(rng);
    if (trial % 2 == 1) {
      for (int64_t h = 0; h < c.heads; ++h) c.sink.push_back(value(rng));
    }
    const DecodeStepResult r = indexer_decode_step(c.inputs());
    int64_t token = 0;
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0; t < c.decode_lens[static_cast<size_t>(b)]; ++t, ++token) {
        const BruteForceToken want = brute_force(c, b, t, token);
        for (int64_t i = 0; i < c.topk; ++i) {
          ASSERT_EQ(r.topk_local(token, i), want.local[static_cast<size_t>(i)]) << "trial " << trial << " token " << token;
          ASSERT_EQ(r.topk_global(token, i), want.global[static_cast<size_t>(i)]) << "trial " << trial << " token " << token;
        }
        for (int64_t h = 0; h < c.heads; ++h) {
          const double lse = want.lse[static_cast<size_t>(h)];  // +inf for a token with no keys
          if (std::isinf(lse)) ASSERT_EQ(r.attention.lse.at({token, h, 0}), lse);
          else ASSERT_NEAR(r.attention.lse.at({token, h, 0}), lse, 1e-10);
          for (int64_t e = 0; e < 512; ++e) {
            ASSERT_NEAR(r.attention.out.at({token, 0, h, e}), want.out[static_cast<size_t>(h * 512 + e)], 1e-10)
                << "trial " << trial << " token " << token << " head " << h << " column " << e;
          }
        }
      }
    }
    ASSERT_EQ(token, c.T);
  }
}

TEST(DecodeStep, InconsistentInputsAreRefused) {
  StepCase c = hand_worked();
  DecodeStepInputs in = c.inputs();
  in.index_q.view = View::contiguous(DType::kFP8E4M3, {3, 1, 1});  // the decode lengths sum to 4
  EXPECT_THROW(indexer_decode_step(in), Error);
  in = c.inputs();
  in.mla_cache.view = View::contiguous(DType::kU8, {4, 4, kDsMlaTokenBytes});  // pages of 4, the indexer's are 2
  EXPECT_THROW(indexer_decode_step(in), Error);
  in = c.inputs();
  in.batch.decode_lens.view = View::contiguous(DType::kI32, {3});
  EXPECT_THROW(indexer_decode_step(in), Error);
  c.decode_lens[0] = 3;  // more than next_n = 2
  c.index_q.resize(5);
  EXPECT_THROW(indexer_decode_step(c.inputs()), Error);
}

}  // namespace
}  // namespace mlacheck::oracle
