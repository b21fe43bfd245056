// One campaign of `mlacheck fuzz` (tools/fuzz_campaign.h), in the order it runs, each step a
// method of Campaign over the campaign's folder and clock: prepare (the folder, the seeds, the
// harness's environment and arguments), fuzz (libFuzzer in fork mode, a progress line every 5 s),
// triage (each new crash rerun and keyed, the smallest input of each key kept), write_cases (each
// kept crash minimized and written as a readable case), merge (the corpus cut to the inputs that
// add coverage) and summarize (the campaign's line, NO RUN when no input ran).
#include "tools/fuzz_campaign.h"

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
#include <utility>

#include "core/error.h"
#include "fuzz/fuzz_input.h"
#include "harness/input_file.h"
#include "kernels/device.h"
#include "kernels/python_bridge.h"
#include "tools/suite_runner.h"

namespace fs = std::filesystem;

namespace mlacheck {

namespace {

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
fs::path find_harness(const FuzzOptions& o) {
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
std::vector<std::string> default_seed_dirs(const FuzzOptions& o) {
  std::vector<std::string> out;
  const std::string root = corpus_root("");
  for (const std::string& d : {root + "/" + o.target, root + "/regressions"}) {
    if (fs::is_directory(d)) out.push_back(d);
  }
  return out;
}

// Encodes the target's case files into seeds/; returns how many.
int write_seeds(const FuzzOptions& o, const FuzzTarget& t, const fs::path& seeds, std::ostream& out) {
  fs::create_directories(seeds);
  int n = 0;
  for (const std::string& dir : o.seeds) {
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

// The campaign's state, shared by its steps.
class Campaign {
 public:
  Campaign(FuzzOptions o, std::ostream& out) : o_(std::move(o)), out_(out) {
    summary_.target = o_.target;
    budget_.timed = !o_.given.runs;
    budget_.seconds = static_cast<double>(o_.time);
  }

  CampaignSummary run() {
    prepare();
    fuzz();
    triage();
    write_cases();
    const size_t merged = merge();
    summarize(merged);
    summary_.seconds = budget_.elapsed();
    return std::move(summary_);
  }

 private:
  // The folder, the seeds, and the harness's environment and arguments.
  void prepare() {
    target_ = &find_fuzz_target(o_.target);
    MLA_REQUIRE(o_.backend == "host" || o_.backend == "cuda", "--backend is '", o_.backend, "', not host or cuda");
    const bool python = !o_.python_loaded.empty();
    if (o_.impl.empty()) o_.impl = target_->op + (python ? "@py" : "@ref");
    harness_ = find_harness(o_);
    dir_ = o_.out.empty() ? fs::path("mlacheck-fuzz") / o_.target : fs::path(o_.out);
    for (const char* sub : {"corpus", "crashes", "cases", "violations"}) fs::create_directories(dir_ / sub);
    fs::remove_all(dir_ / "seeds");
    if (!o_.given.seeds) o_.seeds = default_seed_dirs(o_);
    seeds_ = write_seeds(o_, *target_, dir_ / "seeds", out_);
    corpus_before_ = std::distance(fs::directory_iterator(dir_ / "corpus"), fs::directory_iterator());
    before_ = crash_files(dir_ / "crashes");

    env_ = {"MLACHECK_BACKEND=" + o_.backend, "MLACHECK_IMPL=" + o_.impl,
            "MLACHECK_CASE_DIR=" + (dir_ / "violations").string()};
    if (!o_.plugin.empty()) {
      std::string list;
      for (const std::string& path : o_.plugin) list += (list.empty() ? "" : ":") + path;
      env_.push_back("MLACHECK_PLUGIN=" + list);
    }
    if (python) {
      // The harness registers the callables again from this (kernels/python_bridge.h); its worker
      // starts on a process's first call. A call of a Python callable costs milliseconds with
      // torch, and tenths of a second to seconds in Triton's interpreter: a case is slow (kept out
      // of the corpus) past 5 s unless MLACHECK_FUZZ_MAX_MS says otherwise, and the interpreter's
      // cost model (kernels/interpreter_cost.h) skips a call predicted past that time as too large,
      // its measurements shared by the campaign's processes.
      env_.push_back("MLACHECK_PYTHON_LOADED=" + o_.python_loaded);
      const char* ms = std::getenv("MLACHECK_FUZZ_MAX_MS");
      if (ms == nullptr || *ms == '\0') env_.push_back("MLACHECK_FUZZ_MAX_MS=5000");
      env_.push_back("MLACHECK_FUZZ_CASE_TIMEOUT=" + std::to_string(o_.timeout));
      env_.push_back("MLACHECK_FUZZ_COST_FILE=" + fs::absolute(dir_ / "interpreter-cost").string());
    }
    if (o_.backend == "cuda") {
      const char* a = std::getenv("ASAN_OPTIONS");
      env_.push_back(std::string("ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0") + (a && *a ? ":" + std::string(a) : ""));
    }
    replay_artifact_ = "-exact_artifact_path=" + (dir_ / "replay.artifact").string();
  }

  // libFuzzer on the corpus and the seeds until the budget's fuzzing part ends (or --runs), a
  // progress line every 5 s; stopped early enough for the merge to fit.
  void fuzz() {
    std::vector<std::string> argv = {harness_.string(), "-seed=" + std::to_string(o_.seed),
                                     "-timeout=" + std::to_string(o_.timeout),
                                     "-rss_limit_mb=" + std::to_string(std::max<int64_t>(8192, o_.max_mb + 2048)),
                                     "-max_len=8192", "-artifact_prefix=" + (dir_ / "crashes").string() + "/",
                                     "-print_final_stats=1"};
    if (o_.given.runs) {
      argv.push_back("-runs=" + std::to_string(o_.runs));
    } else {
      // libFuzzer's own clock starts after our setup; its fork-mode jobs may overrun it (run_child stops them).
      const int64_t fuzz_s =
          std::max<int64_t>(1, std::llround(budget_.seconds - budget_.reserve() - budget_.elapsed()));
      argv.push_back("-max_total_time=" + std::to_string(fuzz_s));
      argv.push_back("-fork=" + std::to_string(o_.jobs));
      argv.push_back("-ignore_crashes=1");
      argv.push_back("-ignore_timeouts=1");
      argv.push_back("-ignore_ooms=1");
    }
    argv.push_back((dir_ / "corpus").string());
    argv.push_back((dir_ / "seeds").string());
    log_ = dir_ / "fuzz.log";
    fs::remove(log_);
    out_ << "fuzz " << o_.target << " (" << o_.impl << " on " << o_.backend << "): " << harness_.string() << "\n"
         << "  " << seeds_ << " seed cases, " << corpus_before_ << " inputs in " << (dir_ / "corpus").string() << ", "
         << (o_.given.runs ? std::to_string(o_.runs) + " runs"
                          : std::to_string(o_.time) + " s in all (the last " + std::to_string(std::llround(budget_.reserve())) +
                                " s for triage, minimizing, merging)")
         << ", " << o_.jobs << " job(s); log " << log_.string() << '\n';
    if (o_.backend == "cuda" && o_.jobs > 1 && !kernels::mps_daemon_running()) {
      out_ << "  note: no MPS daemon (nvidia-cuda-mps-control -d): the " << o_.jobs
           << " jobs time-slice the GPU, and check less than fewer would (docs/fuzzing.md)\n";
    }
    out_.flush();
    double last_print = 0;
    const double limit =
        o_.given.runs ? 0 : std::max(1.0, budget_.seconds - 0.5 * budget_.reserve() - budget_.elapsed());
    // Fuzzing also stops early enough for the merge to fit: the corpus rerun once by one process, at
    // the rate seen so far (a quarter of the budget at most).
    const auto merge_fits = [&] {
      // Fuzzing always gets half of the time at least: a short campaign is for finding, not merging.
      if (!budget_.timed || stats_.exec_per_s <= 0 || budget_.elapsed() < budget_.seconds / 2) return true;
      const double per_process = std::max(1.0, static_cast<double>(stats_.exec_per_s) / static_cast<double>(o_.jobs));
      const double merge_s = std::min(static_cast<double>(stats_.corpus) / per_process + 1, budget_.seconds / 4);
      return budget_.seconds - budget_.elapsed() > budget_.reserve() + merge_s;
    };
    run_child(argv, env_, log_, limit, [&](double s) {
      if (s - last_print < 5) return !merge_fits();
      last_print = s;
      stats_ = parse_fuzz_stats(read_all(log_));
      const size_t crashes = crash_files(dir_ / "crashes").size() - before_.size();
      char line[200];
      std::snprintf(line, sizeof line, "  [%4.0fs] exec/s %lld  cov %lld  ft %lld  corpus %lld  crashes %zu\n", s,
                    static_cast<long long>(stats_.exec_per_s), static_cast<long long>(stats_.cov),
                    static_cast<long long>(stats_.ft), static_cast<long long>(stats_.corpus), crashes);
      out_ << line;
      out_.flush();
      return !merge_fits();
    });
    const std::string text = read_all(log_);
    stats_ = parse_fuzz_stats(text);
    if (text.find("mlacheck fuzz: ") != std::string::npos && stats_.execs == 0) {
      const size_t at = text.find("mlacheck fuzz: ");
      throw Error(text.substr(at + 15, text.find('\n', at) - at - 15));
    }
  }

  // Each new crash rerun and keyed (by its verdict, or by its sanitizer stack); the smallest input
  // of each key kept.
  void triage() {
    for (const fs::path& f : crash_files(dir_ / "crashes")) {
      if (std::find(before_.begin(), before_.end(), f) == before_.end()) found_.push_back(f);
    }
    for (const fs::path& f : found_) {
      const double left = budget_.left(600);
      if (left < 0.5) {
        ++untriaged_;
        continue;
      }
      const fs::path tlog = dir_ / "triage.log";
      fs::remove(tlog);
      // A crashing replay writes its input as an artifact: into the campaign's folder, never the
      // caller's working directory (libFuzzer's default).
      if (run_child({harness_.string(), "-runs=1", replay_artifact_, f.string()}, env_, tlog, left,
                    [](double) { return false; }) >= 128 + SIGTERM &&
          budget_.timed && budget_.left(600) < 0.5) {
        ++untriaged_;  // stopped by the budget, not by its own crash
        continue;
      }
      const std::string triage_log = read_all(tlog);
      const Triage t = triage_output(triage_log);
      auto it = distinct_.find(t.key);
      if (it == distinct_.end() || fs::file_size(f) < fs::file_size(it->second.second)) {
        distinct_[t.key] = {t, f};
        where_[t.key] = t.property.empty() ? report::first_source_location(triage_log) : std::nullopt;
      }
    }
    out_ << "  " << found_.size() << " crash(es), " << distinct_.size() << " distinct\n";
    if (untriaged_ > 0) {
      out_ << "  " << untriaged_ << " crash(es) not triaged: the --time budget ended (their inputs are in "
           << (dir_ / "crashes").string() << "; mlacheck repro FILE --target " << o_.target << " replays one)\n";
    }
  }

  // Each kept crash minimized (half of what is left, shared) when it still fails the same way, and
  // written as a readable case with its finding.
  void write_cases() {
    int index = 0;
    size_t unminimized = 0;
    for (auto& [key, tf] : distinct_) {
      const auto& [t, f] = tf;
      const std::string k = hex_key(key);
      fs::path input = f;
      // Half of what is left goes to minimizing, shared by the crashes still to minimize.
      const int64_t min_s = std::min<int64_t>(
          o_.minimize, static_cast<int64_t>(budget_.left(1e9) / 2 / static_cast<double>(distinct_.size() - index)));
      if (o_.minimize > 0 && min_s < 1) ++unminimized;
      if (o_.minimize > 0 && min_s >= 1) {
        const fs::path min = dir_ / "crashes" / ("min-" + k);
        run_child({harness_.string(), "-minimize_crash=1", "-max_total_time=" + std::to_string(min_s),
                   "-exact_artifact_path=" + min.string(), f.string()},
                  env_, dir_ / "minimize.log", budget_.left(min_s + 120), [](double) { return false; });
        if (fs::exists(min)) {
          // Keep the minimized input only if it still fails the same way.
          const fs::path tlog = dir_ / "triage.log";
          fs::remove(tlog);
          run_child({harness_.string(), "-runs=1", replay_artifact_, min.string()}, env_, tlog, budget_.left(600),
                    [](double) { return false; });
          if (triage_output(read_all(tlog)).key == key) input = min;
        }
      }
      const std::string bytes = read_all(input);
      std::string name = (t.property.empty() ? o_.target : t.property) + "-" + k + ".case";
      std::ostringstream c;
      c << "# found by mlacheck fuzz --target " << o_.target << " --backend " << o_.backend << kernels::python_flags()
        << " on " << now_utc() << "\n# " << t.summary << "\n# raw input: " << input.string() << " (" << bytes.size()
        << " bytes)\n";
      report::Finding finding;
      finding.rule = report::finding_rule(t.property, t.summary);
      finding.verdict = t.summary;
      finding.target = o_.target, finding.impl = o_.impl, finding.backend = o_.backend;
      finding.raw_input = input.string();
      finding.key = k;
      finding.location = where_[key];
      try {
        c << decode_fuzz_input(*target_, bytes, o_.impl, o_.backend).text.format();
        std::ofstream(dir_ / "cases" / name) << c.str();
        finding.case_file = (dir_ / "cases" / name).string();
      } catch (const Error& e) {
        name = "(no case: " + std::string(e.what()) + ")";
      }
      const std::string case_file = finding.case_file;
      summary_.findings.push_back(std::move(finding));
      out_ << "  " << ++index << ". " << t.summary << "\n     case " << (dir_ / "cases" / name).string()
           << "\n     raw  " << input.string() << " (" << bytes.size() << " bytes)\n";
      if (!o_.python_loaded.empty() && !case_file.empty()) {
        out_ << "     repro: mlacheck repro " << case_file << kernels::python_flags() << "\n";
      }
    }
    if (unminimized > 0) {
      out_ << "  " << unminimized
           << " crash(es) not minimized: the --time budget ended (their cases are written from the raw inputs)\n";
    }
  }

  // The corpus cut to the inputs that add coverage (a merge the budget cuts short keeps them all);
  // returns how many it kept (0: not merged).
  size_t merge() {
    const fs::path merged = dir_ / "corpus.merged";
    fs::remove_all(merged);
    fs::create_directories(merged);
    // The merge meets the crashing inputs again and writes each as an artifact: into a scratch
    // folder of the campaign, never the caller's working directory (libFuzzer's default).
    const fs::path merge_artifacts = dir_ / "merge.artifacts";
    fs::remove_all(merge_artifacts);
    fs::create_directories(merge_artifacts);
    const double merge_left = budget_.left(1800);
    const int merge_status =
        merge_left < 0.5 ? -1
                         : run_child({harness_.string(), "-merge=1", "-artifact_prefix=" + merge_artifacts.string() + "/",
                                      merged.string(), (dir_ / "corpus").string(), (dir_ / "seeds").string()},
                                     env_, dir_ / "merge.log", merge_left, [](double) { return false; });
    fs::remove_all(merge_artifacts);
    size_t merged_n = std::distance(fs::directory_iterator(merged), fs::directory_iterator());
    corpus_after_ = std::distance(fs::directory_iterator(dir_ / "corpus"), fs::directory_iterator());
    if (merge_status != 0) {
      out_ << "  corpus not merged: "
           << (merge_status < 0 || (budget_.timed && budget_.left(1) < 0.5)
                   ? std::string("the --time budget ended")
                   : "the merge exited " + std::to_string(merge_status) + " (see " + (dir_ / "merge.log").string() + ")")
           << " (" << corpus_after_ << " inputs kept as they are)\n";
      merged_n = 0;
    }
    if (merged_n > 0) {
      fs::remove_all(dir_ / "corpus");
      fs::rename(merged, dir_ / "corpus");
    } else {
      fs::remove_all(merged);
    }
    return merged_n;
  }

  // The campaign's line, NO RUN when no input ran to its end, and the summary's counts.
  void summarize(size_t merged_n) {
    char line[400];
    // In one plain phrase: what the corpus holds now, and what it was merged from (the seed cases
    // and the corpus folder after the run: what it held before plus this run's new inputs).
    const std::string corpus_words =
        merged_n > 0 ? std::to_string(merged_n) + " inputs that add coverage, kept of " + std::to_string(seeds_) +
                           " seed case(s) and " + std::to_string(corpus_after_) + " corpus input(s) (" +
                           std::to_string(corpus_before_) + " from earlier runs, " +
                           std::to_string(corpus_after_ >= corpus_before_ ? corpus_after_ - corpus_before_ : 0) + " new)"
                     : std::to_string(corpus_after_) + " inputs (" + std::to_string(corpus_before_) +
                           " from earlier runs; not merged)";
    std::snprintf(line, sizeof line,
                  "fuzz %s: %lld inputs run, %lld exec/s at the end, coverage %lld (features %lld), corpus %s, "
                  "%zu distinct crash(es); %.0f s\n",
                  o_.target.c_str(), static_cast<long long>(stats_.execs), static_cast<long long>(stats_.exec_per_s),
                  static_cast<long long>(stats_.cov), static_cast<long long>(stats_.ft), corpus_words.c_str(),
                  distinct_.size(), budget_.elapsed());
    out_ << line;
    if (stats_.execs == 0 && distinct_.empty()) {
      // libFuzzer ran no input to its end: the time went to starting (seeds, a Python worker) or
      // every input was refused or skipped. Not a clean campaign.
      summary_.ran_nothing = true;
      out_ << "fuzz " << o_.target << ": NO RUN: no input was run to its end in " << std::llround(budget_.elapsed())
           << " s (see " << log_.string() << "; a longer --time, or smaller seeds with --seeds)\n";
    }
    summary_.stats = stats_;
    summary_.corpus = merged_n > 0 ? merged_n : corpus_after_;
    summary_.crashes = found_.size();
    summary_.distinct = distinct_.size();
  }

  FuzzOptions o_;
  std::ostream& out_;
  Budget budget_;
  CampaignSummary summary_;
  const FuzzTarget* target_ = nullptr;
  fs::path harness_, dir_, log_;
  std::vector<std::string> env_;
  std::string replay_artifact_;
  int seeds_ = 0;
  size_t corpus_before_ = 0, corpus_after_ = 0, untriaged_ = 0;
  std::vector<fs::path> before_, found_;  // crash inputs there before the run; the run's new ones
  FuzzStats stats_;
  std::map<std::string, std::pair<Triage, fs::path>> distinct_;  // by key: the verdict, the smallest input
  std::map<std::string, std::optional<report::SourceLocation>> where_;  // a sanitizer stack's place, by key
};

}  // namespace

CampaignSummary run_fuzz_campaign(FuzzOptions o, std::ostream& out) { return Campaign(std::move(o), out).run(); }

}  // namespace mlacheck
