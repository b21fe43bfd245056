// Benchmark of the oracle at production sizes: the paged logits oracle (B 8, next_n 2, H 64, D 128,
// context 32,768) and the sparse MLA oracle (b 8, h 128, topk 2048), in GFLOP/s beside Eigen's own
// large double GEMM on this machine, all single-threaded and measured in this one run; and the dense
// MLA decode oracle (B 8, q_len 2, H 128, seq_len 4096). Not a test.
//
// usage: oracle_bench [repeats, default 3]   (each figure is the best of the repeats)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include <Eigen/Core>

#include "core/fp16.h"
#include "core/fp8.h"
#include "oracle/mla_decode.h"
#include "oracle/mqa_logits.h"
#include "oracle/quantize.h"
#include "oracle/sparse_mla.h"

namespace oracle = mlacheck::oracle;
using mlacheck::DType;
using mlacheck::HostTensor;
using mlacheck::View;

namespace {

using Clock = std::chrono::steady_clock;

// The best wall time of `repeats` calls of f, in seconds.
template <class F>
double best_seconds(int repeats, F&& f) {
  double best = 1e300;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best;
}

double gemm_gflops(int repeats) {
  const int n = 2048;
  const Eigen::MatrixXd a = Eigen::MatrixXd::Random(n, n), b = Eigen::MatrixXd::Random(n, n);
  Eigen::MatrixXd c(n, n);
  const double s = best_seconds(repeats, [&] { c.noalias() = a * b; });
  if (c(0, 0) == 12345.0) std::puts("");  // keep the product alive
  return 2.0 * n * n * n / s / 1e9;
}

struct Figure {
  double seconds, gflop;
};

Figure paged_logits(int repeats, std::mt19937& rng) {
  const int64_t B = 8, next_n = 2, H = 64, D = 128, ctx = 32768, bs = 64, W = ctx / bs, blocks = B * W;
  const int64_t stride = bs * (D + 4);
  std::uniform_int_distribution<int> byte(0, 255);
  auto finite_fp8 = [&] {
    uint8_t c;
    do c = static_cast<uint8_t>(byte(rng)); while ((c & 0x7F) == 0x7F);
    return c;
  };
  std::vector<uint8_t> q(static_cast<size_t>(B * next_n * H * D)), cache(static_cast<size_t>(blocks * stride));
  for (auto& x : q) x = finite_fp8();
  for (auto& x : cache) x = finite_fp8();
  for (int64_t p = 0; p < blocks; ++p) {
    for (int64_t s = 0; s < bs; ++s) {
      const float scale = 0.01f;
      std::memcpy(&cache[static_cast<size_t>(p * stride + bs * D + 4 * s)], &scale, 4);
    }
  }
  std::vector<float> weights(static_cast<size_t>(B * next_n * H), 0.5f);
  std::vector<int32_t> lens(static_cast<size_t>(B), static_cast<int32_t>(ctx)), table(static_cast<size_t>(blocks));
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  std::shuffle(table.begin(), table.end(), rng);
  const oracle::PagedMqaLogitsInputs in{HostTensor(q.data(), View::contiguous(DType::kFP8E4M3, {B, next_n, H, D})),
                                        {HostTensor(cache.data(), View::contiguous(DType::kU8, {blocks, stride})), bs, D},
                                        HostTensor(weights.data(), View::contiguous(DType::kF32, {B * next_n, H})),
                                        HostTensor(lens.data(), View::contiguous(DType::kI32, {B})),
                                        HostTensor(table.data(), View::contiguous(DType::kI32, {B, W})),
                                        ctx};
  // Row j of a request has ctx - next_n + j + 1 keys: each needs H dot products of length D, then
  // a relu and a weighted sum over the H heads.
  double flop = 0;
  for (int64_t j = 0; j < next_n; ++j) flop += double(B) * double(ctx - next_n + j + 1) * H * (2.0 * D + 2.0);
  const double s = best_seconds(repeats, [&] { oracle::paged_mqa_logits(in); });
  return {s, flop / 1e9};
}

Figure sparse_mla(int repeats, std::mt19937& rng) {
  const int64_t b = 8, s_q = 1, h = 128, topk = 2048, page = 64, blocks = b * topk / page;
  std::uniform_real_distribution<float> value(-1, 1);
  std::vector<uint16_t> q(static_cast<size_t>(b * s_q * h * 576));
  for (auto& x : q) x = mlacheck::float_to_bf16(value(rng));
  std::vector<uint8_t> cache(static_cast<size_t>(blocks * page * oracle::kDsMlaTokenBytes));
  std::vector<float> latent(oracle::kDsMlaLatent), rope(oracle::kDsMlaRope);
  for (int64_t t = 0; t < blocks * page; ++t) {
    for (auto& x : latent) x = value(rng);
    for (auto& x : rope) x = value(rng);
    const auto token = oracle::pack_ds_mla_token(latent.data(), rope.data());
    std::copy(token.begin(), token.end(), cache.begin() + t * oracle::kDsMlaTokenBytes);
  }
  std::vector<int32_t> indices(static_cast<size_t>(b * s_q * topk));
  std::uniform_int_distribution<int32_t> slot(0, static_cast<int32_t>(blocks * page - 1));
  for (auto& x : indices) x = slot(rng);
  const oracle::SparseMlaInputs in{HostTensor(q.data(), View::contiguous(DType::kBF16, {b, s_q, h, 576})),
                                   HostTensor(cache.data(), View::contiguous(DType::kU8, {blocks, page, oracle::kDsMlaTokenBytes})),
                                   HostTensor(indices.data(), View::contiguous(DType::kI32, {b, s_q, topk})),
                                   std::nullopt, 0.0722, std::nullopt};
  // Per (batch, query, head): topk scores of length 576 and an output of topk rows of 512.
  const double flop = double(b) * s_q * h * topk * 2.0 * (576 + 512);
  const double s = best_seconds(repeats, [&] { oracle::sparse_mla_decode(in); });
  return {s, flop / 1e9};
}

Figure dense_mla(int repeats, std::mt19937& rng) {
  const int64_t B = 8, q_len = 2, H = 128, seq = 4096, page = 64, W = seq / page, blocks = B * W;
  std::uniform_real_distribution<float> value(-1, 1);
  std::vector<uint16_t> q(static_cast<size_t>(B * q_len * H * 576)), cache(static_cast<size_t>(blocks * page * 576));
  for (auto& x : q) x = mlacheck::float_to_bf16(value(rng));
  for (auto& x : cache) x = mlacheck::float_to_bf16(value(rng));
  std::vector<int32_t> lens(static_cast<size_t>(B), static_cast<int32_t>(seq)), table(static_cast<size_t>(blocks));
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  std::shuffle(table.begin(), table.end(), rng);
  const oracle::MlaDecodeInputs in{HostTensor(q.data(), View::contiguous(DType::kBF16, {B, q_len, H, 576})),
                                   HostTensor(cache.data(), View::contiguous(DType::kBF16, {blocks, page, 576})),
                                   HostTensor(table.data(), View::contiguous(DType::kI32, {B, W})),
                                   HostTensor(lens.data(), View::contiguous(DType::kI32, {B})), 0.0722, 1.0, 1.0, {}};
  // Query token t sees seq - q_len + t + 1 keys: scores of length 576 and an output of 512 per key.
  double flop = 0;
  for (int64_t t = 0; t < q_len; ++t) flop += double(B) * H * double(seq - q_len + t + 1) * 2.0 * (576 + 512);
  const double s = best_seconds(repeats, [&] { oracle::mla_decode(in); });
  return {s, flop / 1e9};
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 3;
  if (repeats < 1) {
    std::fprintf(stderr, "oracle_bench: repeats must be a positive integer, got '%s'\n", argv[1]);
    return 2;
  }
  std::mt19937 rng(1);
  std::printf("oracle at production sizes, single thread, double precision, best of %d\n", repeats);
  // The GEMM rate is measured before and after the oracle (the better of the two), so a machine that
  // slows down mid-run does not flatter the oracle.
  double gemm = gemm_gflops(repeats);
  const Figure l = paged_logits(repeats, rng);
  const Figure m = sparse_mla(repeats, rng);
  const Figure d = dense_mla(repeats, rng);
  gemm = std::max(gemm, gemm_gflops(repeats));
  std::printf("%-56s %9s %9s %9s %12s\n", "", "seconds", "GFLOP", "GFLOP/s", "vs GEMM");
  std::printf("%-56s %9s %9s %9.2f %12s\n", "Eigen GEMM 2048 x 2048 x 2048 (the reference rate)", "", "", gemm, "1.00x");
  const struct {
    const char* name;
    Figure f;
  } rows[] = {{"paged logits: B 8, next_n 2, H 64, D 128, context 32768", l},
              {"sparse MLA: b 8, s_q 1, h 128, topk 2048", m},
              {"dense MLA: B 8, q_len 2, H 128, seq_len 4096", d}};
  for (const auto& r : rows) {
    const double rate = r.f.gflop / r.f.seconds;
    std::printf("%-56s %9.3f %9.2f %9.2f %11.2fx\n", r.name, r.f.seconds, r.f.gflop, rate, rate / gemm);
  }
  return 0;
}
