// Properties of the indexer's K-cache gather (docs/ops.md 2.4) as verdict functions of
// (implementation, case), shared by the RapidCheck suite, the fuzzers and `mlacheck repro`. Each
// stages the case through the testbed (harness/testbed.h): a cache of random bytes (read only), a
// block table inside a wider buffer whose padding and unused columns hold -1, ids past the cache or
// anything, cu_seq_lens between poison, and outputs whose only output views are the rows below
// cu_seq_lens[B], so a byte written to a spare row, to dst_k's row padding or anywhere else is a
// guard failure.
#pragma once

#include "harness/property.h"
#include "kernels/device.h"
#include "kernels/k_cache_gather_glue.h"
#include "properties/k_cache_gather_gen.h"

namespace mlacheck {

// The registry entries' type (kernels/registry_builtin.cpp).
using KCacheGatherFn = decltype(kernels::indexer_k_cache_gather);

// Every row below cu_seq_lens[B] holds, byte for byte, the oracle's codes and scale of its token
// (oracle/k_cache_gather.h); nothing else changes: not the spare rows, not the row padding, not the
// cache.
Verdict k_cache_gather_equals_oracle(kernels::Device& device, KCacheGatherFn* gather, const KCacheGatherCase& c);

// The round trip: random keys written into every request's slots by indexer_k_cache_insert@ref
// (docs/ops.md 2.3), then gathered: each row holds the codes and the scale the insert made of its
// token's key (oracle::quantize_indexer_key). Independent of the gather's oracle: a gather and an
// oracle that agreed on a wrong slot would still fail here.
Verdict k_cache_gather_inverts_insert(kernels::Device& device, KCacheGatherFn* gather, const KCacheGatherCase& c);

void register_k_cache_gather_properties(PropertyRegistry& r);

}  // namespace mlacheck
