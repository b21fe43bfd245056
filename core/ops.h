// The ops of docs/ops.md, from the op table core/ops.def: the names the registry, the command line,
// case files, fuzz targets and test names use, and where each op lives.
#pragma once

#include <string_view>
#include <vector>

namespace mlacheck {

// One row of the op table (core/ops.def, which says what each field is for).
struct OpInfo {
  std::string_view name;          // "paged_mqa_logits"
  std::string_view section;       // docs/ops.md section, "2.1"
  std::string_view kernels;       // kernels/<kernels>.h holds its entry point
  std::string_view properties;    // properties/<properties>_gen.h and _properties.h
  std::string_view tolerances;    // "op:output" tolerance entries, space-separated, or ""
  std::string_view summary;       // one line
  std::string_view fuzz_summary;  // one line: what its fuzz target explores
};

// Every op of docs/ops.md, in the order of core/ops.def.
const std::vector<OpInfo>& spec_ops();
// The op named name, or nullptr.
const OpInfo* find_op(std::string_view name);

}  // namespace mlacheck
