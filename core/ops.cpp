// The op table (core/ops.h), read from core/ops.def.
#include "core/ops.h"

namespace mlacheck {

const std::vector<OpInfo>& spec_ops() {
  static const std::vector<OpInfo> ops = {
#define MLACHECK_OP(name, section, kernels, properties, tolerances, summary, fuzz_summary) \
  {#name, section, #kernels, #properties, tolerances, summary, fuzz_summary},
#include "core/ops.def"
#undef MLACHECK_OP
  };
  return ops;
}

const OpInfo* find_op(std::string_view name) {
  for (const OpInfo& op : spec_ops()) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

}  // namespace mlacheck
