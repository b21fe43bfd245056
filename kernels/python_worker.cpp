// The Python worker (kernels/python_worker.h): its process and socket, and the memory it is lent.
#include "kernels/python_worker.h"

#include "kernels/case_clock.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/backend/isolate_hook.h"
#include "core/contract.h"
#include "core/error.h"
#include "core/shared_arena.h"
#include "kernels/python_worker_source.h"  // kPythonWorkerSource: python/mlacheck/_worker.py

#if defined(MLACHECK_HAVE_CUDA)
#include "core/backend/cuda_runtime.h"
#endif

namespace mlacheck::kernels::python_worker {
namespace {

bool& through_driver() {
  static bool on = false;
  return on;
}

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

// ---- the worker process ---------------------------------------------------------------------------

class Worker {
 public:
  // The worker of this process, started on first use (a forked child starts its own).
  static Worker& of_this_process() {
    static Worker* w = nullptr;
    static pid_t owner = 0;
    if (w == nullptr || owner != getpid()) {
      w = new Worker;  // an inherited one belongs to the parent: left alone, never destroyed here
      owner = getpid();
    }
    return *w;
  }

  // Sends one message (with fd attached when >= 0) and returns the reply. A worker that died is
  // mlacheck::ContextLost ("crashed"): its state is gone, as a lost CUDA context's is.
  Reply request(const std::string& json, int fd = -1) {
    start();
    // A sequence number unique across the run's processes: with OP=- they share one socket, and a
    // reply to a process killed mid-call (a budget's end) must not be taken for this one's.
    static uint64_t counter = 0;
    const uint64_t seq = (static_cast<uint64_t>(getpid()) << 24) + (++counter & 0xFFFFFF);
    send_message("{\"seq\":" + std::to_string(seq) + "," + json.substr(1), fd);
    for (;;) {
      if (reply_within_ > 0) await_reply();
      Reply r = receive_reply();
      if (r.seq.empty() || r.seq == std::to_string(seq)) return r;  // else a stale reply: skipped
    }
  }

  bool started() const { return pid_ > 0 || driver_; }

  // The next replies must come within seconds (0: no limit): a worker that takes longer is killed
  // and the request throws ContextLost.
  void reply_within(double seconds) { reply_within_ = seconds; }

  // This process's worker is now the one at pid, on sock (a worker another process started and
  // lent it: kernels/python_worker.h).
  void adopt(int sock, pid_t pid) { sock_ = sock, pid_ = pid, dead_ = false, from_zygote_ = false; }

  // Hands this process's worker over (its socket and pid), forgetting it here: a later request of
  // this process starts another.
  std::pair<int, pid_t> release() {
    const std::pair<int, pid_t> w{sock_, pid_};
    sock_ = -1, pid_ = 0;
    return w;
  }

 private:
  Reply receive_reply() {
    std::string text;
    const bool got = receive(&text);
    if (!got || text.rfind("worker-ended ", 0) == 0) {  // no reply starts so (ok, fail, crashed)
      MLA_REQUIRE(!driver_, "the Python process serving the calls (mlacheck.cases()) stopped answering: its loop "
                  "ended before the run did");
      int status = 0;
      std::string how = "closed its end";
      // A worker the zygote forked is not this process's child: its supervisor says how it ended.
      bool known = false;
      if (got) {
        std::istringstream words(text.substr(13));
        std::string kind;
        int n = 0;
        if (words >> kind >> n) known = true, status = kind == "signal" ? (n & 0x7f) : (n & 0xff) << 8;
      } else if (!from_zygote_) {
        // A worker this process did not start (the parent's, lent: python_worker.h) is not its child:
        // its status is read from the kernel while its parent has not reaped it.
        known = waitpid(pid_, &status, 0) == pid_ || status_of_unreaped(pid_, &status);
      }
      if (known) {
        how = WIFSIGNALED(status) ? std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
                                        strsignal(WTERMSIG(status)) + ")"
                                  : "exited with status " + std::to_string(WEXITSTATUS(status));
      }
      dead_ = true;
      throw ContextLost("the Python worker " + how + " during the call (its stderr is above)",
                        WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status)) : "worker exit");
    }
    return parse(text);
  }

