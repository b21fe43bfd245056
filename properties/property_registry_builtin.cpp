// The built-in properties: each op's properties file registers its own.
#include "properties/decode_metadata_properties.h"
#include "properties/decode_step_properties.h"
#include "properties/mla_decode_impl_properties.h"
#include "properties/mla_decode_properties.h"
#include "properties/mqa_logits_properties.h"
#include "properties/pack_decode_properties.h"
#include "properties/sparse_mla_properties.h"
#include "properties/topk_properties.h"
#include "properties/k_cache_insert_properties.h"
#include "properties/property_registry.h"

namespace mlacheck {

const PropertyRegistry& property_registry() {
  static const PropertyRegistry r = [] {
    PropertyRegistry reg;
    register_decode_metadata_properties(reg);
    register_mqa_logits_properties(reg);
    register_topk_properties(reg);
    register_pack_decode_properties(reg);
    register_sparse_mla_properties(reg);
    register_mla_decode_properties(reg);
    register_mla_decode_impl_properties(reg);
    register_decode_step_properties(reg);
    register_k_cache_insert_properties(reg);
    return reg;
  }();
  return r;
}

}  // namespace mlacheck
