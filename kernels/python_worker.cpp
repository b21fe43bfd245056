// The Python worker (kernels/python_worker.h): its process and socket, and the memory it is lent.
#include "kernels/python_worker.h"

#include "kernels/case_clock.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/backend/isolate_hook.h"
#include "core/contract.h"
#include "core/error.h"
#include "core/shared_arena.h"
#include "kernels/python_zygote.h"

#if defined(MLACHECK_HAVE_CUDA)
#include "core/backend/cuda_runtime.h"
#endif

namespace mlacheck::kernels::python_worker {
namespace {

bool& through_driver() {
  static bool on = false;
  return on;
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
    const int ctrl = zygote_socket();
    if (ctrl < 0) return false;
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
    while ((k = sendmsg(ctrl, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
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
      forget_zygote();
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
  if (!through_driver()) start_command_zygote();
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
