// A property: a named check of one op, runnable from a case file. Its two halves are a parse
// function (the case's keys, read from a CaseText, which is also how fuzz bytes decode and case
// files encode) and a check (the verdict of running an implementation on the case). The registry of
// the built-in ones is properties/property_registry.h.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "harness/case_text.h"
#include "harness/verdict.h"
#include "kernels/device.h"

namespace mlacheck {

struct PropertyEntry {
  std::string name;     // "<op>.<what holds>", e.g. "topk_decode.rows_admissible"
  std::string op;       // the op whose implementations it takes (a kernels::registry() op name)
  std::string summary;  // one line: what holds
  bool ref_only = false;  // drives the ref kernel's own paths: runs on <op>@ref only
  // Reads every key of the case's own (all but property, impl and backend) and checks they make a
  // case of this property, running nothing; throws mlacheck::Error with one line if not. Over a
  // drawing CaseText this is the fuzz input decoder; over an encoding one, the encoder.
  std::function<void(const CaseText& c)> parse;
  // Parses the case and runs the property on device against the implementation impl ("op@name");
  // throws mlacheck::Error for a malformed case or an unknown implementation.
  std::function<Verdict(kernels::Device& device, const std::string& impl, const CaseText& c)> run;
};

// A property from its two halves: parse reads the case from the text (every key it reads, and
// nothing else, makes the case), check runs it. Keys parse does not read are refused.
template <class Case>
PropertyEntry make_property(std::string name, std::string op, std::string summary,
                            std::function<Case(const CaseText&)> parse,
                            std::function<Verdict(kernels::Device&, const std::string& impl, const Case&)> check) {
  PropertyEntry e;
  e.name = std::move(name), e.op = std::move(op), e.summary = std::move(summary);
  e.parse = [parse](const CaseText& t) {
    parse(t);
    t.expect_all_read();
  };
  e.run = [parse, check](kernels::Device& device, const std::string& impl, const CaseText& t) {
    const Case c = parse(t);
    t.expect_all_read();
    return check(device, impl, c);
  };
  return e;
}
// The same, for a property that runs on <op>@ref only (it drives the ref kernel's own paths).
template <class Case>
PropertyEntry make_ref_property(std::string name, std::string op, std::string summary,
                                std::function<Case(const CaseText&)> parse,
                                std::function<Verdict(kernels::Device&, const std::string& impl, const Case&)> check) {
  PropertyEntry e = make_property<Case>(std::move(name), std::move(op), std::move(summary), std::move(parse),
                                        std::move(check));
  e.ref_only = true;
  return e;
}

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

// Throws mlacheck::Error unless impl ("op@name") is registered and property p can run on it: the
// op matches, and a ref-only property gets <op>@ref.
void check_property_impl(const PropertyEntry& p, const std::string& impl);

// The header every printed case starts with.
CaseText case_header(const std::string& property, const std::string& impl, const std::string& backend = "host");

}  // namespace mlacheck
