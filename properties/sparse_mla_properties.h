// Properties of sparse_mla as verdict functions of (implementation, case), shared by the RapidCheck
// suite, the fuzzers and `mlacheck repro`.
#pragma once

#include "properties/sparse_mla_gen.h"
#include "properties/property_registry.h"

namespace mlacheck {

// Registers this op's properties by name.
void register_sparse_mla_properties(PropertyRegistry& r);

}  // namespace mlacheck
