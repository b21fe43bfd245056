// Triton's interpreter on the host backend, as the Python bridge (kernels/python_bridge.cpp) runs
// it: a slow kernel is not a hung one.
//
// On the host backend a @triton.jit kernel runs in Triton's interpreter, thousands of times slower
// than on a GPU and in proportion to the elements it touches (docs/python.md, "Triton on the host":
// a sort of 2 x 64 keys 0.2 s, of 16 x 512 15.6 s). So a correct kernel's large case would outlive
// the case timeout and be called a hang. Instead, each call of an interpreted callable is measured:
// its seconds per element of the tensors it was handed (the most seen in this implementation's run,
// shared by its children through case_clock's cost file). With that figure known:
// - a call whose predicted time passes half the case timeout is not run: the case is beyond the
//   interpreter's reach, counted and said apart (OutsideContract), never a pass or a failure;
// - a call predicted to take P s may run 4 P + 1 s before the case timeout starts counting (the
//   watchdog is told the case is alive until then), so a real hang is still a hang, later by that.
// Before any call took long enough to time, the prediction of the allowance is the bound the quick
// calls give, and nothing is skipped. The quickest call's time is the call path's own only for calls
// at least as large as it: a smaller one is predicted in proportion, so one large first call does not
// get every later case skipped.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace mlacheck::kernels {

// Runs fn while telling the suite's watchdog, for at most `seconds`, that the running case is
// alive (case_clock.h): time the case timeout must not count (a worker's start, an interpreted
// call's predicted time). After `seconds` the case timeout counts again, so a hang is still one.
void keep_alive_during(double seconds, const std::function<void()>& fn);

// Runs call (one request of op's interpreted callable, handed tensors of `elements` elements in all)
// under the cost model above: throws OutsideContract ("beyond the Triton interpreter's reach: ...")
// instead of running a call predicted past half the case timeout; else runs it kept alive for its
// allowance, and records what it cost (case_clock's cost file, shared by the run's children).
void interpreted_call(const std::string& op, int64_t elements, const std::function<void()>& call);

}  // namespace mlacheck::kernels
