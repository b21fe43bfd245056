// The mlacheck command: entry point and subcommand dispatch.
//
// Exit codes: 0 success, 1 a check failed, 2 bad usage or bad input (one line on stderr).
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/contract.h"
#include "core/error.h"
#include "core/ops.h"
#include "core/tolerances.h"
#include "kernels/registry.h"
#include "properties/property_registry.h"
#include "fuzz/fuzz_input.h"
#include "kernels/plugin.h"
#include "tools/bench_command.h"
#include "tools/check_command.h"
#include "tools/fuzz_command.h"
#include "tools/mutants_command.h"
#include "tools/repro.h"
#include "tools/selfcheck.h"

namespace {

constexpr const char* kUsage = R"(mlacheck: correctness checks and fuzzing for sparse MLA decode kernels

usage: mlacheck <command> [options]

commands:
  list [--plugin PATH]...   the backends and whether each is usable here, the ops of docs/ops.md,
                            their outputs' comparison rules, and registered implementations
  selfcheck [--seed N] [--samples N]
                            check the toolkit's own foundations (codecs, views, guarded buffers,
                            comparison) on this machine, each against a planted fault; prints a table
  check [--impl OP@NAME]... [--plugin PATH]... [--backend host|cuda] [--budget S] [--cases N]
        [--seed N] [--corpus DIR] [--save DIR] [--format table|json] [--contract-probe]
        [--case-timeout S]
                            run implementations (the --impl ones, else every one the plugins
                            register, else every <op>@ref) through their op's whole suite: the
                            properties on seed and random cases, the corpus regressions, then
                            random fuzzing for S seconds (30) each, in a child process; PASS, or
                            FAIL with the first failing check, its verdict and the case, saved
                            in DIR (mlacheck-cases); a kernel that crashes or faults the device
                            is FAIL crashed (cudaErrorIllegalAddress), its case saved too.
                            Cases are drawn inside each implementation's declared contract;
                            --contract-probe runs cases outside it in the budget's last quarter
                            and reports them apart, never as FAIL. Each implementation ends
                            within S + 5%: a case still running then is not judged, unless it
                            ran past the case timeout (a third of S, 10 to 60 s): FAIL timed out.
                            exit 0 all pass, 1 one failed, 2 bad usage or setup
  repro FILE [--backend host|cuda] [--impl OP@NAME] [--target T] [--plugin PATH]... [--ignore-contract]
                            rerun one case file (what a failing property or fuzzer prints) or a
                            raw fuzz input (decoded by target T's harness; T is read from the path
                            when it names one): its property on its implementation and backend
                            unless overridden; prints PASS or FAIL with the verdict, or OUTSIDE
                            for a case outside the implementation's contract (--ignore-contract
                            runs it). exit 0 holds or outside, 1 violated, 2 bad case
  repro --all DIR [...]     every .case file in DIR, one line each
  fuzz --target T [--backend host|cuda] [--impl OP@NAME] [--time S | --runs N] [--jobs N]
       [--out DIR] [--seeds DIR]... [--seed N] [--minimize S] [--timeout S] [--harness-dir DIR]
       [--plugin PATH]...
                            a libFuzzer campaign on T's harness (fork mode, N jobs) seeded with
                            T's case files: progress every 5 s, crashes deduplicated by verdict
                            or stack, minimized and written as cases, corpus merged at the end;
                            --time S holds for all of it (within 5%): what the time cuts short
                            (triage, minimizing, the merge) is said in a line.
                            exit 0 no crash, 1 crashes found, 2 bad usage or setup
  mutants [--backend host|cuda] [--budget S] [--format table|json] [--only ID]... [--cases N]
          [--seed N] [--corpus DIR] [--save DIR] [--plugin PATH]... [--case-timeout S]
                            the kill matrix: each seeded-bug variant (<op>@<docs/bugs.md id>) against
                            the property suite, the corpus regressions and random fuzzing, until
                            the first kill or S seconds (60; the named check alone gets what is
                            left of them, and each variant ends within S + 5%); the first check that killed it, its
                            verdict, the time, and whether the check its docs/bugs.md row names kills it;
                            --save DIR writes each killing case there, for repro.
                            exit 0 all killed, 1 one survived, 2 bad usage
  bench guards [--backend cuda|host] [--size production|small] [--repeats N] [--format table|json]
                            what guarded memory costs a launch: each kernel at DeepSeek-V3.2 decode
                            shapes timed plain (launch, synchronize) and guarded (arm, launch,
                            synchronize, check), alternately on the same buffers; medians and ratios
  targets                   the fuzz targets (one harness each) and their properties
  decode --target T FILE [--impl OP@NAME] [--backend B]
                            print the case a raw fuzz input of T decodes to
  encode CASE OUT           write the raw fuzz input that decodes to CASE (a case file) to OUT
  help, --help              this text

