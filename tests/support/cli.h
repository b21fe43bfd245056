// Runs the mlacheck binary of this build (MLACHECK_BINARY) in a shell, for the command-line tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace mlacheck::test {

struct CliResult {
  int status;
  std::string out;  // stdout and stderr together
};

// env: assignments put before the command ("PATH=/nonexistent"), or "".
inline CliResult run_mlacheck(const std::string& args, const std::string& env = "") {
  const std::string cmd = (env.empty() ? "" : "env " + env + " ") + std::string(MLACHECK_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  CliResult r{-1, ""};
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace mlacheck::test
