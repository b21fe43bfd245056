// Oracle of docs/ops.md section 2 (indexer logits): paged decode logits and ragged prefill logits.
#include "oracle/mqa_logits.h"

#include <array>
#include <cmath>
#include <cstring>

#include <Eigen/Core>

#include "core/error.h"
#include "oracle/decode_rows.h"
#include "core/fp8.h"

namespace mlacheck::oracle {
namespace {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXd;

// The 256 fp8 e4m3 values, so decoding a key is a table lookup.
const std::array<double, 256>& fp8_values() {
  static const std::array<double, 256> table = [] {
    std::array<double, 256> t{};
    for (int c = 0; c < 256; ++c) t[static_cast<size_t>(c)] = fp8_e4m3_to_float(static_cast<uint8_t>(c));
    return t;
  }();
  return table;
}

void require_cache(const PagedIndexerCache& c) {
  const View& v = c.blocks.view;
  MLA_REQUIRE(c.block_size >= 1 && c.head_dim >= 1, "indexer cache: block_size ", c.block_size, " and head_dim ",
              c.head_dim, " must be positive");
  MLA_REQUIRE(v.dtype() == DType::kU8 && v.rank() == 2 && (v.size(1) <= 1 || v.stride(1) == 1),
              "indexer cache: blocks must be u8 [num_blocks, block_stride] with unit column stride, got ", v.to_string());
  MLA_REQUIRE(v.size(1) >= c.block_size * (c.head_dim + 4) && (v.size(0) <= 1 || v.stride(0) % 4 == 0),
              "indexer cache: ", v.to_string(), " cannot hold ", c.block_size, " tokens of ", c.head_dim,
              " fp8 bytes and an fp32 scale per block (block_size * (D + 4) = ", c.block_size * (c.head_dim + 4),
              " bytes, block stride a multiple of 4)");
}

// The first byte of block p.
const uint8_t* block_start(const PagedIndexerCache& c, int64_t p) {
  return c.blocks.bytes() + c.blocks.view.byte_offset_of({p, 0});
}

// K [t1 - t0, D] (decoded codes) and k_scale of tokens [t0, t1) of request b.
void gather_keys(const PagedIndexerCache& c, const HostTensor& table, int64_t b, int64_t t0, int64_t t1, Matrix& k,
                 Vector& scale) {
  const int64_t bs = c.block_size, D = c.head_dim, num_blocks = c.blocks.view.size(0);
  const auto& fp8 = fp8_values();
  k.resize(t1 - t0, D);
  scale.resize(t1 - t0);
  for (int64_t t = t0; t < t1; ++t) {
    const int32_t page = table.at<int32_t>({b, t / bs});
    MLA_REQUIRE(page >= 0 && page < num_blocks, "paged logits: block_table[", b, ", ", t / bs, "] = ", page,
                " is not a block of the cache (", num_blocks, " blocks)");
    const uint8_t* block = block_start(c, page);
    const uint8_t* codes = block + (t % bs) * D;
    for (int64_t d = 0; d < D; ++d) k(t - t0, d) = fp8[codes[d]];
    float s;
    std::memcpy(&s, block + bs * D + 4 * (t % bs), 4);
    scale(t - t0) = s;
  }
}

// logits[t] = scale[t] * sum_h w[h] * relu(s[t, h]) for the first n rows of s.
template <class Scores, class Scales>
void weigh(const Scores& s, const double* w, const Scales& scale, int64_t n, double* out) {
  const Eigen::Map<const Vector> weights(w, s.cols());
  Eigen::Map<Vector>(out, n) = (s.topRows(n).cwiseMax(0.0) * weights).cwiseProduct(scale.head(n));
}

}  // namespace

void store_indexer_token(const PagedIndexerCache& cache, int64_t block, int64_t slot, const uint8_t* codes, float scale) {
  require_cache(cache);
  MLA_REQUIRE(block >= 0 && block < cache.blocks.view.size(0) && slot >= 0 && slot < cache.block_size,
              "indexer cache: block ", block, " slot ", slot, " is outside ", cache.blocks.view.to_string(),
              " with block size ", cache.block_size);
  uint8_t* start = const_cast<uint8_t*>(block_start(cache, block));
  std::memcpy(start + slot * cache.head_dim, codes, static_cast<size_t>(cache.head_dim));
  std::memcpy(start + cache.block_size * cache.head_dim + 4 * slot, &scale, 4);
}

LogitsResult paged_mqa_logits(const PagedMqaLogitsInputs& in) {
  require_cache(in.kv);
  const View& q = in.q.view;
  MLA_REQUIRE(q.dtype() == DType::kFP8E4M3 && q.rank() == 4 && q.size(3) == in.kv.head_dim,
              "paged logits: q must be fp8 [B, next_n, H, D = ", in.kv.head_dim, "], got ", q.to_string());
  const int64_t B = q.size(0), next_n = q.size(1), H = q.size(2), D = q.size(3), rows = B * next_n;
  const View& w = in.weights.view;
  MLA_REQUIRE(w.dtype() == DType::kF32 && w.rank() == 2 && w.size(0) == rows && w.size(1) == H,
              "paged logits: weights must be fp32 [B * next_n = ", rows, ", H = ", H, "], got ", w.to_string());
  const View& t = in.block_table.view;
  MLA_REQUIRE(t.dtype() == DType::kI32 && t.rank() == 2 && t.size(0) == B && (t.size(1) <= 1 || t.stride(1) == 1),
              "paged logits: block_table must be int32 [B = ", B, ", W] with unit column stride, got ", t.to_string());
  const View& c = in.context_lens.view;
  MLA_REQUIRE(c.dtype() == DType::kI32 && c.size(0) == B && (c.rank() == 1 || (c.rank() == 2 && c.size(1) == next_n)),
              "paged logits: context_lens must be int32 [B = ", B, "] or [B, next_n = ", next_n, "], got ", c.to_string());
  // The kernel reads a 2-D context_lens as context_lens[b * next_n + j]: anything else reads wrong lengths.
  MLA_REQUIRE(c.rank() == 1 || c.is_contiguous(), "paged logits: 2-D context_lens ", c.to_string(),
              " is not C-contiguous (strides must be (", next_n, ", 1))");
  MLA_REQUIRE(in.max_context_len >= 0, "paged logits: max_context_len is ", in.max_context_len);

  LogitsResult res;
  res.logits = OracleTensor({rows, in.max_context_len}, -HUGE_VAL);
  res.row_begin.assign(static_cast<size_t>(rows), 0);
  res.row_end.resize(static_cast<size_t>(rows));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = 0; j < next_n; ++j) {
      const int64_t n = c.rank() == 2 ? in.context_lens.at<int32_t>({b, j})
                                      : decode_row_length(in.context_lens.at<int32_t>({b}), next_n, j);
      MLA_REQUIRE(n >= 0 && n <= in.max_context_len, "paged logits: row ", b * next_n + j, " has context length ", n,
                  ", outside [0, max_context_len = ", in.max_context_len, "]");
      res.row_end[static_cast<size_t>(b * next_n + j)] = n;
    }
  }

  const OracleTensor qv = load(in.q), wv = load(in.weights);
  const int64_t W = t.size(1), bs = in.kv.block_size;
  MLA_REQUIRE(in.qk_unit >= 0 && D * in.qk_unit < 0.5, "paged logits: qk_unit ", in.qk_unit, " is no unit roundoff");
  const double gamma = static_cast<double>(D) * in.qk_unit / (1 - static_cast<double>(D) * in.qk_unit);
  if (in.qk_unit > 0) res.slack = OracleTensor({rows, in.max_context_len}, 0.0);
  const int64_t chunk = 4096;  // keys per GEMM: the scores of a chunk stay in cache
  Matrix k;
  Vector scale;
  for (int64_t b = 0; b < B; ++b) {
    int64_t n = 0;
    for (int64_t j = 0; j < next_n; ++j) n = std::max(n, res.row_end[static_cast<size_t>(b * next_n + j)]);
    MLA_REQUIRE((n + bs - 1) / bs <= W, "paged logits: request ", b, " needs ", (n + bs - 1) / bs, " blocks for ", n,
                " tokens of block size ", bs, " but block_table ", t.to_string(), " has ", W, " columns");
    const Eigen::Map<const Matrix> qb(qv.values.data() + b * next_n * H * D, next_n * H, D);
    for (int64_t t0 = 0; t0 < n; t0 += chunk) {
      const int64_t t1 = std::min(n, t0 + chunk);
      gather_keys(in.kv, in.block_table, b, t0, t1, k, scale);
      // One GEMM for all next_n * H query rows of the request: scores [t1 - t0, next_n * H].
      const Matrix scores = k * qb.transpose();
      const Matrix magnitudes = in.qk_unit > 0 ? Matrix(k.cwiseAbs() * qb.cwiseAbs().transpose()) : Matrix();
      for (int64_t j = 0; j < next_n; ++j) {
        const int64_t r = b * next_n + j, end = std::min(t1, res.row_end[static_cast<size_t>(r)]);
        if (end <= t0) continue;
        weigh(scores.middleCols(j * H, H), wv.values.data() + r * H, scale, end - t0,
              res.logits.values.data() + r * in.max_context_len + t0);
        if (in.qk_unit > 0) {
          const Eigen::Map<const Vector> w_row(wv.values.data() + r * H, H);
          Eigen::Map<Vector>(res.slack.values.data() + r * in.max_context_len + t0, end - t0) =
              gamma * (magnitudes.middleCols(j * H, H).topRows(end - t0) * w_row.cwiseAbs())
                          .cwiseProduct(scale.head(end - t0).cwiseAbs());
        }
      }
    }
  }
  return res;
}

