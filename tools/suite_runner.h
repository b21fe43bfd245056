// The suite runner behind `mlacheck mutants` and `mlacheck check`: one implementation ("op@name")
// against its op's property suite, in a child process (core/backend/isolate.h), until the budget:
//   1. the property suite (up to a third of the budget): each of the op's properties on its seed
//      cases (corpus/<target>/), then on `cases` random cases each (decoded from seeded random
//      bytes through the property's own case readers, fuzz/fuzz_input.h; for a C++ implementation a
//      quarter of them a seed case's bytes with one to four bytes changed);
//   2. the corpus regressions of the op (corpus/regressions/);
//   3. random fuzzing of the op's target for the rest of the budget.
// check judges every property (SuiteOptions::every_property): a property that fails is reported
// with its first case and left out from then on, and the others run on; a child that crashes,
// hangs or loses the device context ends, and a fresh one goes on without that property. mutants
// (and check --fail-fast) stop at the first failure.
// A failure counts only if <op>@ref passes the same case; otherwise it is the suite's own false
// positive, counted apart with its case. A crash, a hang or a lost device context (a CUDA sticky
// fault) of the child is a failure by that, its check "crashed", "hang" or "crashed
// (cudaErrorIllegalAddress)", with the case it ran, once <op>@ref has passed that case in a fresh
// child. A case past the case timeout is a hang when <op>@ref, in a fresh child, ran it in under a
// sixteenth of the case timeout (on a GPU; on the host the kernels' hangs are told by their steps,
// properties/property_registry.h), or when, run again alone with four times as long, it still does
// not end; if it ends and holds it was a slow case (counted, never a failure).
// The budget holds (a row ends within 5% of it) except for a case still running at its end: that
// case is given up to the case timeout, so a kernel that never returns is FAIL hang under every
// budget, never a pass. Only a child still starting (a Python worker) is cut at the budget's end.
// When a named property is given and the first failure was another, the named property is then
// run alone (regressions, seeds, random cases) for what is left of the budget. With a contract
// probe, the suite takes three quarters of the budget and the probe the rest.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>


