// libFuzzer harness for the mlacheck command line itself: each input is an argv, run in-process
// through the command's own entry point (mlacheck::cli_main, tools/cli_main.h) exactly as main runs
// it, and then held to the command line's contract:
//   - it returns (no crash, no sanitizer report, no hang: libFuzzer's -timeout);
//   - its exit status is 0, 1 or 2;
//   - on exit 2, stderr holds exactly one line, starting "mlacheck" (what the command printed, and
//     what child processes it forked printed, counted together, as a user would see them), but for
//     two exceptions the commands make on purpose, allowed unless MLACHECK_CLI_FUZZ_STRICT=1: the
//     progress lines of check and mutants before it, and repro --all's line per malformed file;
//   - it leaves no child process behind and no file descriptor open.
// A broken rule prints the argv (shell-quoted), the exit status and both streams, then aborts, so
// libFuzzer keeps the input. MLACHECK_CLI_FUZZ_TRACE=1 prints every argv, its exit status and the
// peak RSS so far; MLACHECK_CLI_FUZZ_PRINT=1 prints the argv each input stands for and whether it
// would run, and runs nothing (to read a crash file or a corpus).
//
// Input. The first byte picks the mode:
//   - a multiple of 4 ("L" for one): a literal argv, one argument per line after the first; an
//     argument "@NAME" is the named file of the dictionary below (tools/cli_seeds/ are written so);
//   - anything else: an argv drawn from the flag table (tools/flags.def) by the rest of the bytes:
//     a command (or help, an unknown command, none), the flags each command needs to stay fast, then
//     up to six more items: flags of the command (in all three spellings, sometimes without their
//     value), flags of other commands, positional arguments, "--", --help, garbage. Values are drawn
//     per kind: whole numbers and reals inside and outside the flag's range (and not numbers),
//     every choice and some that are not, seeds past 2^64; text and list values from the
//     dictionary: case files, malformed case files, raw fuzz inputs, folders, output paths,
//     plugins, implementations, targets, properties, variant ids. One input in 16 runs with a
//     stdout that refuses every write (as `> /dev/full` does).
//
// Dictionary (made once, in a scratch folder under $TMPDIR): fast case files of the source tree's
// corpus/ (one per op, some regressions), malformed case files made from one of them, raw fuzz
// inputs (`mlacheck encode` of seeds, and small random bytes), folders of good, malformed and no
// cases, a minimal corpus, a missing path, a regular file where a folder is wanted, /dev/null,
// /dev/zero, and output paths inside the scratch folder (plus /dev/full and paths under /dev/null).
// Plugins: the example plugin and its buggy twin and the test fixture plugins of the build tree. A
// plugin that loads can be loaded once per process (a second load finds its names taken), so every
// plugin that loads is loaded at start-up (its implementations are then there for --impl) and an
// input's --plugin of it is refused as taken, every time; one that does not load never changes the
// process, and is refused the same way every time.
//
// What is kept fast, or not run (an input outside these is skipped, returned to libFuzzer as -1):
//   - --python, and --adapter naming a shipped adapter: each starts a Python worker (seconds);
//   - check: up to 2 implementations (all <op>@ref is a third of a second), --budget <= 0.05 s
//     (0.03 s for sparse MLA and paged logits: past it a case of seconds starts, and is let finish),
//     --cases <= 3; mutants: 1 or 2 --only, the same budget and cases (the whole matrix: 0.8 s);
//   - the hanging variants sparse_mla_decode@H1 and @H2 (half a second each to be caught);
//   - selfcheck --samples <= 100; bench guards on the host backend (0.4 s); bench fuzz --jobs > 1
//     (it execs this program as its workers) or more than 0.1 s of measuring;
//   - repro --all of a folder with more than 4 cases, a .call file (the Python package), and a file
//     that is no case read as a raw fuzz input, but the dictionary's (a few bytes can decode to a
//     case of seconds and hundreds of MB: the op harnesses' budgets are for those);
//   - fuzz: its campaign runs the harness binaries as children for seconds, so it always gets a
//     --harness-dir (an empty folder unless the input names one without harnesses): everything up to
//     finding the harness runs;
//   - every path a command writes (check and mutants --save, --report-dir, fuzz --out and --sarif,
//     encode's OUT) must be inside the scratch folder, or /dev/null, /dev/full, or under /dev/null/;
//   - no GPU: CUDA_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES are emptied at start-up;
//   - --sanitize memcheck, where compute-sanitizer is found, would replace this process with it:
//     the input then runs as the sanitized child does (MLACHECK_SANITIZED=1).
// Commands run with the scratch folder's work/ as the current folder, emptied before each input.
// Child processes the commands fork get the signal handlers and sanitizer settings the mlacheck
// executable has (not libFuzzer's), their stdout goes to /dev/null and their stderr to a file that
// counts as the command's stderr.
#include <dirent.h>
#include <fcntl.h>
#include <sanitizer/common_interface_defs.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>

#include "core/error.h"
#include "fuzz/fuzz_input.h"
#include "harness/memory_budget.h"
#include "kernels/plugin.h"
#include "kernels/registry.h"
#include "properties/property_registry.h"
#include "tools/adapters.h"
#include "tools/cli_main.h"
#include "tools/flags.h"

