// The case that runs in this process, as the suite's watchdog sees it (tools/suite_runner.cpp): the
// progress file whose age is the running case's age, the case timeout, and the file where the
// children of one implementation's run share what a call of an interpreted kernel costs.
//
// The suite sets these in each child before its cases; an implementation whose calls are slow by
// nature (a Triton kernel in the interpreter, kernels/python_bridge.cpp) reads them to keep a correct
// slow case from being called a hang while a real hang still is one.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>

#include <string>

namespace mlacheck::case_clock {

struct State {
  std::string progress_file;  // "": no suite watches this process
  double case_timeout = 0;    // seconds; 0: no suite watches this process
  std::string cost_file;      // "": no shared measurements
  double reach = 0;           // seconds: the longest predicted call of an interpreted kernel that
                              // runs (kernels/interpreter_cost.h); 0: half the case timeout
};

inline State& state() {
  static State s;
  return s;
}

// Resets the running case's age: it is making progress the watchdog should not count.
inline void alive() {
  if (!state().progress_file.empty()) ::utimensat(AT_FDCWD, state().progress_file.c_str(), nullptr, 0);
}

}  // namespace mlacheck::case_clock
