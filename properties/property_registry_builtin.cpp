// The built-in properties: each properties family of the op table (core/ops.def) registers its own
// with register_<family>_properties (properties/<family>_properties.h); the build lists the families
// (properties/CMakeLists.txt writes property_families.inc), so a new family is registered by its row.
#include "properties/property_registry.h"

#include <cstdlib>

#include "core/error.h"
#include "harness/testbed.h"

namespace mlacheck {

#define MLACHECK_PROPERTY_FAMILY(family) void register_##family##_properties(PropertyRegistry& r);
#include "property_families.inc"
#undef MLACHECK_PROPERTY_FAMILY

namespace {

// Launches of one case in <op>.deterministic: MLACHECK_DETERMINISM_LAUNCHES, else 20 on a GPU and 4
// on the host backend (where each later launch runs under a shuffled schedule of its own).
int determinism_launches(const kernels::Device& device) {
  if (const char* v = std::getenv("MLACHECK_DETERMINISM_LAUNCHES")) {
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    MLA_REQUIRE(*v != '\0' && *end == '\0' && n >= 2 && n <= 1000, "MLACHECK_DETERMINISM_LAUNCHES is '", v,
                "', not a count of launches from 2 to 1000");
    return static_cast<int>(n);
  }
  return device.backend() == Backend::kHost ? 4 : 20;
}

// <op>.deterministic from the property that checks the op's outputs against the oracle: the same
// cases, each launched determinism_launches() times (harness/testbed.h, ScopedRepeats). Only ops
// whose launches are stateless: a second launch of the same case must write the same bits. Top-k
// (docs/ops.md 3: any order within a row) must select the same set per row (Sameness::kRowSets).
void register_determinism(PropertyRegistry& reg) {
  for (const char* base : {"paged_mqa_logits.equals_oracle", "mqa_logits.equals_oracle", "sparse_mla_decode.equals_oracle",
                           "mla_decode.equals_oracle", "pack_decode.slots_left_aligned", "unpack_decode.inverts_pack",
                           "topk_to_global.equals_oracle", "indexer_k_cache_insert.equals_oracle",
                           "indexer_k_cache_gather.equals_oracle", "topk_decode.rows_admissible", "topk_prefill.rows_admissible"}) {
    PropertyEntry e = reg.find(base);
    e.name = e.op + ".deterministic";
    e.summary = "the cases of " + std::string(base) +
                ", each launched again and again (20 times on a GPU, 4 on the host under shuffled schedules): bit-identical outputs" +
                (e.op.rfind("topk_", 0) == 0 && e.op != "topk_to_global" ? " (each row's selection as a set)" : "");
    e.run = [run = e.run](kernels::Device& device, const std::string& impl, const CaseText& c) {
      const ScopedRepeats repeats(determinism_launches(device));
      return run(device, impl, c);
    };
    reg.add(std::move(e));
  }
}

}  // namespace

const PropertyRegistry& property_registry() {
  static const PropertyRegistry r = [] {
    PropertyRegistry reg;
#define MLACHECK_PROPERTY_FAMILY(family) register_##family##_properties(reg);
#include "property_families.inc"
#undef MLACHECK_PROPERTY_FAMILY
    register_determinism(reg);
    return reg;
  }();
  return r;
}

}  // namespace mlacheck
