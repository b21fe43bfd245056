// The property registry and the case runner (properties/property_registry.h).
#include "properties/property_registry.h"

#include "core/backend/backend.h"
#include "core/error.h"
#include "kernels/registry.h"

namespace mlacheck {

void PropertyRegistry::add(PropertyEntry entry) {
  for (const PropertyEntry& e : entries_) MLA_REQUIRE(e.name != entry.name, "property '", entry.name, "' registered twice");
  entries_.push_back(std::move(entry));
}

const PropertyEntry& PropertyRegistry::find(const std::string& name) const {
  std::string names;
  for (const PropertyEntry& e : entries_) {
    if (e.name == name) return e;
    names += (names.empty() ? "" : ", ") + e.name;
  }
  throw Error("no property called '" + name + "' (there are: " + names + ")");
}

CaseText case_header(const std::string& property, const std::string& impl, const std::string& backend) {
  CaseText c;
  c.set("property", property).set("impl", impl).set("backend", backend);
  return c;
}

void check_property_impl(const PropertyEntry& p, const std::string& impl) {
  const std::string op = impl.substr(0, impl.find('@'));
  MLA_REQUIRE(op == p.op, "property '", p.name, "' takes a ", p.op, " implementation, not '", impl, "'");
  MLA_REQUIRE(kernels::registry().contains(impl), "no implementation called '", impl, "' (mlacheck list shows them)");
  MLA_REQUIRE(!p.ref_only || impl == p.op + "@ref", "property ", p.name,
              " drives the ref kernel's own paths: it runs on ", p.op, "@ref only, not '", impl, "'");
}

std::string outside_contract(const CaseText& c, const std::string& impl) {
  const PropertyEntry& p = property_registry().find(c.word("property"));
  check_property_impl(p, impl);
  CaseText t = c;
  t.within(kernels::registry().contract(impl));
  try {
    p.parse(t);
  } catch (const OutsideContract& e) {
    return e.what();
  }
  return "";
}

ReproResult run_case_text(const CaseText& text, const std::string& backend, const std::string& impl,
                          bool ignore_contract) {
  CaseText c = text;
  ReproResult r;
  r.property = c.word("property");
  r.impl = c.word("impl");  // read even when overridden: the key is the case's, not unknown
  r.backend = c.word("backend");
  if (!impl.empty()) r.impl = impl;
  if (!backend.empty()) r.backend = backend;
  const PropertyEntry& p = property_registry().find(r.property);
  const auto b = parse_backend(r.backend);
  MLA_REQUIRE(b.has_value(), "backend '", r.backend, "' is not one of host, cuda, hip");
  std::string why;
  MLA_REQUIRE(kernels::device_usable(*b, &why), "backend ", r.backend, " is not usable here: ", why);
  check_property_impl(p, r.impl);
  c.within(ignore_contract ? nullptr : kernels::registry().contract(r.impl));
  try {
    p.parse(c);  // a malformed case throws here, before anything runs
  } catch (const OutsideContract& e) {
    r.outside = e.what();
    return r;
  }
  const auto device = kernels::make_device(*b);
  try {
    r.verdict = p.run(*device, r.impl, c);
  } catch (const ContextLost& e) {
    r.fault = e.fault();
    r.verdict = "crashed (" + e.fault() + "): " + e.what();
  } catch (const Error& e) {
    // The case is well formed, so a throw is the implementation's: it refused a valid case, or
    // faulted (a host kernel fault, a device fault).
    r.verdict = std::string("the implementation threw: ") + e.what();
  }
  return r;
}

}  // namespace mlacheck
