// Oracle of docs/ops.md section 4, "Sparse MLA decode": attention over the KV slots each top-k row names.
#include "oracle/sparse_mla.h"

#include <cmath>
#include <limits>

#include <Eigen/Core>

#include "core/error.h"
#include "oracle/mla_weight_slack.h"
#include "oracle/quantize.h"

namespace mlacheck::oracle {
namespace {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXd;
constexpr int64_t kHeadDim = kDsMlaLatent + kDsMlaRope;  // 576

void require_inputs(const SparseMlaInputs& in) {
  const View &q = in.q.view, &kv = in.kv_cache.view, &idx = in.indices.view;
  MLA_REQUIRE(q.dtype() == DType::kBF16 && q.rank() == 4 && q.size(3) == kHeadDim,
              "sparse MLA decode: q must be bf16 [b, s_q, h, 576], got ", q.to_string());
  MLA_REQUIRE(kv.dtype() == DType::kU8 && kv.rank() == 3 && kv.size(2) == kDsMlaTokenBytes && kv.stride(2) == 1,
              "sparse MLA decode: kv_cache must be u8 [num_blocks, page, 656] with unit byte stride, got ",
              kv.to_string());
  MLA_REQUIRE(idx.dtype() == DType::kI32 && idx.rank() == 3 && idx.size(0) == q.size(0) && idx.size(1) == q.size(1),
              "sparse MLA decode: indices must be int32 [b, s_q, topk] matching q ", q.to_string(), ", got ",
              idx.to_string());
  if (in.topk_length) {
    const View& len = in.topk_length->view;
    MLA_REQUIRE(len.dtype() == DType::kI32 && len.rank() == 1 && len.size(0) == q.size(0),
                "sparse MLA decode: topk_length must be int32 [b] for q ", q.to_string(), ", got ", len.to_string());
  }
  if (in.attn_sink) {
    const View& sink = in.attn_sink->view;
    MLA_REQUIRE(sink.dtype() == DType::kF32 && sink.rank() == 1 && sink.size(0) == q.size(2),
                "sparse MLA decode: attn_sink must be fp32 [h] for q ", q.to_string(), ", got ", sink.to_string());
  }
}

}  // namespace

SparseMlaResult sparse_mla_decode(const SparseMlaInputs& in) {
  require_inputs(in);
  const View& kv = in.kv_cache.view;
  const int64_t B = in.q.view.size(0), S = in.q.view.size(1), H = in.q.view.size(2), topk = in.indices.view.size(2);
  const int64_t page = kv.size(1), num_slots = kv.size(0) * page;
  const OracleTensor q = load(in.q), indices = load(in.indices);
  const OracleTensor lengths = in.topk_length ? load(*in.topk_length) : OracleTensor({B}, double(topk));
  const OracleTensor sink = in.attn_sink ? load(*in.attn_sink) : OracleTensor({H}, -HUGE_VAL);  // -inf: no sink
  for (int64_t b = 0; b < B; ++b) {
    MLA_REQUIRE(lengths.values[b] >= 0 && lengths.values[b] <= topk, "sparse MLA decode: topk_length[", b, "] = ",
                lengths.values[b], " is outside [0, topk = ", topk, "] of indices ", in.indices.view.to_string());
  }

  SparseMlaResult r{OracleTensor({B, S, H, kDsMlaLatent}), OracleTensor({B, H, S}, HUGE_VAL), OracleTensor({B, H, S}),
                    OracleTensor({B, S, H, kDsMlaLatent})};
  const MlaPrecision& u = in.precision;
  constexpr double kU = 0x1p-24, kGamma = (kHeadDim + 2) * kU / (1 - (kHeadDim + 2) * kU);
  Matrix k(topk, kHeadDim);  // the row's valid keys, decoded; V is the first 512 columns
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t s = 0; s < S; ++s) {
      // Gather: entry i of the row counts when it is among the first topk_length[b] and names a slot.
      int64_t n = 0;
      const double* row = indices.values.data() + (b * S + s) * topk;
      for (int64_t i = 0; i < static_cast<int64_t>(lengths.values[b]); ++i) {
        const auto slot = static_cast<int64_t>(row[i]);
        if (!sparse_mla_index_valid(slot, num_slots)) continue;
        const int64_t byte = kv.byte_offset() + (slot / page) * kv.stride(0) + (slot % page) * kv.stride(1);
        decode_ds_mla_token(in.kv_cache.bytes() + byte, k.row(n++).data());
      }
      if (n == 0) continue;  // out = 0, lse = +inf (already so)

      const Eigen::Map<const Matrix> q_bs(q.values.data() + (b * S + s) * H * kHeadDim, H, kHeadDim);
      const Matrix scores = in.softmax_scale * q_bs * k.topRows(n).transpose();  // [h, n]
      const Vector magnitude = (q_bs.cwiseAbs() * k.topRows(n).cwiseAbs().transpose()).rowwise().maxCoeff();
      const Vector largest = scores.cwiseAbs().rowwise().maxCoeff();
      const Vector m = scores.rowwise().maxCoeff();
      const Matrix p = (scores.colwise() - m).array().exp().matrix();  // exp(score - max): at most 1
      const Vector sum = p.rowwise().sum();
      Eigen::Map<Matrix> out(r.out.values.data() + (b * S + s) * H * kDsMlaLatent, H, kDsMlaLatent);
      out.noalias() = p * k.topLeftCorner(n, kDsMlaLatent);
      const double terms = static_cast<double>(n + 72) * kU;
      const double gamma_sum = terms / (1 - terms);
      const double rounded = (1 + u.p) / (1 - u.p) * (1 + u.kv);  // r of sparse_mla.h
      for (int64_t h = 0; h < H; ++h) {
        const double lse = m(h) + std::log(sum(h));
        const double sink_factor = 1.0 / (1.0 + std::exp(sink.values[h] - lse));  // 1 without a sink
        out.row(h) *= sink_factor / sum(h);
        r.lse.at({b, h, s}) = lse;  // without the sink
        const double lse_slack =
            std::abs(in.softmax_scale) * (kGamma + u.q + u.kv + u.q * u.kv) * magnitude(h) + 4 * kU * largest(h);
        r.lse_slack.at({b, h, s}) = lse_slack;
        if (!u.declared()) continue;
        const double two_d = 2 * (lse_slack + 4 * kU);
        const double grow = rounded * std::exp(two_d);
        const double factor = (grow - 1 + gamma_sum * grow) * (1 + 0x1p-8) * sink_factor / sum(h);
        Eigen::Map<Matrix> slack(r.out_slack.values.data() + ((b * S + s) * H + h) * kDsMlaLatent, 1, kDsMlaLatent);
        if (two_d <= 600) {
          slack.noalias() = factor * (p.row(h) * k.topLeftCorner(n, kDsMlaLatent).cwiseAbs());
        } else {  // e^(2d) past exp's range: key by key in log space (mla_weight_slack.h)
          const Eigen::RowVectorXd log_p = scores.row(h).array() - (m(h) + std::log(sum(h)));
          const Eigen::RowVectorXd weights = p.row(h) / sum(h);
          slack.noalias() = vast_weight_slack(log_p, weights, two_d, rounded * (1 + gamma_sum),
                                              k.topLeftCorner(n, kDsMlaLatent).cwiseAbs()) *
                            ((1 + 0x1p-8) * sink_factor);
        }
        if (u.p_abs > 0) {  // P rounded to fp8: p_abs of each |V_s| besides (p is at most 1 here), as mla_decode.cpp
          slack.noalias() += u.p_abs * grow * (1 + 0x1p-8) * sink_factor / sum(h) *
                             k.topLeftCorner(n, kDsMlaLatent).cwiseAbs().colwise().sum();
        }
      }
    }
  }
  return r;
}

}  // namespace mlacheck::oracle
