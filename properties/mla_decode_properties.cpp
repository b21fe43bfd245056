// Properties of mla_decode (properties/mla_decode_properties.h).
#include "properties/mla_decode_properties.h"

namespace mlacheck {

void register_mla_decode_properties(PropertyRegistry&) {}

}  // namespace mlacheck
