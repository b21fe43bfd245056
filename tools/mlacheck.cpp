// The mlacheck command: its command line (cli_main, tools/cli_main.h) and subcommand dispatch. The
// executable's main is tools/mlacheck_main.cpp; the command-line fuzzer (tools/cli_fuzzer.cpp) runs
// cli_main in-process.
//
// Exit codes: 0 success, 1 a check failed, 2 bad usage or bad input (one line on stderr).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <optional>
#include <vector>

#include "core/backend/backend.h"
#include "core/contract.h"
#include "core/error.h"
#include "core/ops.h"
#include "core/tolerances.h"
#include "kernels/registry.h"
#include "properties/property_registry.h"
#include "fuzz/fuzz_input.h"
#include "harness/input_file.h"
#include "kernels/plugin.h"
#include "kernels/python_bridge.h"
#include "tools/bench_command.h"
#include "tools/cli_main.h"
#include "tools/check_command.h"
#include "tools/adapters.h"
#include "tools/flags_typed.h"
#include "tools/fuzz_command.h"
#include "tools/mutants_command.h"
#include "tools/repro.h"
#include "tools/sanitize.h"
#include "tools/selfcheck.h"

namespace {

namespace flags = mlacheck::flags;

int usage_error(const std::string& what) {
  std::cerr << "mlacheck: " << what << " (see mlacheck --help)\n";
  return 2;
}

// `list --contract-terms`: one line per term of every op, then what any op takes.
int cmd_list_contract_terms() {
  using namespace mlacheck;
  std::cout << "contract terms (a clause each; N: a number or another quantity; docs/plugins.md, \"Contracts\"):\n";
  for (const OpInfo& op : spec_ops()) {
    for (const auto& [clause, meaning] : contract_term_lines(std::string(op.name))) {
      std::cout << "  " << op.name << std::string(op.name.size() < 18 ? 18 - op.name.size() : 1, ' ') << clause
                << std::string(clause.size() < 44 ? 44 - clause.size() : 1, ' ') << meaning << '\n';
    }
  }
  std::cout << "  (any op)          KEY <= N, KEY >= N, KEY = N, KEY in [A, B], KEY one-of WORD...\n"
               "                    limits a key of the op's case files (a case file names its keys)\n";
  return 0;
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
  std::cout << "\nops (docs/ops.md):\n";
  size_t name_width = 0;
  for (const OpInfo& op : spec_ops()) name_width = std::max(name_width, op.name.size());
  for (const OpInfo& op : spec_ops()) {
    std::cout << "  " << op.name << std::string(name_width + 2 - op.name.size(), ' ') << "§" << op.section
              << std::string(op.section.size() < 5 ? 5 - op.section.size() : 1, ' ') << op.summary << '\n';
  }
  std::cout << "\nfloat outputs and their tolerances (integer outputs compare exactly):\n";
  for (const ToleranceEntry& e : tolerance_table()) {
    const std::string name = std::string(e.op) + "." + std::string(e.output);
    std::cout << "  " << name << std::string(name.size() < 26 ? 26 - name.size() : 1, ' ') << "atol " << e.tolerance.atol << ", rtol "
              << e.tolerance.rtol << ", cosine distance <= " << e.tolerance.max_cosine_distance << '\n';
  }
  const auto impls = mlacheck::kernels::registry().list();
  std::cout << "\nimplementations (op@name; each runs on the usable backends above):\n";
  for (const auto& i : impls) {
    const std::string q = i.qualified();
    std::cout << "  " << q << std::string(q.size() < 30 ? 30 - q.size() : 1, ' ') << i.summary << '\n';
    const auto contract = mlacheck::kernels::registry().contract(q);
    if (!contract->clauses.empty()) std::cout << std::string(32, ' ') << "contract: " << contract->describe() << '\n';
  }
  if (impls.empty()) std::cout << "  none registered in this build\n";
  std::cout << "\nadapters of upstream kernels (--adapter NAME; docs/upstream.md):\n";
  const std::vector<mlacheck::AdapterInfo> adapters = mlacheck::shipped_adapters();
  for (const mlacheck::AdapterInfo& a : adapters) {
    std::cout << "  " << a.name << std::string(a.name.size() < 40 ? 40 - a.name.size() : 1, ' ') << a.op << '\n';
  }
  if (adapters.empty()) std::cout << "  none: the Python package is not beside this executable\n";
  std::cout << "\ncontract terms (clauses a plugin's contract may use; N: a number or another quantity):\n";
  for (const OpInfo& op : spec_ops()) {
    const std::vector<std::string> terms = contract_terms(std::string(op.name));
    if (terms.empty()) continue;
    std::string line;
    for (const std::string& t : terms) line += (line.empty() ? "" : "; ") + t;
    std::cout << "  " << op.name << std::string(op.name.size() < 18 ? 18 - op.name.size() : 1, ' ') << line << '\n';
  }
  std::cout << "  (any op: KEY <= N, KEY in [A, B], KEY one-of WORD... on a key of its case files)\n";
  std::cout << "\nproperties (a case file names one; mlacheck repro runs it):\n";
  for (const auto& p : mlacheck::property_registry().list()) {
    std::cout << "  " << p.name << std::string(p.name.size() < 52 ? 52 - p.name.size() : 1, ' ') << p.summary << '\n';
  }
  std::cout << "  (the far_* properties on cuda do not run a Python callable: their buffers are reserved device\n"
               "   memory, a virtual range mapped in granules, which has no CUDA IPC handle to lend the worker's\n"
               "   process; check says so per property, PARTIAL, never PASS. On the host backend they run.)\n";
  return 0;
}

int cmd_selfcheck(const flags::SelfcheckFlags& f) {
  return mlacheck::run_selfcheck(std::cout, f.seed, f.samples) == 0 ? 0 : 1;
}

int cmd_targets() {
  using namespace mlacheck;
  std::cout << "fuzz targets (mlacheck fuzz --target T; the harness is T_fuzzer):\n";
  for (const FuzzTarget& t : fuzz_targets()) {
    std::cout << "  " << t.name << std::string(t.name.size() < 22 ? 22 - t.name.size() : 1, ' ') << t.summary << '\n';
    for (const PropertyEntry* p : fuzz_target_properties(t)) {
      std::cout << "      " << p->name << (p->ref_only ? "  (ref only)" : "") << '\n';
    }
  }
  return 0;
}

int cmd_decode(const flags::DecodeFlags& f) {
  if (f.target.empty()) return flags::usage_error(std::cerr, "decode", "--target T is required");
  const mlacheck::FuzzCase c = mlacheck::decode_fuzz_input(mlacheck::find_fuzz_target(f.target),
                                                           mlacheck::read_input_file(f.positional[0]), f.impl, f.backend);
  std::cout << c.text.format();
  return 0;
}

int cmd_encode(const flags::EncodeFlags& f) {
  const std::string bytes = mlacheck::encode_fuzz_input(mlacheck::read_input_file(f.positional[0]));
  std::ofstream out(f.positional[1], std::ios::binary);
  if (!(out << bytes) || !out.flush()) throw mlacheck::Error("cannot write '" + f.positional[1] + "'");
  std::cout << "encode: " << f.positional[0] << " -> " << f.positional[1] << " (" << bytes.size() << " bytes)\n";
  return 0;
}

// Commands whose flags this file reads; the others parse their own (tools/*_command.cpp).
int run_command(const std::string& cmd, const std::vector<std::string>& args) {
  if (cmd == "repro") return mlacheck::run_repro_command(args, std::cout, std::cerr);
  if (cmd == "fuzz") return mlacheck::run_fuzz_command(args, std::cout, std::cerr);
  if (cmd == "mutants") return mlacheck::run_mutants_command(args, std::cout, std::cerr);
  if (cmd == "check") return mlacheck::run_check_command(args, std::cout, std::cerr);
  if (cmd == "bench") return mlacheck::run_bench_command(args, std::cout, std::cerr);
  // Each parses into its command's typed flags (tools/flags_typed.h): -1 goes on.
  if (cmd == "list") {
    flags::ListFlags f;
    if (const int rc = flags::parse_list(args, f, std::cout, std::cerr); rc >= 0) return rc;
    for (const std::string& path : f.plugin) mlacheck::kernels::load_plugin_isolated(path);
    mlacheck::kernels::load_python_isolated(mlacheck::python_specs(f.python, f.adapter));
    return f.contract_terms ? cmd_list_contract_terms() : cmd_list();
  }
  if (cmd == "selfcheck") {
    flags::SelfcheckFlags f;
    const int rc = flags::parse_selfcheck(args, f, std::cout, std::cerr);
    return rc >= 0 ? rc : cmd_selfcheck(f);
  }
  if (cmd == "targets") {
    flags::TargetsFlags f;
    const int rc = flags::parse_targets(args, f, std::cout, std::cerr);
    return rc >= 0 ? rc : cmd_targets();
  }
  if (cmd == "decode") {
    flags::DecodeFlags f;
    const int rc = flags::parse_decode(args, f, std::cout, std::cerr);
    return rc >= 0 ? rc : cmd_decode(f);
  }
  flags::EncodeFlags f;
  const int rc = flags::parse_encode(args, f, std::cout, std::cerr);
  return rc >= 0 ? rc : cmd_encode(f);
}

bool is_command(const std::string& name) {
  for (const flags::CommandSpec& c : flags::commands()) {
    if (c.name == name) return true;
  }
  return false;
}

// Everything written to stdout reached it: a failed write (a full disk, /dev/full) is an error
// of its own, exit 2, instead of a silent success.
int stdout_checked(const std::string& prefix, int rc) {
  std::cout.flush();
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int error = errno;
  if (flushed && std::cout.good() && !std::ferror(stdout)) return rc;
  // A command that failed has said why in its one line (exit 2): the output it could not write
  // then is not a second line (found by tools/cli_fuzzer: repro of a raw input, stdout on /dev/full).
  if (rc == 2) return 2;
  std::cerr << prefix << "cannot write the output to stdout"
            << (error != 0 ? std::string(": ") + std::strerror(error) : std::string()) << '\n';
  return 2;
}

}  // namespace

int mlacheck::cli_main(int argc, char** argv) {
  if (argc < 2) return usage_error("no command given");
  const std::string cmd = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    if (args.empty()) {
      std::cout << flags::overview();
    } else if (args.size() == 1 && is_command(args[0])) {
      std::cout << flags::help(args[0]);
    } else {
      return usage_error("help takes one command, got '" + args[0] + "'");
    }
    return stdout_checked("mlacheck: ", 0);
  }
  if (!is_command(cmd)) return usage_error("unknown command '" + cmd + "'");
  if (const std::optional<int> sanitized = mlacheck::run_sanitized(cmd, args, std::cerr)) return *sanitized;
  int rc = 2;
  try {
    rc = run_command(cmd, args);
  } catch (const mlacheck::Error& e) {
    std::cerr << flags::prefix(cmd) << e.what() << '\n';
    rc = 2;
  } catch (const std::exception& e) {
    // What the commands do not turn into a line of their own (a folder that cannot be made, memory
    // that cannot be had) is still one line and exit 2, never an abort.
    std::cerr << flags::prefix(cmd) << e.what() << '\n';
    rc = 2;
  }
  return stdout_checked(flags::prefix(cmd), rc);
}
