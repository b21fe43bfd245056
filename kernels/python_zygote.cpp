// How a Python worker's process comes to be (kernels/python_worker.cpp): an interpreter started
// directly, or a fork of the command's zygote, a Python process that imported torch once
// (python/mlacheck/_worker.py, zygote(), is its other end); and, for a worker that is not this
// process's child, how it ended.
#include "kernels/python_zygote.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/case_clock.h"
#include "kernels/python_worker.h"
#include "kernels/python_worker_source.h"  // kPythonWorkerSource: python/mlacheck/_worker.py

namespace mlacheck::kernels::python_worker {

// name as execvp would find it: itself when it holds a '/', else the first executable of that
// name in $PATH's folders, else name (execve then fails with ENOENT, said in one line).
std::string on_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr && *path ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return name;
}

// This process's environment for a worker: MLACHECK_PROGRESS_FILE is progress (the file whose age
// the suite's case timeout measures: the worker keeps it fresh while Triton compiles,
// python/mlacheck/_worker.py, Compiling), or absent when progress is empty.
std::vector<std::string> worker_environment(const std::string& progress) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "MLACHECK_PROGRESS_FILE=", 23) != 0) env.emplace_back(*e);
  }
  if (!progress.empty()) env.push_back("MLACHECK_PROGRESS_FILE=" + progress);
  return env;
}

// Starts `python -c <the worker's source> ARGS...` with keep_fd left open across the exec; returns 0
// and its pid, or the errno of a failed exec. The process dies with this one (PR_SET_PDEATHSIG), and
// its prints (the user's print()) go to stderr: stdout may be a report.
int spawn_python(const std::string& python, const std::vector<std::string>& args, int keep_fd, pid_t* pid_out) {
  const pid_t parent = getpid();
  // Everything the child needs is made here, before the fork: this process may have other
  // threads (KeepAlive, kernels/interpreter_cost.h), and a forked child may do nothing that takes a
  // lock one of them could hold (malloc, setenv, a function-local static's first use: a child
  // once hung for good on the guard of case_clock::state(), which a KeepAlive thread was
  // initializing at the fork). It only dup2s, fcntls and execves.
  std::vector<std::string> env_strings = worker_environment(case_clock::state().progress_file);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> words = {python, "-c", kPythonWorkerSource};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  int exec_error[2];  // close-on-exec: the child writes errno into it only when exec fails
  MLA_REQUIRE(pipe2(exec_error, O_CLOEXEC) == 0, "--python: pipe: ", std::strerror(errno));
  const pid_t pid = fork();
  MLA_REQUIRE(pid >= 0, "--python: fork: ", std::strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    dup2(2, 1);
    const int flags = fcntl(keep_fd, F_GETFD);
    fcntl(keep_fd, F_SETFD, flags & ~FD_CLOEXEC);
    execve(python.c_str(), argv.data(), envp.data());
    const int e = errno;
    (void)!write(exec_error[1], &e, sizeof e);
    _exit(127);
  }
  close(exec_error[1]);
  int e = 0;
  ssize_t k;
  while ((k = read(exec_error[0], &e, sizeof e)) < 0 && errno == EINTR) {
  }
  close(exec_error[0]);
  if (k == static_cast<ssize_t>(sizeof e)) {
    waitpid(pid, nullptr, 0);
    return e;
  }
  *pid_out = pid;
  return 0;
}

