// Properties of the MLA impl (mla_decode_impl) as verdict functions of (implementation, case),
// shared by the RapidCheck suite, the fuzzers and `mlacheck repro`.
#pragma once

#include "properties/mla_decode_impl_gen.h"
#include "properties/property_registry.h"

namespace mlacheck {

// Registers this op's properties by name.
void register_mla_decode_impl_properties(PropertyRegistry& r);

}  // namespace mlacheck
