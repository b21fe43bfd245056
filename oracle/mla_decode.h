// Oracle of docs/ops.md section 5, "Dense MLA decode": causal attention of q_len query tokens per
// request over a paged KV cache in bf16 or fp8 with per-tensor scales.
//
// Split-KV is how the kernel computes this; the answer does not depend on it, so the oracle computes
// the unsplit softmax in double with Eigen products.
#pragma once

#include "core/tensor.h"
#include "oracle/mla_precision.h"
#include "oracle/oracle_tensor.h"

namespace mlacheck::oracle {

struct MlaDecodeInputs {
  HostTensor q;            // bf16 or fp8 e4m3 [B, q_len, H, 576]
  HostTensor kv_cache;     // bf16 or fp8 e4m3 [num_blocks, page, 576]; V = K[:512]
  HostTensor block_table;  // int32 [B, W], unit column stride, any row stride
  HostTensor seq_lens;     // int32 [B]
  double base_scale = 1.0; // DeepSeek: 192^-0.5 * mscale^2
  double q_scale = 1.0;    // per-tensor scales of this call
  double k_scale = 1.0;
  MlaPrecision precision;  // the implementation's declared roundings (its slack follows them)
};

struct MlaDecodeResult {
  OracleTensor o;    // [B, q_len, H, 512]
  OracleTensor lse;  // [B, q_len, H]
  // [B, q_len, H]: how far an fp32 kernel's lse may move from the scores' own rounding alone. lse
  // is 1-Lipschitz in the largest score error, and a score's fp32 dot product over 576 terms errs
  // by at most gamma_578 * sum_d |q_d K_d| (gamma_n = n u / (1 - n u), u = 2^-24), times the scale,
  // plus 4 u |score| for the scale's own rounding and its product, plus (u_q + u_kv + u_q u_kv) *
  // sum_d |q_d K_d| times the scale for the declared roundings of q and K; plus gamma_(len + 2) for the sum
  // of the exponentials itself (a relative error of l is an absolute error of ln l, and an fp32 sum
  // of len positive terms taken one after another is only bounded that loosely: a row's worth of
  // near-equal terms added to a large running sum rounds the same way again and again). 0 for rows
  // without keys.
  OracleTensor lse_slack;
  // [B, q_len, H, 512]: how far an fp32 kernel's o may move from rounding alone, beyond the output's
  // own bf16 rounding. With d the row's score part of lse_slack + 4u (expf and the max subtraction), every
  // probability may move by a factor within [e^-2d, e^2d], and the fp32 sums over the keys and at
  // most 64 splits add gamma_(len + 72) of what they sum; both are relative to
  // A = k_scale * sum_s p_s |K_s[c]|, the column's sum of magnitudes. A declared rounding of P (u_p,
  // the numerator's and perhaps the normalizer's) and of V (u_kv) multiplies each term by at most
  // r = (1 + u_p) / (1 - u_p) * (1 + u_kv):
  //   o_slack = (r e^2d - 1 + gamma_(len + 72) r e^2d) (1 + 2^-8) A.
  // (P rounded to bf16 before P.V, as vLLM's Triton decode does, gives r - 1 of about 2^-7: an error
  // of 2^-7 A where o itself may have cancelled to far less than A.)
  // It is what lets o cancel to near zero (terms of magnitude A summing to much less) or take a
  // large scale without a false report. 0 for rows without keys.
  OracleTensor o_slack;
};

// Query token t of request b attends to keys [0, len) with len = max(0, seq_lens[b] - q_len + t + 1);
// key s lives at kv_cache[block_table[b, s / page], s % page]. With q and K the decoded values as
// stored (no scale applied):
//   score_s = base_scale * q_scale * k_scale * q . K_s,  lse = ln sum exp(score_s),
//   o = k_scale * sum exp(score_s - lse) * K_s[:512].
// len = 0 gives o = 0 and lse = -inf.
// Keys after a token's position never reach it (a NaN there does not either). Only the first
// ceil(seq_lens[b] / page) columns of a table row are read; the rest may hold anything.
// Throws mlacheck::Error for shapes or dtypes other than the above, a negative seq_len, a block table
// with fewer than ceil(seq_len / page) columns, or a page id outside [0, num_blocks) in those columns.
MlaDecodeResult mla_decode(const MlaDecodeInputs& in);

}  // namespace mlacheck::oracle
