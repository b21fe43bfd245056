// Runs one check in a forked child process, so a crash, a hang or a sticky GPU fault becomes a verdict with the case saved.
//
// A CUDA kernel that touches an illegal address kills the CUDA context for the rest of the
// process (cuda::StickyFault), and a host kernel with a wild pointer kills the process. A fuzzer or
// a property run must survive both, report what happened and keep the input. run_isolated forks,
// runs the check in the child, and has the parent only supervise: it reads the child's verdict
// through a pipe, waits with a timeout, and turns a signal, a timeout or a sticky fault into an
// IsolatedOutcome.
//
// CUDA must not have been initialised in the parent before the fork (no CUDA call at all, not even
// cuda::probe_device): a CUDA context does not survive fork, and a child of an initialised parent
// cannot use CUDA. That is why the parent only supervises and the check does all the CUDA work.
// As with any fork without exec, the parent should not be running other threads that may hold
// locks the child needs (malloc's, stdio's) at the moment of the fork.
//
// POSIX only; no CUDA dependency (the caller classifies sticky faults through a hook).
#pragma once

#include <exception>
#include <functional>
#include <string>

namespace mlacheck {

struct IsolationOptions {
  // The child is killed (SIGKILL) once it has run this long. Must be > 0.
  double timeout_seconds = 60;
  // When the outcome is not kPassed and case_text is not empty, case_text is written to
  // save_dir/<case_name>.case (save_dir must be an existing folder; checked before forking).
  std::string case_text;
  std::string save_dir = ".";
  std::string case_name;  // "" names the file by a hash of case_text
  // Classifies an exception thrown by the check inside the child as a sticky fault (kStickyFault),
  // besides mlacheck::ContextLost, which always is one. nullptr: no other exception is sticky.
  std::function<bool(const std::exception&)> is_sticky = nullptr;
  // Asked about once a second while the child runs; a non-empty answer kills the child (SIGKILL)
  // and is the outcome's message, as kTimedOut (a case running past its own timeout, say, found
  // from a progress file's age). nullptr: only timeout_seconds ends a slow child.
  std::function<std::string()> watchdog = nullptr;
};

struct IsolatedOutcome {
  enum Kind {
    kPassed,       // the check returned ""
    kViolation,    // the check returned a verdict line, or threw an mlacheck::Error ("error: ...")
    kStickyFault,  // the check threw mlacheck::ContextLost, or an exception that opts.is_sticky accepts
    kCrashed,      // the child died by a signal, exited without a verdict, or threw a foreign exception
    kTimedOut,     // the child ran past opts.timeout_seconds, or opts.watchdog answered, and was killed
  } kind = kPassed;
  std::string message;          // one line; "" when passed
  std::string saved_case_path;  // where the case was saved, or ""
  bool passed() const { return kind == kPassed; }
};

// "passed", "violation", "sticky fault", "crashed", "timed out".
const char* isolated_outcome_name(IsolatedOutcome::Kind k);

// Runs check() in a child process and reports how it ended; check returns "" for a pass or a
// one-line verdict. Throws mlacheck::Error (before forking) for bad options, and if the pipe,
// the fork or saving the case fails.
IsolatedOutcome run_isolated(const std::function<std::string()>& check, const IsolationOptions& opts);

}  // namespace mlacheck
