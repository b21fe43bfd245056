// The fuzz command (tools/fuzz_command.h): runs the harness binary as a child, watches its log,
// then triages what it found. Past 500 lines: the campaign's phases (seed, run and watch, triage,
// minimize, merge, the SARIF findings) share its folders and clock; fuzz_log.h holds what reads its files.
#include "tools/fuzz_command.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "harness/input_file.h"
#include "kernels/device.h"
#include "kernels/plugin.h"
#include "fuzz/fuzz_input.h"
#include "harness/memory_budget.h"
#include "tools/adapters.h"
#include "tools/flags.h"
#include "tools/fuzz_log.h"
#include "kernels/python_bridge.h"
#include "tools/report_formats.h"
#include "tools/suite_runner.h"

namespace fs = std::filesystem;

namespace mlacheck {

namespace {

struct Options {
  std::string target, backend = "host", impl, out_dir, harness_dir;
  std::vector<std::string> seed_dirs, plugins;  // plugins: absolute paths, for the harness too
  std::vector<std::string> python;              // --python specs (kernels/python_bridge.h)
  std::string python_loaded;                    // their $MLACHECK_PYTHON_LOADED, for the harness
  bool seeds_given = false;
  int64_t time_s = 60, jobs = 1, runs = -1, seed = 0, minimize_s = 20, timeout_s = 60;
  std::string format = "text", sarif_path;  // --format text|sarif (stdout), --sarif FILE (also)
  int64_t max_mb = 0;  // --max-mb: one case's budget here; libFuzzer's -rss_limit_mb is raised above it
};

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

fs::path self_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : exe.parent_path();
}

// The harness binary: --harness-dir, $MLACHECK_FUZZ_DIR, <mlacheck's folder>/../fuzz (a build
// tree), <mlacheck's folder> (an install).
fs::path find_harness(const Options& o) {
  const std::string name = o.target + "_fuzzer";
  std::vector<fs::path> dirs;
  if (!o.harness_dir.empty()) {
    dirs.push_back(o.harness_dir);
  } else {
    if (const char* d = std::getenv("MLACHECK_FUZZ_DIR"); d && *d) dirs.push_back(d);
    dirs.push_back(self_dir() / ".." / "fuzz");
    dirs.push_back(self_dir());
  }
  std::string looked;
  for (const fs::path& d : dirs) {
    const fs::path p = d / name;
    // Not canonical: the all-targets harness, linked as <target>_fuzzer, reads the target from its name.
    if (::access(p.c_str(), X_OK) == 0) return fs::absolute(p).lexically_normal();
    looked += (looked.empty() ? "" : ", ") + d.lexically_normal().string();
  }
  throw Error("no harness " + name + " in " + looked +
              ": the harnesses are built with clang (cmake --preset asan), or pass --harness-dir");
}

// Seed folders when none are given: the corpus's <target> and regressions folders (corpus_root).
std::vector<std::string> default_seed_dirs(const Options& o) {
  std::vector<std::string> out;
  const std::string root = corpus_root("");
  for (const std::string& d : {root + "/" + o.target, root + "/regressions"}) {
    if (fs::is_directory(d)) out.push_back(d);
  }
  return out;
}

// Encodes the target's case files into seeds/; returns how many.
int write_seeds(const Options& o, const FuzzTarget& t, const fs::path& seeds, std::ostream& out) {
  fs::create_directories(seeds);
  int n = 0;
  for (const std::string& dir : o.seed_dirs) {
    std::error_code ec;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.is_regular_file() && e.path().extension() == ".case") files.push_back(e.path());
    }
    MLA_REQUIRE(!ec, "cannot read the seed folder '", dir, "': ", ec.message());
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      try {
        const std::string text = read_input_file(f.string());  // a seed folder may hold anything
        const CaseText c = CaseText::parse(text);
        if (&fuzz_target_of(property_registry().find(c.word("property"))) != &t) continue;  // another target's
        std::ofstream(seeds / f.filename().replace_extension(".bin"), std::ios::binary) << encode_fuzz_input(text);
        ++n;
      } catch (const Error& e) {
        out << "fuzz: seed " << f.string() << " skipped: " << e.what() << '\n';
      }
    }
  }
  return n;
}

