// Properties by name, each runnable from a case file: what `mlacheck repro` runs, and what the
// fuzzers will apply to the cases they decode.
//
// A property is registered by the file that defines it (register_<op>_properties in
// properties/<op>_properties.h, called from property_registry_builtin.cpp); its run function reads
// the op's keys from the case text, makes the implementation named by impl, and returns the verdict.
#pragma once

#include <string>

#include "harness/property.h"

namespace mlacheck {

// Every built-in property.
const PropertyRegistry& property_registry();

// The outcome of rerunning one case.
// The key of a saved case that records the memory it took when it failed, in MiB (the suite runner
// writes it when that is over the memory budget, harness/memory_budget.h; repro raises its budget
// to it unless --max-mb is given).
constexpr const char* kMaxMbKey = "max_mb";
// The key of a saved case that records the case timeout, in seconds, under which check or mutants
// found it hanging (written for a hang only): repro gives it that long, four times over as check's
// confirmation did, unless --case-timeout is given.
constexpr const char* kCaseTimeoutKey = "case_timeout";

struct ReproResult {
  std::string property, impl, backend;
  Verdict verdict;  // std::nullopt: the property holds
  // Not empty when the run lost the device context (mlacheck::ContextLost): the fault's name,
  // "cudaErrorIllegalAddress", and the verdict "crashed (<fault>): ...". No later case can run in
  // this process.
  std::string fault;
  // Not empty when the case lies outside the implementation's contract (core/contract.h): why.
  // Nothing ran, and verdict is empty: such a case is neither a pass nor a failure.
  std::string outside;
};
// Runs case c: its property on its backend and implementation unless backend / impl (not empty)
// override them. Throws mlacheck::Error for a malformed case, an unknown property or
// implementation, or a backend not usable here; an error the run throws for a well-formed case
// (the implementation refused it or faulted) is a violation, "the implementation threw: ...", and
// a lost device context is the violation "crashed (<fault>): ..." with ReproResult::fault set.
// The case is read within the contract of the implementation that runs (ReproResult::outside when
// it does not fit), unless ignore_contract. On the host backend an implementation other than
// <op>@ref whose block passes 2^20 thread steps is weighed against <op>@ref's largest block on the
// case: past 16 times it, the violation "hang: kernel ... took over N thread steps, more than 16
// times the largest block of <op>@ref on this case (M steps) ..." (docs/design.md, hangs by work).
ReproResult run_case_text(const CaseText& c, const std::string& backend = "", const std::string& impl = "",
                          bool ignore_contract = false);

// Why case c lies outside the contract of impl (core/contract.h), or "" when it lies inside. Runs
// nothing; throws mlacheck::Error for a malformed case or an unknown property or implementation.
std::string outside_contract(const CaseText& c, const std::string& impl);

}  // namespace mlacheck