namespace {

namespace fs = std::filesystem;
namespace flags = mlacheck::flags;
using Argv = std::vector<std::string>;

// ---- the scratch folder and the dictionary ------------------------------------------------------

struct Dictionary {
  fs::path root, work, fixtures, child_err;
  std::string start_dir;  // the folder the fuzzer started in (libFuzzer's relative paths)
  std::map<std::string, std::string> named;  // @NAME -> path, for literal inputs
  std::vector<std::string> cases, bad_cases, raw_inputs, in_dirs, out_paths, harness_dirs, plugins;
  std::vector<std::string> impls, variant_ids, targets, properties, odd_paths;
  std::vector<std::string> shipped_adapters;
  std::set<std::string> big_dirs;  // folders with more than 4 cases (repro --all of them is skipped)
  bool compute_sanitizer = false;  // whether --sanitize memcheck would exec it here
  bool trace = false;              // MLACHECK_CLI_FUZZ_TRACE=1: every argv and its exit status
  bool strict = false;             // MLACHECK_CLI_FUZZ_STRICT=1: no known exceptions to one line on exit 2
  bool print_only = false;         // MLACHECK_CLI_FUZZ_PRINT=1: print each input's argv, run nothing
};

Dictionary& dict() {
  static Dictionary* d = new Dictionary;  // never destroyed: at_exit reads it
  return *d;
}

// Garbage arguments: what no table row expects.
const std::vector<std::string>& garbage() {
  static const std::vector<std::string> g = {
      "", "-", "--", "---", "--=", "=", " ", "\t", "-h", "-help", "--help=1", "x", "--x", "-x=1", "@", "%s%n%s",
      "../..", "--budget", "--impl=", "\xff\xfe\x01", "a b", "\\", std::string(300, 'a'), "--" + std::string(80, 'z'),
      "topk_decode@", "@ref", "nope@ref", "-1", "0", "1e999"};
  return g;
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// The case files of the dictionary: fast ones (tens of milliseconds under the sanitizers), one or
// more per op, some regressions with a seeded variant that fails them.
const char* const kCaseFiles[] = {
    "regressions/R1-topk-decode-view-past-num-decode-tokens.case",
    "regressions/S1-topk-to-global-no-slot-is-minus-one.case",
    "regressions/K2-impl-nonuniform-query-lengths-refused.case",
    "regressions/U1-metadata-nonuniform-batch-fast-path.case",
    "regressions/R4-topk-fast-path-only-for-k-2048.case",
    "regressions/T5-mla-decode-empty-request-defined-output.case",
    "regressions/H1-sparse-mla-empty-row-ends.case",
    "regressions/O1-paged-logits-row-lengths-read-past-context-lens.case",
    "topk_to_global/equals_oracle-0.case",
    "mqa_logits/equals_oracle-1.case",
    "paged_mqa_logits/clean_equals_unclean-1.case",
    "decode_metadata/equals_oracle-0.case",
    "indexer_k_cache_insert/far_slots-0.case",
    "pack_decode/slots_left_aligned-3.case",
    "unpack_decode/inverts_pack-0.case",
    "topk_decode/permutation_commutes-0.case",
    "topk_prefill/rows_admissible-2.case",
    "mla_decode_impl/engine_sequence-1.case",
    "sparse_mla_decode/equals_oracle-0.case",
    "mla_decode/far_pages-0.case",
    "indexer_decode_step/equals_oracle-1.case",
    "case_text/small.case",  // not a case repro runs (a parser seed): refused in one line
};

// "regressions/R1-topk-....case" -> "R1-topk-...", "topk_to_global/equals_oracle-0.case" ->
// "topk_to_global-equals_oracle-0": the @NAME of a literal input.
std::string case_key(const std::string& rel) {
  std::string k = rel.substr(0, rel.size() - 5);
  if (k.rfind("regressions/", 0) == 0) return k.substr(12);
  std::replace(k.begin(), k.end(), '/', '-');
  return k;
}

void add(std::vector<std::string>& pool, const std::string& key, const std::string& path) {
  pool.push_back(path);
  dict().named[key] = path;
}

// Malformed cases made from a good one: a key dropped, a value too large, negative, not a number,
// a key twice, a line that is no key, an unknown property, nothing, bytes that are no text.
std::vector<std::pair<std::string, std::string>> malformed_from(const std::string& good) {
  std::vector<std::string> lines;
  std::istringstream in(good);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && l[0] != '#') lines.push_back(l);
  }
  const auto join = [](const std::vector<std::string>& ls) {
    std::string s;
    for (const std::string& l : ls) s += l + "\n";
    return s;
  };
  std::vector<std::pair<std::string, std::string>> out;
  size_t number = 0;  // the first line whose value is a number
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t sp = lines[i].find(' ');
    if (sp != std::string::npos && std::isdigit(static_cast<unsigned char>(lines[i][sp + 1]))) {
      number = i;
      break;
    }
  }
  const auto with_value = [&](const std::string& v) {
    std::vector<std::string> ls = lines;
    if (number < ls.size()) ls[number] = ls[number].substr(0, ls[number].find(' ')) + " " + v;
    return join(ls);
  };
  {
    std::vector<std::string> ls = lines;
    if (ls.size() > 3) ls.erase(ls.begin() + 3);
    out.push_back({"bad-key-missing", join(ls)});
  }
  out.push_back({"bad-huge-value", with_value("99999999999999999999999")});
  out.push_back({"bad-negative-value", with_value("-7")});
  out.push_back({"bad-not-a-number", with_value("seven")});
  {
    std::vector<std::string> ls = lines;
    if (!ls.empty()) ls.push_back(ls.back());
    out.push_back({"bad-key-twice", join(ls)});
  }
  out.push_back({"bad-stray-line", join(lines) + "this is not a key value line at all\n"});
  {
    std::vector<std::string> ls = lines;
    if (!ls.empty()) ls[0] = "property nope.no_such_property";
    out.push_back({"bad-unknown-property", join(ls)});
  }
  out.push_back({"bad-empty", ""});
  out.push_back({"bad-binary", std::string("\x00\xff\xfe property\x01\n\x80", 15)});
  return out;
}

// The --sanitize memcheck path of tools/sanitize.cpp execs compute-sanitizer when it finds it.
bool compute_sanitizer_found() {
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    for (size_t at = 0; at <= p.size();) {
      const size_t end = std::min(p.find(':', at), p.size());
      const fs::path c = fs::path(p.substr(at, end - at)) / "compute-sanitizer";
      if (end > at && ::access(c.c_str(), X_OK) == 0) return true;
      at = end + 1;
    }
  }
  for (const char* c : {"/usr/local/cuda/bin/compute-sanitizer", "/usr/local/cuda/compute-sanitizer/compute-sanitizer"}) {
    if (::access(c, X_OK) == 0) return true;
  }
  return false;
}

// ---- child processes: the executable's settings, not libFuzzer's ---------------------------------

// The signal handlers this process had before libFuzzer installed its own (the sanitizer runtime's,
// or the defaults): what the mlacheck executable's children run with.
const int kSignals[] = {SIGABRT, SIGALRM, SIGBUS, SIGFPE, SIGILL, SIGINT, SIGSEGV, SIGTERM, SIGUSR1, SIGUSR2, SIGXFSZ};
struct sigaction g_before_libfuzzer[sizeof kSignals / sizeof kSignals[0]];
int g_child_err = -1, g_dev_null = -1;  // the current input's children's stderr; /dev/null

// In every child a command forks (pthread_atfork): libFuzzer's crash handlers and death callback
// would write a crash file for the child's own crash (a buggy kernel's, which the command is there
// to catch) and exit in a way the mlacheck executable's child never does.
void in_forked_child() {
  for (size_t i = 0; i < sizeof kSignals / sizeof kSignals[0]; ++i) ::sigaction(kSignals[i], &g_before_libfuzzer[i], nullptr);
  __sanitizer_set_death_callback(nullptr);
  if (g_child_err >= 0) ::dup2(g_child_err, 2);
  if (g_dev_null >= 0) ::dup2(g_dev_null, 1);
}

// ---- argv from bytes --------------------------------------------------------------------------------

// The budgets an in-range value of a flag is drawn under (and the most an input may ask for).
double cap_of(const std::string& cmd, const std::string& flag) {
  static const std::map<std::string, double> caps = {
      {"check budget", 0.05}, {"mutants budget", 0.05}, {"check cases", 3},   {"mutants cases", 3},
      {"selfcheck samples", 100}, {"bench seconds", 0.05}, {"bench repeats", 2}, {"bench jobs", 1}};
  const auto it = caps.find(cmd + " " + flag);
  return it == caps.end() ? -1 : it->second;
}

