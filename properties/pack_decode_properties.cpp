// Properties of pack_decode (properties/pack_decode_properties.h).
#include "properties/pack_decode_properties.h"

namespace mlacheck {

void register_pack_decode_properties(PropertyRegistry&) {}

}  // namespace mlacheck
