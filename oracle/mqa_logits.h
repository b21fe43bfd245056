// Oracle of docs/ops.md section 2, "Indexer logits": the paged decode logits over the block-flat fp8
// KV cache (2.1) and the ragged prefill logits with ks/ke (2.2).
//
//   logits[r, t] = k_scale[t] * sum_h w[r, h] * relu(sum_d q[r, h, d] * k[t, d])
//
// with q and k the exactly decoded fp8 values (q's own scale is folded into the weights). Computed
// in double; the inner products are one Eigen GEMM per request.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "oracle/oracle_tensor.h"

namespace mlacheck::oracle {

// Clean mode writes -inf past each row's length; unclean mode (what vLLM runs) leaves those columns
// unspecified: any value is right there.
enum class LogitsMode { kClean, kUnclean };

// The block-flat paged indexer cache: block p is row p of an u8 [num_blocks, block_stride] view
// (unit column stride; the row stride is the block stride, at least block_size * (D + 4) bytes and
// a multiple of 4). Inside a block: block_size * D fp8 key bytes (token s at byte s * D), then
// block_size fp32 scales (token s at byte block_size * D + 4 s).
struct PagedIndexerCache {
  HostTensor blocks;
  int64_t block_size = 64;
  int64_t head_dim = 128;
};

// Writes one token's D fp8 key codes and its scale into block `block`, slot `slot` (how the tests
// and generators fill a cache the way production's quantize-and-store kernel does).
void store_indexer_token(const PagedIndexerCache& cache, int64_t block, int64_t slot, const uint8_t* codes, float scale);

struct PagedMqaLogitsInputs {
  HostTensor q;             // fp8 [B, next_n, H, D]
  PagedIndexerCache kv;
  HostTensor weights;       // fp32 [B * next_n, H]
  HostTensor context_lens;  // int32 [B] or C-contiguous [B, next_n]
  HostTensor block_table;   // int32 [B, W], unit column stride, any row stride
  int64_t max_context_len = 0;
  // The unit roundoff of the implementation's declared accumulation of each q_h . k (its contract's
  // "precision qk fp22": 2^-13), 0 for fp32, whose rounding the table's tolerance covers.
  double qk_unit = 0;
};

struct LogitsResult {
  OracleTensor logits;               // [rows, columns]: the clean-mode answer (-inf outside each row's range)
  std::vector<int64_t> row_begin;    // columns [row_begin, row_end) of row r are specified in either mode
  std::vector<int64_t> row_end;
  // [rows, columns], only with a declared qk_unit u (else empty): how far a logit may move from the
  // declared accumulation, |k_scale[t]| * sum_h |w[r, h]| * gamma_D(u) * sum_d |q[r, h, d] k[t, d]|
  // with gamma_n = n u / (1 - n u): every one of a score's D additions errs by at most u of its
  // result, so the score by gamma_D of the sum of its products' magnitudes, and relu and the
  // weighted sum carry that through (docs/ops.md 2.1, "Declared accumulation").
  OracleTensor slack;
  // Whether column c of row r has one right value in this mode (always true in clean mode).
  bool specified(int64_t r, int64_t c, LogitsMode mode) const {
    return mode == LogitsMode::kClean || (c >= row_begin[static_cast<size_t>(r)] && c < row_end[static_cast<size_t>(r)]);
  }
};

// Row r = b * next_n + j has length ctx_r = context_lens[b, j] (2-D) or max(0, L_b - next_n + j + 1)
// (1-D), columns [0, ctx_r). Throws mlacheck::Error for inconsistent shapes or dtypes, a
// non-contiguous 2-D context_lens, a length above max_context_len, a block table narrower than a
// row needs, or a page id outside the cache.
LogitsResult paged_mqa_logits(const PagedMqaLogitsInputs& in);

struct MqaLogitsInputs {
  HostTensor q;        // fp8 [M, H, D]
  HostTensor k;        // fp8 [N, D]
  HostTensor k_scale;  // fp32 [N]
  HostTensor weights;  // fp32 [M, H]
  HostTensor ks;       // int32 [M], 0 <= ks <= ke <= N
  HostTensor ke;       // int32 [M]
};

// Prefill: row m is specified on columns [ks[m], ke[m]) of an [M, N] output.
LogitsResult mqa_logits(const MqaLogitsInputs& in);

}  // namespace mlacheck::oracle
