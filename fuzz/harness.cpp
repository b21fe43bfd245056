// The shared harness body (fuzz/harness.h).
#include "fuzz/harness.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/backend/backend.h"
#include "core/backend/host_executor.h"
#include "core/contract.h"
#include "core/error.h"
#include "kernels/device.h"
#include "kernels/plugin.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_runner.h"
#include "harness/staged_buffer.h"
#include "kernels/case_clock.h"
#include "kernels/python_bridge.h"

namespace mlacheck::fuzz {

namespace {

struct State {
  const FuzzTarget* target = nullptr;
  std::string impl, backend, case_dir;
  int64_t budget = int64_t{8} << 20;
  uint64_t max_steps = 0;  // host backend: GPU-thread steps a case may take (0: no cap)
  double max_seconds = 0.5;
  std::unique_ptr<kernels::Device> device;
  std::unique_ptr<FuzzRunner> runner;
  uint64_t runs = 0, refused = 0, skipped = 0, slow = 0;
};
State& state() {
  static State s;
  return s;
}

[[noreturn]] void setup_error(const std::string& what) {
  std::fprintf(stderr, "mlacheck fuzz: %s\n", what.c_str());
  std::exit(2);
}

std::string env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

[[noreturn]] void violation(const FuzzCase& fc, const std::string& verdict) {
  const State& s = state();
  const std::string text = fc.text.format();
  std::fprintf(stderr,
               "==mlacheck== violation: %s on %s (%s)\n==mlacheck== verdict: %s\n"
               "==mlacheck== case (save it and run `mlacheck repro FILE`):\n%s==mlacheck== end of case\n",
               fc.property->name.c_str(), s.impl.c_str(), s.backend.c_str(), verdict.c_str(), text.c_str());
  if (!s.case_dir.empty()) {
    char name[40];
    std::snprintf(name, sizeof name, "-%016llx.case", static_cast<unsigned long long>(fnv1a(text)));
    const std::string path = s.case_dir + "/" + fc.property->name + name;
    std::string line = verdict;  // a comment line of the case: one line
    for (char& ch : line) ch = ch == '\n' ? ' ' : ch;
    std::ofstream(path) << "# " << fc.property->name << " on " << s.impl << " (" << s.backend << "): " << line << "\n"
                        << text;
    std::fprintf(stderr, "==mlacheck== case written to %s\n", path.c_str());
  }
  std::fflush(stderr);
  std::abort();
}

void print_stats() {
  const State& s = state();
  std::fprintf(stderr,
               "mlacheck fuzz %s: %llu inputs run, %llu refused by the case rules, %llu skipped as too large, "
               "%llu run but kept out of the corpus as slow\n",
               s.target ? s.target->name.c_str() : "?", static_cast<unsigned long long>(s.runs),
               static_cast<unsigned long long>(s.refused), static_cast<unsigned long long>(s.skipped),
               static_cast<unsigned long long>(s.slow));
}

}  // namespace

int harness_init(const char* target, const char* argv0) {
  State& s = state();
  try {
    std::string name = target ? target : env("MLACHECK_TARGET", "");
    if (name.empty() && argv0) {
      name = argv0;
      name = name.substr(name.rfind('/') == std::string::npos ? 0 : name.rfind('/') + 1);
      MLA_REQUIRE(name.size() > 7 && name.compare(name.size() - 7, 7, "_fuzzer") == 0, "the all-targets harness '",
                  name, "' needs MLACHECK_TARGET, or a name <target>_fuzzer (link it under that name)");
      name.resize(name.size() - 7);
    }
    s.target = &find_fuzz_target(name);
    // A plugin's implementations (kernels/plugin.h), before MLACHECK_IMPL is looked up.
    for (const std::string& path : kernels::plugin_paths_from_environment()) kernels::load_plugin_isolated(path);
    // The Python callables of `mlacheck fuzz --python` (kernels/python_bridge.h), as OP@py.
    const bool python = !kernels::load_python_from_environment().empty();
    s.backend = env("MLACHECK_BACKEND", "host");
    s.impl = env("MLACHECK_IMPL", s.target->op + "@ref");
    s.case_dir = env("MLACHECK_CASE_DIR", "");
    const std::string mb = env("MLACHECK_FUZZ_MAX_MB", "8");
    char* end = nullptr;
    const long long v = std::strtoll(mb.c_str(), &end, 10);
    MLA_REQUIRE(*end == '\0' && v > 0 && v <= (1 << 20), "MLACHECK_FUZZ_MAX_MB is '", mb,
                "', not a size in MiB (1 to 1048576)");
    s.budget = static_cast<int64_t>(v) << 20;
    const std::string ms = env("MLACHECK_FUZZ_MAX_MS", "500");
    const long long m = std::strtoll(ms.c_str(), &end, 10);
    MLA_REQUIRE(*end == '\0' && m > 0 && m <= 3600000, "MLACHECK_FUZZ_MAX_MS is '", ms,
                "', not a time in milliseconds (1 to 3600000)");
    s.max_seconds = static_cast<double>(m) / 1000;
    // The clock of the callables' interpreted calls (kernels/interpreter_cost.h): libFuzzer's
    // -timeout, a cost file the campaign's processes share, and the slow-case time as the reach (a
    // call predicted past it is skipped as too large for fuzzing, as a case past the memory or step
    // budget is).
    if (python) {
      const std::string t = env("MLACHECK_FUZZ_CASE_TIMEOUT", "60");
      const double seconds = std::strtod(t.c_str(), &end);
      MLA_REQUIRE(*end == '\0' && seconds > 0, "MLACHECK_FUZZ_CASE_TIMEOUT is '", t, "', not a time in seconds");
      case_clock::state().case_timeout = seconds;
      case_clock::state().cost_file = env("MLACHECK_FUZZ_COST_FILE", "");
      case_clock::state().reach = s.max_seconds;
    }
    const std::string steps = env("MLACHECK_FUZZ_MAX_STEPS", "200000");
    const long long st = std::strtoll(steps.c_str(), &end, 10);
    MLA_REQUIRE(*end == '\0' && st >= 0, "MLACHECK_FUZZ_MAX_STEPS is '", steps,
                "', not a count of GPU-thread steps (0: no cap)");
    s.max_steps = static_cast<uint64_t>(st);
    const auto b = parse_backend(s.backend);
    MLA_REQUIRE(b.has_value(), "MLACHECK_BACKEND is '", s.backend, "', not one of host, cuda, hip");
    const std::string op = s.impl.substr(0, s.impl.find('@'));
    MLA_REQUIRE(op == s.target->op, "MLACHECK_IMPL is '", s.impl, "', not a ", s.target->op, " implementation");
    // Every property of the target must accept impl (ref-only ones are skipped per input).
    for (const PropertyEntry* p : fuzz_target_properties(*s.target)) {
      if (!p->ref_only) check_property_impl(*p, s.impl);
    }
    std::string why;
    MLA_REQUIRE(kernels::device_usable(*b, &why), s.backend, ": not usable: ", why);
    s.device = kernels::make_device(*b);
    s.runner = std::make_unique<FuzzRunner>(*s.target, s.impl, s.backend, *s.device,
                                            FuzzBudgets{s.budget, s.max_steps, s.max_seconds});
  } catch (const Error& e) {
    setup_error(e.what());
  }
  std::atexit(print_stats);
  return 0;
}

int harness_run(const uint8_t* data, size_t size) {
  State& s = state();
  const FuzzOutcome o = s.runner->run(std::string_view(reinterpret_cast<const char*>(data), size));
  switch (o.kind) {
    case FuzzOutcome::kRefused: ++s.refused; return -1;
    case FuzzOutcome::kSkipped: ++s.skipped; return -1;
    case FuzzOutcome::kViolation: violation(o.fc, o.verdict);
    case FuzzOutcome::kChecked: break;
  }
  ++s.runs;
  // A case slower than MLACHECK_FUZZ_MAX_MS was checked, but is kept out of the corpus so that
  // libFuzzer does not spend its time mutating it (a few large attention cases ran for seconds
  // each and held a harness to a few inputs per second).
  if (o.slow) {
    ++s.slow;
    return -1;
  }
  return 0;
}

}  // namespace mlacheck::fuzz
