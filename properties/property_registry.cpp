// The property registry and the case runner (properties/property_registry.h).
#include "properties/property_registry.h"

#include <algorithm>

#include "core/backend/backend.h"
#include "core/backend/host_executor.h"
#include "core/error.h"
#include "kernels/registry.h"

namespace mlacheck {

namespace {

// Hangs by work, not wall time (host backend): a block of an implementation that takes more than
// kFirstBlockSteps thread steps is weighed against the largest block <op>@ref launches for the
// same case. Past kWorkFactor times that it is a hang, whatever the build (a sanitizer slows each
// step, not their count): a loop whose work has nothing to do with the case's. A case whose own
// blocks are that large gives the implementation kWorkFactor times them, up to the options' limit.
constexpr uint64_t kFirstBlockSteps = uint64_t{1} << 20;
constexpr uint64_t kWorkFactor = 16;

std::string hang_by_work(const std::string& hang, uint64_t allowed, const std::string& ref, uint64_t ref_largest) {
  const std::string where = hang.substr(0, hang.find(" took "));  // "hang: kernel '...' block (...)"
  return where + " took over " + std::to_string(allowed) + " thread steps, more than " + std::to_string(kWorkFactor) +
         " times the largest block of " + ref + " on this case (" + std::to_string(ref_largest) +
         " steps): work out of all proportion to the case's, in any build (steps, not seconds)";
}

Verdict run_judging_work(const PropertyEntry& p, kernels::Device& device, Backend backend, const std::string& impl,
                         const std::string& ref, const CaseText& c) {
  std::string hang;
  try {
    const simt::host::ScopedWorkBudget first(simt::host::ScopedWorkBudget::kNoCap, kFirstBlockSteps);
    return p.run(device, impl, c);
  } catch (const simt::host::KernelHang& e) {
    hang = e.what();
  }
  uint64_t ref_largest = 0;
  bool ref_ran = false;
  {
    const simt::host::ScopedWorkBudget measure(simt::host::ScopedWorkBudget::kNoCap);
    try {
      const auto ref_device = kernels::make_device(backend);
      (void)p.run(*ref_device, ref, c);
      ref_ran = true;
    } catch (const std::exception&) {
      // the reference does not end either, or cannot run the case: nothing to weigh against
    }
    ref_largest = measure.largest_block();
  }
  const uint64_t allowed = std::max(kFirstBlockSteps, ref_largest * kWorkFactor);
  if (ref_ran && allowed == kFirstBlockSteps) return hang_by_work(hang, allowed, ref, ref_largest);
  const auto again = kernels::make_device(backend);
  try {
    const simt::host::ScopedWorkBudget second(simt::host::ScopedWorkBudget::kNoCap, ref_ran ? allowed : 0);
    return p.run(*again, impl, c);
  } catch (const simt::host::KernelHang& e) {
    if (!ref_ran || allowed >= simt::host::current_options().max_block_steps) throw;
    return hang_by_work(e.what(), allowed, ref, ref_largest);
  }
}

}  // namespace

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
  MLA_REQUIRE(kernels::device_usable(*b, &why), why);  // "cuda: not usable: no usable driver (...)"
  check_property_impl(p, r.impl);
  c.within(ignore_contract ? nullptr : kernels::registry().contract(r.impl));
  try {
    p.parse(c);  // a malformed case throws here, before anything runs
  } catch (const OutsideContract& e) {
    r.outside = e.what();
    return r;
  }
  const auto device = kernels::make_device(*b);
  const std::string ref = p.op + "@ref";
  try {
    r.verdict = *b == Backend::kHost && r.impl != ref ? run_judging_work(p, *device, *b, r.impl, ref, c)
                                                      : p.run(*device, r.impl, c);
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
