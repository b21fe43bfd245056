// Cases of the indexer's K-cache insert (properties/k_cache_insert_gen.h).
#include "properties/k_cache_insert_gen.h"

namespace mlacheck {

std::vector<int32_t> KCacheInsertCase::slot_mapping() const {
  std::vector<int32_t> s(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) {
    s[static_cast<size_t>(i)] =
        padding[static_cast<size_t>(i)] ? -1 : static_cast<int32_t>(block_base * block_size + slot_order[static_cast<size_t>(i)]);
  }
  return s;
}

KCacheInsertCase k_cache_insert_from_text(const CaseText& t) { return read_case<KCacheInsertCase>(t); }
KCacheInsertCase k_cache_insert_far_from_text(const CaseText& t) {
  gen::KCacheInsertShape far;
  far.far_slots = true;
  return read_case<KCacheInsertCase>(t, far);
}

namespace gen {
rc::Gen<KCacheInsertCase> k_cache_insert_case(KCacheInsertShape shape) { return draw_case<KCacheInsertCase>(2, shape); }
}  // namespace gen

}  // namespace mlacheck
