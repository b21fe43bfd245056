// Seeded-bug variants: each the correct op with one wrong decision that shipped upstream (a row of
// docs/bugs.md), registered beside the correct implementation as <op>@<bug id> so every
// property, fuzzer and corpus case can be pointed at it and must fail. They live here, apart from
// the production code, which has no mutant switches.
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

// MetadataBuilder::build written out again with each decision a docs/bugs.md row gets wrong in its own
// virtual function, returning the production answer; the metadata variants override one each.
// (The copy itself runs the property suite in tests/kernels/decode_metadata_test.cpp.)
class MetadataBuilderCopy : public MetadataBuilder {
 public:
  using MetadataBuilder::MetadataBuilder;
  MetadataResult build(const MetadataBatch& batch) override;

 protected:
  virtual MetadataStepShape checked_step(const MetadataBatch& batch);                           // U2
  virtual bool uniform_path(const MetadataStepShape& step, const MetadataBatch& batch) const;   // U1
  virtual int64_t flat_reset_end(const MetadataStepShape& step) const;                          // U5
  virtual int32_t native_row_stride(const MetadataStepShape& step) const;                       // C1, C3
  virtual View native_view(const MetadataStepShape& step) const;                                // C1, C3
  virtual GuardedMemory& native_buffer();                                                  // C2
  virtual void expand(bool uniform, const ExpandMetadataParams& p);                        // U3, U6
};

// U1, U2, U3, U5, U6, C1, C2, C3 (decode metadata builder and kernels, vLLM #39458, #42135, #51538).
void register_decode_metadata_mutants(Registry& reg);

// R4 (top-k dispatch, vLLM #42072): the k = 2048 fast path taken for any k >= 2048.
void register_topk_mutants(Registry& reg);
// R1, R2 (top-k decode glue of the indexer step, vLLM #42072): rows written past the view; packed
// rows regrouped with the configured next_n.
void register_indexer_decode_step_mutants(Registry& reg);
// T5 (dense MLA decode, vLLM #51065): rows without keys merged as 0/0.
void register_mla_decode_mutants(Registry& reg);
// K1, K2, T1, T2, K3 (MLA decode impl, vLLM #41778, #42885): scales cached from the first call;
// non-uniform query lengths run a token per row; a graph's key range fixed at capture; workspace
// allocated per call; workspace sized for q_len 1 and grown.
void register_mla_decode_impl_mutants(Registry& reg);

// Every variant above.
inline void register_mutants(Registry& reg) {
  register_decode_metadata_mutants(reg);
  register_topk_mutants(reg);
  register_indexer_decode_step_mutants(reg);
  register_mla_decode_mutants(reg);
  register_mla_decode_impl_mutants(reg);
}

}  // namespace mlacheck::kernels
