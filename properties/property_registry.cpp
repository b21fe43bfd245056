// The property registry and the case runner (properties/property_registry.h).
#include "properties/property_registry.h"

#include "core/backend/backend.h"
#include "core/backend/host_executor.h"
#include "core/error.h"
#include "kernels/registry.h"

namespace mlacheck {

std::string outside_contract(const CaseText& c, const std::string& impl) {
  const PropertyEntry& p = property_registry().find(c.word("property"));
  check_property_impl(p, impl);
  CaseText t = c;
  if (t.has(kMaxMbKey)) t.integer(kMaxMbKey, 1, int64_t{1} << 30);  // the memory it took (repro's), not the case's
  if (t.has(kCaseTimeoutKey)) t.integer(kCaseTimeoutKey, 1, 3600);  // repro's, not the case's
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
  if (c.has(kMaxMbKey)) c.integer(kMaxMbKey, 1, int64_t{1} << 30);  // the memory it took (repro's), not the case's
  if (c.has(kCaseTimeoutKey)) c.integer(kCaseTimeoutKey, 1, 3600);  // the time it was given (repro's)
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
  } catch (const OutsideContract& e) {
    r.outside = e.what();  // the device cannot stage the case (Device::reserve): not run
  } catch (const ContextLost& e) {
    r.fault = e.fault();
    r.verdict = "crashed (" + e.fault() + "): " + e.what();
  } catch (const simt::host::KernelHang& e) {
    r.verdict = e.what();  // "hang: kernel '...' block (...) took ... thread steps ..."
  } catch (const simt::host::SharedHazard& e) {
    r.verdict = e.what();  // "race: kernel '...' block (...) thread (...) reads what thread (...) wrote to ..."
  } catch (const Error& e) {
    // The case is well formed, so a throw is the implementation's: it refused a valid case, or
    // faulted (a host kernel fault, a device fault).
    r.verdict = std::string("the implementation threw: ") + e.what();
  }
  return r;
}

}  // namespace mlacheck
