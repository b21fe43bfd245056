// Child-process isolation of one check: fork, verdict through a pipe, timeout, signal and sticky-fault classification, case saving.
#include "core/backend/isolate.h"
#include "core/backend/isolate_hook.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <ucontext.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/error.h"
#include "core/reserved_buffer.h"

namespace mlacheck {

const char* isolated_outcome_name(IsolatedOutcome::Kind k) {
  switch (k) {
    case IsolatedOutcome::kPassed: return "passed";
    case IsolatedOutcome::kViolation: return "violation";
    case IsolatedOutcome::kStickyFault: return "sticky fault";
    case IsolatedOutcome::kCrashed: return "crashed";
    case IsolatedOutcome::kTimedOut: return "timed out";
  }
  return "?";
}

namespace {

// The child's message: one byte of IsolatedOutcome::Kind, then the message text.
void write_all(int fd, const std::string& s) {
  const char* p = s.data();
  size_t left = s.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent is gone; nothing to report to
    p += n;
    left -= static_cast<size_t>(n);
  }
}

// Runs in the child: never returns.
// The child's fault note: a byte no verdict kind uses, then one line on the faulting address,
// written to the verdict pipe just before the child dies of the fault.
constexpr char kFaultNote = '\xFE';
int g_fault_fd = -1;

void append(char* out, size_t n, size_t& k, const char* s) {
  while (*s && k + 1 < n) out[k++] = *s++;
}

// SIGSEGV or SIGBUS in the child: says what was touched (a reserved buffer's unbacked page or
// margin names the buffer: core/reserved_buffer.h), then dies of the signal as it would have.
// Async-signal-safe.
void on_fault(int sig, siginfo_t* info, void* context) {
  char line[512];
  size_t k = 0;
  line[k++] = kFaultNote;
  const char* access = "an access";
#if defined(__x86_64__) && defined(REG_ERR)
  // The page fault's error code: bit 1 is set for a write.
  const auto* uc = static_cast<const ucontext_t*>(context);
  access = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0 ? "a write" : "a read";
#else
  (void)context;
#endif
  append(line, sizeof line, k, access);
  char where[400];
  if (info != nullptr && describe_reserved_address(info->si_addr, where, sizeof where)) {
    append(line, sizeof line, k, " to ");
    append(line, sizeof line, k, where);
  } else {
    append(line, sizeof line, k, " to an address in no memory mlacheck reserved");
  }
  if (g_fault_fd >= 0) {
    const ssize_t ignored = ::write(g_fault_fd, line, k);
    (void)ignored;
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// On an alternate stack: the host backend runs GPU threads on small fiber stacks.
void install_fault_note(int fd) {
  g_fault_fd = fd;
  static char alternate[64 * 1024];
  stack_t st{};
  st.ss_sp = alternate;
  st.ss_size = sizeof alternate;
  ::sigaltstack(&st, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGSEGV, &sa, nullptr);
  ::sigaction(SIGBUS, &sa, nullptr);
}

[[noreturn]] void child_main(int fd, const std::function<std::string()>& check, const IsolationOptions& opts) {
  install_fault_note(fd);
  IsolatedOutcome::Kind kind = IsolatedOutcome::kPassed;
  std::string message;
  try {
    message = check();
    kind = message.empty() ? IsolatedOutcome::kPassed : IsolatedOutcome::kViolation;
  } catch (const std::exception& e) {
    if (dynamic_cast<const ContextLost*>(&e) != nullptr || (opts.is_sticky && opts.is_sticky(e))) {
      kind = IsolatedOutcome::kStickyFault;
      message = e.what();
    } else if (dynamic_cast<const Error*>(&e) != nullptr) {
      kind = IsolatedOutcome::kViolation;
      message = std::string("error: ") + e.what();
    } else {
      // Not a verdict of the check: its own code broke (bad_alloc, out_of_range...).
      kind = IsolatedOutcome::kCrashed;
      message = std::string("uncaught exception: ") + e.what();
    }
  } catch (...) {
    kind = IsolatedOutcome::kCrashed;
    message = "uncaught exception of a type not derived from std::exception";
  }
  write_all(fd, std::string(1, static_cast<char>(kind)) + message);
  ::close(fd);
  // Keep what the check printed, then leave without running the parent's exit handlers and static
  // destructors (test frameworks, CUDA's teardown), which belong to the parent.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  ::_exit(0);
}

// FNV-1a, 64 bits: a stable name for a case file.
std::string hash_name(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string save_case(const IsolationOptions& opts) {
  const std::string path = opts.save_dir + "/" + (opts.case_name.empty() ? hash_name(opts.case_text) : opts.case_name) + ".case";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << opts.case_text;
  out.close();
  MLA_REQUIRE(out.good(), "run_isolated: cannot write the case file '", path, "': ", std::strerror(errno));
  return path;
}

std::string signal_text(int sig) {
  std::ostringstream os;
  const char* name = ::strsignal(sig);
  os << "child died by signal " << sig << " (" << (name ? name : "unknown signal") << ")";
  return os.str();
}

// The message as one line: a verdict with newlines would break the one-line reports built on it.
std::string one_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

}  // namespace

namespace {
void (*after_child)(int) = nullptr;
}  // namespace

void set_after_isolated_child(void (*hook)(int pid)) { after_child = hook; }

IsolatedOutcome run_isolated(const std::function<std::string()>& check, const IsolationOptions& opts) {
  MLA_REQUIRE(check != nullptr, "run_isolated: no check given");
  MLA_REQUIRE(std::isfinite(opts.timeout_seconds) && opts.timeout_seconds > 0,
              "run_isolated: timeout_seconds must be positive, got ", opts.timeout_seconds);
  if (!opts.case_text.empty()) {
    // Checked before the run, so a typo in the folder is not found only after a long failing case.
    struct stat st;
    MLA_REQUIRE(!opts.save_dir.empty() && ::stat(opts.save_dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode),
                "run_isolated: the folder to save failing cases in, '", opts.save_dir,
                "', does not exist or is not a folder");
    MLA_REQUIRE(opts.case_name.find('/') == std::string::npos, "run_isolated: case name '", opts.case_name,
                "' holds a '/'; it names a file inside save_dir");
  }

  int fds[2];
  MLA_REQUIRE(::pipe2(fds, O_CLOEXEC) == 0, "run_isolated: pipe failed: ", std::strerror(errno));
  // Output buffered now would be printed twice, once by each process.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    MLA_REQUIRE(false, "run_isolated: fork failed: ", std::strerror(err));
  }
  if (pid == 0) {
    ::close(fds[0]);
    child_main(fds[1], check, opts);
  }
  ::close(fds[1]);

  // Read the verdict until the child closes its end (it exits, or dies), or time runs out.
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(opts.timeout_seconds));
  std::string received, watchdog_said;
  bool timed_out = false;
  for (;;) {
    const auto now = Clock::now();
    if (now >= deadline) {
      timed_out = true;
      break;
    }
    if (opts.watchdog && !(watchdog_said = opts.watchdog()).empty()) {
      timed_out = true;
      break;
    }
    // Rounded up, so the child always gets its whole time.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    pollfd p{fds[0], POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;  // poll timed out: look at the deadline again
    char buf[4096];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child is done or dead
    received.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (after_child != nullptr) after_child(static_cast<int>(pid));

  IsolatedOutcome out;
  if (timed_out) {
    out.kind = IsolatedOutcome::kTimedOut;
    std::ostringstream os;
    os << "child ran past the " << opts.timeout_seconds << " s timeout and was killed";
    out.message = watchdog_said.empty() ? os.str() : one_line(watchdog_said);
  } else if (WIFSIGNALED(status)) {
    out.kind = IsolatedOutcome::kCrashed;
    out.message = signal_text(WTERMSIG(status));
    if (!received.empty() && received[0] == kFaultNote) out.message += ": " + one_line(received.substr(1));
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || received.empty()) {
    // exit() or _exit() inside the check, or a sanitizer that reported and exited.
    out.kind = IsolatedOutcome::kCrashed;
    out.message = "child exited with status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                  " without a verdict (a sanitizer's or the runtime's report, if any, is on stderr)";
  } else {
    const auto kind = static_cast<unsigned char>(received[0]);
    MLA_REQUIRE(kind <= IsolatedOutcome::kTimedOut, "run_isolated: garbled verdict from the child");
    out.kind = static_cast<IsolatedOutcome::Kind>(kind);
    out.message = one_line(received.substr(1));
  }
  if (out.kind != IsolatedOutcome::kPassed && !opts.case_text.empty()) out.saved_case_path = save_case(opts);
  return out;
}

}  // namespace mlacheck
