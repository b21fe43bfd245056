// Properties and their registry, the case header, and which implementations a property runs on
// (harness/property.h).
#include "harness/property.h"

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
  MLA_REQUIRE(kernels::registry().contains(impl), "no implementation called '", impl, "' (mlacheck list shows them",
              impl.size() > 3 && impl.compare(impl.size() - 3, 3, "@py") == 0 ? "; a Python callable's needs --python" : "",
              ")");
  MLA_REQUIRE(!p.ref_only || impl == p.op + "@ref", "property ", p.name,
              " drives the ref kernel's own paths: it runs on ", p.op, "@ref only, not '", impl, "'");
}

}  // namespace mlacheck