// Runs argv with env added, output appended to log; returns the exit status (128 + signal when
// killed). After limit_s seconds (0: no limit) the child's process group gets SIGTERM (libFuzzer
// stops and exits), and SIGKILL two seconds later if it is still there. on_tick(seconds) is called
// about five times a second while it runs; its returning true stops the child the same way.
template <class Tick>
int run_child(const std::vector<std::string>& argv, const std::vector<std::string>& env, const fs::path& log,
              double limit_s, Tick on_tick) {
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  MLA_REQUIRE(fd >= 0, "cannot write ", log.string());
  const pid_t pid = ::fork();
  MLA_REQUIRE(pid >= 0, "fork failed: ", std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    for (const std::string& kv : env) ::putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(fd);
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  int sent = 0;
  while (true) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const bool stop = on_tick(s);
    if (((limit_s > 0 && s > limit_s) || stop) && sent == 0) {
      limit_s = s;
      ::kill(-pid, SIGTERM);
      sent = 1;
    } else if (limit_s > 0 && s > limit_s + 2 && sent == 1) {
      ::kill(-pid, SIGKILL);
      sent = 2;
    }
  }
  if (sent) ::kill(-pid, SIGKILL);  // fork-mode jobs the harness left behind
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

struct Summary {
  std::string target;
  FuzzStats stats;
  size_t corpus = 0, crashes = 0, distinct = 0;
  bool ran_nothing = false;  // no input was run: NO RUN, never a clean campaign
  double seconds = 0;
  std::vector<report::Finding> findings;  // one per distinct crash, for --format sarif and --sarif
};

Summary run_campaign(Options o, std::ostream& out);

}  // namespace

