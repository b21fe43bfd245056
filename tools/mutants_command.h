// `mlacheck mutants [--only ID]... [flags]` (its flags: tools/flags.def, or `mlacheck mutants
// --help`): the kill matrix (--save writes each kill's
// case as DIR/<op>-<id>.case, for `mlacheck repro`). For each seeded-bug variant
// (kernels/mutants/, registered as <op>@<docs/bugs.md id>) it runs, until the first kill or the budget:
//   1. the property suite (up to a third of the budget): each of the op's properties on its
//      generator cases (the seed cases of corpus/<target>/) and then on --cases random cases (decoded from seeded random bytes through
//      the property's own case readers, fuzz/fuzz_input.h);
//   2. the corpus regressions of the op (corpus/regressions/);
//   3. random fuzzing of the op's target for the rest of the budget.
// When the first kill is not the check the variant's docs/bugs.md row names, that check is then run on
// its own (regressions, seeds, random cases) so the matrix shows whether it kills the variant too.
// Each variant runs in a child process (core/backend/isolate.h): a crash or a sticky GPU fault is
// a kill by that crash, not the end of the matrix.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace mlacheck {

// The check each variant's docs/bugs.md row names, by qualified name ("topk_decode@R4"): a property
// name. Every registered variant has one (a test checks it).
const std::string& named_check_of(const std::string& variant);

// Every seeded-bug variant in the registry ("<op>@<id>", id a docs/bugs.md id: a capital letter and
// digits), in registry order.
std::vector<std::string> seeded_variants();

struct SuiteResult;
// A surviving variant's run in exact counts: "N cases run, none failed", then the cases it did not
// run (beyond the Triton interpreter's reach, with the first reason; seed or regression cases
// outside the contract): a survivor whose killing case was among them never met it.
std::string survivor_text(const SuiteResult& r);

// Returns the exit status: 0 every variant killed, 1 one survived, 2 bad usage (one line on err).
int run_mutants_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace mlacheck