template <class T>
T pick(FuzzedDataProvider& in, const std::vector<T>& pool) {
  if (pool.empty()) return T();  // a pool whose files are not there (a harness run outside its build tree)
  return pool[in.ConsumeIntegralInRange<size_t>(0, pool.size() - 1)];
}

std::string real_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string int_value(FuzzedDataProvider& in, const flags::FlagSpec& f, double cap) {
  const int64_t hi = cap >= 0 ? std::min<int64_t>(f.int_max, static_cast<int64_t>(cap)) : f.int_max;
  switch (in.ConsumeIntegralInRange<int>(0, 15)) {
    case 0: case 1: case 2: case 3: case 4: case 5:  // in range, small
      return std::to_string(f.int_min + in.ConsumeIntegralInRange<int64_t>(0, std::max<int64_t>(0, std::min<int64_t>(hi - f.int_min, 3))));
    case 6: return std::to_string(hi);
    case 7: return std::to_string(f.int_max);  // the table's max (past the cap: such an input is skipped)
    case 8: return f.int_max == INT64_MAX ? "9223372036854775808" : std::to_string(f.int_max + 1);
    case 9: return f.int_min == INT64_MIN ? "-9223372036854775809" : std::to_string(f.int_min - 1);
    case 10: return "99999999999999999999999";
    case 11: return pick<std::string>(in, {"", "x", "1.5", "0x10", "+1", " 1", "1 ", "1e3", "--1", "-"});
    case 12: return "-" + std::to_string(in.ConsumeIntegral<uint8_t>());
    default: return std::to_string(in.ConsumeIntegral<int64_t>());
  }
}

std::string real_value(FuzzedDataProvider& in, const flags::FlagSpec& f, double cap) {
  const double hi = cap >= 0 ? std::min(f.real_max, cap) : f.real_max;
  switch (in.ConsumeIntegralInRange<int>(0, 13)) {
    case 0: case 1: case 2: case 3: case 4:  // in range, small
      return real_text(f.real_min + (hi - f.real_min) * in.ConsumeProbability<double>());
    case 5: return real_text(f.real_min);
    case 6: return real_text(hi);
    case 7: return real_text(f.real_max);
    case 8: return real_text(f.real_max * 2 + 1);
    case 9: return real_text(f.real_min > 0 ? f.real_min / 2 : f.real_min - 1);
    case 10: return pick<std::string>(in, {"nan", "inf", "-inf", "1e999", "-1e999", "1e-999", "0x1p-6", "-0"});
    case 11: return pick<std::string>(in, {"", "x", "1,5", " 1", "1 ", "1.", ".", "e", "0.05s", "١"});
    default: return real_text(in.ConsumeFloatingPoint<double>());
  }
}

std::string seed_value(FuzzedDataProvider& in) {
  static const std::vector<std::string> v = {"0", "1", "42", "18446744073709551615", "18446744073709551616",
                                             "0xffffffffffffffff", "0x10000000000000000", "0XaB", "0x", "-1",
                                             "-0", "", "x", "1.0", " 1", "99999999999999999999999999"};
  return in.ConsumeBool() ? pick(in, v) : std::to_string(in.ConsumeIntegral<uint64_t>());
}

std::string choice_value(FuzzedDataProvider& in, const flags::FlagSpec& f) {
  const std::vector<std::string> choices = f.choices();
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0: case 1: case 2: case 3: case 4: return pick(in, choices);
    case 5: {
      std::string c = pick(in, choices);
      for (char& ch : c) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      return c;
    }
    case 6: return pick(in, choices) + "x";
    default: return pick<std::string>(in, {"", "table", "json", "junit", "html", "sarif", "host", "cuda", "hip", "none", "small"});
  }
}

// A text or list value: from the pool the flag's meaning names, else from everything.
std::string text_value(FuzzedDataProvider& in, const std::string& cmd, const std::string& name) {
  Dictionary& d = dict();
  if (in.ConsumeIntegralInRange<int>(0, 9) == 0) return pick(in, garbage());
  if (name == "impl") return pick(in, d.impls);
  if (name == "only") return pick(in, d.variant_ids);
  if (name == "target") return pick(in, d.targets);
  if (name == "property") return pick(in, d.properties);
  if (name == "plugin") return pick(in, d.plugins);
  if (name == "corpus" || name == "seeds" || name == "all") return pick(in, d.in_dirs);
  if (name == "save" || name == "report-dir" || name == "out" || name == "sarif") return pick(in, d.out_paths);
  if (name == "harness-dir") return pick(in, d.harness_dirs);
  if (name == "sanitize") return pick<std::string>(in, {"memcheck", "", "asan", "Memcheck", "memcheck "});
  if (name == "emit") return pick<std::string>(in, {"pytest:out.py", "pytest:", "out.py", ""});
  if (name == "adapter") return pick<std::string>(in, {"nope", "nope.nope", "", "a.b.c", ".", "vllm."});
  (void)cmd;
  return pick(in, d.odd_paths);
}

Argv flag_item(FuzzedDataProvider& in, const std::string& cmd, const flags::FlagSpec& f) {
  const double cap = cap_of(cmd, f.name);
  std::string value;
  switch (f.kind) {
    case flags::Kind::Bool: break;
    case flags::Kind::Int: value = int_value(in, f, cap); break;
    case flags::Kind::Real: value = real_value(in, f, cap); break;
    case flags::Kind::Seed: value = seed_value(in); break;
    case flags::Kind::Choice: value = choice_value(in, f); break;
    case flags::Kind::Text:
    case flags::Kind::List: value = text_value(in, cmd, f.name); break;
  }
  const std::string flag = "--" + f.name;
  const int form = in.ConsumeIntegralInRange<int>(0, 15);
  if (f.kind == flags::Kind::Bool) {
    if (form < 12) return {flag};
    if (form < 14) return {flag + "=" + (form == 12 ? "" : "1")};
    return {form == 14 ? "-" + f.name : flag.substr(0, flag.size() - 1)};
  }
  if (form < 10) return {flag, value};
  if (form < 13) return {flag + "=" + value};
  if (form == 13) return {flag};  // its value missing (or the next item taken for it)
  if (form == 14) return {"-" + f.name, value};
  return {flag.substr(0, std::max<size_t>(3, flag.size() - 1)), value};  // a prefix of the name
}

