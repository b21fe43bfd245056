// What a fuzz campaign's files say (tools/fuzz_log.h).
#include "tools/fuzz_log.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace mlacheck {

namespace fs = std::filesystem;

FuzzStats parse_fuzz_stats(const std::string& log) {
  FuzzStats s;
  const std::string text = "\n" + log;  // a status line on the first line is a line too
  size_t at = text.rfind("\n#");
  while (at != std::string::npos) {
    const size_t end = text.find('\n', at + 1);
    const std::string line = text.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
    if (line.find("cov: ") != std::string::npos && line.find("exec/s") != std::string::npos) {
      auto number_after = [&](const char* key) -> int64_t {
        const size_t k = line.find(key);
        return k == std::string::npos ? 0 : std::atoll(line.c_str() + k + std::strlen(key));
      };
      s.execs = std::atoll(line.c_str() + 1);
      s.cov = number_after("cov: ");
      s.ft = number_after("ft: ");
      s.corpus = number_after("corp: ");
      s.exec_per_s = line.find("exec/s: ") != std::string::npos ? number_after("exec/s: ") : number_after("exec/s ");
      return s;
    }
    if (at == 0) break;
    at = text.rfind("\n#", at - 1);
  }
  return s;
}

std::vector<fs::path> crash_files(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    for (const char* p : {"crash-", "timeout-", "oom-", "leak-"}) {  // a slow unit is not a failure
      if (n.rfind(p, 0) == 0) out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string without_numbers(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch >= '0' && ch <= '9') {
      if (out.empty() || out.back() != '#') out += '#';
    } else {
      out += ch;
    }
  }
  return out;
}


Triage triage_output(const std::string& log) {
  Triage t;
  const size_t v = log.find("==mlacheck== violation: ");
  if (v != std::string::npos) {
    const size_t e = log.find('\n', v);
    const std::string head = log.substr(v + 24, e - v - 24);
    t.property = head.substr(0, head.find(' '));
    const size_t w = log.find("==mlacheck== verdict: ", v);
    const std::string verdict = w == std::string::npos ? "" : log.substr(w + 22, log.find('\n', w) - w - 22);
    t.key = t.property + ": " + without_numbers(verdict);
    t.summary = t.property + ": " + verdict;
    return t;
  }
  std::string kind = "crash";
  for (const char* k : {"ERROR: AddressSanitizer: ", "ERROR: LeakSanitizer: ", "ERROR: libFuzzer: ", "runtime error: "}) {
    const size_t at = log.find(k);
    if (at != std::string::npos) {
      kind = log.substr(at, log.find('\n', at) - at);
      if (kind.size() > 120) kind.resize(120);
      break;
    }
  }
  std::string frames;
  int n = 0;
  std::istringstream lines(log);
  for (std::string line; n < 3 && std::getline(lines, line);) {
    const size_t in = line.find(" in ");
    if (line.find("    #") != 0 || in == std::string::npos) continue;
    const std::string fn = line.substr(in + 4, line.find(' ', in + 4) - in - 4);
    if (fn.find("__sanitizer") != std::string::npos || fn.find("__asan") != std::string::npos ||
        fn.find("fuzzer::") != std::string::npos || fn.find("__ubsan") != std::string::npos ||
        fn.rfind("std::", 0) == 0 || fn == "abort" || fn == "raise" || fn.find("libc") != std::string::npos) {
      continue;
    }
    frames += (n++ ? " < " : "") + fn;
  }
  t.key = without_numbers(kind) + " at " + frames;
  t.summary = kind + (frames.empty() ? "" : " at " + frames);
  return t;
}

std::string hex_key(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  char buf[20];
  std::snprintf(buf, sizeof buf, "%012llx", static_cast<unsigned long long>(h & 0xffffffffffffull));
  return buf;
}

}  // namespace mlacheck
