// The docs/ops.md op catalogue.
#include "core/ops.h"

namespace mlacheck {

const std::vector<OpInfo>& spec_ops() {
  static const std::vector<OpInfo> ops = {
      {"decode_metadata", "1", "per-token context lengths and block rows, flattened and native 2-D layouts"},
      {"paged_mqa_logits", "2.1", "indexer logits over a paged fp8 KV cache (decode)"},
      {"mqa_logits", "2.2", "indexer logits over a ragged fp8 K with ks/ke (prefill)"},
      {"topk_prefill", "3", "top-k per row of prefill logits, indices relative to ks"},
      {"topk_decode", "3", "top-k per row of decode logits, row lengths from seq_lens"},
      {"topk_to_global", "3", "top-k indices to global KV slots through the block table"},
      {"pack_decode", "6", "pack non-uniform decode queries left-aligned into [B, next_n', H, D]"},
      {"unpack_decode", "6", "unpack padded top-k rows back to token order"},
      {"indexer_decode_step", "6", "one indexer decode step: metadata, logits, top-k, shared buffer"},
      {"sparse_mla_decode", "4", "sparse MLA decode over the fp8_ds_mla KV layout"},
      {"mla_decode", "5", "dense split-KV MLA decode with per-tensor fp8 scales"},
      {"mla_decode_impl", "5", "the MLA decode host impl: scales, workspace, graph capture"},
  };
  return ops;
}

const OpInfo* find_op(std::string_view name) {
  for (const OpInfo& op : spec_ops()) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

}  // namespace mlacheck
