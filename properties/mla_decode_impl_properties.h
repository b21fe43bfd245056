// Properties of the MLA impl (mla_decode_impl) as verdict functions of (implementation, case),
// shared by the RapidCheck suite, the fuzzers and `mlacheck repro`. The implementation is the
// registry entry's factory; a test passes one that makes a wrong impl (MlaDecodeImpl's forward and
// capture are virtual, so a subclass).
#pragma once

#include <memory>

#include "kernels/device.h"
#include "kernels/mla_decode_impl.h"
#include "properties/mla_decode_impl_gen.h"
#include "harness/property.h"
#include "properties/view_properties.h"

namespace mlacheck {

// The registry entry's type (kernels/registry_builtin.cpp).
using MlaDecodeImplFactory = std::unique_ptr<kernels::MlaDecodeImpl>(kernels::Device&,
                                                                     const kernels::MlaDecodeImplConfig&);

// One eager call on a live impl: the call staged as the dense property stages it (poisoned cache
// bytes no request reads, offset and padded views), forward with the call's scales, o and lse
// against the oracle with those scales, and nothing but o, lse and the impl's workspace written.
Verdict mla_decode_impl_eager_call(kernels::Device& device, kernels::MlaDecodeImpl& impl, const MlaDecodeCase& call);

// Eager calls equal the oracle: one impl made by factory for c.config, every call of c in turn
// (scales changing between calls: vLLM #41778 cached the first call's), each against the oracle
// with its own scales, and the workspace never moving.
Verdict mla_decode_impl_calls_equal_oracle(kernels::Device& device, MlaDecodeImplFactory* factory,
                                           const MlaDecodeImplCallsCase& c);

// A graph's cache: one allocation of the step cases' cache shape, written anew by each step.
struct MlaGraphCache {
  std::unique_ptr<GuardedMemory> memory;
  kernels::DeviceTensor tensor;
};
MlaGraphCache allocate_mla_graph_cache(kernels::Device& device, const MlaDecodeCase& step);

// Writes step (a dense case of the graph's shape: contiguous q, the graph's table width) into the
// impl's graph q, seq_lens and block_table and into the cache.
void write_mla_graph_step(kernels::MlaDecodeImpl& impl, MlaGraphCache& cache, const MlaDecodeCase& step);

// Writes step, replays graph (captured over these buffers and cache with step's scales) and checks
// the replay against the oracle (padding rows: o = +0, lse = -inf) and, byte for byte, against an
// eager launch on the same buffers (the split count the capture chose: host_seq_lens left empty).
Verdict mla_decode_impl_replay_step(kernels::Device& device, kernels::MlaDecodeImpl& impl,
                                    kernels::DeviceGraph& graph, MlaGraphCache& cache, const MlaDecodeCase& step);

// Replay equals eager: an impl made by factory, step 0 written and captured (short sequences),
// then every step written and replayed (vLLM #42885 fixed the split bounds at capture): each equals
// the oracle and an eager launch on the same buffers, and no buffer address moves.
Verdict mla_decode_impl_replay_equals_eager(kernels::Device& device, MlaDecodeImplFactory* factory,
                                            const MlaDecodeImplReplayCase& c);

// An engine's sequence: one impl made by factory, the commands of c in order (a capture with short
// lengths in the buffers; a replay through mla_decode_impl_replay_step with the scales of its
// graph's capture), each eager call and replay against the oracle, no buffer of the impl moving.
Verdict mla_decode_impl_engine_sequence(kernels::Device& device, MlaDecodeImplFactory* factory,
                                        const MlaDecodeImplSequenceCase& c);

// Registers mla_decode_impl.calls_equal_oracle, mla_decode_impl.replay_equals_eager and
// mla_decode_impl.engine_sequence.
// K2 (vLLM #41778): a call whose requests' query lengths differ is refused with an mlacheck::Error
// before any launch, and no buffer is written.
Verdict mla_decode_impl_nonuniform_refused(kernels::Device& device, MlaDecodeImplFactory* factory,
                                           const MlaDecodeImplNonUniformCase& c);

void register_mla_decode_impl_properties(PropertyRegistry& r);

}  // namespace mlacheck
