// The table of every seeded bug (docs/bugs.md's rows that mlacheck seeds), read from the per-op bugs
// tables kernels/<family>_bugs.def, which also give each kernel's bug parameter enum its values:
// a bug is named once, with the check that must catch it. The kill matrix (tools/mutants_command.cpp)
// reads its named checks and needs from here; tests/tools/mutants_test.cpp checks that every row is
// a registered variant and every registered variant a row.
#pragma once

#include <vector>

namespace mlacheck::kernels {

struct SeededBug {
  const char* variant;  // op@ID, as registered (kernels/mutants/)
  const char* check;    // the property carrying the check its docs/bugs.md row names
  bool needs_read_fence;  // a read past a view whose values are never used: seen by a read fence only
};

inline const std::vector<SeededBug>& seeded_bugs() {
#define MLACHECK_NEEDS_any false
#define MLACHECK_NEEDS_read_fence true
#define MLACHECK_BUG(variant, check, needs, enumerator) {variant, check, MLACHECK_NEEDS_##needs},
#define MLACHECK_HOOK_BUG(variant, check) {variant, check, false},
  static const std::vector<SeededBug> rows = {
#include "kernels/decode_metadata_bugs.def"
#include "kernels/topk_bugs.def"
#include "kernels/indexer_decode_step_bugs.def"
#include "kernels/mla_decode_bugs.def"
#include "kernels/mla_decode_impl_bugs.def"
#include "kernels/k_cache_insert_bugs.def"
#include "kernels/k_cache_gather_bugs.def"
#include "kernels/paged_mqa_logits_bugs.def"
#include "kernels/sparse_mla_bugs.def"
#include "kernels/pack_decode_bugs.def"
  };
#undef MLACHECK_BUG
#undef MLACHECK_HOOK_BUG
#undef MLACHECK_NEEDS_any
#undef MLACHECK_NEEDS_read_fence
  return rows;
}

}  // namespace mlacheck::kernels