namespace mlacheck {

struct SuiteOptions {
  std::string backend = "host";
  double budget = 60;  // seconds
  int cases = 20;      // random cases per property in stage 1
  uint64_t seed = 1;   // of the random cases
  std::string corpus;  // "": $MLACHECK_CORPUS_DIR, else the source tree's corpus/
  // Also run cases just outside the implementation's contract (the last quarter of the budget, in a
  // child of its own) and report them apart, never as the failure.
  bool contract_probe = false;
  // One case running longer than this is a hang: "hang", a failure with its case (when <op>@ref
  // runs it within this time). 0: a third of the budget, within 10 to 60 s.
  double case_timeout = 0;
  // Run only these properties (their seed cases, their regressions, random cases of them in turn
  // for the rest of the budget); empty: every property of the op.
  std::vector<std::string> only;
  bool selected(const std::string& property) const {
    return only.empty() || std::find(only.begin(), only.end(), property) != only.end();
  }
  // Make a failing random case smaller before reporting it (check does; mutants, which counts
  // kills, does not).
  bool shrink = false;
  // Seconds a child spends starting the implementation before its first case (a Python worker:
  // the interpreter, torch, the module; measured when the callables were loaded): the row's clock
  // starts that much later, so a budget counts cases, not starts. 0 for C++ implementations.
  double start_seconds = 0;
  // Judge every property: after a property's first failure, leave it out and run the others on
  // (check); false: stop at the first failure (mutants, which counts kills; check --fail-fast).
  bool every_property = false;
  // Random fuzzing after the regressions until the budget ends (check); false (check --no-fuzz): the
  // run ends after the regressions, and the property suite may take the whole budget.
  bool fuzz = true;
};

// Throws mlacheck::Error with one line when impl's contract bounds a name that is neither a term of
// its op nor a key of the op's cases (case_keys: its case schemas' keys; a misspelt clause would
// otherwise bound nothing); nothing to check without a contract.
void check_contract_names(const std::string& impl);

// The suite's flags of check and mutants (tools/flags.def): --backend, --budget, --case-timeout,
// --cases, --seed, --corpus, each as given or its command's default (F: flags::CheckFlags or
// flags::MutantsFlags, tools/flags_typed.h).
template <class F>
SuiteOptions suite_options(const F& f) {
  SuiteOptions o;
  o.backend = f.backend;
  o.budget = f.budget;
  o.case_timeout = f.case_timeout;
  o.cases = static_cast<int>(f.cases);
  o.seed = f.seed;
  o.corpus = f.corpus;
  return o;
}

// What failed: the stage ("properties", "regressions", "fuzz"), the check (a property, or how the
// child ended), its verdict line, when, and the case (a case file, for `mlacheck repro`).
struct SuiteFinding {
  std::string stage, check, verdict;
  double seconds = 0;
  std::string case_text;
  // A random case's draw (its property, "" for the fuzz stage's any, and its index), so a child of
  // its own can shrink it; index -1 for a seed case, a regression or a crash.
  std::string random_property;
  int random_index = -1;
  // The property whose case failed (the check itself, or for a crash the property of its case).
  std::string property;
};

// What one property got in a row: the cases it ran, and those it did not take (outside the
// implementation's contract, or beyond the Triton interpreter's reach), with one reason: the first,
// unless a reason that is not the contract's comes later (a case the implementation cannot take at
// all, such as reserved memory a Python callable is not lent, says more than a case's value outside
// the contract: it may be why no case of the property ran).
struct PropertyTally {
  int cases = 0;
  int not_taken = 0;
  std::string not_taken_why;
  void add_not_taken(int count, const std::string& why);
};

struct SuiteResult {
  std::string impl, op, summary;
  std::string named = "(none)";  // the property run alone after another first failure
  bool failed = false;
  SuiteFinding first;
  // The first failure of each further property, in the order found (check judges every property).
  std::vector<SuiteFinding> more;
  // The properties the row judges (its op's, or the one --property names), and what each got.
  std::vector<std::string> properties;
  std::map<std::string, PropertyTally> tally;
  int cases_run = 0;
  double seconds = 0;  // the row's time, from its start to its end (shrinking and the probe included)
  std::string named_result = "not run";  // "first kill", "killed", "survived", "not named", ...
  std::string named_verdict;
  // Cases that failed on the implementation and on <op>@ref too: the suite's own false positives.
  int false_positives = 0;
  std::string false_positive, false_positive_case;
  // Seed and regression cases outside the implementation's contract: not run.
  int outside_contract = 0;
  // Cases a Triton kernel in the interpreter would take too long on (kernels/python_bridge.cpp):
  // not run, neither pass nor failure; the first one's reason.
  int beyond_reach = 0;
  std::string beyond_reach_why;
  // The contract probe (SuiteOptions::contract_probe): cases outside the contract that ran, those
  // that failed (or crashed: the probe stops there), and the first of them.
  int probe_cases = 0, probe_failures = 0;
  SuiteFinding probe_first;
  std::string probe_note;  // why no probe ran ("the implementation declares no contract"), or ""
  // The budget ended while the child was still starting (no case judged there), or "".
  std::string budget_note;
  // Cases that ran past the case timeout on <op>@ref too, or that ran again alone with four times
  // as long and ended and held: slow, not hangs (never a failure); the first one's line.
  int slow_cases = 0;
  std::string slow_case;
  // The run stopped at its first failure (--fail-fast: SuiteOptions::every_property off), so the
  // properties without a case were not run, not starved of time.
  bool stopped_at_first_failure = false;
  // Why a property the row did not judge got no case, in words: cases not taken (and why), its
  // case failing on the reference, the first failure stopping the run, or the budget.
  std::string no_case_reason(const std::string& property) const;
  // No failure, but no case ran either (the budget ended first, or the contract left none): never a
  // PASS. check says NO RUN and exits 1.
  bool ran_nothing() const { return !failed && cases_run == 0; }
  // Why no case ran, one line: the budget note when the budget ended in the child's start.
  std::string ran_nothing_reason() const {
    return "no case ran within the budget" + (budget_note.empty() ? std::string() : " (" + budget_note + ")");
  }
  // The properties of the row that neither failed nor ran a case: not judged.
  std::vector<std::string> unjudged() const;
  // Some cases ran and nothing failed, but a property ran none: never a PASS. check says PARTIAL
  // and exits 1.
  bool partial() const { return !failed && cases_run > 0 && !unjudged().empty(); }
  // A case that failed here failed on <op>@ref too: the suite (its oracle, a generator, the
  // reference) is wrong there. Never a pass, whatever the implementation did elsewhere.
  bool suite_defect() const { return false_positives > 0; }
  bool passed() const { return !failed && cases_run > 0 && unjudged().empty() && !suite_defect(); }
  // One line: each property not judged and why ("topk_decode.far_rows: no case ran (12 not taken:
  // <reason>)"), "; " between them; "" when every property was judged.
  std::string unjudged_reason() const;
  // Every failure: first, then more.
  std::vector<const SuiteFinding*> findings() const;
};

// Runs impl through the suite (see the top of this file). Throws mlacheck::Error with one line when
// the run's own setup fails in the child (a malformed corpus case, a backend not usable there).
SuiteResult run_suite(const SuiteOptions& o, const std::string& impl, const std::string& named = "(none)");

// The corpus folder: corpus if not empty, else $MLACHECK_CORPUS_DIR, else share/mlacheck/corpus
// beside the running mlacheck's bin/ (an install or a GPU bundle), else the source tree's.
std::string corpus_root(const std::string& corpus);

}  // namespace mlacheck
