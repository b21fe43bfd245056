// Every float output's comparison tolerance, in one table, each with the reason for its size.
//
// Integer outputs (metadata, indices) are compared exactly and have no entry. The sizes assume
// the generators' data: fp8 inputs from values of magnitude about 1 and outputs of magnitude up to
// about 100. A tolerance may only change with its reason, never to make a failing check pass.
#pragma once

#include <string_view>
#include <vector>

#include "core/compare.h"

namespace mlacheck {

struct ToleranceEntry {
  std::string_view op;      // docs/ops.md op name
  std::string_view output;  // output tensor name
  Tolerance tolerance;
};

const std::vector<ToleranceEntry>& tolerance_table();

// The tolerance of op's output; throws mlacheck::Error naming the known entries if there is none.
const Tolerance& tolerance_for(std::string_view op, std::string_view output);

}  // namespace mlacheck