const flags::FlagSpec* find_flag(const std::string& cmd, const std::string& name) {
  for (const flags::FlagSpec& f : flags::flags_of(cmd)) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// A flag of cmd drawn from the table (--python never: every input with it is skipped).
Argv any_flag(FuzzedDataProvider& in, const std::string& cmd) {
  std::vector<const flags::FlagSpec*> fs;
  for (const flags::FlagSpec& f : flags::flags_of(cmd)) {
    if (f.name != "python") fs.push_back(&f);
  }
  if (fs.empty()) return {pick(in, garbage())};
  return flag_item(in, cmd, *pick(in, fs));
}

std::string positional(FuzzedDataProvider& in, const std::string& cmd, int index) {
  Dictionary& d = dict();
  if (in.ConsumeIntegralInRange<int>(0, 9) == 0) return pick(in, garbage());
  if (cmd == "bench") return pick<std::string>(in, {"fuzz", "guards", "fuzz", "guards", "Fuzz", "guard", ""});
  if (cmd == "encode" && index == 1) return pick(in, d.out_paths);
  const int r = in.ConsumeIntegralInRange<int>(0, 9);
  if (cmd == "decode") return r < 6 ? pick(in, d.raw_inputs) : r < 8 ? pick(in, d.cases) : pick(in, d.odd_paths);
  return r < 5 ? pick(in, d.cases) : r < 7 ? pick(in, d.bad_cases) : r < 8 ? pick(in, d.raw_inputs) : pick(in, d.odd_paths);
}

// What a command needs to stay fast (see the top of the file), most of the time.
std::vector<Argv> needs(FuzzedDataProvider& in, const std::string& cmd) {
  std::vector<Argv> items;
  const auto often = [&] { return in.ConsumeIntegralInRange<int>(0, 9) != 0; };
  const auto flag = [&](const std::string& name) { items.push_back(flag_item(in, cmd, *find_flag(cmd, name))); };
  if (cmd == "check") {
    if (often()) flag("impl");
    if (in.ConsumeIntegralInRange<int>(0, 4) == 0) flag("impl");
    if (often()) flag("budget");
    if (often()) flag("cases");
  } else if (cmd == "mutants") {
    if (often()) flag("only");
    if (often()) flag("budget");
    if (often()) flag("cases");
  } else if (cmd == "selfcheck") {
    if (often()) flag("samples");
  } else if (cmd == "bench") {
    if (often()) items.push_back({positional(in, cmd, 0)});
    if (often()) flag("seconds");
    if (often()) flag("target");
  } else if (cmd == "repro") {
    if (in.ConsumeIntegralInRange<int>(0, 5) == 0) {
      flag("all");
    } else if (often()) {
      items.push_back({positional(in, cmd, 0)});
    }
  } else if (cmd == "decode") {
    if (often()) flag("target");
    if (often()) items.push_back({positional(in, cmd, 0)});
  } else if (cmd == "encode") {
    if (often()) items.push_back({positional(in, cmd, 0), positional(in, cmd, 1)});
  } else if (cmd == "fuzz") {
    if (often()) flag("target");
    if (often()) flag("runs");
  }
  return items;
}

Argv structured(FuzzedDataProvider& in) {
  const std::vector<flags::CommandSpec>& cmds = flags::commands();
  const size_t n = cmds.size();
  const size_t which = in.ConsumeIntegralInRange<size_t>(0, n + 3);
  Argv argv = {"mlacheck"};
  if (which == n) {  // help
    argv.push_back(pick<std::string>(in, {"help", "--help", "-h", "help"}));
    const int more = in.ConsumeIntegralInRange<int>(0, 2);
    for (int i = 0; i < more; ++i) argv.push_back(in.ConsumeBool() ? pick(in, cmds).name : pick(in, garbage()));
    return argv;
  }
  if (which == n + 1) return argv;  // no command at all
  std::string cmd = which == n + 2 ? pick(in, garbage()) : which == n + 3 ? "" : cmds[which].name;
  argv.push_back(cmd);
  const bool known = which < n;
  std::vector<Argv> items = known ? needs(in, cmd) : std::vector<Argv>{};
  const int extra = in.ConsumeIntegralInRange<int>(0, 6);
  for (int i = 0; i < extra; ++i) {
    const int r = in.ConsumeIntegralInRange<int>(0, 99);
    Argv item;
    if (known && r < 65) {
      item = any_flag(in, cmd);
    } else if (r < 72) {  // a flag of another command
      item = any_flag(in, pick(in, cmds).name);
    } else if (r < 84) {
      item = {known ? positional(in, cmd, in.ConsumeIntegralInRange<int>(0, 1)) : pick(in, dict().odd_paths)};
    } else if (r < 87) {
      item = {"--"};
    } else if (r < 89) {
      item = {pick<std::string>(in, {"--help", "-h", "-help"})};
    } else {
      item = {pick(in, garbage())};
    }
    // Inserted anywhere, so that what a command needs is not always first.
    const size_t at = in.ConsumeIntegralInRange<size_t>(0, items.size());
    items.insert(items.begin() + static_cast<std::ptrdiff_t>(at), item);
  }
  for (const Argv& item : items) argv.insert(argv.end(), item.begin(), item.end());
  return argv;
}

// "L\nrepro\n@R1-topk-...\n--impl\nindexer_decode_step@R1\n": an argument a line, @NAME expanded.
Argv literal(const uint8_t* data, size_t size) {
  Argv argv = {"mlacheck"};
  const std::string text(reinterpret_cast<const char*>(data), size);
  size_t at = text.find('\n');
  if (at == std::string::npos) return argv;
  ++at;
  while (at <= text.size() && argv.size() < 40) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string arg = text.substr(at, end - at);
    if (arg.size() > 1 && arg[0] == '@') {
      const auto it = dict().named.find(arg.substr(1));
      if (it != dict().named.end()) arg = it->second;
    }
    if (!(end == text.size() && arg.empty())) argv.push_back(arg);  // no empty argument from a final newline
    at = end + 1;
  }
  return argv;
}

// ---- which inputs run ---------------------------------------------------------------------------------

bool under(const fs::path& p, const fs::path& dir) {
  const std::string a = p.lexically_normal().string(), b = dir.lexically_normal().string();
  return a == b || (a.size() > b.size() && a.compare(0, b.size(), b) == 0 && (b.back() == '/' || a[b.size()] == '/'));
}

// A path a command writes: inside the scratch folder, or one nothing can be written under.
bool safe_output(const std::string& p) {
  if (p.empty() || p == "/dev/null" || p == "/dev/full" || p.rfind("/dev/null/", 0) == 0) return true;
  const Dictionary& d = dict();
  const fs::path full = fs::path(p).is_absolute() ? fs::path(p) : d.work / p;
  if (under(full, d.fixtures / "afile")) return full.lexically_normal() != (d.fixtures / "afile").lexically_normal();
  return under(full, d.work);
}

int cases_in(const std::string& dir) {
  std::error_code ec;
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir, ec)) n += e.path().extension() == ".case";
  return n;
}

// The op of an implementation ("op@name") or of a variant id ("R4").
std::string op_of(const std::string& impl) {
  if (impl.find('@') != std::string::npos) return impl.substr(0, impl.find('@'));
  for (const mlacheck::kernels::ImplementationInfo& i : mlacheck::kernels::registry().list()) {
    if (i.name == impl) return i.op;
  }
  return "";
}

// The ops whose seed and regression cases take seconds under the sanitizers (a sparse MLA case,
// 3 s; a paged logits one, 0.3 s): a check of them past a budget of 0.03 s starts one, and the case
// under way at the budget's end is given the case timeout to finish.
bool slow_op(const std::string& op) { return op == "sparse_mla_decode" || op == "paged_mqa_logits"; }

