// The interpreter's cost model and the watchdog's keep-alive (kernels/interpreter_cost.h).
#include "kernels/interpreter_cost.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <map>
#include <mutex>
#include <thread>

#include "core/contract.h"
#include "kernels/case_clock.h"

namespace mlacheck::kernels {
namespace {

// Runs fn while telling the suite's watchdog, for at most `seconds`, that the running case is
// alive (case_clock.h): time the case timeout must not count (a worker's start, an interpreted
// call's predicted time). After `seconds` the case timeout counts again, so a hang is still one.
class KeepAlive {
 public:
  template <class F>
  static auto during(double seconds, F&& fn) -> decltype(fn()) {
    KeepAlive k(seconds);
    return fn();
  }

 private:
  explicit KeepAlive(double seconds) : start_(std::chrono::steady_clock::now()), seconds_(seconds) {
    // Its first use here, before the thread: a fork while the thread initialized it would leave the
    // child waiting for good on the static's guard (kernels/python_worker.cpp, the worker's start).
    case_clock::state();
    thread_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(m_);
      while (!done_ && std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() < seconds_) {
        case_clock::alive();
        cv_.wait_for(lock, std::chrono::milliseconds(250));
      }
    });
  }
  ~KeepAlive() {
    {
      std::lock_guard<std::mutex> lock(m_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  KeepAlive(const KeepAlive&) = delete;
  KeepAlive& operator=(const KeepAlive&) = delete;

  const std::chrono::steady_clock::time_point start_;
  const double seconds_;
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};


constexpr double kInterpreterSafety = 4;        // the allowance, in predicted times
constexpr double kInterpreterReach = 0.5;       // of the case timeout: the largest predicted call run
constexpr double kInterpreterMinMeasured = 0.05;  // seconds: shorter calls measure the call path
constexpr double kFirstCallAllowance = 10;        // seconds: a process's first interpreted call
// Seconds per element a process's first call may take on top, before anything is measured: four
// times the cost of vLLM's Triton MLA decode in the interpreter (2.7 us an element of its tensors,
// 12 s for a case of 4.6 million, this 2-core machine, 2026-11-29), so a large first case of a
// kernel of that kind is not called hung; a sort-heavy kernel costs more per element but its cases
// hold far fewer (topk_triton.py: 1.6 ms an element, 12,447 elements at most).
constexpr double kUnmeasuredRate = 1e-5;

// What this implementation's run has measured of its interpreted calls (shared by its children
// through case_clock's cost file): the most seconds per element of a call that took at least
// kInterpreterMinMeasured (a process's first call not counted), and the most elements of any call.
struct Cost {
  double per_element = 0;  // of the time past the fastest call: what the elements cost
  double largest = 0;
  double fastest = 0;      // seconds of the quickest call (a process's first not counted): the call path
  double fastest_elements = 0;  // that call's elements: its time is the call path's only if it was small
  // Seconds per element for the allowance: the most measured; else, when every call so far was too
  // quick to time, the bound they give (kInterpreterMinMeasured over the most elements seen), so a
  // call far larger than any seen gets time in proportion, not just the case timeout.
  double allowance_rate() const {
    return per_element > 0 ? per_element : largest > 0 ? kInterpreterMinMeasured / largest : 0;
  }
};

Cost read_cost(const std::string& op) {
  Cost c;
  const std::string& file = case_clock::state().cost_file;
  if (file.empty()) return c;
  std::ifstream in(file + "." + op);
  if (!(in >> c.per_element >> c.largest >> c.fastest >> c.fastest_elements)) c = Cost{};
  return c;
}

void write_cost(const std::string& op, const Cost& c) {
  const std::string& file = case_clock::state().cost_file;
  if (file.empty()) return;
  const std::string tmp = file + "." + op + ".tmp" + std::to_string(getpid());
  std::ofstream(tmp) << std::setprecision(17) << c.per_element << ' ' << c.largest << ' ' << c.fastest << ' '
                     << c.fastest_elements << '\n';
  std::rename(tmp.c_str(), (file + "." + op).c_str());
}

}  // namespace

void interpreted_call(const std::string& op, int64_t elements, const std::function<void()>& call) {
  static std::map<std::string, Cost> seen;  // of this process, merged with the file's
  static std::map<std::string, int> calls;  // of this process
  const bool first = calls[op]++ == 0;      // pays Triton's lazy imports once: not measured
  Cost& c = seen[op];
  const Cost shared = read_cost(op);
  c.per_element = std::max(c.per_element, shared.per_element), c.largest = std::max(c.largest, shared.largest);
  if (shared.fastest > 0 && (c.fastest == 0 || shared.fastest < c.fastest)) {
    c.fastest = shared.fastest, c.fastest_elements = shared.fastest_elements;
  }
  const double timeout = case_clock::state().case_timeout;
  const double reach = case_clock::state().reach > 0 ? case_clock::state().reach : kInterpreterReach * timeout;
  // Only a measured rate skips a call; a bound from quick calls only lengthens the allowance (it
  // says little about a call a thousand times larger, and skipping on it would skip every case
  // larger than the seed cases).
  // The fastest call's time stands for the call path only as far as that call was small: when every
  // call so far was large (vLLM's MLA decode: 21 s at 1.6 million elements), a smaller call is
  // predicted in proportion to it, so it runs (and, quicker, becomes the fastest) instead of every
  // later case being skipped on that one large call's time.
  const double n = static_cast<double>(elements);
  const double path = c.fastest_elements > n ? c.fastest * n / c.fastest_elements : c.fastest;
  const double predicted = path + c.per_element * n;
  if (reach > 0 && predicted > reach) {
    char why[400];
    std::snprintf(why, sizeof why,
                  "beyond the Triton interpreter's reach: predicted %.1f s (%.2g s a call and %lld elements at %.3g ms "
                  "each, the most measured) past %.1f s (%s)",
                  predicted, path, static_cast<long long>(elements), c.per_element * 1e3, reach,
                  case_clock::state().reach > 0 ? "the fuzzing budget of a case" : "half the case timeout");
    throw OutsideContract(why);
  }
  const auto start = std::chrono::steady_clock::now();
  // A process's first call also pays Triton's lazy imports (0.15 s on an idle machine, seconds on a
  // loaded one): kFirstCallAllowance more.
  const double allowance = kInterpreterSafety * (c.fastest + c.allowance_rate() * n) + 1 +
                           (first ? kFirstCallAllowance + kUnmeasuredRate * n : 0);
  KeepAlive::during(allowance, call);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (elements > 0) {
    // A process's first call pays Triton's lazy imports: its size counts, its time does not. The
    // fastest call is the call path's own cost; what a call takes past it is its elements'.
    const bool faster = !first && (c.fastest == 0 || took < c.fastest);
    if (faster) c.fastest = took, c.fastest_elements = static_cast<double>(elements);
    const double beyond = took - c.fastest;
    const double per = !first && beyond >= kInterpreterMinMeasured ? beyond / static_cast<double>(elements) : 0;
    if (faster || per > c.per_element || static_cast<double>(elements) > c.largest) {
      c.per_element = std::max(c.per_element, per), c.largest = std::max(c.largest, static_cast<double>(elements));
      const Cost now = read_cost(op);
      const bool theirs = now.fastest > 0 && now.fastest < c.fastest;
      write_cost(op, Cost{std::max(c.per_element, now.per_element), std::max(c.largest, now.largest),
                          theirs ? now.fastest : c.fastest, theirs ? now.fastest_elements : c.fastest_elements});
    }
  }
}

void keep_alive_during(double seconds, const std::function<void()>& fn) { KeepAlive::during(seconds, fn); }

}  // namespace mlacheck::kernels
