// The mlacheck command: entry point and subcommand dispatch.
//
// Exit codes: 0 success, 1 a check failed, 2 bad usage or bad input (one line on stderr).
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/error.h"
#include "core/ops.h"
#include "core/tolerances.h"
#include "kernels/registry.h"
#include "properties/property_registry.h"
#include "tools/repro.h"
#include "tools/selfcheck.h"

namespace {

constexpr const char* kUsage = R"(mlacheck: correctness checks and fuzzing for sparse MLA decode kernels

usage: mlacheck <command> [options]

commands:
  list                      the backends and whether each is usable here, the ops of SPEC.md,
                            their outputs' comparison rules, and registered implementations
  selfcheck [--seed N] [--samples N]
                            check the toolkit's own foundations (codecs, views, guarded buffers,
                            comparison) on this machine, each against a planted fault; prints a table
  repro FILE [--backend host|cuda] [--impl OP@NAME]
                            rerun one case file (what a failing property or fuzzer prints): its
                            property on its implementation and backend unless overridden; prints
                            PASS or FAIL with the verdict. exit 0 holds, 1 violated, 2 bad case
  help, --help              this text

exit status: 0 ok, 1 a check failed, 2 bad usage or input
)";

int usage_error(const std::string& what) {
  std::cerr << "mlacheck: " << what << " (see mlacheck --help)\n";
  return 2;
}

int cmd_list() {
  using namespace mlacheck;
  // Backends first: whether the cuda tests will run here, and if not why, is the first question.
  std::cout << "backends:\n";
  for (const BackendStatus& b : backend_statuses()) {
    const std::string name = backend_name(b.backend);
    const char* state = b.usable ? "usable" : "not usable";
    std::cout << "  " << name << std::string(6 - name.size(), ' ') << state
              << std::string(12 - std::string(state).size(), ' ') << b.detail << '\n';
  }
  std::cout << "\nops (SPEC.md):\n";
  for (const OpInfo& op : spec_ops()) {
    std::cout << "  " << op.name << std::string(22 - op.name.size(), ' ') << "§" << op.section
              << std::string(5 - op.section.size(), ' ') << op.summary << '\n';
  }
  std::cout << "\nfloat outputs and their tolerances (integer outputs compare exactly):\n";
  for (const ToleranceEntry& e : tolerance_table()) {
    const std::string name = std::string(e.op) + "." + std::string(e.output);
    std::cout << "  " << name << std::string(26 - name.size(), ' ') << "atol " << e.tolerance.atol << ", rtol "
              << e.tolerance.rtol << ", cosine distance <= " << e.tolerance.max_cosine_distance << '\n';
  }
  const auto impls = mlacheck::kernels::registry().list();
  std::cout << "\nimplementations (op@name; each runs on the usable backends above):\n";
  for (const auto& i : impls) {
    const std::string q = i.qualified();
    std::cout << "  " << q << std::string(q.size() < 30 ? 30 - q.size() : 1, ' ') << i.summary << '\n';
  }
  if (impls.empty()) std::cout << "  none registered in this build\n";
  std::cout << "\nproperties (a case file names one; mlacheck repro runs it):\n";
  for (const auto& p : mlacheck::property_registry().list()) {
    std::cout << "  " << p.name << std::string(p.name.size() < 52 ? 52 - p.name.size() : 1, ' ') << p.summary << '\n';
  }
  return 0;
}

// Parses "--name value" integer options; returns false (with a message) on anything else.
bool parse_int_option(const std::vector<std::string>& args, size_t& i, const char* name, int64_t& out,
                      std::string& error) {
  if (args[i] != name) return false;
  if (i + 1 >= args.size()) {
    error = std::string(name) + " needs a value";
    return true;
  }
  char* end = nullptr;
  const long long v = std::strtoll(args[i + 1].c_str(), &end, 10);
  if (args[i + 1].empty() || *end != '\0' || v < 0) {
    error = std::string(name) + " needs a non-negative integer, got '" + args[i + 1] + "'";
  } else {
    out = v;
  }
  ++i;
  return true;
}

int cmd_selfcheck(const std::vector<std::string>& args) {
  int64_t seed = 1, samples = 2000;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string error;
    if (!parse_int_option(args, i, "--seed", seed, error) && !parse_int_option(args, i, "--samples", samples, error)) {
      return usage_error("selfcheck: unknown option '" + args[i] + "'");
    }
    if (!error.empty()) return usage_error("selfcheck: " + error);
  }
  if (samples < 1) return usage_error("selfcheck: --samples must be at least 1");
  return mlacheck::run_selfcheck(std::cout, static_cast<uint64_t>(seed), samples) == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage_error("no command given");
  const std::string cmd = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (cmd == "help" || cmd == "--help" || cmd == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (cmd == "list") {
      if (!args.empty()) return usage_error("list takes no arguments");
      return cmd_list();
    }
    if (cmd == "selfcheck") return cmd_selfcheck(args);
    if (cmd == "repro") return mlacheck::run_repro_command(args, std::cout, std::cerr);
    return usage_error("unknown command '" + cmd + "'");
  } catch (const mlacheck::Error& e) {
    std::cerr << "mlacheck: " << e.what() << '\n';
    return 2;
  }
}
