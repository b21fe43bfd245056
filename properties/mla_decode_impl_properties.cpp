// Properties of the MLA impl (properties/mla_decode_impl_properties.h).
#include "properties/mla_decode_impl_properties.h"

namespace mlacheck {

void register_mla_decode_impl_properties(PropertyRegistry&) {}

}  // namespace mlacheck
