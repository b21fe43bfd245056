// Oracle of docs/ops.md section 5, "Dense MLA decode": causal softmax attention over a paged KV cache.
#include "oracle/mla_decode.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "oracle/decode_rows.h"
#include "oracle/mla_weight_slack.h"

namespace mlacheck::oracle {
namespace {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
constexpr int64_t kDim = 576, kLatent = 512;

bool is_mla_dtype(DType t) { return t == DType::kBF16 || t == DType::kFP8E4M3; }

// Keys [0, len) of request b, decoded as stored, one row per key: key s is
// kv_cache[block_table[b, s / page], s % page, :].
Matrix gather_keys(const MlaDecodeInputs& in, int64_t b, int64_t len) {
  const View& kv = in.kv_cache.view;
  const View& table = in.block_table.view;
  const int64_t page = kv.size(1), num_blocks = kv.size(0), es = kv.element_size(), step = kv.stride(2) * es;
  const int64_t columns = (len + page - 1) / page;
  MLA_REQUIRE(columns <= table.size(1), "mla decode: request ", b, " has seq_len ", len, " and needs ", columns,
              " block_table columns of page ", page, ", but block_table ", table.to_string(), " has ", table.size(1));
  Matrix K(len, kDim);
  int64_t block = 0;
  for (int64_t s = 0; s < len; ++s) {
    if (s % page == 0) {
      block = in.block_table.at<int32_t>({b, s / page});
      MLA_REQUIRE(block >= 0 && block < num_blocks, "mla decode: block_table ", table.to_string(), " row ", b,
                  " column ", s / page, " holds page ", block, ", outside [0, ", num_blocks, ") of kv_cache ",
                  kv.to_string());
    }
    const int64_t element = block * kv.stride(0) + (s % page) * kv.stride(1);
    const uint8_t* row = in.kv_cache.bytes() + kv.byte_offset() + element * es;
    for (int64_t c = 0; c < kDim; ++c) K(s, c) = load_element(kv.dtype(), row + c * step);
  }
  return K;
}

}  // namespace

MlaDecodeResult mla_decode(const MlaDecodeInputs& in) {
  const View &q = in.q.view, &kv = in.kv_cache.view, &table = in.block_table.view, &lens = in.seq_lens.view;
  MLA_REQUIRE(is_mla_dtype(q.dtype()) && q.rank() == 4 && q.size(3) == kDim,
              "mla decode: q must be bf16 or fp8_e4m3 [B, q_len, H, 576], got ", q.to_string());
  MLA_REQUIRE(is_mla_dtype(kv.dtype()) && kv.rank() == 3 && kv.size(1) >= 1 && kv.size(2) == kDim,
              "mla decode: kv_cache must be bf16 or fp8_e4m3 [num_blocks, page >= 1, 576], got ", kv.to_string());
  const int64_t B = q.size(0), q_len = q.size(1), H = q.size(2);
  MLA_REQUIRE(lens.dtype() == DType::kI32 && lens.rank() == 1 && lens.size(0) == B,
              "mla decode: seq_lens must be int32 [", B, "] (B of q ", q.to_string(), "), got ", lens.to_string());
  MLA_REQUIRE(table.dtype() == DType::kI32 && table.rank() == 2 && table.size(0) == B &&
                  (table.size(1) <= 1 || table.stride(1) == 1),
              "mla decode: block_table must be int32 [", B, ", W] with unit column stride, got ", table.to_string());

  const OracleTensor q_values = load(in.q);  // [B, q_len, H, 576] row-major: token (b, t) is H rows of 576
  MlaDecodeResult out{OracleTensor({B, q_len, H, kLatent}), OracleTensor({B, q_len, H}), OracleTensor({B, q_len, H}),
                      OracleTensor({B, q_len, H, kLatent})};
  const double softmax_scale = in.base_scale * in.q_scale * in.k_scale;
  constexpr double kU = 0x1p-24, kGamma = (kDim + 2) * kU / (1 - (kDim + 2) * kU);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t seq_len = in.seq_lens.at<int32_t>({b});
    MLA_REQUIRE(seq_len >= 0, "mla decode: seq_lens ", lens.to_string(), " entry ", b, " is ", seq_len);
    const Matrix K = gather_keys(in, b, seq_len);  // the last query token sees all seq_len keys
    for (int64_t t = 0; t < q_len; ++t) {
      const int64_t row = (b * q_len + t) * H, len = decode_row_length(seq_len, q_len, t);
      Eigen::Map<Eigen::VectorXd> lse(out.lse.values.data() + row, H);
      if (len == 0) {  // o stays 0
        lse.setConstant(-std::numeric_limits<double>::infinity());
        continue;
      }
      // Only keys [0, len) take part, so a later key (even NaN) never reaches this token.
      Eigen::Map<const Matrix> Q(q_values.values.data() + row * kDim, H, kDim);
      Matrix P = softmax_scale * (Q * K.topRows(len).transpose());  // scores [H, len]
      const Matrix magnitudes = Q.cwiseAbs() * K.topRows(len).cwiseAbs().transpose();  // sum_d |q_d K_d|
      Eigen::Map<Eigen::VectorXd> lse_slack(out.lse_slack.values.data() + row, H);
      const MlaPrecision& u = in.precision;
      // Q.K's sum: fp32's gamma_578, or a declared accumulator's (fp22) in its place.
      const double sum_gamma = u.qk > 0 ? (kDim + 2) * u.qk / (1 - (kDim + 2) * u.qk) : kGamma;
      lse_slack = std::abs(softmax_scale) * (sum_gamma + u.q + u.kv + u.q * u.kv) * magnitudes.rowwise().maxCoeff() +
                  4 * kU * P.cwiseAbs().rowwise().maxCoeff();
      // A score slack so wide that e^(2d) would overflow, or lift a key whose probability underflows
      // to 0 in double into view (a declared fp22 accumulation on scores of 10^5, say): o's slack is
      // then taken key by key in log space, each weight's bound capped at what a weight can be (r).
      // (Without it e^(2d) was inf and inf * 0 gave a NaN slack where a column of V is 0: o reported
      // wrong there, from FlashMLA's fp8 dense decode on an H100, 2026-12-07.)
      const bool vast = (2 * (lse_slack.array() + 4 * kU)).maxCoeff() > 600;
      const Matrix scores = vast ? P : Matrix();
      const Eigen::VectorXd m = P.rowwise().maxCoeff();  // subtracted first so exp never overflows
      P = (P.colwise() - m).array().exp().matrix();
      const Eigen::VectorXd l = P.rowwise().sum();
      P.array().colwise() /= l.array();
      lse = m.array() + l.array().log();
      Eigen::Map<Matrix>(out.o.values.data() + row * kLatent, H, kLatent).noalias() =
          in.k_scale * (P * K.topLeftCorner(len, kLatent));
      // o's slack (see mla_decode.h): each head's factor times k_scale * P |V|.
      const double terms = static_cast<double>(len + 72) * kU;
      const double gamma_sum = terms / (1 - terms);
      const double rounded = (1 + u.p) / (1 - u.p) * (1 + u.kv);  // r of mla_decode.h
      const Eigen::ArrayXd grow = rounded * (2 * (lse_slack.array() + 4 * kU)).exp();
      const Eigen::ArrayXd factor = (grow - 1 + gamma_sum * grow) * (1 + 0x1p-8) * std::abs(in.k_scale);
      Eigen::Map<Matrix> o_slack(out.o_slack.values.data() + row * kLatent, H, kLatent);
      if (!vast) {
        o_slack.noalias() = P * K.topLeftCorner(len, kLatent).cwiseAbs();
        o_slack.array().colwise() *= factor;
      } else {
        // Weight s moves up to min(p_s r e^(2d), r) (1 + gamma) or down to 0 (mla_weight_slack.h).
        const Matrix V = K.topLeftCorner(len, kLatent).cwiseAbs();
        for (int64_t h = 0; h < H; ++h) {
          const double two_d = 2 * (lse_slack(h) + 4 * kU);
          const Eigen::RowVectorXd log_p = scores.row(h).array() - (m(h) + std::log(l(h)));
          o_slack.row(h) = vast_weight_slack(log_p, P.row(h), two_d, rounded * (1 + gamma_sum), V) *
                           ((1 + 0x1p-8) * std::abs(in.k_scale));
        }
      }
      if (u.p_abs > 0) {
        // P rounded to fp8: each probability, as the kernel holds it (relative to a running maximum, at
        // most 1), is also off by up to p_abs absolutely; scaled back and normalised that is p_abs / l
        // of each |V_s| (1/l being the row's largest normalised probability), grown as the rest, and
        // never more than p_abs itself (the kernel's own normaliser is at least 1).
        const Eigen::ArrayXd abs_factor = u.p_abs * (grow * P.rowwise().maxCoeff().array()).min(1.0) * (1 + 0x1p-8) *
                                          std::abs(in.k_scale);
        const Eigen::RowVectorXd column_sums = K.topLeftCorner(len, kLatent).cwiseAbs().colwise().sum();
        o_slack.noalias() += abs_factor.matrix() * column_sums;
      }
      // lse's own sum: ln l of an fp32 l summed from len exponentials (each within 2u) one after
      // another errs by up to gamma_(len + 2) (o_slack above has its own sum term already).
      const double sum_terms = static_cast<double>(len + 2) * kU;
      lse_slack.array() += sum_terms / (1 - sum_terms);
    }
  }
  return out;
}

}  // namespace mlacheck::oracle
