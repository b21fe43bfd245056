// Oracle of docs/ops.md section 4, "Sparse MLA decode" (FlashMLA's fp8_ds_mla layout): attention of
// each query token over the KV slots its top-k row names.
//
// Keys are decoded exactly from the 656-byte tokens (oracle/quantize.h, decode_ds_mla_token), and
// the scores, softmax and output are computed in double with Eigen products.
#pragma once

#include <optional>

#include "core/tensor.h"
#include "oracle/mla_precision.h"
#include "oracle/oracle_tensor.h"

namespace mlacheck::oracle {

struct SparseMlaInputs {
  HostTensor q;         // bf16 [b, s_q, h, 576]: 512 latent + 64 rope
  HostTensor kv_cache;  // u8 [num_blocks, page, 656], unit stride along the 656 bytes; any outer strides
  HostTensor indices;   // int32 [b, s_q, topk]: global slots block * page + offset
  std::optional<HostTensor> topk_length;  // int32 [b]: only the first topk_length[b] entries count
  double softmax_scale = 1.0;
  std::optional<HostTensor> attn_sink;  // fp32 [h]
  MlaPrecision precision;  // the implementation's declared roundings (its slacks follow them)
};

struct SparseMlaResult {
  OracleTensor out;  // [b, s_q, h, 512]
  OracleTensor lse;  // [b, h, s_q] (transposed, as FlashMLA returns it)
  // [b, h, s_q]: how far an fp32 kernel's lse may move from the scores' own rounding alone, as for
  // dense MLA decode (oracle/mla_decode.h, MlaDecodeResult::lse_slack): lse is 1-Lipschitz in the
  // largest score error, and a score's fp32 dot product over 576 terms (each an fp32 product of q
  // and a key value decoded with its tile scale) errs by at most gamma_578 * sum_d |q_d K_d| times
  // |softmax_scale|, plus 4 u |score| for the scale's rounding and its product, plus
  // (u_q + u_kv + u_q u_kv) sum_d |q_d K_d| times |softmax_scale| for declared roundings of q and K.
  // 0 for rows without valid entries.
  OracleTensor lse_slack;
  // [b, s_q, h, 512]: with a declared precision only (MlaPrecision::declared; else 0, and out is
  // compared with the tolerance table alone, as before), how far out may move from the declared
  // roundings and fp32's: dense MLA decode's o_slack (oracle/mla_decode.h) over the row's n valid
  // entries, d the row's lse_slack + 4u, r = (1 + u_p) / (1 - u_p) (1 + u_kv):
  //   out_slack = (r e^2d - 1 + gamma_(n + 72) r e^2d) (1 + 2^-8) sink_factor sum_i p_i |V_i|.
  OracleTensor out_slack;
};

// For each (batch, s, head), over the valid entries i of the row (0 <= index < num_blocks * page,
// among the first topk_length[batch]; duplicates count twice):
//   score_i = softmax_scale * q . K_i,  lse = ln sum exp(score_i),  out = sum exp(score_i - lse) V_i
// with V = K[0:512]. No valid entry: out = 0, lse = +inf. With attn_sink: out *= 1 / (1 + exp(sink -
// lse)); lse is reported without the sink.
// Throws mlacheck::Error for shapes or dtypes other than the above, or topk_length outside [0, topk].
SparseMlaResult sparse_mla_decode(const SparseMlaInputs& in);

// True when index is a slot the kernel must read (not negative, below num_slots).
inline bool sparse_mla_index_valid(int64_t index, int64_t num_slots) { return index >= 0 && index < num_slots; }

}  // namespace mlacheck::oracle
