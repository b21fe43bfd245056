// `--sanitize memcheck` (tools/sanitize.h).
#include "tools/sanitize.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>

#include "tools/flags.h"

namespace mlacheck {

namespace {

std::string find_compute_sanitizer() {
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    for (size_t at = 0; at <= p.size();) {
      const size_t end = std::min(p.find(':', at), p.size());
      const std::filesystem::path candidate = std::filesystem::path(p.substr(at, end - at)) / "compute-sanitizer";
      if (end > at && ::access(candidate.c_str(), X_OK) == 0) return candidate.string();
      at = end + 1;
    }
  }
  for (const char* c : {"/usr/local/cuda/bin/compute-sanitizer", "/usr/local/cuda/compute-sanitizer/compute-sanitizer"}) {
    if (::access(c, X_OK) == 0) return c;
  }
  return "";
}

}  // namespace

std::vector<std::string> memcheck_arguments() {
  // Every process of the run (the checks run in forked children), the first 20 errors of each, and
  // the application's own exit status.
  return {"--tool", "memcheck", "--target-processes", "all", "--print-limit", "20", "--nvtx", "yes"};
}

std::optional<int> run_sanitized(const std::string& cmd, const std::vector<std::string>& args, std::ostream& err) {
  if (cmd != "check" && cmd != "mutants" && cmd != "repro") return std::nullopt;
  // --sanitize TOOL or --sanitize=TOOL (before a "--", after which every argument is positional).
  auto at = args.end();
  std::string tool_name;
  bool given = false;
  for (auto it = args.begin(); it != args.end() && *it != "--"; ++it) {
    if (*it == "--sanitize") {
      at = it, given = true;
      tool_name = it + 1 == args.end() ? "" : *(it + 1);
      break;
    }
    if (it->rfind("--sanitize=", 0) == 0) {
      at = it, given = true;
      tool_name = it->substr(11);
      break;
    }
  }
  if (!given) return std::nullopt;
  if (const char* v = std::getenv("MLACHECK_SANITIZED"); v != nullptr && std::string(v) == "1") return std::nullopt;
  if (tool_name != "memcheck") {
    err << flags::prefix(cmd) << "--sanitize takes 'memcheck'" << (tool_name.empty() ? "" : ", not '" + tool_name + "'")
        << '\n';
    return 2;
  }
  const bool joined = at->size() > 10;  // --sanitize=memcheck: one argument, not two
  const std::string tool = find_compute_sanitizer();
  if (tool.empty()) {
    err << flags::prefix(cmd)
        << "--sanitize memcheck needs compute-sanitizer (the CUDA toolkit's), on the PATH or in /usr/local/cuda/bin\n";
    return 2;
  }
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    err << flags::prefix(cmd) << "--sanitize: cannot find this program's own path (/proc/self/exe)\n";
    return 2;
  }
  self[n] = '\0';
  std::vector<std::string> argv = {tool};
  for (const std::string& a : memcheck_arguments()) argv.push_back(a);
  argv.push_back(self);
  argv.push_back(cmd);
  for (auto it = args.begin(); it != args.end(); ++it) {
    if (it == at) {
      if (!joined) ++it;  // and its value
      continue;
    }
    argv.push_back(*it);
  }
  ::setenv("MLACHECK_DEVICE_FENCE", "1", 1);
  // Every device block from cudaMalloc and back to cudaFree: a cached block reused by the next
  // buffer would still be, to memcheck, the unregistered heap of the last one.
  ::setenv("MLACHECK_CUDA_CACHE", "0", 1);
  ::setenv("MLACHECK_SANITIZED", "1", 1);
  std::vector<char*> c;
  for (std::string& a : argv) c.push_back(a.data());
  c.push_back(nullptr);
  ::execv(tool.c_str(), c.data());
  err << flags::prefix(cmd) << "--sanitize: cannot run " << tool << '\n';
  return 2;
}

}  // namespace mlacheck
