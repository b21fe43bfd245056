// The Python worker of kernels/python_bridge.h, as the bridge uses it (not installed): the process
// that runs the user's callables (started on first use, one per process; with OP=- the Python
// process that started mlacheck instead), the messages to it and its replies, and the memory it is
// lent (host: the shared arena; cuda: IPC handles, named by block ids and kept open by scope).
// python/mlacheck/_worker.py is the other end; its docstring has the message format.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mlacheck/plugin.h"

namespace mlacheck::kernels::python_worker {

// One reply: "ok" with values, "fail" with a line, or "crashed" with a fault and a line.
struct Reply {
  std::string status, message, fault, seq;
  std::map<std::string, std::vector<std::string>> values;  // name -> the tokens after "kind name"
  std::map<std::string, std::string> kinds;                // name -> int, real, ints, tensor, none
};

// The interpreter a worker runs in: $MLACHECK_PYTHON; else an active virtualenv's or conda env's
// python3 (the user's own, with their torch); else the project's environment this mlacheck was
// built with (scripts/pyenv.sh) when it is still there; else python3 on PATH.
std::string interpreter();

// The socket of the Python process serving OP=- ($MLACHECK_DRIVER_FD), or -1.
int driver_fd();
// From now on every process of the run talks to that process instead of starting a worker.
void serve_through_driver();

// Whether this process's worker has started.
bool started();
// Sends one message (with fd attached when >= 0) to this process's worker, starting it first, and
// returns its reply. Throws mlacheck::Error when the interpreter cannot run, mlacheck::ContextLost
// when the worker died (its state is gone, as a lost CUDA context's is).
Reply request(const std::string& json, int fd = -1);

// request, but a reply that takes longer than seconds kills the worker and throws ContextLost (a
// module whose import hangs).
Reply request_within(const std::string& json, double seconds);

// ---- a worker lent to the first child ----
// Lends this process's worker (started, its callables loaded for key: a backend and device) to the
// first child forked from this process that asks for one for the same key (adopt_lent): that child
// takes it over instead of starting its own (the interpreter's, torch's and the user's imports:
// seconds). This process forgets it (a later request here starts another). When an isolated child
// that took it over has ended (core/backend/isolate.h), the worker is ended too: its state is that
// child's, a call it may still be in included. Later children start their own.
void lend_to_first_child(const std::string& key);
// In a child: takes over the lent worker when it was loaded for key and no other child took it;
// true when this process's worker is now that one.
bool adopt_lent(const std::string& key);
// In the lending process: whether the lent worker is still there for the next child.
bool lent_available();

// ---- the zygote: workers forked with torch imported ----
// Starts this command's zygote: a Python process that imports torch once, then forks each worker
// this process and every process forked from it after this call asks for, torch already imported
// (about 2 s of CPU saved per worker: a check runs its properties in isolated children, each with a
// worker of its own). It dies with this process. A worker it forked is ended as one started
// directly is: with the process it serves, or killed by its pid. MLACHECK_PYTHON_ZYGOTE=0 turns it
// off; without it (or when it is gone) each worker starts an interpreter of its own.
void start_zygote();

// ---- the memory lent to the worker ----
// The backend whose buffers are lent (set before the first describe).
void set_backend(int32_t backend);
// The worker's descriptor of t: [block, offset, dtype, shape, strides], or "null" for no tensor;
// the block is opened for scope. Throws for memory that is not a guarded buffer of mlacheck's.
std::string describe(const mlacheck_tensor& t, int64_t scope);
// The address of byte offset of block in this process.
void* address(int64_t block, int64_t offset);
// The "blocks" and "drop" members of the next message (each once), and the file to attach.
std::string take_members(int* fd);
int64_t new_scope();
// Ends a scope: its blocks stay open in the worker for later calls, the oldest closed past 64.
void end_scope(int64_t scope);
// Before a message that hands the worker lent cuda memory: waits until this process's queued GPU
// work is done (the poison fills, the inputs' copies, earlier launches). The worker is another
// process with a CUDA context of its own, and nothing orders its kernels after this process's
// work. Nothing on the host, nor while stream is capturing a graph.
void settle_before_lending(int32_t backend, void* stream);

}  // namespace mlacheck::kernels::python_worker