  void start() {
    if (dead_) throw ContextLost("the Python worker of this process died before", "worker exit");
    if (pid_ > 0 || driver_) return;
    if (through_driver()) {
      sock_ = driver_fd();
      MLA_REQUIRE(sock_ >= 0, "--python OP=-: no MLACHECK_DRIVER_FD socket");
      driver_ = true;
      return;
    }
    if (start_from_zygote()) return;
    int sv[2];
    MLA_REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "--python: socketpair: ",
                std::strerror(errno));
    pid_t pid = 0;
    const std::string python = on_path(interpreter());
    const int e = spawn_python(python, {std::to_string(sv[1])}, sv[1], &pid);
    close(sv[1]);
    if (e != 0) {
      close(sv[0]);
      dead_ = true;
      throw Error("cannot run the Python interpreter '" + python + "' (" + std::strerror(e) +
                  "): set MLACHECK_PYTHON to the Python that has your torch");
    }
    sock_ = sv[0], pid_ = pid, from_zygote_ = false;
  }

  // A worker forked by the command's zygote (below), torch imported already; false when there is
  // none or it is gone (this process then starts its own, as without one).
  bool start_from_zygote() {
    Zygote& z = zygote();
    if (z.ctrl < 0) return false;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
    char folder[4096];
    std::string request = getcwd(folder, sizeof folder) != nullptr ? folder : "/";
    for (const std::string& e : worker_environment(case_clock::state().progress_file)) request += '\0' + e;
    // The worker's stdin and stderr are this process's (a closed one: /dev/null).
    int in = 0, err = 2, opened[2] = {-1, -1};
    if (fcntl(in, F_GETFD) < 0) in = opened[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fcntl(err, F_GETFD) < 0) err = opened[1] = open("/dev/null", O_WRONLY | O_CLOEXEC);
    const int fds[3] = {sv[1], in, err};
    iovec iov{request.data(), request.size()};
    msghdr msg{};
    msg.msg_iov = &iov, msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)];
    msg.msg_control = control, msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS, c->cmsg_len = CMSG_LEN(sizeof fds);
    std::memcpy(CMSG_DATA(c), fds, sizeof fds);
    ssize_t k;
    while ((k = sendmsg(z.ctrl, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
    }
    close(sv[1]);
    for (int fd : opened) {
      if (fd >= 0) close(fd);
    }
    sock_ = sv[0];
    std::string first;
    if (k < 0 || !receive(&first) || first.rfind("worker-pid ", 0) != 0) {  // the zygote is gone
      close(sv[0]);
      sock_ = -1;
      close(z.ctrl);
      z.ctrl = -1;
      return false;
    }
    pid_ = static_cast<pid_t>(std::atol(first.c_str() + 11));
    from_zygote_ = true;
    return pid_ > 0;
  }

  void send_message(const std::string& json, int fd) {
    const uint32_t n = static_cast<uint32_t>(json.size());
    std::string wire(reinterpret_cast<const char*>(&n), 4);
    wire += json;
    size_t sent = 0;
    bool fd_pending = fd >= 0;
    while (sent < wire.size()) {
      iovec iov{const_cast<char*>(wire.data() + sent), wire.size() - sent};
      msghdr msg{};
      msg.msg_iov = &iov, msg.msg_iovlen = 1;
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
      if (fd_pending) {
        msg.msg_control = control, msg.msg_controllen = sizeof control;
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS, c->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
      }
      const ssize_t k = sendmsg(sock_, &msg, MSG_NOSIGNAL);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) {
        dead_ = true;
        throw ContextLost("the Python worker is gone (sending to it: " + std::string(std::strerror(errno)) + ")",
                          "worker exit");
      }
      sent += static_cast<size_t>(k);
      fd_pending = false;
    }
  }

  bool read_exactly(char* p, size_t n) {
    while (n > 0) {
      const ssize_t k = read(sock_, p, n);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return false;
      p += k, n -= static_cast<size_t>(k);
    }
    return true;
  }

  bool receive(std::string* text) {
    uint32_t n = 0;
    if (!read_exactly(reinterpret_cast<char*>(&n), 4)) return false;
    text->assign(n, '\0');
    return read_exactly(text->data(), n);
  }

  static Reply parse(const std::string& text) {
    Reply r;
    std::istringstream lines(text);
    std::string line;
    bool first = true;
    while (std::getline(lines, line)) {
      const size_t sp = line.find(' ');
      const std::string head = line.substr(0, sp), rest = sp == std::string::npos ? "" : line.substr(sp + 1);
      if (first) {
        r.status = head;
        if (head == "crashed") {
          const size_t sp2 = rest.find(' ');
          r.fault = rest.substr(0, sp2);
          r.message = sp2 == std::string::npos ? "" : rest.substr(sp2 + 1);
        } else {
          r.message = rest;
        }
        first = false;
        continue;
      }
      if (head == "seq") {
        r.seq = rest;
        continue;
      }
      std::istringstream words(rest);
      std::string name, w;
      words >> name;
      std::vector<std::string> tokens;
      if (head == "contract") {  // the rest of the line is one JSON string
        std::getline(words, w);
        const size_t q = w.find('"');
        tokens.push_back(q == std::string::npos ? "" : w.substr(q));
      } else {
        while (words >> w) tokens.push_back(w);
      }
      r.kinds[name] = head;
      r.values[name] = tokens;
    }
    return r;
  }

  void await_reply() {
    pollfd p{sock_, POLLIN, 0};
    int r;
    while ((r = poll(&p, 1, static_cast<int>(reply_within_ * 1000))) < 0 && errno == EINTR) {
    }
    if (r > 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    close(sock_);
    sock_ = -1, pid_ = 0, dead_ = true;
    throw ContextLost("the Python worker did not answer within " + std::to_string(static_cast<int>(reply_within_)) +
                      " s", "worker timeout");
  }

  pid_t pid_ = 0;
  int sock_ = -1;
  bool dead_ = false;
  bool from_zygote_ = false;  // pid_ is not this process's child: the zygote's supervisor reports its end
  bool driver_ = false;  // sock_ is the OP=- caller's, shared by every process of the run
  double reply_within_ = 0;
};