bool is_hang_variant(const std::string& impl) {
  const auto ends = [&](const char* s) { return impl.size() > 3 && impl.compare(impl.size() - 3, 3, s) == 0; };
  return impl == "H1" || impl == "H2" || ends("@H1") || ends("@H2");
}

// Whether repro reads the file as a raw fuzz input: not a case file that parses, when its target is
// known (--target, or a folder or file name of its path naming one, as tools/repro.cpp reads it). Any
// bytes decode to a case, and a few dozen of them can decode to one that runs for seconds on
// hundreds of MB (a 40-byte text file as mla_decode: 13 s, 640 MB): the op harnesses' budgets are
// for those, so only the dictionary's raw inputs (small values) are run as one here.
bool repro_reads_raw(const std::string& path, bool target_given) {
  const Dictionary& d = dict();
  if (std::find(d.raw_inputs.begin(), d.raw_inputs.end(), path) != d.raw_inputs.end()) return false;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;  // refused before it is read
  bool target = target_given;
  std::istringstream parts(path);
  for (std::string part; !target && std::getline(parts, part, '/');) {
    for (const mlacheck::FuzzTarget& t : mlacheck::fuzz_targets()) {
      if (part == t.name || part.rfind(t.name + "-", 0) == 0 || part == t.name + "_fuzzer") target = true;
    }
  }
  if (!target) return false;  // refused: no target to decode it for
  try {
    return !mlacheck::CaseText::parse(read_file(path)).has("property");
  } catch (const std::exception&) {
    return true;
  }
}

bool has_harness(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.size() > 7 && n.compare(n.size() - 7, 7, "_fuzzer") == 0) return true;
  }
  return false;
}

// Whether argv runs (see the top of the file). May add fuzz's --harness-dir.
bool runnable(Argv& argv) {
  if (argv.size() < 2) return true;
  const std::string& cmd = argv[1];
  if (std::none_of(flags::commands().begin(), flags::commands().end(), [&](const flags::CommandSpec& c) { return c.name == cmd; })) {
    return true;  // help, or an unknown command: refused before any work
  }
  const Argv args(argv.begin() + 2, argv.end());
  flags::Parsed f;
  std::ostringstream sink;
  if (flags::parse(cmd, args, f, sink, sink) >= 0) return true;  // --help, or refused by the table
  const auto given_list = [&](const char* name) {
    return find_flag(cmd, name) ? f.list(name) : std::vector<std::string>{};
  };
  if (!given_list("python").empty()) return false;
  for (const std::string& a : given_list("adapter")) {
    const auto& shipped = dict().shipped_adapters;
    if (std::find(shipped.begin(), shipped.end(), a) != shipped.end()) return false;
  }
  const auto over_cap = [&](const char* name, double value) { return value > cap_of(cmd, name); };
  for (const std::string& out : {std::string("save"), std::string("report-dir"), std::string("out"), std::string("sarif")}) {
    const flags::FlagSpec* spec = find_flag(cmd, out);
    if (spec != nullptr && !safe_output(f.text(out))) return false;
  }
  if (cmd == "check" || cmd == "mutants") {
    if (over_cap("budget", f.real("budget")) || over_cap("cases", static_cast<double>(f.integer("cases")))) return false;
    const std::vector<std::string> picked = cmd == "check" ? f.list("impl") : f.list("only");
    if (cmd == "check" && picked.empty() && f.list("plugin").empty()) return false;  // every <op>@ref
    if (cmd == "mutants" && (picked.empty() || picked.size() > 2)) return false;   // the whole matrix
    if (picked.size() > 2) return false;
    if (std::any_of(picked.begin(), picked.end(), is_hang_variant)) return false;
    if (f.real("budget") > 0.03 && std::any_of(picked.begin(), picked.end(), [](const std::string& p) { return slow_op(op_of(p)); })) {
      return false;
    }
  }
  if (cmd == "repro") {
    if (is_hang_variant(f.text("impl"))) return false;
    if (f.given("all") && cases_in(f.text("all")) > 4) return false;
    if (f.positional.size() == 1 && fs::path(f.positional[0]).extension() == ".call") return false;
    std::vector<std::string> files = f.positional;
    std::error_code ec;
    if (f.given("all")) {
      for (const auto& e : fs::directory_iterator(f.text("all"), ec)) {
        if (e.path().extension() == ".case") files.push_back(e.path().string());
      }
    }
    for (const std::string& file : files) {
      if (repro_reads_raw(file, f.given("target"))) return false;
    }
  }
  if (cmd == "selfcheck" && over_cap("samples", static_cast<double>(f.integer("samples")))) return false;
  if (cmd == "bench" && !f.positional.empty()) {
    const std::string backend = f.text("backend");
    if (f.positional[0] == "guards" && backend == "host") return false;
    if (f.positional[0] == "fuzz") {
      if (f.integer("jobs") > 1) return false;
      const size_t targets = f.list("target").empty() ? mlacheck::fuzz_targets().size() : f.list("target").size();
      if (backend == "host" && f.real("seconds") * static_cast<double>(targets) > 0.1) return false;
    }
  }
  if (cmd == "encode" && f.positional.size() == 2 && !safe_output(f.positional[1])) return false;
  if (cmd == "fuzz") {
    if (!f.given("harness-dir")) {
      argv.insert(argv.begin() + 2, {"--harness-dir", (dict().fixtures / "no-harness").string()});
    } else if (f.text("harness-dir").empty() || has_harness(f.text("harness-dir"))) {
      return false;  // an empty --harness-dir is none: the command looks beside itself, in this build's fuzz/
    }
  }
  return true;
}

// Whether tools/sanitize.cpp would exec compute-sanitizer for argv (it finds one here).
bool would_exec_sanitizer(const Argv& argv) {
  if (!dict().compute_sanitizer || argv.size() < 2) return false;
  const std::string& cmd = argv[1];
  if (cmd != "check" && cmd != "mutants" && cmd != "repro") return false;
  for (size_t i = 2; i < argv.size() && argv[i] != "--"; ++i) {
    if (argv[i] == "--sanitize") return i + 1 < argv.size() && argv[i + 1] == "memcheck";
    if (argv[i].rfind("--sanitize=", 0) == 0) return argv[i].substr(11) == "memcheck";
  }
  return false;
}

// ---- running one argv ----------------------------------------------------------------------------------

// A stdout every write to fails (`> /dev/full`).
struct FullBuf : std::streambuf {
  int overflow(int) override { return traits_type::eof(); }
  std::streamsize xsputn(const char*, std::streamsize) override { return 0; }
};

std::string quoted(const Argv& argv) {
  std::string s;
  for (size_t i = 1; i < argv.size(); ++i) {
    std::string q = "'";
    for (char c : argv[i]) {
      if (c == '\'') {
        q += "'\\''";
      } else if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
        q += buf;
      } else {
        q += c;
      }
    }
    s += (i > 1 ? " " : "") + q + "'";
  }
  return s;
}

