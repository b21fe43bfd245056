// Properties of the indexer decode step (docs/ops.md 6) as verdict functions of (implementation, case),
// shared by the RapidCheck suite and the fuzzers. Each stages the case in guarded device buffers
// (every byte a kernel must not read poisoned, the shared top-k buffer's prefill rows holding a
// pattern), runs the step and returns std::nullopt or one line saying how it failed.
#pragma once

#include <string>
#include <vector>

#include "kernels/device.h"
#include "kernels/indexer_decode_step.h"
#include "properties/decode_step_gen.h"
#include "harness/property.h"
#include "harness/testbed.h"
#include "properties/view_properties.h"

namespace mlacheck {

// The staged buffers of one case: host bytes (what the oracle reads) and, after upload(), guarded
// device memory. Every byte a kernel must not read is poison (fp8 NaN); the shared top-k buffer
// has c.prefill_rows rows after the T token rows, holding a pattern that must survive.
struct DecodeStepBuffers {
  Buffer seq_lens, decode_lens, qsl, table, q, weights, kv, topk, global;
  std::vector<int32_t> host_table;  // [B, W] dense, for the oracle's conversion to global slots
  std::vector<Buffer*> all() { return {&seq_lens, &decode_lens, &qsl, &table, &q, &weights, &kv, &topk, &global}; }
};
// Host side only; the index weights are multiplied by weight_scale.
DecodeStepBuffers make_decode_step_buffers(const DecodeStepEngine& e, const DecodeStepCase& c,
                                           float weight_scale = 1.0f);
// The step's inputs over the uploaded buffers.
kernels::IndexerDecodeStepInputs decode_step_inputs(const DecodeStepBuffers& s, const DecodeStepEngine& e,
                                                    const DecodeStepCase& c);

// Oracle equivalence per token, and writes only inside rows [0, T) of the two outputs: each token's
// logits row equals oracle::indexer_decode_step's over its length, its row of the shared buffer is
// a valid top-k of that row (ties: core/topk_check.h), its global slots are the oracle's conversion
// of that choice, and no other byte of any buffer changes. step must have been made for the
// engine's limits; *result (when given) gets the run's result (for its route).
Verdict decode_step_equals_oracle(kernels::Device& device, kernels::IndexerDecodeStep& step,
                                  const DecodeStepEngine& e, const DecodeStepCase& c,
                                  kernels::IndexerDecodeStepResult* result = nullptr);

// Metamorphic: the same case with every index weight doubled gives every token's logits exactly
// doubled, bit for bit (a power-of-two scale commutes with every rounding of the sum).
Verdict decode_step_weights_scale_exactly(kernels::Device& device, kernels::IndexerDecodeStep& step,
                                          const DecodeStepEngine& e, const DecodeStepCase& c);

// Metamorphic: running the batch with its requests reordered by perm (request i of the new batch is
// request perm[i] of c, with its tokens, weights and table row; the KV cache unchanged) gives every
// token the same logits, bit for bit, and a top-k row selecting the same values.
Verdict decode_step_permutation_commutes(kernels::Device& device, kernels::IndexerDecodeStep& step,
                                         const DecodeStepEngine& e, const DecodeStepCase& c,
                                         const std::vector<int>& perm);

// The registry's factory for a decode step (kernels/registry_builtin.cpp).
using IndexerDecodeStepFactory =
    std::unique_ptr<kernels::IndexerDecodeStep>(kernels::Device&, const kernels::IndexerDecodeStepLimits&);

// Registers indexer_decode_step.equals_oracle, .weights_scale_exactly and .permutation_commutes
// (the permutation as the case's "permutation" key).
void register_decode_step_properties(PropertyRegistry& r);

// The route a result took ("native packed padded top-k general"), for RC_TAG and reports.
std::string decode_step_route(const kernels::IndexerDecodeStepResult& r);

}  // namespace mlacheck
