// Fuzz targets and their inputs: which properties each libFuzzer harness applies, how its input
// bytes decode to a case, and how a case file encodes back to bytes.
//
// An input's first value (harness/case_bytes.h) picks one of the target's properties; that
// property's parse function, run over a CaseText drawing from the rest of the bytes, reads every
// other value (harness/case_text.h). So any bytes decode, deterministically, to a case within
// the ranges the parse functions state, or to a one-line refusal when the drawn values break a rule
// no range expresses. Encoding runs the same parse function over the case's text and records the
// bytes each value takes, so regression and seed cases in corpus/ seed the fuzzers.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "harness/case_text.h"
#include "properties/property_registry.h"

namespace mlacheck {

struct FuzzTarget {
  std::string name;     // the harness is fuzz/<name>_fuzzer
  std::string op;       // the op whose properties it applies (a kernels::registry() op name)
  std::string summary;  // one line
};

// One target per op of the op table (core/ops.def), named after it, in its order.
const std::vector<FuzzTarget>& fuzz_targets();
// Throws mlacheck::Error naming the targets when there is none called name.
const FuzzTarget& find_fuzz_target(const std::string& name);
// The target whose harness applies property (its op's).
const FuzzTarget& fuzz_target_of(const PropertyEntry& property);
// The target's properties, in registry order: an input's first value indexes this list.
std::vector<const PropertyEntry*> fuzz_target_properties(const FuzzTarget& target);

struct FuzzCase {
  CaseText text;                      // property, impl, backend, then every key the property read
  const PropertyEntry* property = nullptr;
  bool from_text = false;             // the input was a case file, not raw bytes
};

// Decodes one input of target's harness: a case file of one of its properties (text with a line
// "property P", wherever it is, that parses) is read as text; anything else decodes as bytes. impl
// and backend fill the header (a case file's own are kept unless they are given). Throws
// mlacheck::Error with one line when the case is refused; for a case file, a refusal about a key
// names its line ("case line 12: 'k' is 0, outside [1, 8]").
FuzzCase decode_fuzz_input(const FuzzTarget& target, std::string_view input, const std::string& impl,
                           const std::string& backend);
// Every key the cases of op's properties hold (the header's property, impl and backend left out):
// their schemas' fields, read by decoding a few inputs of each property of the op's target. What a
// contract may bound besides the op's terms (check_contract_names).
std::set<std::string> case_keys(const std::string& op);

// The bytes that decode (with decode_fuzz_input of its property's target) to case c. Throws
// mlacheck::Error with one line for a malformed case.
std::string encode_fuzz_input(std::string_view case_file);

}  // namespace mlacheck