// ---- the memory lent to the worker ------------------------------------------------------------------

// Blocks are named by ids; id 0 is the host arena (sent once, with its file). A cuda block is one
// device allocation; the worker opens it for a scope (a call, or a stateful object's life) and
// closes it when the scope ends.
class Lender {
 public:
  static Lender& of_this_process() {
    static Lender* l = nullptr;
    static pid_t owner = 0;
    if (l == nullptr || owner != getpid()) l = new Lender, owner = getpid();
    return *l;
  }

  // The worker's descriptor of t: [block, offset, dtype, shape, strides], on the host followed by
  // the offset and size of the arena allocation that holds it; or "null" for no tensor.
  std::string describe(const mlacheck_tensor& t, [[maybe_unused]] int64_t scope) {
    if (t.data == nullptr) return "null";
    int64_t block = 0, offset = 0;
    if (backend_ == MLACHECK_BACKEND_HOST) {
      const shared_arena::Arena a = shared_arena::current();
      const auto* p = static_cast<const uint8_t*>(t.data);
      MLA_REQUIRE(a.fd >= 0 && p >= a.base && p < a.base + a.bytes,
                  "a Python callable can be lent only mlacheck's guarded buffers (this tensor is not one: "
                  "MLACHECK_GUARDS=0 is not supported with --python)");
      offset = p - a.base;
      if (!arena_sent_) {
        blocks_json_ += std::string(blocks_json_.empty() ? "" : ",") + "{\"id\":0,\"bytes\":" + std::to_string(a.bytes) +
                        ",\"fd\":0}";
        fd_ = a.fd;
        arena_sent_ = true;
      }
    } else {
#if defined(MLACHECK_HAVE_CUDA)
      cuda::IpcBlock b;
      std::string why;
      // Reserved device memory (a virtual range mapped in granules) has no CUDA IPC handle: the case
      // is not run on a Python callable, and said so, rather than failed.
      if (!cuda::ipc_block_of(t.data, &b, &why)) {
        throw OutsideContract("a Python callable can be lent only mlacheck's cudaMalloc buffers (" + why +
                              "): reserved device memory is not lent on cuda");
      }
      auto it = open_.find(b.handle);
      if (it != open_.end() && it->second.scope == 0) it->second.scope = scope;  // kept open: in use again
      if (it == open_.end()) {
        const int64_t id = next_id_++;
        it = open_.emplace(b.handle, Open{id, scope, b.base}).first;
        base_of_[id] = b.base;
        pending_.emplace_back(id, "{\"id\":" + std::to_string(id) + ",\"bytes\":" + std::to_string(b.bytes) +
                                      ",\"ipc\":\"" + b.handle + "\"}");
        if (!hooked_) cuda::set_before_free(&before_free), hooked_ = true;
      }
      block = it->second.id;
      offset = static_cast<const uint8_t*>(t.data) - static_cast<const uint8_t*>(b.base);
#else
      throw Error("a Python callable on a GPU backend needs a build with CUDA");
#endif
    }
    std::string s = "[" + std::to_string(block) + "," + std::to_string(offset) + "," + std::to_string(t.dtype) + ",[";
    for (int i = 0; i < t.rank; ++i) s += (i ? "," : "") + std::to_string(t.shape[i]);
    s += "],[";
    for (int i = 0; i < t.rank; ++i) s += (i ? "," : "") + std::to_string(t.strides[i]);
    s += "]";
    // On the host, the guarded buffer the view lies in (its offset in the arena and its size), so
    // the worker gives each buffer a storage of its own, as a cuda block has: a watch over the
    // tensor's storage (mlacheck.guard()) then covers that buffer, not the whole arena.
    int64_t alloc_offset = 0, alloc_bytes = 0;
    if (backend_ == MLACHECK_BACKEND_HOST &&
        shared_arena::allocation_of(static_cast<const uint8_t*>(t.data), &alloc_offset, &alloc_bytes)) {
      s += "," + std::to_string(alloc_offset) + "," + std::to_string(alloc_bytes);
    }
    return s + "]";
  }