int run_fuzz_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  // A GPU that is not there is said first, before any flag's range (--jobs is bounded by this
  // machine's CPUs, which is not what is wrong on a machine without a GPU). The harness children
  // are started with exec, so asking the driver here leaves them nothing to inherit.
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--backend=cuda" || (args[i] == "--backend" && i + 1 < args.size() && args[i + 1] == "cuda")) {
      std::string why;
      if (!kernels::device_usable(Backend::kCuda, &why)) {
        err << flags::prefix("fuzz") << why << '\n';
        return 2;
      }
    }
  }
  Options o;
  flags::Parsed f;
  if (const int rc = flags::parse("fuzz", args, f, out, err); rc >= 0) return rc;
  o.target = f.text("target");
  o.backend = f.text("backend");
  o.impl = f.text("impl");
  o.out_dir = f.text("out");
  o.harness_dir = f.text("harness-dir");
  // An empty --harness-dir is a mistake, not "look where you would without it".
  if (f.given("harness-dir") && o.harness_dir.empty()) return flags::usage_error(err, "fuzz", "--harness-dir is empty");
  o.seed_dirs = f.list("seeds");
  o.seeds_given = f.given("seeds");
  o.plugins = f.list("plugin");
  o.python = python_specs(f);
  o.time_s = f.integer("time");
  o.runs = f.given("runs") ? f.integer("runs") : -1;
  o.jobs = f.integer("jobs");
  o.seed = f.integer("seed");
  o.minimize_s = f.integer("minimize");
  o.timeout_s = f.integer("timeout");
  o.format = f.text("format");
  o.sarif_path = f.text("sarif");
  o.max_mb = f.integer("max-mb");
  if (f.given("time") && f.given("runs")) return flags::usage_error(err, "fuzz", "give --time or --runs, not both");
  if (o.target.empty()) {
    return flags::usage_error(err, "fuzz", "--target T is required (mlacheck targets lists them; all runs each in turn)");
  }
  flags::apply_max_mb(f);
  try {
    // Loaded here (a plugin that cannot be loaded is one line, before any harness starts) and, by
    // MLACHECK_PLUGIN, in every harness process.
    for (std::string& path : o.plugins) {
      kernels::load_plugin_isolated(path);
      path = fs::absolute(path).string();
    }
    // A Python callable is probed here (one line if it does not load) and registered again, from
    // $MLACHECK_PYTHON_LOADED without a probe, in every harness process.
    std::vector<std::string> python_ops;
    for (const std::string& name : kernels::load_python_isolated(o.python)) python_ops.push_back(name.substr(0, name.find('@')));
    o.python_loaded = kernels::python_loaded_environment();
    const auto has_callable = [&](const FuzzTarget& t) {
      return std::find(python_ops.begin(), python_ops.end(), t.op) != python_ops.end();
    };
    std::vector<std::string> targets;
    if (o.target == "all") {
      // With --python, all means the targets of the callables' ops.
      for (const FuzzTarget& t : fuzz_targets()) {
        if (python_ops.empty() || has_callable(t)) targets.push_back(t.name);
      }
      MLA_REQUIRE(o.impl.empty(), "--impl names one op's implementation; give one --target with it");
    } else {
      const FuzzTarget& t = find_fuzz_target(o.target);
      MLA_REQUIRE(python_ops.empty() || has_callable(t) || !o.impl.empty(), "--python gives no callable of ", t.op,
                  ", the op of --target ", t.name, " (it gives ", [&] {
                    std::string l;
                    for (const std::string& op : python_ops) l += (l.empty() ? "" : ", ") + op;
                    return l;
                  }(), ")");
      targets.push_back(t.name);
    }
    // With --format sarif, stdout holds the SARIF log alone and the campaign's text goes to stderr.
    std::ostream& text = o.format == "sarif" ? err : out;
    std::ofstream sarif_file;
    if (!o.sarif_path.empty()) {
      sarif_file.open(o.sarif_path, std::ios::trunc);
      MLA_REQUIRE(sarif_file.is_open(), "--sarif: cannot write '", o.sarif_path, "'");
    }
    std::vector<Summary> done;
    for (const std::string& t : targets) {
      Options one = o;
      one.target = t;
      if (targets.size() > 1) one.out_dir = (fs::path(o.out_dir.empty() ? "mlacheck-fuzz" : o.out_dir) / t).string();
      done.push_back(run_campaign(one, text));
    }
    size_t distinct = 0, ran_nothing = 0;
    for (const Summary& d : done) distinct += d.distinct, ran_nothing += d.ran_nothing ? 1 : 0;
    if (o.format == "sarif" || sarif_file.is_open()) {
      report::SarifRun run;
      run.tool_version = MLACHECK_VERSION;
      run.source_root = MLACHECK_SOURCE_DIR;
      run.command_line = "mlacheck fuzz";
      for (const std::string& a : args) run.command_line += " " + a;
      for (const Summary& d : done) run.findings.insert(run.findings.end(), d.findings.begin(), d.findings.end());
      if (o.format == "sarif") report::write_sarif(out, run);
      if (sarif_file.is_open()) {
        report::write_sarif(sarif_file, run);
        sarif_file.close();
        MLA_REQUIRE(!sarif_file.fail(), "--sarif: cannot write '", o.sarif_path, "'");
      }
    }
    if (done.size() > 1) {
      text << "\nfuzz campaign summary (" << o.backend << ", " << (o.runs >= 0 ? std::to_string(o.runs) + " runs" : std::to_string(o.time_s) + " s")
          << " per target):\n  target                   inputs   exec/s  coverage  corpus  crashes (distinct)\n";
      for (const Summary& d : done) {
        char line[200];
        std::snprintf(line, sizeof line, "  %-22s %8lld %8lld %9lld %7zu  %zu (%zu)\n", d.target.c_str(),
                      static_cast<long long>(d.stats.execs), static_cast<long long>(d.stats.exec_per_s),
                      static_cast<long long>(d.stats.cov), d.corpus, d.crashes, d.distinct);
        text << line;
      }
    }
    return distinct == 0 && ran_nothing == 0 ? 0 : 1;
  } catch (const Error& e) {
    err << flags::prefix("fuzz") << e.what() << '\n';
    return 2;
  }
}

