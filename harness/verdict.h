// The verdict every check returns: std::nullopt when the property holds, or one line saying how it
// failed. Properties, the testbed, the fuzzers and the command line all speak it.
#pragma once

#include <optional>
#include <string>

namespace mlacheck {

using Verdict = std::optional<std::string>;

}  // namespace mlacheck
