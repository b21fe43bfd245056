// One fuzz input through its target's property (fuzz/fuzz_runner.h).
#include "fuzz/fuzz_runner.h"

#include <chrono>
#include <exception>
#include <optional>
#include <utility>

#include "core/backend/host_executor.h"
#include "core/contract.h"
#include "core/error.h"
#include "harness/staged_buffer.h"

namespace mlacheck::fuzz {

namespace {

// A device whose allocations for one case may total at most a budget: past it, allocate throws and
// the case is skipped (fuzzing is for many small cases; large ones belong to the property suite).
class BudgetDevice final : public kernels::Device {
 public:
  BudgetDevice(kernels::Device& inner, int64_t budget) : inner_(inner), budget_(budget) {}
  Backend backend() const override { return inner_.backend(); }
  std::unique_ptr<GuardedMemory> allocate(const std::string& name, int64_t bytes) override {
    charge(name, bytes);
    return inner_.allocate(name, bytes);
  }
  // Reserved memory counts the bytes it backs.
  std::unique_ptr<GuardedMemory> reserve(const std::string& name, int64_t bytes, const std::vector<ByteSpan>& backed,
                                         bool writable) override {
    int64_t staged = 0;
    for (const ByteSpan& r : backed) staged += r.size();
    charge(name, staged);
    return inner_.reserve(name, bytes, backed, writable);
  }
  void* stream() const override { return inner_.stream(); }
  void synchronize() override { inner_.synchronize(); }
  int64_t multiprocessors() const override { return inner_.multiprocessors(); }
  std::unique_ptr<kernels::DeviceGraph> capture(const std::function<void()>& body) override {
    return inner_.capture(body);
  }
  std::shared_ptr<void> hold_freed_memory() override { return inner_.hold_freed_memory(); }
  std::vector<std::string> writes_to_freed_memory() override { return inner_.writes_to_freed_memory(); }
  bool exceeded() const { return exceeded_; }

 private:
  void charge(const std::string& name, int64_t bytes) {
    used_ += bytes;
    if (used_ > budget_) {
      exceeded_ = true;
      throw Error("fuzz: case needs over " + std::to_string(budget_ >> 20) + " MiB (" + name + ")");
    }
  }
  kernels::Device& inner_;
  int64_t budget_, used_ = 0;
  bool exceeded_ = false;
};

}  // namespace

FuzzRunner::FuzzRunner(const FuzzTarget& target, std::string impl, std::string backend, kernels::Device& device,
                       FuzzBudgets budgets)
    : target_(target), impl_(std::move(impl)), backend_(std::move(backend)), device_(device), budgets_(budgets) {}

std::optional<uint64_t> FuzzRunner::ref_work(const FuzzCase& fc) {
  BudgetDevice device(device_, budgets_.bytes);
  simt::host::ScopedWorkBudget work(budgets_.max_steps);
  ScopedStagingBudget staging(budgets_.bytes);
  try {
    (void)fc.property->run(device, target_.op + "@ref", fc.text);
  } catch (const std::exception&) {
    return std::nullopt;  // the reference cannot run it within the budgets either: a large case
  }
  if (work.exceeded() || device.exceeded() || staging.exceeded()) return std::nullopt;
  return work.steps();
}

FuzzOutcome FuzzRunner::run(std::string_view input) {
  FuzzOutcome out;
  try {
    out.fc = decode_fuzz_input(target_, input, impl_, backend_);
  } catch (const Error&) {
    out.kind = FuzzOutcome::kRefused;
    return out;
  }
  if (out.fc.property->ref_only && impl_ != target_.op + "@ref") {
    out.kind = FuzzOutcome::kSkipped;
    return out;
  }
  BudgetDevice device(device_, budgets_.bytes);
  // On the host backend a case's kernels may take at most max_steps GPU-thread steps; the rare
  // larger case is given up like one past the memory budget (the property suite covers those).
  std::optional<simt::host::ScopedWorkBudget> work;
  if (budgets_.max_steps > 0) work.emplace(budgets_.max_steps);
  ScopedStagingBudget staging(budgets_.bytes);  // the device's budget, checked before the data is made
  const auto over_budget = [&] { return device.exceeded() || staging.exceeded() || (work && work->exceeded()); };
  const auto start = std::chrono::steady_clock::now();
  const auto violation = [&](std::string verdict) {
    out.kind = FuzzOutcome::kViolation;
    out.verdict = std::move(verdict);
    return out;
  };
  Verdict verdict;
  bool unstageable = false;
  try {
    verdict = out.fc.property->run(device, impl_, out.fc.text);
  } catch (const OutsideContract&) {
    unstageable = true;  // the device cannot stage the case (Device::reserve on cuda): skipped
  } catch (const simt::host::KernelHang& e) {
    return violation(e.what());  // "hang: ...": a loop that never ends, whatever the budgets
  } catch (const simt::host::SharedHazard& e) {
    return violation(e.what());  // "race: ...": two threads' unordered accesses of shared memory
  } catch (const std::exception& e) {
    // A parsed case that throws is the implementation's fault (a host kernel fault, a device
    // fault, a refused launch), unless it only outgrew a budget.
    if (!over_budget()) return violation(std::string("error: ") + e.what());
  }
  if (work && work->exceeded() && !unstageable && impl_ != target_.op + "@ref") {
    // Past the work budget: a large case, or a loop out of all proportion to the case (docs/bugs.md
    // H2)? <op>@ref's work on the same case under the same budget tells them apart, in any build.
    if (const auto ref_steps = ref_work(out.fc); ref_steps && *ref_steps * kWorkFactor <= budgets_.max_steps) {
      return violation("hang: the case's kernels took over " + std::to_string(budgets_.max_steps) +
                       " thread steps, more than " + std::to_string(kWorkFactor) + " times the " +
                       std::to_string(*ref_steps) + " that " + target_.op +
                       "@ref takes on it: work out of all proportion to the case's, in any build (steps, not seconds)");
    }
  }
  if (over_budget() || unstageable) {
    out.kind = FuzzOutcome::kSkipped;
    return out;
  }
  if (verdict) return violation(*verdict);
  out.kind = FuzzOutcome::kChecked;
  out.slow = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > budgets_.max_seconds;
  return out;
}

}  // namespace mlacheck::fuzz