namespace {

// --time N holds for the whole campaign (within 5%): fuzzing until the reserve, then triage,
// minimization and the corpus merge in the reserve (a tenth of N, at least 5 s or 30% of N, at
// most 120 s), each cut where the time ends, with a line saying
// what it left undone. --runs N is not timed: each step gets its own generous limit.
struct Budget {
  bool timed = false;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  double seconds = 0;
  double reserve() const { return std::min(std::max(0.1 * seconds, std::min(5.0, 0.3 * seconds)), 120.0); }
  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }
  // Seconds left until the end (plus 5% slack), at most cap; cap when not timed.
  double left(double cap) const { return timed ? std::max(0.0, std::min(cap, 1.05 * seconds - elapsed())) : cap; }
};

Summary run_campaign(Options o, std::ostream& out) {
  Summary summary;
  summary.target = o.target;
  Budget budget;
  budget.timed = o.runs < 0;
  budget.seconds = static_cast<double>(o.time_s);
  const auto t_start = budget.start;
  {
    const FuzzTarget& target = find_fuzz_target(o.target);
    MLA_REQUIRE(o.backend == "host" || o.backend == "cuda", "--backend is '", o.backend, "', not host or cuda");
    const bool python = !o.python_loaded.empty();
    if (o.impl.empty()) o.impl = target.op + (python ? "@py" : "@ref");
    const fs::path harness = find_harness(o);
    const fs::path dir = o.out_dir.empty() ? fs::path("mlacheck-fuzz") / o.target : fs::path(o.out_dir);
    for (const char* sub : {"corpus", "crashes", "cases", "violations"}) fs::create_directories(dir / sub);
    fs::remove_all(dir / "seeds");
    if (!o.seeds_given) o.seed_dirs = default_seed_dirs(o);
    const int seeds = write_seeds(o, target, dir / "seeds", out);
    const size_t corpus_before = std::distance(fs::directory_iterator(dir / "corpus"), fs::directory_iterator());
    const auto before = crash_files(dir / "crashes");

    std::vector<std::string> env = {"MLACHECK_BACKEND=" + o.backend, "MLACHECK_IMPL=" + o.impl,
                                    "MLACHECK_CASE_DIR=" + (dir / "violations").string()};
    if (!o.plugins.empty()) {
      std::string list;
      for (const std::string& path : o.plugins) list += (list.empty() ? "" : ":") + path;
      env.push_back("MLACHECK_PLUGIN=" + list);
    }
    if (python) {
      // The harness registers the callables again from this (kernels/python_bridge.h); its worker
      // starts on a process's first call. A call of a Python callable costs milliseconds with
      // torch, and tenths of a second to seconds in Triton's interpreter: a case is slow (kept out
      // of the corpus) past 5 s unless MLACHECK_FUZZ_MAX_MS says otherwise, and the interpreter's
      // cost model (kernels/interpreter_cost.h) skips a call predicted past that time as too large,
      // its measurements shared by the campaign's processes.
      env.push_back("MLACHECK_PYTHON_LOADED=" + o.python_loaded);
      const char* ms = std::getenv("MLACHECK_FUZZ_MAX_MS");
      if (ms == nullptr || *ms == '\0') env.push_back("MLACHECK_FUZZ_MAX_MS=5000");
      env.push_back("MLACHECK_FUZZ_CASE_TIMEOUT=" + std::to_string(o.timeout_s));
      env.push_back("MLACHECK_FUZZ_COST_FILE=" + fs::absolute(dir / "interpreter-cost").string());
    }
    if (o.backend == "cuda") {
      const char* a = std::getenv("ASAN_OPTIONS");
      env.push_back(std::string("ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0") + (a && *a ? ":" + std::string(a) : ""));
    }
    std::vector<std::string> argv = {harness.string(), "-seed=" + std::to_string(o.seed),
                                     "-timeout=" + std::to_string(o.timeout_s),
                                     "-rss_limit_mb=" + std::to_string(std::max<int64_t>(8192, o.max_mb + 2048)),
                                     "-max_len=8192", "-artifact_prefix=" + (dir / "crashes").string() + "/",
                                     "-print_final_stats=1"};
    if (o.runs >= 0) {
      argv.push_back("-runs=" + std::to_string(o.runs));
    } else {
      // libFuzzer's own clock starts after our setup; its fork-mode jobs may overrun it (run_child stops them).
      const int64_t fuzz_s =
          std::max<int64_t>(1, std::llround(budget.seconds - budget.reserve() - budget.elapsed()));
      argv.push_back("-max_total_time=" + std::to_string(fuzz_s));
      argv.push_back("-fork=" + std::to_string(o.jobs));
      argv.push_back("-ignore_crashes=1");
      argv.push_back("-ignore_timeouts=1");
      argv.push_back("-ignore_ooms=1");
    }
    argv.push_back((dir / "corpus").string());
    argv.push_back((dir / "seeds").string());
    const fs::path log = dir / "fuzz.log";
    fs::remove(log);
    out << "fuzz " << o.target << " (" << o.impl << " on " << o.backend << "): " << harness.string() << "\n"
        << "  " << seeds << " seed cases, " << corpus_before << " inputs in " << (dir / "corpus").string() << ", "
        << (o.runs >= 0 ? std::to_string(o.runs) + " runs"
                        : std::to_string(o.time_s) + " s in all (the last " + std::to_string(std::llround(budget.reserve())) +
                              " s for triage, minimizing, merging)")
        << ", " << o.jobs << " job(s); log " << log.string() << '\n';
    if (o.backend == "cuda" && o.jobs > 1 && !kernels::mps_daemon_running()) {
      out << "  note: no MPS daemon (nvidia-cuda-mps-control -d): the " << o.jobs
          << " jobs time-slice the GPU, and check less than fewer would (docs/fuzzing.md)\n";
    }
    out.flush();
    double last_print = 0;
    FuzzStats stats;
    const double limit =
        o.runs >= 0 ? 0 : std::max(1.0, budget.seconds - 0.5 * budget.reserve() - budget.elapsed());
    // Fuzzing also stops early enough for the merge to fit: the corpus rerun once by one process, at
    // the rate seen so far (a quarter of the budget at most).
    const auto merge_fits = [&] {
      // Fuzzing always gets half of the time at least: a short campaign is for finding, not merging.
      if (!budget.timed || stats.exec_per_s <= 0 || budget.elapsed() < budget.seconds / 2) return true;
      const double per_process = std::max(1.0, static_cast<double>(stats.exec_per_s) / static_cast<double>(o.jobs));
      const double merge_s = std::min(static_cast<double>(stats.corpus) / per_process + 1, budget.seconds / 4);
      return budget.seconds - budget.elapsed() > budget.reserve() + merge_s;
    };
    run_child(argv, env, log, limit, [&](double s) {
      if (s - last_print < 5) return !merge_fits();
      last_print = s;
      stats = parse_fuzz_stats(read_all(log));
      const size_t crashes = crash_files(dir / "crashes").size() - before.size();
      char line[200];
      std::snprintf(line, sizeof line, "  [%4.0fs] exec/s %lld  cov %lld  ft %lld  corpus %lld  crashes %zu\n", s,
                    static_cast<long long>(stats.exec_per_s), static_cast<long long>(stats.cov),
                    static_cast<long long>(stats.ft), static_cast<long long>(stats.corpus), crashes);
      out << line;
      out.flush();
      return !merge_fits();
    });
    const std::string text = read_all(log);
    stats = parse_fuzz_stats(text);
    if (text.find("mlacheck fuzz: ") != std::string::npos && stats.execs == 0) {
      const size_t at = text.find("mlacheck fuzz: ");
      throw Error(text.substr(at + 15, text.find('\n', at) - at - 15));
    }

    // Triage: rerun each new crash, key it, minimize one per key, write its case.
    std::vector<fs::path> found;
    for (const fs::path& f : crash_files(dir / "crashes")) {
      if (std::find(before.begin(), before.end(), f) == before.end()) found.push_back(f);
    }
    std::map<std::string, std::pair<Triage, fs::path>> distinct;
    // Where a sanitizer's stack puts each distinct crash (a property violation has no such place).
    std::map<std::string, std::optional<report::SourceLocation>> where;
    size_t untriaged = 0;
    const std::string replay_artifact = "-exact_artifact_path=" + (dir / "replay.artifact").string();
    for (const fs::path& f : found) {
      const double left = budget.left(600);
      if (left < 0.5) {
        ++untriaged;
        continue;
      }
      const fs::path tlog = dir / "triage.log";
      fs::remove(tlog);
      // A crashing replay writes its input as an artifact: into the campaign's folder, never the
      // caller's working directory (libFuzzer's default).
      if (run_child({harness.string(), "-runs=1", replay_artifact, f.string()}, env, tlog, left, [](double) { return false; }) >=
              128 + SIGTERM &&
          budget.timed && budget.left(600) < 0.5) {
        ++untriaged;  // stopped by the budget, not by its own crash
        continue;
      }
      const std::string triage_log = read_all(tlog);
      const Triage t = triage_output(triage_log);
      auto it = distinct.find(t.key);
      if (it == distinct.end() || fs::file_size(f) < fs::file_size(it->second.second)) {
        distinct[t.key] = {t, f};
        where[t.key] = t.property.empty() ? report::first_source_location(triage_log) : std::nullopt;
      }
    }
    int index = 0;
    out << "  " << found.size() << " crash(es), " << distinct.size() << " distinct\n";
    if (untriaged > 0) {
      out << "  " << untriaged << " crash(es) not triaged: the --time budget ended (their inputs are in "
          << (dir / "crashes").string() << "; mlacheck repro FILE --target " << o.target << " replays one)\n";
    }
    size_t unminimized = 0;
    for (auto& [key, tf] : distinct) {
      const auto& [t, f] = tf;
      const std::string k = hex_key(key);
      fs::path input = f;
      // Half of what is left goes to minimizing, shared by the crashes still to minimize.
      const int64_t min_s = std::min<int64_t>(
          o.minimize_s, static_cast<int64_t>(budget.left(1e9) / 2 / static_cast<double>(distinct.size() - index)));
      if (o.minimize_s > 0 && min_s < 1) ++unminimized;
      if (o.minimize_s > 0 && min_s >= 1) {
        const fs::path min = dir / "crashes" / ("min-" + k);
        run_child({harness.string(), "-minimize_crash=1", "-max_total_time=" + std::to_string(min_s),
                   "-exact_artifact_path=" + min.string(), f.string()},
                  env, dir / "minimize.log", budget.left(min_s + 120), [](double) { return false; });
        if (fs::exists(min)) {
          // Keep the minimized input only if it still fails the same way.
          const fs::path tlog = dir / "triage.log";
          fs::remove(tlog);
          run_child({harness.string(), "-runs=1", replay_artifact, min.string()}, env, tlog, budget.left(600),
                    [](double) { return false; });
          if (triage_output(read_all(tlog)).key == key) input = min;
        }
      }
      const std::string bytes = read_all(input);
      std::string name = (t.property.empty() ? o.target : t.property) + "-" + k + ".case";
      std::ostringstream c;
      c << "# found by mlacheck fuzz --target " << o.target << " --backend " << o.backend << kernels::python_flags()
        << " on " << now_utc()
        << "\n# " << t.summary << "\n# raw input: " << input.string() << " (" << bytes.size() << " bytes)\n";
      report::Finding finding;
      finding.rule = report::finding_rule(t.property, t.summary);
      finding.verdict = t.summary;
      finding.target = o.target, finding.impl = o.impl, finding.backend = o.backend;
      finding.raw_input = input.string();
      finding.key = k;
      finding.location = where[key];
      try {
        c << decode_fuzz_input(target, bytes, o.impl, o.backend).text.format();
        std::ofstream(dir / "cases" / name) << c.str();
        finding.case_file = (dir / "cases" / name).string();
      } catch (const Error& e) {
        name = "(no case: " + std::string(e.what()) + ")";
      }
      const std::string case_file = finding.case_file;
      summary.findings.push_back(std::move(finding));
      out << "  " << ++index << ". " << t.summary << "\n     case " << (dir / "cases" / name).string()
          << "\n     raw  " << input.string() << " (" << bytes.size() << " bytes)\n";
      if (!o.python_loaded.empty() && !case_file.empty()) {
        out << "     repro: mlacheck repro " << case_file << kernels::python_flags() << "\n";
      }
    }

    if (unminimized > 0) {
      out << "  " << unminimized << " crash(es) not minimized: the --time budget ended (their cases are written from the raw inputs)\n";
    }
    // Merge the corpus: keep the inputs that add coverage (a merge the budget cuts short keeps them all).
    const fs::path merged = dir / "corpus.merged";
    fs::remove_all(merged);
    fs::create_directories(merged);
    // The merge meets the crashing inputs again and writes each as an artifact: into a scratch
    // folder of the campaign, never the caller's working directory (libFuzzer's default).
    const fs::path merge_artifacts = dir / "merge.artifacts";
    fs::remove_all(merge_artifacts);
    fs::create_directories(merge_artifacts);
    const double merge_left = budget.left(1800);
    const int merge_status =
        merge_left < 0.5 ? -1
                         : run_child({harness.string(), "-merge=1", "-artifact_prefix=" + merge_artifacts.string() + "/",
                                      merged.string(), (dir / "corpus").string(), (dir / "seeds").string()},
                                     env, dir / "merge.log", merge_left, [](double) { return false; });
    fs::remove_all(merge_artifacts);
    size_t merged_n = std::distance(fs::directory_iterator(merged), fs::directory_iterator());
    const size_t corpus_after = std::distance(fs::directory_iterator(dir / "corpus"), fs::directory_iterator());
    if (merge_status != 0) {
      out << "  corpus not merged: "
          << (merge_status < 0 || (budget.timed && budget.left(1) < 0.5) ? std::string("the --time budget ended")
                                                                           : "the merge exited " + std::to_string(merge_status) + " (see " + (dir / "merge.log").string() + ")")
          << " (" << corpus_after << " inputs kept as they are)\n";
      merged_n = 0;
    }
    if (merged_n > 0) {
      fs::remove_all(dir / "corpus");
      fs::rename(merged, dir / "corpus");
    } else {
      fs::remove_all(merged);
    }
    char line[400];
    // In one plain phrase: what the corpus holds now, and what it was merged from (the seed cases
    // and the corpus folder after the run: what it held before plus this run's new inputs).
    const std::string corpus_words =
        merged_n > 0 ? std::to_string(merged_n) + " inputs that add coverage, kept of " + std::to_string(seeds) +
                           " seed case(s) and " + std::to_string(corpus_after) + " corpus input(s) (" +
                           std::to_string(corpus_before) + " from earlier runs, " +
                           std::to_string(corpus_after >= corpus_before ? corpus_after - corpus_before : 0) + " new)"
                     : std::to_string(corpus_after) + " inputs (" + std::to_string(corpus_before) +
                           " from earlier runs; not merged)";
    std::snprintf(line, sizeof line,
                  "fuzz %s: %lld inputs run, %lld exec/s at the end, coverage %lld (features %lld), corpus %s, "
                  "%zu distinct crash(es); %.0f s\n",
                  o.target.c_str(), static_cast<long long>(stats.execs), static_cast<long long>(stats.exec_per_s),
                  static_cast<long long>(stats.cov), static_cast<long long>(stats.ft), corpus_words.c_str(),
                  distinct.size(), budget.elapsed());
    out << line;
    if (stats.execs == 0 && distinct.empty()) {
      // libFuzzer ran no input to its end: the time went to starting (seeds, a Python worker) or
      // every input was refused or skipped. Not a clean campaign.
      summary.ran_nothing = true;
      out << "fuzz " << o.target << ": NO RUN: no input was run to its end in " << std::llround(budget.elapsed())
          << " s (see " << log.string() << "; a longer --time, or smaller seeds with --seeds)\n";
    }
    summary.stats = stats;
    summary.corpus = merged_n > 0 ? merged_n : corpus_after;
    summary.crashes = found.size();
    summary.distinct = distinct.size();
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  return summary;
}

}  // namespace


}  // namespace mlacheck
