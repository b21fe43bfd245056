// Properties of the indexer's K-cache insert (docs/ops.md 2.3) as verdict functions of
// (implementation, case), shared by the RapidCheck suite, the fuzzers and `mlacheck repro`. Each
// stages the case through the testbed (harness/testbed.h): keys in a row-padded view inside a
// wider buffer, the slot mapping between poison, and a cache of random bytes whose only output
// views are the codes and the scale of each slot a token goes to, so a byte written anywhere else
// (another slot, a padding token's slot, the block padding) is a guard failure.
#pragma once

#include "harness/property.h"
#include "kernels/device.h"
#include "kernels/k_cache_insert_glue.h"
#include "properties/k_cache_insert_gen.h"

namespace mlacheck {

// The registry entries' type (kernels/registry_builtin.cpp).
using KCacheInsertFn = decltype(kernels::indexer_k_cache_insert);

// Every slot a token goes to holds, byte for byte, the oracle's codes and scale of that token
// (oracle/k_cache_insert.h); nothing else of the cache changes.
Verdict k_cache_insert_equals_oracle(kernels::Device& device, KCacheInsertFn* insert, const KCacheInsertCase& c);

// The reader's side: each token read back from its slot in 2.1's layout (a block's codes, then its
// scales; oracle::read_indexer_key) is its key within fp8 rounding. Independent of the oracle's
// writer: a writer and an oracle that agreed on a wrong layout would still fail here.
Verdict k_cache_insert_reader_gets_the_keys(kernels::Device& device, KCacheInsertFn* insert, const KCacheInsertCase& c);

void register_k_cache_insert_properties(PropertyRegistry& r);

}  // namespace mlacheck