LogitsResult mqa_logits(const MqaLogitsInputs& in) {
  const View &q = in.q.view, &k = in.k.view, &ks = in.ks.view, &ke = in.ke.view;
  MLA_REQUIRE(q.dtype() == DType::kFP8E4M3 && q.rank() == 3, "prefill logits: q must be fp8 [M, H, D], got ", q.to_string());
  const int64_t M = q.size(0), H = q.size(1), D = q.size(2);
  MLA_REQUIRE(k.dtype() == DType::kFP8E4M3 && k.rank() == 2 && k.size(1) == D,
              "prefill logits: k must be fp8 [N, D = ", D, "], got ", k.to_string());
  const int64_t N = k.size(0);
  MLA_REQUIRE(in.k_scale.view.dtype() == DType::kF32 && in.k_scale.view.rank() == 1 && in.k_scale.view.size(0) == N,
              "prefill logits: k_scale must be fp32 [N = ", N, "], got ", in.k_scale.view.to_string());
  MLA_REQUIRE(in.weights.view.dtype() == DType::kF32 && in.weights.view.rank() == 2 && in.weights.view.size(0) == M &&
                  in.weights.view.size(1) == H,
              "prefill logits: weights must be fp32 [M = ", M, ", H = ", H, "], got ", in.weights.view.to_string());
  MLA_REQUIRE(ks.dtype() == DType::kI32 && ks.rank() == 1 && ks.size(0) == M && ke.dtype() == DType::kI32 &&
                  ke.rank() == 1 && ke.size(0) == M,
              "prefill logits: ks and ke must be int32 [M = ", M, "], got ", ks.to_string(), " and ", ke.to_string());

  LogitsResult res;
  res.logits = OracleTensor({M, N}, -HUGE_VAL);
  res.row_begin.resize(static_cast<size_t>(M));
  res.row_end.resize(static_cast<size_t>(M));
  const OracleTensor qv = load(in.q), kv = load(in.k), sv = load(in.k_scale), wv = load(in.weights);
  const Eigen::Map<const Matrix> keys(kv.values.data(), N, D);
  const Eigen::Map<const Vector> scale(sv.values.data(), N);
  for (int64_t m = 0; m < M; ++m) {
    const int32_t s = in.ks.at<int32_t>({m}), e = in.ke.at<int32_t>({m});
    MLA_REQUIRE(0 <= s && s <= e && e <= N, "prefill logits: row ", m, " has ks ", s, " and ke ", e,
                "; need 0 <= ks <= ke <= N = ", N);
    res.row_begin[static_cast<size_t>(m)] = s;
    res.row_end[static_cast<size_t>(m)] = e;
    const Eigen::Map<const Matrix> qm(qv.values.data() + m * H * D, H, D);
    const Matrix scores = keys.middleRows(s, e - s) * qm.transpose();  // [e - s, H]
    weigh(scores, wv.values.data() + m * H, scale.segment(s, e - s), e - s, res.logits.values.data() + m * N + s);
  }
  return res;
}

}  // namespace mlacheck::oracle
