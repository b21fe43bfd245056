// Properties of mqa_logits (properties/mqa_logits_properties.h).
#include "properties/mqa_logits_properties.h"

namespace mlacheck {

void register_mqa_logits_properties(PropertyRegistry&) {}

}  // namespace mlacheck
