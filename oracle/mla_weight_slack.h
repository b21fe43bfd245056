// o's slack where the scores' slack d is so wide that e^(2d) is past exp's range (a declared fp22
// Q.K on scores of 10^5, say), shared by the dense and sparse MLA oracles: taken key by key in log
// space. Weight s, p_s of the exact softmax, may then rise to min(p_s e^(2d), 1) and fall to
// p_s e^(-2d) (0 where 2d is vast: another key, its score within 2d, took its place: FlashMLA's fp8
// dense decode did so on an H100, docs/findings.md 15), each bound moved by the roundings of P and
// of the sum. The kernel's o is off from the exact one by at most sum_s |p'_s - p_s| |V_s|, each
// term at most the larger of the two moves. (The dense oracle takes this branch for every head of a
// token whose widest head needs it: a head of small d keeps a slack of its own size.) Included by
// oracle/*.cpp only (Eigen).
#pragma once

#include <cmath>

#include <Eigen/Core>

namespace mlacheck::oracle {

// sum_s max(grown min(e^(log_p_s + two_d), 1) - p_s, p_s (1 - e^(-two_d) / grown)) v_abs(s, :): log_p
// the log of each exact normalised weight, p the weights, v_abs |V| [keys, columns], grown
// r (1 + gamma) of the oracle's derivation (docs/ops.md 7).
template <typename VAbs>
Eigen::RowVectorXd vast_weight_slack(const Eigen::RowVectorXd& log_p, const Eigen::RowVectorXd& p, double two_d,
                                     double grown, const Eigen::MatrixBase<VAbs>& v_abs) {
  const double kept = std::exp(-two_d) / grown;  // the least share of its weight a key keeps (0 when vast)
  const Eigen::RowVectorXd move =
      (grown * (log_p.array() + two_d).min(0.0).exp() - p.array()).max(p.array() * (1 - kept)).matrix();
  return move * v_abs;
}

}  // namespace mlacheck::oracle