--plugin PATH loads a shared library of your own kernels (include/mlacheck/plugin.h) into the
registry first, so OP@NAME may name its implementations; a case on them runs in a child process.
--only of mutants takes a plugin's implementation too (a plugin's OP@<capital and digits> ones are
variants by default).

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
    if (!contract->empty()) std::cout << std::string(32, ' ') << "contract: " << contract->describe() << '\n';
  }
  if (impls.empty()) std::cout << "  none registered in this build\n";
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

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw mlacheck::Error("cannot read '" + path + "'");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

int cmd_decode(const std::vector<std::string>& args) {
  std::string target, file, impl, backend;
  for (size_t i = 0; i < args.size(); ++i) {
    if ((args[i] == "--target" || args[i] == "--impl" || args[i] == "--backend") && i + 1 < args.size()) {
      (args[i] == "--target" ? target : args[i] == "--impl" ? impl : backend) = args[i + 1];
      ++i;
    } else if (!args[i].empty() && args[i][0] != '-' && file.empty()) {
      file = args[i];
    } else {
      return usage_error("decode: unexpected '" + args[i] + "'");
    }
  }
  if (target.empty() || file.empty()) return usage_error("decode needs --target T and a file");
  const mlacheck::FuzzCase c = mlacheck::decode_fuzz_input(mlacheck::find_fuzz_target(target), read_file(file), impl, backend);
  std::cout << c.text.format();
  return 0;
}

int cmd_encode(const std::vector<std::string>& args) {
  if (args.size() != 2 || args[0].empty() || args[0][0] == '-') return usage_error("encode takes CASE OUT");
  const std::string bytes = mlacheck::encode_fuzz_input(read_file(args[0]));
  std::ofstream out(args[1], std::ios::binary);
  if (!(out << bytes)) throw mlacheck::Error("cannot write '" + args[1] + "'");
  std::cout << "encode: " << args[0] << " -> " << args[1] << " (" << bytes.size() << " bytes)\n";
  return 0;
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
      for (size_t i = 0; i < args.size(); i += 2) {
        if (args[i] != "--plugin" || i + 1 >= args.size()) return usage_error("list takes only --plugin PATH");
        mlacheck::kernels::load_plugin_isolated(args[i + 1]);
      }
      return cmd_list();
    }
    if (cmd == "selfcheck") return cmd_selfcheck(args);
    if (cmd == "repro") return mlacheck::run_repro_command(args, std::cout, std::cerr);
    if (cmd == "fuzz") return mlacheck::run_fuzz_command(args, std::cout, std::cerr);
    if (cmd == "mutants") return mlacheck::run_mutants_command(args, std::cout, std::cerr);
    if (cmd == "check") return mlacheck::run_check_command(args, std::cout, std::cerr);
    if (cmd == "bench") return mlacheck::run_bench_command(args, std::cout, std::cerr);
    if (cmd == "targets") {
      if (!args.empty()) return usage_error("targets takes no arguments");
      return cmd_targets();
    }
    if (cmd == "decode") return cmd_decode(args);
    if (cmd == "encode") return cmd_encode(args);
    return usage_error("unknown command '" + cmd + "'");
  } catch (const mlacheck::Error& e) {
    std::cerr << "mlacheck: " << e.what() << '\n';
    return 2;
  }
}
