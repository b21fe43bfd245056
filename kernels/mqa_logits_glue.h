// The checked entry points of docs/ops.md 2 (indexer logits): each validates every view it is given and
// refuses bad input with a one-line mlacheck::Error before any launch, then launches the kernel of
// kernels/mqa_logits.h on the device's backend. The caller owns every buffer; nothing is kept.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/device.h"
#include "kernels/mqa_logits.h"

namespace mlacheck::kernels {

// docs/ops.md 2.1, paged decode logits. Row r = b * next_n + j of logits gets columns [0, ctx_r) with
// ctx_r = context_lens[b, j] (2-D) or max(0, L_b - next_n + j + 1) (1-D).
struct PagedMqaLogitsArgs {
  DeviceTensor q;             // fp8 [B, next_n, H, D], contiguous
  DeviceTensor kv_blocks;     // u8 [num_blocks, block_stride], unit column stride: the block-flat cache
  int64_t block_size = 64;    // tokens per KV block, any value >= 1
  DeviceTensor weights;       // fp32 [B * next_n, H], contiguous
  DeviceTensor context_lens;  // int32 [B] (any stride) or [B, next_n] C-contiguous
  DeviceTensor block_table;   // int32 [B, W], unit column stride, any row stride
  int64_t max_context_len = 0;
  DeviceTensor logits;  // fp32 [B * next_n, max_context_len], unit column stride, row stride >= columns
  LogitsMode mode = LogitsMode::kUnclean;
  // A host copy of context_lens' values in row-major order ([B] or [B * next_n]), when the caller has
  // one: then rows longer than max_context_len, negative 2-D lengths and block tables narrower than
  // a row needs are refused too. Without it they cannot be seen before the launch: the kernel clamps
  // each row to max_context_len and W * block_size columns, so it never writes outside the logits
  // view or reads outside the table (the oracle refuses such input). A page id outside the cache
  // gives NaN logits for its tokens, never a read outside the cache.
  const std::vector<int32_t>* host_context_lens = nullptr;
};
void paged_mqa_logits(Device& device, const PagedMqaLogitsArgs& args);
// The same with a seeded variant's decision (kernels/mutants/); paged_mqa_logits is kNone.
void paged_mqa_logits_seeded(Device& device, const PagedMqaLogitsArgs& args, PagedLogitsBug bug);

// The cache checks of paged_mqa_logits, for callers that must refuse a bad cache before launching
// anything else (the decode step): u8 [num_blocks, block_stride], unit column stride, blocks of
// block_size tokens x (head_dim key bytes + a 4-byte scale), block stride a multiple of 4.
void require_paged_indexer_cache(const DeviceTensor& kv_blocks, int64_t block_size, int64_t head_dim, const char* op);

// docs/ops.md 2.2, ragged prefill logits: row m gets columns [ks[m], ke[m]) of an [M, N] output.
struct MqaLogitsArgs {
  DeviceTensor q;        // fp8 [M, H, D], contiguous
  DeviceTensor k;        // fp8 [N, D], unit column stride, any row stride
  DeviceTensor k_scale;  // fp32 [N], any stride
  DeviceTensor weights;  // fp32 [M, H], contiguous
  DeviceTensor ks;       // int32 [M], any stride
  DeviceTensor ke;       // int32 [M], any stride
  DeviceTensor logits;   // fp32 [M, N], unit column stride, row stride >= N
  LogitsMode mode = LogitsMode::kUnclean;
  // Host copies of ks and ke ([M] each), when the caller has them: then ranges outside
  // 0 <= ks <= ke <= N are refused. Without them the kernel clamps each range into [0, N].
  const std::vector<int32_t>* host_ks = nullptr;
  const std::vector<int32_t>* host_ke = nullptr;
};
void mqa_logits(Device& device, const MqaLogitsArgs& args);

}  // namespace mlacheck::kernels
