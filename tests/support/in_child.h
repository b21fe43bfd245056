// Shared by tests that need a fresh process: a fork whose body returns whether its expectations
// held, and how the child ended.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <functional>

namespace mlacheck::test_support {

// Runs body in a forked child; its exit status: 0 when body returned true, 1 when false, 100 + the
// signal when it died of one (other statuses: the child exited on its own, as AddressSanitizer's
// reports do).
inline int in_child(const std::function<bool()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body() ? 0 : 1);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

}  // namespace mlacheck::test_support
