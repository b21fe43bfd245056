// The ops of docs/ops.md: the names used by the registry, the command line, case files and test names.
#pragma once

#include <string_view>
#include <vector>

namespace mlacheck {

struct OpInfo {
  std::string_view name;     // "paged_mqa_logits"
  std::string_view section;  // docs/ops.md section, "2.1"
  std::string_view summary;  // one line
};

// Every op of docs/ops.md, in the order the spec defines them.
const std::vector<OpInfo>& spec_ops();
// The op named name, or nullptr.
const OpInfo* find_op(std::string_view name);

}  // namespace mlacheck
