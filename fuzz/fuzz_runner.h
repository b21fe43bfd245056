// One fuzz input through its target's property, as a harness runs it: the bytes decoded to a case
// (fuzz/fuzz_input.h), the case run on a device under the fuzzing budgets, and what came of it.
// The libFuzzer harnesses (fuzz/harness.h) and `mlacheck bench fuzz` (the throughput benchmark)
// share it, so the benchmark measures the harness's own work per input.
//
//   FuzzRunner runner(find_fuzz_target("topk_decode"), "topk_decode@ref", "host", *device, {});
//   FuzzOutcome o = runner.run(bytes);   // o.kind: refused, skipped, checked or violation
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz/fuzz_input.h"
#include "kernels/device.h"

namespace mlacheck::fuzz {

// What one case may cost before it is given up as too large for fuzzing (the property suite runs
// those): device memory it allocates, and host bytes it stages before that; GPU-thread steps on the
// host backend (0: no cap); and the time past which a checked case counts as slow.
struct FuzzBudgets {
  int64_t bytes = int64_t{8} << 20;
  uint64_t max_steps = 200000;
  double max_seconds = 0.5;
};

struct FuzzOutcome {
  enum Kind {
    kRefused,    // the bytes break a case rule no range expresses
    kSkipped,    // past a budget, a ref-only property for another implementation, or not stageable here
    kChecked,    // the property ran and held
    kViolation,  // the property failed, or the implementation threw, hung or raced
  } kind = kRefused;
  bool slow = false;    // checked, but past max_seconds
  FuzzCase fc;          // the decoded case (when not refused)
  std::string verdict;  // kViolation: one line
};

class FuzzRunner {
 public:
  // impl: "op@name" of target's op; backend: the name the case header carries. device must
  // outlive the runner.
  FuzzRunner(const FuzzTarget& target, std::string impl, std::string backend, kernels::Device& device,
             FuzzBudgets budgets);
  FuzzOutcome run(std::string_view input);
  // A case past the work budget is a hang, not a large case, when <op>@ref takes under 1/kWorkFactor
  // of that budget on it (docs/design.md, "Hangs by work").
  static constexpr uint64_t kWorkFactor = 16;

 private:
  // <op>@ref's steps on fc within the budgets; nothing when it cannot run it within them.
  std::optional<uint64_t> ref_work(const FuzzCase& fc);

  const FuzzTarget& target_;
  std::string impl_, backend_;
  kernels::Device& device_;
  FuzzBudgets budgets_;
};

}  // namespace mlacheck::fuzz
