// The built-in implementations: every production entry point, registered as <op>@ref, and the
// seeded-bug variants as <op>@<bug id>.
#include <memory>

#include "kernels/indexer_decode_step.h"
#include "kernels/k_cache_gather_glue.h"
#include "kernels/k_cache_insert_glue.h"
#include "kernels/metadata_builder.h"
#include "kernels/mutants/mutants.h"
#include "kernels/mla_decode_glue.h"
#include "kernels/mla_decode_impl.h"
#include "kernels/mqa_logits_glue.h"
#include "kernels/pack_decode_glue.h"
#include "kernels/sparse_mla_glue.h"
#include "kernels/topk_glue.h"
#include "kernels/registry.h"

namespace mlacheck::kernels {

Registry& registry() {
  static Registry r = [] {
    Registry reg;
    // The metadata op is a builder that owns persistent buffers: the entry point makes one.
    reg.add({"decode_metadata", "ref", "builder with persistent buffers: uniform fused / general / native 2-D"},
            +[](Device& device, const MetadataLimits& limits) { return std::make_unique<MetadataBuilder>(device, limits); });
    reg.add({"paged_mqa_logits", "ref", "paged fp8 indexer logits: block-64 fast path, any block size, clean/unclean"},
            &paged_mqa_logits);
    reg.add({"mqa_logits", "ref", "ragged prefill fp8 indexer logits over [ks, ke)"}, &mqa_logits);
    reg.add({"topk_prefill", "ref", "radix top-k per row relative to ks; k = 2048 fast path, split very long rows"},
            &topk_per_row_prefill);
    reg.add({"topk_decode", "ref", "radix top-k per row from 1-D or 2-D seq_lens; k = 2048 fast path"},
            &topk_per_row_decode);
    reg.add({"pack_decode", "ref", "token rows -> left-aligned [B, next_n'] slots, padding slots zeroed"}, &pack_decode);
    reg.add({"unpack_decode", "ref", "[B, next_n'] slots -> the T token rows, padding slots never read"}, &unpack_decode);
    reg.add({"topk_to_global", "ref", "request-local top-k indices -> global KV slots through the block table"},
            &topk_to_global);
    // The decode step owns its scratch like the builder: the entry point makes one.
    reg.add({"indexer_decode_step", "ref",
             "metadata -> pack if non-uniform -> logits -> top-k (padded rows) -> shared buffer rows -> global slots"},
            +[](Device& device, const IndexerDecodeStepLimits& limits) {
              return std::make_unique<IndexerDecodeStep>(device, limits);
            });
    reg.add({"sparse_mla_decode", "ref",
             "fp8_ds_mla sparse decode: 16 heads x 32-key tiles per block, online softmax, sink, topk_length"},
            &sparse_mla_decode);
    reg.add({"mla_decode", "ref", "dense split-KV decode: device-side split bounds from seq_lens, LSE merge, bf16/fp8"},
            &mla_decode);
    // The impl owns its workspace and graph buffers: the entry point makes one.
    reg.add({"mla_decode_impl", "ref",
             "engine-side MLA impl: workspace sized once, scales per call, uniform q_len only, graph capture"},
            +[](Device& device, const MlaDecodeImplConfig& config) {
              return std::make_unique<MlaDecodeImpl>(device, config);
            });
    reg.add({"indexer_k_cache_insert", "ref", "fp8 keys with per-token fp32 / ue8m0 scales into the block-flat cache"},
            &indexer_k_cache_insert);
    reg.add({"indexer_k_cache_gather", "ref",
             "each request's fp8 codes and fp32 scales copied from the block-flat cache into token rows"},
            &indexer_k_cache_gather);
    // The seeded-bug variants, as <op>@<bug id> (kernels/mutants/).
    register_mutants(reg);
    return reg;
  }();
  return r;
}

}  // namespace mlacheck::kernels