[[noreturn]] void violation(const std::string& what, const Argv& argv, bool full, int rc, const std::string& out,
                            const std::string& err) {
  std::fprintf(stderr,
               "cli_fuzzer: %s\n--- argv (quoted; \\xNN: a byte) ---\nmlacheck %s%s\n--- exit status: %d\n"
               "--- stdout (%zu bytes, first 2000) ---\n%.2000s\n--- stderr (%zu bytes, first 4000) ---\n%.4000s\n",
               what.c_str(), quoted(argv).c_str(), full ? "  > /dev/full" : "", rc, out.size(), out.c_str(), err.size(),
               err.c_str());
  std::fflush(stderr);
  if (::chdir(dict().start_dir.c_str()) != 0) std::fprintf(stderr, "cli_fuzzer: cannot go back to %s\n", dict().start_dir.c_str());
  std::abort();
}

// This process's children, from /proc: "pid (name) state" each, but the symbolizer the sanitizer
// runtime starts (to print libFuzzer's NEW_FUNC lines and stack traces) and keeps running.
std::string children_text() {
  std::string out;
  std::error_code ec;
  const std::string self = std::to_string(::getpid());
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string stat = read_file(e.path() / "stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size()) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string state, ppid;
    rest >> state >> ppid;
    if (ppid != self) continue;
    std::error_code lec;
    if (fs::read_symlink(e.path() / "exe", lec).filename().string().rfind("llvm-symbolizer", 0) == 0) continue;
    out += (out.empty() ? "" : ", ") + stat.substr(0, close + 1) + " " + state;
  }
  return out;
}

int open_fds() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d) != nullptr) ++n;
    ::closedir(d);
  }
  return n - 3;  // ., .. and the folder's own descriptor
}

void empty_work() {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dict().work, ec)) fs::remove_all(e.path(), ec);
}

