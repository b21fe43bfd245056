// Properties of sparse_mla (properties/sparse_mla_properties.h).
#include "properties/sparse_mla_properties.h"

namespace mlacheck {

void register_sparse_mla_properties(PropertyRegistry&) {}

}  // namespace mlacheck