namespace {

// ---- the zygote ----------------------------------------------------------------------------------
// A command runs its cases in isolated children, and each gets a fresh worker (its state is that
// child's). Each would start an interpreter and import torch (about 2 s of CPU), so the command
// starts one zygote instead: a Python process that imports torch once and forks a worker per request
// (python/mlacheck/_worker.py, zygote(), says how), the probe's worker included. Every process
// forked from the command after that shares its socket; one that finds it gone starts its own.
struct Zygote {
  int ctrl = -1;    // SOCK_SEQPACKET to the zygote, shared with the children forked after its start
  pid_t owner = 0;  // the process that started it
};
Zygote& zygote() {
  static auto* z = new Zygote;
  return *z;
}

// ---- the shared zygote ------------------------------------------------------------------------------
// MLACHECK_PYTHON_ZYGOTE=FOLDER: the commands share one zygote per interpreter and import-time
// environment, a daemon listening on FOLDER/zygote-KEY.sock, started by the first command that finds
// none and ended after kSharedIdleSeconds without a command connected (its log: FOLDER/zygote-KEY.log).
// A test suite or a loop of commands then imports torch once in all, not once a command.
constexpr int kSharedIdleSeconds = 60;

// What a worker's imports depend on besides its own request (which carries its folder and
// environment): the interpreter, this worker source, and the variables read when torch, Triton or the
// interpreter start. Commands that differ in any of them get zygotes of their own.
std::string shared_key(const std::string& python) {
  std::vector<std::string> kept;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string v = *e;
    const std::string name = v.substr(0, v.find('='));
    static const char* const kNames[] = {"PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE", "PYTHONSAFEPATH",
                                         "PYTHONUSERBASE", "LD_LIBRARY_PATH", "LD_PRELOAD"};
    static const char* const kPrefixes[] = {"TORCH", "PYTORCH", "OMP_", "MKL_", "OPENBLAS_", "CUDA_", "NVIDIA_",
                                            "HIP_", "ROCR_", "HSA_", "TRITON_"};
    bool keep = false;
    for (const char* n : kNames) keep = keep || name == n;
    for (const char* p : kPrefixes) keep = keep || name.rfind(p, 0) == 0;
    if (keep) kept.push_back(v);
  }
  std::sort(kept.begin(), kept.end());
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  const auto mix = [&h](const std::string& text) {
    for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
  };
  mix(python);
  mix(kPythonWorkerSource);
  for (const std::string& v : kept) mix(v);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

int connect_to(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Starts the daemon on the listening socket: in a session of its own, its stdio /dev/null and its
// log, no other descriptor of this process (a pipe it kept would hold a caller's read open).
void spawn_server(const std::string& python, int listening, const std::string& base) {
  std::vector<std::string> env_strings = worker_environment("");
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> words = {python, "-c", kPythonWorkerSource, "--zygote-server", "3", base + ".lock",
                                    base + ".sock", std::to_string(kSharedIdleSeconds)};
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const std::string log = base + ".log";
  const pid_t pid = fork();
  if (pid < 0) return;
  if (pid == 0) {
    setsid();
    if (fork() != 0) _exit(0);  // the daemon is nobody's child here
    const int keep = fcntl(listening, F_DUPFD, 10);
    const int null_fd = open("/dev/null", O_RDWR);
    const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (keep < 0 || null_fd < 0) _exit(1);
    dup2(null_fd, 0);
    dup2(null_fd, 1);
    dup2(log_fd >= 0 ? log_fd : null_fd, 2);
    dup2(keep, 3);
    close_range(4, ~0u, 0);
    if (chdir("/") != 0) _exit(1);
    execve(python.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  waitpid(pid, nullptr, 0);
}

bool connect_shared(const std::string& folder, const std::string& python) {
  const std::string base = folder + "/zygote-" + shared_key(python), path = base + ".sock";
  if (path.size() >= sizeof(sockaddr_un{}.sun_path)) return false;
  mkdir(folder.c_str(), 0700);
  // Only a folder of this user's that nobody else may write: a socket another user placed there
  // would be handed this user's workers.
  struct stat st;
  if (stat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 022) != 0) {
    return false;
  }
  const int lock = open((base + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0) return false;
  while (flock(lock, LOCK_EX) != 0 && errno == EINTR) {
  }
  int fd = connect_to(path);
  if (fd < 0) {  // none, or one that ended: this command starts it
    unlink(path.c_str());
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    const int listening = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (listening >= 0 && bind(listening, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0 &&
        listen(listening, 128) == 0) {
      spawn_server(python, listening, base);
      close(listening);  // the daemon's now: a daemon that could not start leaves none, and connect fails
      fd = connect_to(path);
    } else if (listening >= 0) {
      close(listening);
    }
  }
  flock(lock, LOCK_UN);
  close(lock);
  if (fd < 0) return false;
  zygote().ctrl = fd;
  return true;
}

}  // namespace

void start_command_zygote() {
  Zygote& z = zygote();
  if (z.owner != 0) return;
  z.owner = getpid();
  const char* mode = std::getenv("MLACHECK_PYTHON_ZYGOTE");
  const std::string how = mode == nullptr ? "" : mode;
  if (how == "0") return;
  const std::string python = on_path(interpreter());
  if (!how.empty() && how != "1" && connect_shared(how, python)) return;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return;
  pid_t pid = 0;
  const int e = spawn_python(python, {"--zygote", std::to_string(sv[1])}, sv[1], &pid);
  close(sv[1]);
  if (e != 0) {
    close(sv[0]);  // no zygote: each process starts its own worker, and says what is wrong with the interpreter
    return;
  }
  z.ctrl = sv[0];
}

int zygote_socket() { return zygote().ctrl; }

void forget_zygote() {
  Zygote& z = zygote();
  if (z.ctrl >= 0) close(z.ctrl);
  z.ctrl = -1;
}

// The wait status of pid, another process's child that has ended and is not reaped yet (a zombie:
// /proc/PID/stat's state Z, its 52nd field the status as waitpid gives it); false when it is not
// one within a second (still running, or reaped and gone).
bool status_of_unreaped(pid_t pid, int* status) {
  for (int tries = 0; tries < 100; ++tries) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t close_paren = text.rfind(')');
    if (!in.good() && text.empty()) return false;
    if (close_paren != std::string::npos) {
      std::istringstream fields(text.substr(close_paren + 2));
      std::vector<std::string> f{std::istream_iterator<std::string>(fields), std::istream_iterator<std::string>()};
      // f[0] is field 3 (the state), so field 52 is f[49]
      if (!f.empty() && f[0] == "Z" && f.size() > 49) {
        *status = std::atoi(f[49].c_str());
        return true;
      }
    }
    usleep(10000);
  }
  return false;
}

}  // namespace mlacheck::kernels::python_worker