int run(const Argv& argv, bool full_stdout, std::string& out, std::string& err) {
  Dictionary& d = dict();
  empty_work();
  g_child_err = ::open(d.child_err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (::chdir(d.work.c_str()) != 0) std::abort();
  const bool sanitized = would_exec_sanitizer(argv);
  if (sanitized) ::setenv("MLACHECK_SANITIZED", "1", 1);

  std::ostringstream out_s, err_s;
  FullBuf full;
  std::streambuf* const cout_buf = std::cout.rdbuf(full_stdout ? static_cast<std::streambuf*>(&full) : out_s.rdbuf());
  std::streambuf* const cerr_buf = std::cerr.rdbuf(err_s.rdbuf());
  std::streambuf* const clog_buf = std::clog.rdbuf(err_s.rdbuf());
  std::ios cout_fmt(nullptr), cerr_fmt(nullptr);
  cout_fmt.copyfmt(std::cout), cerr_fmt.copyfmt(std::cerr);

  std::vector<std::string> strings = argv;
  std::vector<char*> c_argv;
  for (std::string& s : strings) c_argv.push_back(s.data());
  c_argv.push_back(nullptr);
  const int rc = mlacheck::cli_main(static_cast<int>(strings.size()), c_argv.data());

  std::cout.flush(), std::cerr.flush(), std::clog.flush();
  std::cout.rdbuf(cout_buf), std::cerr.rdbuf(cerr_buf), std::clog.rdbuf(clog_buf);
  std::cout.copyfmt(cout_fmt), std::cerr.copyfmt(cerr_fmt);
  std::cout.clear(), std::cerr.clear(), std::clog.clear();
  std::clearerr(stdout);
  if (sanitized) ::unsetenv("MLACHECK_SANITIZED");
  mlacheck::set_case_memory_budget_bytes(0);  // --max-mb is process-wide
  if (::chdir(d.start_dir.c_str()) != 0) std::abort();
  ::close(g_child_err);
  g_child_err = -1;
  out = out_s.str();
  err = err_s.str() + read_file(d.child_err);
  return rc;
}

void check(const Argv& argv, bool full, int rc, const std::string& out, const std::string& err) {
  static int fds_after_first = -1;
  const auto fail = [&](const std::string& what) { violation(what, argv, full, rc, out, err); };
  if (rc != 0 && rc != 1 && rc != 2) fail("exit status " + std::to_string(rc) + ", not 0, 1 or 2");
  if (rc == 2) {
    if (err.empty() || err.back() != '\n') fail("exit 2 without a whole line on stderr");
    // Two known exceptions, allowed unless MLACHECK_CLI_FUZZ_STRICT=1 (docs/fuzzing.md): check and
    // mutants print a progress line per implementation on stderr ("check: topk_decode@ref ...") before
    // what may end in exit 2 (stdout unwritable, say); repro --all prints a line per malformed case
    // file, then exits 2.
    const bool repro_all = argv.size() > 1 && argv[1] == "repro" &&
                           std::any_of(argv.begin(), argv.end(), [](const std::string& a) { return a.rfind("--all", 0) == 0; });
    const bool progress = argv.size() > 1 && (argv[1] == "check" || argv[1] == "mutants");
    size_t lines = 0, errors = 0;
    std::istringstream ls(err);
    for (std::string l; std::getline(ls, l);) {
      ++lines;
      const bool is_progress = progress && l.rfind(argv[1] + ": ", 0) == 0 && l.size() > 4 &&
                               l.compare(l.size() - 4, 4, " ...") == 0 && l.find(' ', argv[1].size() + 2) == l.size() - 4;
      if (is_progress && !dict().strict) continue;
      if (l.rfind("mlacheck", 0) != 0) fail("exit 2 with a stderr line that does not start 'mlacheck': " + l);
      ++errors;
    }
    if (errors != 1 && !(repro_all && errors > 1 && !dict().strict)) {
      fail("exit 2 with " + std::to_string(lines) + " lines on stderr, not one");
    }
  }
  int status = 0;
  const pid_t child = ::waitpid(-1, &status, WNOHANG);
  if (child > 0) fail("a child process (" + std::to_string(child) + ") was left behind, ended but not waited for");
  if (child == 0) {
    if (const std::string left = children_text(); !left.empty()) fail("a child process was left behind, still running: " + left);
  }
  const int fds = open_fds();
  if (fds_after_first < 0) fds_after_first = fds;
  if (fds > fds_after_first + 16) {
    fail(std::to_string(fds) + " file descriptors open, " + std::to_string(fds_after_first) + " after the first input");
  }
}

// ---- start-up ---------------------------------------------------------------------------------------------

void make_dictionary(const char* argv0) {
  Dictionary& d = dict();
  const auto on = [](const char* name) { return std::getenv(name) != nullptr && std::string(std::getenv(name)) == "1"; };
  d.trace = on("MLACHECK_CLI_FUZZ_TRACE");
  d.strict = on("MLACHECK_CLI_FUZZ_STRICT");
  d.print_only = on("MLACHECK_CLI_FUZZ_PRINT");
  char cwd[4096];
  d.start_dir = ::getcwd(cwd, sizeof cwd) ? cwd : ".";
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/mlacheck-cli-fuzz-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) {
    std::fprintf(stderr, "cli_fuzzer: cannot make a scratch folder %s: %s\n", templ.c_str(), std::strerror(errno));
    std::exit(1);
  }
  d.root = templ;
  d.work = d.root / "work";
  d.fixtures = d.root / "fixtures";
  d.child_err = d.root / "children.stderr";
  for (const char* sub : {"work", "fixtures/cases", "fixtures/bad", "fixtures/mixed", "fixtures/empty", "fixtures/no-harness",
                          "fixtures/corpus/regressions", "fixtures/corpus/topk_decode", "fixtures/raw/topk_decode",
                          "fixtures/raw/topk_to_global"}) {
    fs::create_directories(d.root / sub);
  }
  const fs::path source = fs::path(MLACHECK_SOURCE_DIR) / "corpus";
  for (const char* rel : kCaseFiles) {
    const fs::path p = source / rel;
    if (fs::is_regular_file(p)) add(d.cases, case_key(rel), p.string());
  }
  // Copies, so that nothing a command does touches the source tree's corpus.
  const auto copy_case = [&](const std::string& key, const fs::path& to) {
    const auto it = d.named.find(key);
    if (it != d.named.end()) write_file(to, read_file(it->second));
  };
  copy_case("topk_to_global-equals_oracle-0", d.fixtures / "cases/a.case");
  copy_case("S1-topk-to-global-no-slot-is-minus-one", d.fixtures / "cases/b.case");
  copy_case("topk_to_global-equals_oracle-0", d.fixtures / "mixed/good.case");
  copy_case("R4-topk-fast-path-only-for-k-2048", d.fixtures / "corpus/regressions/R4-topk-fast-path-only-for-k-2048.case");
  copy_case("topk_decode-permutation_commutes-0", d.fixtures / "corpus/topk_decode/permutation_commutes-0.case");
  const std::string good = d.named.count("topk_to_global-equals_oracle-0") ? read_file(d.named["topk_to_global-equals_oracle-0"]) : "";
  for (const auto& [name, text] : malformed_from(good)) {
    write_file(d.fixtures / "bad" / (name + ".case"), text);
    add(d.bad_cases, name, (d.fixtures / "bad" / (name + ".case")).string());
  }
  write_file(d.fixtures / "mixed/bad.case", "property topk_to_global.equals_oracle\n");
  // Raw fuzz inputs: seeds encoded (under a folder named after their target, which repro reads the
  // target from), and small random bytes under no target's name.
  const auto encode = [&](const std::string& key, const fs::path& to) {
    const auto it = d.named.find(key);
    if (it == d.named.end()) return;
    try {
      write_file(to, mlacheck::encode_fuzz_input(read_file(it->second)));
      add(d.raw_inputs, "raw-" + to.parent_path().filename().string(), to.string());
    } catch (const std::exception&) {
    }
  };
  encode("topk_decode-permutation_commutes-0", d.fixtures / "raw/topk_decode/seed-0");
  encode("topk_to_global-equals_oracle-0", d.fixtures / "raw/topk_to_global/seed-0");
  {
    std::string small(64, '\0');
    for (size_t i = 0; i < small.size(); ++i) small[i] = static_cast<char>((i * 5 + 3) % 8);
    write_file(d.fixtures / "raw/junk.bin", small);
    add(d.raw_inputs, "raw-junk", (d.fixtures / "raw/junk.bin").string());
    write_file(d.fixtures / "raw/empty.bin", "");
    add(d.raw_inputs, "raw-empty", (d.fixtures / "raw/empty.bin").string());
  }
  write_file(d.fixtures / "afile", "a regular file where a folder is wanted\n");
  add(d.in_dirs, "dir-cases", (d.fixtures / "cases").string());
  add(d.in_dirs, "dir-bad", (d.fixtures / "bad").string());
  add(d.in_dirs, "dir-mixed", (d.fixtures / "mixed").string());
  add(d.in_dirs, "dir-empty", (d.fixtures / "empty").string());
  add(d.in_dirs, "dir-corpus", (d.fixtures / "corpus").string());
  add(d.in_dirs, "dir-source-corpus", source.string());
  add(d.in_dirs, "dir-missing", (d.fixtures / "missing").string());
  add(d.in_dirs, "afile", (d.fixtures / "afile").string());
  add(d.in_dirs, "dir-topk_to_global", (source / "topk_to_global").string());
  add(d.in_dirs, "dir-regressions", (source / "regressions").string());  // more than 4 cases: repro --all skips it
  add(d.out_paths, "out", "out");
  add(d.out_paths, "out-deep", "o/p/q");
  add(d.out_paths, "out-file", "out.bin");
  add(d.out_paths, "out-sarif", "out.sarif");
  add(d.out_paths, "out-dot", ".");
  add(d.out_paths, "out-abs", (d.work / "abs").string());
  add(d.out_paths, "dev-null", "/dev/null");
  add(d.out_paths, "dev-full", "/dev/full");
  add(d.out_paths, "under-dev-null", "/dev/null/x");
  add(d.out_paths, "under-afile", (d.fixtures / "afile" / "x").string());
  add(d.harness_dirs, "no-harness", (d.fixtures / "no-harness").string());
  d.harness_dirs.push_back((d.fixtures / "missing").string());
  d.harness_dirs.push_back((d.fixtures / "afile").string());
  d.harness_dirs.push_back("");
  d.harness_dirs.push_back(".");
  add(d.odd_paths, "missing", (d.fixtures / "missing.case").string());
  add(d.odd_paths, "dev-zero", "/dev/zero");
  d.odd_paths.push_back("/dev/null");
  d.odd_paths.push_back((d.fixtures / "cases").string());
  d.odd_paths.push_back((d.fixtures / "afile").string());
  d.odd_paths.push_back("");
  d.odd_paths.push_back("relative/missing.case");
  // Plugins: every one that loads is loaded now (see the top of the file); the fixture that hangs
  // in its kernel is left out (a check of it waits for the case timeout, 10 s at least).
  std::vector<fs::path> candidates;
  const fs::path build = MLACHECK_BINARY_DIR;
  for (const fs::path& dir : {build / "examples/plugin", build / "tests/kernels"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string n = e.path().filename().string();
      if (e.path().extension() == ".so" && n.find("impl_hang") == std::string::npos) candidates.push_back(e.path());
    }
  }
  std::sort(candidates.begin(), candidates.end());
  for (const fs::path& p : candidates) {
    std::string name = p.stem().string();
    if (name.rfind("libmlacheck_", 0) == 0) name = name.substr(12);
    try {
      mlacheck::kernels::load_plugin_isolated(p.string());
      add(d.plugins, "plugin-" + name, p.string());
    } catch (const std::exception&) {
      add(d.plugins, "plugin-" + name, p.string());  // refused, every time the same way
    }
  }
  d.plugins.push_back((d.fixtures / "cases/a.case").string());  // not a shared library
  d.plugins.push_back((d.fixtures / "cases").string());
  d.plugins.push_back("libnope.so");
  d.plugins.push_back("/dev/null");
  d.plugins.push_back("");
  // Names: implementations (the hanging variants left out), variant ids, targets, properties.
  for (const mlacheck::kernels::ImplementationInfo& i : mlacheck::kernels::registry().list()) {
    if (is_hang_variant(i.qualified())) continue;
    d.impls.push_back(i.qualified());
    if (i.name != "ref" && std::isupper(static_cast<unsigned char>(i.name[0]))) {
      d.variant_ids.push_back(i.name);
      d.variant_ids.push_back(i.qualified());
    }
  }
  for (const std::string& s : {"topk_decode@nope", "nope@ref", "topk_decode", "@ref", "topk_decode@ref@ref"}) d.impls.push_back(s);
  for (const std::string& s : {"Z9", "ref", "topk_decode@ref", "r4", "R", "nope@R4"}) d.variant_ids.push_back(s);
  for (const mlacheck::FuzzTarget& t : mlacheck::fuzz_targets()) d.targets.push_back(t.name);
  for (const std::string& s : {"all", "nope", "case_text", "Topk_decode"}) d.targets.push_back(s);
  for (const mlacheck::PropertyEntry& p : mlacheck::property_registry().list()) d.properties.push_back(p.name);
  for (const std::string& s : {"topk_decode.nope", "nope", "topk_decode."}) d.properties.push_back(s);
  for (const mlacheck::AdapterInfo& a : mlacheck::shipped_adapters()) d.shipped_adapters.push_back(a.name);
  d.compute_sanitizer = compute_sanitizer_found();
  std::fprintf(stderr,
               "cli_fuzzer: %zu case files, %zu malformed, %zu raw inputs, %zu plugins, %zu implementations; commands "
               "run in %s (%s)\n",
               d.cases.size(), d.bad_cases.size(), d.raw_inputs.size(), d.plugins.size(), d.impls.size(), d.work.c_str(),
               argv0);
}

