// Properties of mla_decode as verdict functions of (implementation, case), shared by the RapidCheck
// suite, the fuzzers and `mlacheck repro`.
#pragma once

#include "properties/mla_decode_gen.h"
#include "properties/property_registry.h"

namespace mlacheck {

// Registers this op's properties by name.
void register_mla_decode_properties(PropertyRegistry& r);

}  // namespace mlacheck