  // The address of byte offset of block in this process.
  void* address(int64_t block, int64_t offset) const {
    if (block == 0) {
      const shared_arena::Arena a = shared_arena::current();
      MLA_REQUIRE(a.base != nullptr && offset >= 0 && offset < a.bytes, "the Python worker named a host offset ",
                  offset, " outside the arena");
      return a.base + offset;
    }
    const auto it = base_of_.find(block);
    MLA_REQUIRE(it != base_of_.end(), "the Python worker named block ", block, ", which it was not lent");
    return static_cast<uint8_t*>(it->second) + offset;
  }

  // The "blocks" and "drop" members of the next message (each once), and the file to attach.
  std::string take_members(int* fd) {
    std::string blocks = blocks_json_;
    for (const auto& [id, json] : pending_) blocks += (blocks.empty() ? "" : ",") + json;
    std::string s = ",\"blocks\":[" + blocks + "],\"drop\":[" + drop_json_ + "]";
    blocks_json_.clear(), drop_json_.clear(), pending_.clear();
    *fd = fd_;
    fd_ = -1;
    return s;
  }
  // Ends a scope: its blocks stay open in the worker, for the next calls on the same allocations
  // (mlacheck's allocation cache hands them out again), the oldest closed past kKeptOpen. A handle
  // names one allocation: a new allocation at a freed one's address has a handle of its own
  // (measured on an H100), so a kept mapping is never taken for another allocation's.
  void end_scope(int64_t scope) {
    for (auto& [handle, open] : open_) {
      if (open.scope == scope) open.scope = 0, kept_.push_back(handle);
    }
    while (kept_.size() > kKeptOpen) {
      const auto it = open_.find(kept_.front());
      kept_.erase(kept_.begin());
      if (it == open_.end() || it->second.scope != 0) continue;  // in use by an object again
      drop_json_ += std::string(drop_json_.empty() ? "" : ",") + std::to_string(it->second.id);
      base_of_.erase(it->second.id);
      open_.erase(it);
    }
  }
  int64_t new_scope() { return next_scope_++; }
  // Just before mlacheck frees the cuda allocation at base (its cache full or emptied): the worker
  // closes its mapping of it now, as CUDA asks of an importer before the exporter frees (a mapping
  // kept open past the free, for the next call on a cached block, was undefined behaviour: on an
  // H100 a later cuIpcOpenMemHandle failed with CUDA_ERROR_INVALID_VALUE mid-check, and the blocks
  // of that message after it were never opened, a KeyError on the next call naming one; 2026-12-07).
  // A block not sent yet is only forgotten. Nothing is thrown (a worker gone has nothing open).
  static void before_free(void* base) noexcept {
    try {
      Lender& l = of_this_process();
      for (auto it = l.open_.begin(); it != l.open_.end(); ++it) {
        if (it->second.base != base) continue;
        const int64_t id = it->second.id;
        const std::string handle = it->first;
        l.open_.erase(it);
        l.base_of_.erase(id);
        l.kept_.erase(std::remove(l.kept_.begin(), l.kept_.end(), handle), l.kept_.end());
        const auto pending = std::find_if(l.pending_.begin(), l.pending_.end(),
                                          [id](const auto& p) { return p.first == id; });
        if (pending != l.pending_.end()) {
          l.pending_.erase(pending);
          return;
        }
        if (!python_worker::started()) return;
        l.drop_json_ += std::string(l.drop_json_.empty() ? "" : ",") + std::to_string(id);
        int fd = -1;
        const std::string message = "{\"cmd\":\"drop\",\"op\":\"-\"" + l.take_members(&fd) + "}";
        (void)python_worker::request(message, fd);
        return;
      }
    } catch (...) {
    }
  }
  void set_backend(int32_t b) { backend_ = b; }
  int32_t backend() const { return backend_; }