// What ran: argv per command (help, unknown and none under their own names) and exit status.
struct Tally {
  long skipped = 0;
  std::map<std::string, std::array<long, 3>> by_command;
};

Tally& tally() {
  static Tally* t = new Tally;  // never destroyed: at_exit reads it
  return *t;
}

void count(const Argv& argv, int rc) {
  std::string cmd = argv.size() < 2 ? "(none)" : argv[1];
  const auto& cmds = flags::commands();
  if (cmd != "(none)" && cmd != "help" && cmd != "--help" && cmd != "-h" &&
      std::none_of(cmds.begin(), cmds.end(), [&](const flags::CommandSpec& c) { return c.name == cmd; })) {
    cmd = "(unknown)";
  }
  if (rc >= 0 && rc <= 2) ++tally().by_command[cmd][static_cast<size_t>(rc)];
}

// At exit: the tally, then the scratch folder removed.
void at_exit() {
  long runs = 0;
  std::string per;
  for (const auto& [cmd, n] : tally().by_command) {
    runs += n[0] + n[1] + n[2];
    per += (per.empty() ? "" : ", ") + cmd + " " + std::to_string(n[0]) + "/" + std::to_string(n[1]) + "/" +
           std::to_string(n[2]);
  }
  std::fprintf(stderr, "cli_fuzzer: %ld argv run, %ld skipped (outside what is kept fast); exit 0/1/2 by command: %s\n",
               runs, tally().skipped, per.c_str());
  std::error_code ec;
  if (!dict().root.empty()) fs::remove_all(dict().root, ec);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  // Before libFuzzer installs its handlers (it does after this returns): the executable's own.
  for (size_t i = 0; i < sizeof kSignals / sizeof kSignals[0]; ++i) ::sigaction(kSignals[i], nullptr, &g_before_libfuzzer[i]);
  // No GPU work, no environment that points the commands elsewhere.
  ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
  ::setenv("HIP_VISIBLE_DEVICES", "", 1);
  for (const char* v : {"MLACHECK_SANITIZED", "MLACHECK_PLUGIN", "MLACHECK_FUZZ_DIR", "MLACHECK_CORPUS_DIR",
                        "MLACHECK_PYTHON_LOADED", "MLACHECK_IMPL", "MLACHECK_BACKEND"}) {
    ::unsetenv(v);
  }
  g_dev_null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  make_dictionary((*argv)[0]);
  ::pthread_atfork(nullptr, nullptr, in_forked_child);
  std::atexit(at_exit);
  // libFuzzer's command line, amended: the commands run in the scratch folder, so a crash file goes
  // where libFuzzer was started (a relative -artifact_prefix or -exact_artifact_path is made
  // absolute, and the prefix defaults to that folder); and an argv running 30 s is a hang (each
  // takes milliseconds; libFuzzer's own default is 20 minutes) unless -timeout says otherwise.
  static std::string prefix = "-artifact_prefix=" + dict().start_dir + "/", timeout = "-timeout=30";
  static std::vector<std::string> absolute;  // the amended arguments' storage
  static std::vector<char*> with;
  absolute.reserve(static_cast<size_t>(*argc));
  with.assign(*argv, *argv + *argc);
  bool where = false, timed = false;
  for (int i = 1; i < *argc; ++i) {
    const std::string a = (*argv)[i];
    timed = timed || a.rfind("-timeout=", 0) == 0;
    for (const std::string flag : {"-artifact_prefix=", "-exact_artifact_path="}) {
      if (a.rfind(flag, 0) != 0) continue;
      where = true;
      if (a.size() > flag.size() && a[flag.size()] != '/') {
        absolute.push_back(flag + dict().start_dir + "/" + a.substr(flag.size()));
        with[static_cast<size_t>(i)] = absolute.back().data();
      }
    }
  }
  if (!where) with.insert(with.begin() + 1, prefix.data());
  if (!timed) with.insert(with.begin() + 1, timeout.data());
  *argc = static_cast<int>(with.size());
  with.push_back(nullptr);
  *argv = with.data();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Argv argv;
  bool full_stdout = false;
  if (data[0] % 4 == 0) {
    argv = literal(data, size);
  } else {
    FuzzedDataProvider in(data + 1, size - 1);
    argv = structured(in);
    full_stdout = (data[0] >> 2) % 16 == 15;
  }
  for (std::string& a : argv) a.resize(std::strlen(a.c_str()));  // an argument ends at a NUL, as in a real argv
  const bool runs = runnable(argv);
  if (dict().print_only) {
    std::fprintf(stderr, "cli_fuzzer: %s: mlacheck %s%s\n", runs ? "would run" : "skipped", quoted(argv).c_str(),
                 full_stdout ? "  > /dev/full" : "");
    return 0;
  }
  if (!runs) {
    ++tally().skipped;
    return -1;
  }
  std::string out, err;
  const int rc = run(argv, full_stdout, out, err);
  if (dict().trace) {
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    std::fprintf(stderr, "cli_fuzzer: exit %d (peak RSS %ld MB): mlacheck %s%s\n", rc, usage.ru_maxrss / 1024,
                 quoted(argv).c_str(), full_stdout ? "  > /dev/full" : "");
  }
  check(argv, full_stdout, rc, out, err);
  count(argv, rc);
  return 0;
}
