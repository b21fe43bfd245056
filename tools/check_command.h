// `mlacheck check [--impl OP@NAME]... [--plugin PATH]... [flags]` (its flags: tools/flags.def, or
// `mlacheck check --help`): runs implementations
// through their op's whole suite (tools/suite_runner.h: the properties on their seed cases and on
// random cases, the corpus regressions, then random fuzzing until the budget), each in a child
// process, and prints a table: PASS, or FAIL with the first failing check, its verdict and the case
// to rerun with `mlacheck repro`. The implementations are the --impl ones, else every one the
// plugins register, else every built-in <op>@ref.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace mlacheck {

// Returns the exit status: 0 every implementation passed, 1 one failed, 2 bad usage or setup (one
// line on err: an unknown implementation, a plugin that cannot be loaded, a backend not usable).
int run_check_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace mlacheck