 private:
  struct Open {
    int64_t id, scope;
    void* base;
  };
  int32_t backend_ = MLACHECK_BACKEND_HOST;
  bool arena_sent_ = false;
  int fd_ = -1;
  std::string blocks_json_, drop_json_;                 // the host arena's block; the ids to close
  std::vector<std::pair<int64_t, std::string>> pending_;  // cuda blocks to open with the next message
  [[maybe_unused]] bool hooked_ = false;  // cuda only
  static constexpr size_t kKeptOpen = 64;
  std::map<std::string, Open> open_;  // by IPC handle
  std::vector<std::string> kept_;     // handles of ended scopes, oldest first
  std::map<int64_t, void*> base_of_;  // block id -> base in this process
  [[maybe_unused]] int64_t next_id_ = 1;  // cuda blocks only
  int64_t next_scope_ = 1;
};

// ---- a worker lent to the first child ---------------------------------------------------------

struct Lent {
  int sock = -1;
  pid_t pid = 0;
  pid_t owner = 0;  // the process that lent it
  std::string key;  // what it was loaded for
  std::atomic<pid_t>* claim = nullptr;  // shared with the children: 0 free, the taker's pid, -1 spent
};
Lent& lent() {
  static auto* l = new Lent;
  return *l;
}

// In the lending process, after each isolated child has ended: the worker that child took over
// goes with it (its state is that child's: its memory, its objects, a call it may still be in).
void end_worker_of(int child) {
  Lent& l = lent();
  if (l.claim == nullptr || l.owner != getpid()) return;
  pid_t taker = child;
  if (!l.claim->compare_exchange_strong(taker, -1)) return;
  kill(l.pid, SIGKILL);
  waitpid(l.pid, nullptr, 0);
  close(l.sock);
  l.sock = -1;
}

}  // namespace

