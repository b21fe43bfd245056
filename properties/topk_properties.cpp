// Properties of topk (properties/topk_properties.h).
#include "properties/topk_properties.h"

namespace mlacheck {

void register_topk_properties(PropertyRegistry&) {}

}  // namespace mlacheck
