// Oracle of docs/ops.md section 6, "The decode step as a pipeline": for every decode token of a batch,
// the top-k rows the indexer must produce, their global KV slots, and the sparse attention output.
//
// The oracle composes the per-op oracles along the simplest path, one row per token: the flattened
// metadata (section 1), the paged logits of each token over its ctx(b, t) keys (2.1), the top-k of
// each row (3), the conversion to global slots (3) and sparse MLA decode (4). Whatever a kernel
// pipeline does on the way (packing non-uniform queries, padded rows, a top-k buffer shared with
// prefill tokens), its per-token result must equal this one.
#pragma once

#include <optional>
#include <vector>

#include "core/tensor.h"
#include "oracle/decode_metadata.h"
#include "oracle/mqa_logits.h"
#include "oracle/sparse_mla.h"

namespace mlacheck::oracle {

struct DecodeStepInputs {
  DecodeBatchViews batch;  // seq_lens [B], decode_lens [B] (0 for padding), block_table [B, W], next_n
  // Indexer, one row per decode token in token order (T = sum of decode_lens):
  HostTensor index_q;             // fp8 [T, H, D]
  HostTensor index_weights;       // fp32 [T, H]
  PagedIndexerCache index_cache;  // block-flat; its block_size is the page size of both caches
  int64_t topk = 2048;
  // Sparse attention, one query per decode token. Without mla_q (base null) the step stops at the
  // global slots (the indexer half alone) and the result's attention is empty.
  HostTensor mla_q;               // bf16 [T, h, 576]
  HostTensor mla_cache;           // u8 [num_blocks, page, 656]
  double softmax_scale = 1.0;
  std::optional<HostTensor> attn_sink;  // fp32 [h]
};

struct DecodeStepResult {
  std::vector<int64_t> request;      // [T]: the request of each decode token
  std::vector<int64_t> context_len;  // [T]: ctx(b, t), the length of its top-k row
  LogitsResult logits;               // [T, max seq_len]: each token's row, in token order
  IntMatrix topk_local;   // [T, topk]: one admissible answer (ties: see core/topk_check.h). These are
                          // rows [0, T) of the shared top-k buffer; its rows >= T keep their contents.
  IntMatrix topk_global;  // [T, topk]: topk_local as global slots of the token's request
  SparseMlaResult attention;  // out [T, 1, h, 512], lse [T, h, 1]
};

// Throws mlacheck::Error for an inconsistent batch (see the per-op oracles), a token count other
// than sum(decode_lens), or caches whose page sizes differ.
DecodeStepResult indexer_decode_step(const DecodeStepInputs& in);

// The shared top-k buffer int32 [max_tokens, topk] after the step, given its contents before:
// rows [0, T) are the tokens' rows (topk_local, up to ties), rows [T, max_tokens) belong to prefill
// tokens of the same batch and keep their contents exactly. Throws unless the buffer has at least T
// rows of topk columns.
IntMatrix topk_buffer_after(const DecodeStepResult& step, const HostTensor& buffer_before);

// The attention output for a given choice of global slots, int32 [T, topk]: what a pipeline that
// broke a tie differently from topk_local must produce, once its choice is found admissible.
SparseMlaResult decode_step_attention(const DecodeStepInputs& in, const HostTensor& global_indices);

}  // namespace mlacheck::oracle