// The socket of the Python process serving OP=- ($MLACHECK_DRIVER_FD), or -1.
int driver_fd() {
  const char* env = std::getenv("MLACHECK_DRIVER_FD");
  if (env == nullptr || *env == '\0') return -1;
  char* end = nullptr;
  const long fd = std::strtol(env, &end, 10);
  if (*end != '\0' || fd < 0 || fd > 1 << 20 || fcntl(static_cast<int>(fd), F_GETFD) < 0) return -1;
  return static_cast<int>(fd);
}

void serve_through_driver() { through_driver() = true; }

Reply request_within(const std::string& json, double seconds) {
  Worker& w = Worker::of_this_process();
  w.reply_within(seconds);
  try {
    Reply r = w.request(json);
    w.reply_within(0);
    return r;
  } catch (...) {
    w.reply_within(0);
    throw;
  }
}

void lend_to_first_child(const std::string& key) {
  Worker& w = Worker::of_this_process();
  MLA_REQUIRE(w.started() && !through_driver(), "lend_to_first_child: no worker of this process to lend");
  Lent& l = lent();
  MLA_REQUIRE(l.claim == nullptr, "lend_to_first_child: a worker is lent already");
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return;  // nothing lent: each child starts its own, as without this
  l.claim = new (page) std::atomic<pid_t>(0);
  const auto [sock, pid] = w.release();
  l.sock = sock, l.pid = pid, l.owner = getpid(), l.key = key;
  set_after_isolated_child(&end_worker_of);
}

bool adopt_lent(const std::string& key) {
  Lent& l = lent();
  if (l.claim == nullptr || l.owner == getpid() || l.key != key || l.sock < 0) return false;
  pid_t free = 0;
  if (!l.claim->compare_exchange_strong(free, getpid())) return false;
  Worker::of_this_process().adopt(l.sock, l.pid);
  return true;
}

void start_zygote() {
  Zygote& z = zygote();
  if (through_driver() || z.owner != 0) return;
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

bool lent_available() {
  const Lent& l = lent();
  return l.claim != nullptr && l.owner == getpid() && l.sock >= 0 && l.claim->load() == 0;
}
bool started() { return Worker::of_this_process().started(); }
Reply request(const std::string& json, int fd) { return Worker::of_this_process().request(json, fd); }
void set_backend(int32_t backend) { Lender::of_this_process().set_backend(backend); }
std::string describe(const mlacheck_tensor& t, int64_t scope) { return Lender::of_this_process().describe(t, scope); }
void* address(int64_t block, int64_t offset) { return Lender::of_this_process().address(block, offset); }
std::string take_members(int* fd) { return Lender::of_this_process().take_members(fd); }
int64_t new_scope() { return Lender::of_this_process().new_scope(); }
void end_scope(int64_t scope) { Lender::of_this_process().end_scope(scope); }
// Without it, six checks at once on one H100 reported outputs left at the poison in every adapter
// (docs/findings.md 15): beside another context's work the GPU may run this process's queued fills
// after the worker's kernel. A device-wide wait: the fills may be queued on any of this process's
// streams.
void settle_before_lending(int32_t backend, [[maybe_unused]] void* stream) {
#if defined(MLACHECK_HAVE_CUDA)
  if (backend != MLACHECK_BACKEND_CUDA || cuda::capturing(static_cast<cudaStream_t>(stream))) return;
  cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (this process's work on the buffers lent to Python)");
#else
  (void)backend;
#endif
}

std::string interpreter() {
  const char* env = std::getenv("MLACHECK_PYTHON");
  if (env != nullptr && *env) return env;
  for (const char* active : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    const char* dir = std::getenv(active);
    if (dir != nullptr && *dir && access((std::string(dir) + "/bin/python3").c_str(), X_OK) == 0) {
      return std::string(dir) + "/bin/python3";
    }
  }
#ifdef MLACHECK_DEFAULT_PYTHON
  if (*MLACHECK_DEFAULT_PYTHON && access(MLACHECK_DEFAULT_PYTHON, X_OK) == 0) return MLACHECK_DEFAULT_PYTHON;
#endif
  return "python3";
}

}  // namespace mlacheck::kernels::python_worker
