// Properties of decode_metadata (docs/ops.md 1) as verdict functions of (implementation, case), shared by
// the RapidCheck suite, the fuzzers and `mlacheck repro`. The op is a builder with persistent
// buffers: the registry's factory makes one (kernels::MetadataBuilder), and the implementation a
// property runs is the per-step build on it (metadata_build_ref: builder.build(batch)), so a test can
// pass a wrong build. Each property stages the step's inputs in guarded buffers (every byte a build
// must not read poisoned), declares as the builder's outputs exactly what this step may write (its
// live rows and the stale tail it owns), builds, and returns std::nullopt or one line.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/device.h"
#include "kernels/metadata_builder.h"
#include "properties/decode_metadata_gen.h"
#include "harness/property.h"
#include "harness/testbed.h"
#include "properties/view_properties.h"

namespace mlacheck {

// The registry's entry point for decode_metadata (kernels/registry_builtin.cpp).
using MetadataBuilderFactory = std::unique_ptr<kernels::MetadataBuilder>(kernels::Device&, const kernels::MetadataLimits&);
// One step on a builder: the implementation the properties check.
using MetadataBuildFn = kernels::MetadataResult(kernels::MetadataBuilder&, const kernels::MetadataBatch&);
// The reference build: builder.build(batch).
kernels::MetadataResult metadata_build_ref(kernels::MetadataBuilder& builder, const kernels::MetadataBatch& batch);

// A step's staged inputs. The buffers are sized from the limits alone (the largest offset, row pad
// and batch a step may have), so one set of device buffers serves every step of an engine; every
// byte outside the step's views holds poison.
struct MetadataInputs {
  Buffer seq_lens, decode_lens, qsl, table;
  std::vector<Buffer*> all() { return {&seq_lens, &decode_lens, &qsl, &table}; }
};
// Writes step c's inputs into s: allocates the device buffers when s has none, else rewrites the
// existing ones in place (the same addresses, new contents), as an engine refills its input buffers.
void stage_metadata_inputs(kernels::Device& device, const kernels::MetadataLimits& l, const MetadataStep& c,
                           MetadataInputs& s);
// The batch the builder gets for c over the staged buffers.
kernels::MetadataBatch metadata_batch(const MetadataInputs& s, const MetadataStep& c);

// What one build returned and left in the builder's buffers (each read back whole).
struct MetadataOutcome {
  kernels::MetadataResult result;
  std::vector<int32_t> seq_lens, decode_lens, block_table, context_lens;
};

// The shape and stride contract of a build's result, checked where it is built: layout, path (the
// fused kernel exactly for uniform batches under kAuto), token count and next_n'; every view it
// hands out has the dtype, shape, strides and offset it claims (flattened: int32 [rows] contiguous
// and [rows, W] with row stride table_width; native: context_lens int32 [B, next_n'] C-contiguous
// and the batch's own block_table) and lies inside the builder buffer it points into; the views the
// layout leaves empty are empty.
Verdict metadata_result_as_declared(kernels::MetadataBuilder& builder, const MetadataStep& c,
                                    const kernels::MetadataResult& r, const kernels::DeviceTensor& source_table);

// One guarded step of build on builder with inputs s (staged or restaged here): every input buffer
// unchanged, the builder's buffers changed only where this step may write, no persistent buffer
// replaced or moved, the result as declared, and (when against_oracle) every builder buffer equal to
// the oracle's, tails included. out gets the outcome. A valid batch the build refuses is a failure.
Verdict run_metadata_step(kernels::Device& device, MetadataBuildFn* build, kernels::MetadataBuilder& builder,
                          const MetadataStep& c, MetadataInputs& s, bool against_oracle, MetadataOutcome& out);

// Oracle equivalence: the step (its layout and path) leaves the builder's buffers equal to
// oracle::flattened_metadata / native_metadata over every allocated row (so no stale row survives),
// each length in [0, L_b], with the guards and the result contract of run_metadata_step.
Verdict decode_metadata_equals_oracle(kernels::Device& device, MetadataBuildFn* build,
                                      kernels::MetadataBuilder& builder, const MetadataStep& c,
                                      MetadataOutcome* out = nullptr);

// The result contract and the guards alone (metadata_result_as_declared), no oracle.
Verdict decode_metadata_views_as_declared(kernels::Device& device, MetadataBuildFn* build,
                                          kernels::MetadataBuilder& builder, const MetadataStep& c);

// Path equivalence: a uniform batch (c.uniform(), flattened) forced through the general kernel and
// then through the fused fast path leaves the same bytes in every flat buffer and the same views.
// Throws mlacheck::Error when c is not uniform.
Verdict decode_metadata_fast_path_equals_general_path(kernels::Device& device, MetadataBuildFn* build,
                                                      kernels::MetadataBuilder& builder, const MetadataStep& c);

// Layout equivalence: the same requests built flattened and then native give every token t of request
// b the same context length (flattened row query_start_loc[b] + t, native element (b, t)), a flattened
// row that is request b's (its block-table row is b's source row, its decode_len 1), and a native
// block_table that is the source's.
Verdict decode_metadata_layouts_agree(kernels::Device& device, MetadataBuildFn* build,
                                      kernels::MetadataBuilder& builder, const MetadataStep& c);

// An engine's steps on one builder and one set of input buffers refilled each step: every step
// equals the oracle (decode_metadata_equals_oracle) and the persistent buffers keep their addresses.
Verdict decode_metadata_steps_equal_oracle(kernels::Device& device, MetadataBuildFn* build,
                                           kernels::MetadataBuilder& builder, const std::vector<MetadataStep>& steps);

// The addresses of the builder's four persistent buffers, for stability checks.
std::vector<uintptr_t> metadata_buffer_addresses(kernels::MetadataBuilder& builder);

// Registers decode_metadata.equals_oracle, .views_as_declared, .fast_path_equals_general_path,
// .layouts_agree and .steps_equal_oracle (the last over decode_metadata_steps_to_text's keys).
void register_decode_metadata_properties(PropertyRegistry& r);

}  // namespace mlacheck
