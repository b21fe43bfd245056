// Properties by name, each runnable from a case file: what `mlacheck repro` runs, and what the
// fuzzers will apply to the cases they decode.
//
// A property is registered by the file that defines it (register_<op>_properties in
// properties/<op>_properties.h, called from property_registry_builtin.cpp); its run function reads
// the op's keys from the case text, makes the implementation named by impl, and returns the verdict.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kernels/device.h"
#include "properties/case_text.h"
#include "properties/view_properties.h"

namespace mlacheck {

struct PropertyEntry {
  std::string name;     // "<op>.<what holds>", e.g. "topk_decode.rows_admissible"
  std::string op;       // the op whose implementations it takes (a kernels::registry() op name)
  std::string summary;  // one line: what holds
  // Runs the property on device against the implementation impl ("op@name") with the case's own
  // keys (every key but property, impl and backend); throws mlacheck::Error for a malformed case
  // or an unknown implementation.
  std::function<Verdict(kernels::Device& device, const std::string& impl, const CaseText& c)> run;
};

class PropertyRegistry {
 public:
  // Throws mlacheck::Error if the name is taken.
  void add(PropertyEntry entry);
  // Throws mlacheck::Error naming the registered properties when there is none called name.
  const PropertyEntry& find(const std::string& name) const;
  const std::vector<PropertyEntry>& list() const { return entries_; }

 private:
  std::vector<PropertyEntry> entries_;
};

// Every built-in property.
const PropertyRegistry& property_registry();

// The outcome of rerunning one case.
struct ReproResult {
  std::string property, impl, backend;
  Verdict verdict;  // std::nullopt: the property holds
};
// Runs case c: its property on its backend and implementation unless backend / impl (not empty)
// override them. Throws mlacheck::Error for a malformed case, an unknown property or
// implementation, or a backend not usable here.
ReproResult run_case_text(const CaseText& c, const std::string& backend = "", const std::string& impl = "");

// The header every printed case starts with.
CaseText case_header(const std::string& property, const std::string& impl, const std::string& backend = "host");

}  // namespace mlacheck
