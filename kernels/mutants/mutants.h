// Seeded-bug variants: each the correct op with one wrong decision that shipped upstream (a row of
// docs/bugs.md), registered beside the correct implementation as <op>@<bug id> so every
// property, fuzzer and corpus case can be pointed at it and must fail. Each is the production code
// with that one decision switched, never a copy of it: a compile-time bug parameter of a kernel
// (MetadataBug, MlaDecodeBug) or of the glue (TopkBug), or a decision hook of a stateful object
// (MetadataBuilder, IndexerDecodeStep, MlaDecodeImpl) overridden. This folder holds the switches'
// registrations; the decisions themselves sit in the production sources.
#pragma once

#include <memory>

#include "kernels/decode_metadata.h"
#include "kernels/device.h"
#include "kernels/metadata_builder.h"
#include "kernels/registry.h"

namespace mlacheck::kernels {

// The registry entry of a variant of a stateful object (builder, decode step, impl): makes a
// Variant where the registry's factory for Base is asked for one.
template <class Variant, class Base, class Limits>
std::unique_ptr<Base> make_variant(Device& device, const Limits& limits) {
  return std::make_unique<Variant>(device, limits);
}

// U1, U2, U3, U5, U6, C1, C2, C3 (decode metadata builder and kernels, vLLM #39458, #42135, #51538).
void register_decode_metadata_mutants(Registry& reg);

// R4 (top-k dispatch, vLLM #42072): the k = 2048 fast path taken for any k >= 2048; D3: ties
// taken by arrival; W5: a logits row's element offset in int32; N1: NaN keys skipped in the last
// radix pass over a long prefill row.
void register_topk_mutants(Registry& reg);
// R1, R2 (top-k decode glue of the indexer step, vLLM #42072): rows written past the view; packed
// rows regrouped with the configured next_n.
void register_indexer_decode_step_mutants(Registry& reg);
// T5 (dense MLA decode, vLLM #51065): rows without keys merged as 0/0; O2: page ids read past a
// row's last block; W3: a key's offset in int32; D4: the merge's sums in arrival order.
void register_mla_decode_mutants(Registry& reg);
// K1, K2, T1, T2, T3, T4, K3 (MLA decode impl, vLLM #41778, #42885, TensorRT-LLM #16290): scales
// cached from the first call; non-uniform query lengths run a token per row; a graph's key range
// fixed at capture; workspace allocated per eager call; a capture's workspace freed when capture
// returns; each launch's workspace freed inside the captured call; workspace sized for q_len 1 and
// grown.
void register_mla_decode_impl_mutants(Registry& reg);
// L1 (indexer K-cache insert): slots written token-interleaved, so 2.1's reader takes scales out of
// fp8 value bytes.
void register_k_cache_insert_mutants(Registry& reg);
// G1 (indexer K-cache gather, vLLM's cp_gather_indexer_k_quant_cache indexes its table with the
// table's width): a request's table row taken at b x W, not at the row stride; G2: a row on a
// request's end given to that request (its first row read as the previous request's token len); G3
// rows past cu_seq_lens[B] not skipped.
void register_k_cache_gather_mutants(Registry& reg);

// O1 (paged indexer logits, after DeepGEMM #344): row lengths read past context_lens's view; D1
// (after DeepGEMM #392): head sums added in arrival order, so the bits depend on the schedule.
void register_paged_mqa_logits_mutants(Registry& reg);
// O3 (sparse MLA decode): scales read at an unchecked slot's address, before the cache for slot -1;
// H1: an empty row's tile count wraps around, and the kernel spins; H2: the same in 32 bits, 2^27
// tiles that end; D2: no barrier between staging a tile's keys in shared memory and reading them.
void register_sparse_mla_mutants(Registry& reg);

// S1 (top-k to global slots, after vLLM #45324): an index with no slot written as 0, not -1.
void register_pack_decode_mutants(Registry& reg);

// Every variant above.
inline void register_mutants(Registry& reg) {
  register_decode_metadata_mutants(reg);
  register_topk_mutants(reg);
  register_indexer_decode_step_mutants(reg);
  register_mla_decode_mutants(reg);
  register_mla_decode_impl_mutants(reg);
  register_k_cache_insert_mutants(reg);
  register_k_cache_gather_mutants(reg);
  register_pack_decode_mutants(reg);
  register_paged_mqa_logits_mutants(reg);
  register_sparse_mla_mutants(reg);
}

}  // namespace mlacheck::kernels
