// How a Python worker's process comes to be (kernels/python_worker.cpp): an interpreter started
// directly, or a fork of the command's zygote, a Python process that imported torch once
// (python/mlacheck/_worker.py, zygote(), is its other end); and, for a worker that is not this
// process's child, how it ended. Internal to kernels/, not installed.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace mlacheck::kernels::python_worker {

// name as execvp would find it: itself when it holds a '/', else the first executable of that name
// in $PATH's folders, else name (execve then fails with ENOENT).
std::string on_path(const std::string& name);

// This process's environment for a worker, MLACHECK_PROGRESS_FILE set to progress (absent when empty).
std::vector<std::string> worker_environment(const std::string& progress);

// Starts `python -c <the worker's source> ARGS...` with keep_fd open across the exec; 0 and its pid
// in *pid_out, or the errno of a failed exec.
int spawn_python(const std::string& python, const std::vector<std::string>& args, int keep_fd, pid_t* pid_out);

// Starts this command's zygote once (python_worker.h, start_zygote; MLACHECK_PYTHON_ZYGOTE: 0 none,
// a folder the shared one there, else the command's own). Nothing when it cannot: each worker then
// starts its own interpreter.
void start_command_zygote();
// The socket to this command's zygote (shared with the processes forked from the command after it
// started), or -1: none, or forgotten.
int zygote_socket();
// The zygote is gone (a request found its socket closed): later workers start their own.
void forget_zygote();

// The wait status of pid, another process's child that has ended but is not reaped yet; false when
// it is not one within a second.
bool status_of_unreaped(pid_t pid, int* status);

}  // namespace mlacheck::kernels::python_worker
