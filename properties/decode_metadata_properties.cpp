// Properties of decode_metadata (properties/decode_metadata_properties.h).
#include "properties/decode_metadata_properties.h"

namespace mlacheck {

void register_decode_metadata_properties(PropertyRegistry&) {}

}  // namespace mlacheck
