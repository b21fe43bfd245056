// Properties of mqa_logits as verdict functions of (implementation, case), shared by the RapidCheck
// suite, the fuzzers and `mlacheck repro`.
#pragma once

#include "properties/mqa_logits_gen.h"
#include "properties/property_registry.h"

namespace mlacheck {

// Registers this op's properties by name.
void register_mqa_logits_properties(PropertyRegistry& r);

}  // namespace mlacheck
