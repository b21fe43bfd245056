// What the --python command-line tests share (tests/tools/python_cli_test.cpp: check, repro and
// mutants of Python callables; python_examples_test.cpp: the examples, the corpus through them, and
// fuzz --python): the paths of the examples and fixtures, the skips without torch or Triton, and
// `repro --all` over an op's seed and regression cases.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/cli.h"

namespace mlacheck::test::python_cli {

inline const std::string kSource = MLACHECK_SOURCE_DIR;
inline const std::string kGood = kSource + "/examples/python/topk_torch.py:topk_decode";
inline const std::string kBuggy = kSource + "/examples/python/topk_torch_buggy.py:topk_decode";
inline const std::string kFixtures = kSource + "/tests/tools/python/";

inline int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Why these tests cannot run here, or "". mlacheck runs the worker with the test Python.
inline std::string missing() {
  static const bool torch = [] {
    setenv("MLACHECK_PYTHON", MLACHECK_PYTHON_EXECUTABLE, 1);
    return std::system((std::string(MLACHECK_PYTHON_EXECUTABLE) + " " + kSource + "/tests/tools/has_modules.py torch").c_str()) == 0;
  }();
  return torch ? "" : "no torch";
}

#define SKIP_WITHOUT_TORCH()                                           \
  do {                                                                 \
    if (const std::string why = missing(); !why.empty()) GTEST_SKIP() << "skipped: " << why; \
  } while (0)

inline bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// `repro --all` over the case files of cases (the -0 seed case of each property of op, and the
// regressions filter keeps), with args: one process and one Python worker for them all, not two
// per file. Each file's ending: its verdict line ("PASS ...", "FAIL ...") or "mlacheck repro: ..."
// (a case this implementation does not take).
inline std::map<std::string, std::string> repro_each(const std::string& op, bool (*keep)(const std::string& name),
                                              const std::string& args) {
  const std::string dir = ::testing::TempDir() + "repro_each_" + op;
  static std::map<std::string, bool> made;
  if (!made[dir]) {  // the folder of the files, made once per op
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    for (const std::string& from : {kSource + "/corpus/" + op, kSource + "/corpus/regressions"}) {
      const bool seed = from.find("regressions") == std::string::npos;
      for (const auto& e : std::filesystem::directory_iterator(from)) {
        const std::string name = e.path().filename().string();
        if (e.path().extension() == ".case" && (seed ? has(name, "-0.case") : keep(name))) {
          std::filesystem::copy_file(e.path(), dir + "/" + name);
        }
      }
    }
    made[dir] = true;
  }
  const CliResult r = run_mlacheck("repro --all " + dir + " " + args);
  std::map<std::string, std::string> ending;
  std::istringstream lines(r.out);
  std::string line, current;
  while (std::getline(lines, line)) {
    if (line.rfind("repro ", 0) == 0) {
      current = std::filesystem::path(line.substr(6, line.find(": ") - 6)).filename().string();
    } else if (line.rfind("mlacheck repro: ", 0) == 0 && has(line, ".case: ")) {
      const std::string rest = line.substr(16);
      ending[std::filesystem::path(rest.substr(0, rest.find(".case: ") + 5)).filename().string()] = line;
      current.clear();
    } else if (!current.empty() && !ending.count(current)) {
      ending[current] = line;
    }
  }
  return ending;
}

inline bool any_regression(const std::string&) { return true; }
inline bool topk_regression(const std::string& name) { return has(name, "topk"); }

inline std::string missing_triton() {
  if (const std::string why = missing(); !why.empty()) return why;
  static const bool triton =
      std::system((std::string(MLACHECK_PYTHON_EXECUTABLE) + " " + kSource + "/tests/tools/has_modules.py triton").c_str()) == 0;
  return triton ? "" : "no Triton in " MLACHECK_PYTHON_EXECUTABLE " (scripts/pyenv.sh makes the environment)";
}
#define SKIP_WITHOUT_TRITON()                                                                    \
  do {                                                                                           \
    if (const std::string why = missing_triton(); !why.empty()) GTEST_SKIP() << "skipped: " << why; \
  } while (0)

}  // namespace mlacheck::test::python_cli
