// Cases of the indexer's K-cache insert (properties/k_cache_insert_gen.h).
#include "properties/k_cache_insert_gen.h"

namespace mlacheck {

std::vector<int32_t> KCacheInsertCase::slot_mapping() const {
  std::vector<int32_t> s(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) {
    s[static_cast<size_t>(i)] = padding[static_cast<size_t>(i)] ? -1 : slot_order[static_cast<size_t>(i)];
  }
  return s;
}

namespace gen {
rc::Gen<KCacheInsertCase> k_cache_insert_case() { return draw_case<KCacheInsertCase>(); }
}  // namespace gen

}  // namespace mlacheck
