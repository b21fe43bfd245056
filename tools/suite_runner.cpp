// The suite runner (tools/suite_runner.h): one implementation against the property suite, the
// corpus regressions and random fuzzing of its op, in a child process.
//
// Over 500 lines, on purpose: the two sides of one isolation protocol. The child's run (SuiteRun:
// the three stages, writing its progress file) and the parent's reading of how the child ended
// (the result line through the pipe, the progress file of a child that crashed, hung or ran out
// of budget, the rerun on @ref that tells a finding from a false positive) share the row's clock,
// the result's wire format and the progress file's, and are read together when either changes.
#include "tools/suite_runner.h"

#include "kernels/case_clock.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "core/backend/isolate.h"
#include "core/contract.h"
#include "core/error.h"
#include "harness/input_file.h"
#include "kernels/registry.h"
#include "harness/case_bytes.h"
#include "fuzz/fuzz_input.h"
#include "properties/property_registry.h"
#ifdef MLACHECK_HAVE_CUDA
#include "core/backend/cuda_runtime.h"
#endif

namespace mlacheck {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string read_file(const fs::path& p);

}  // namespace

SuiteOptions suite_options(const flags::Parsed& f) {
  SuiteOptions o;
  o.backend = f.text("backend");
  o.budget = f.real("budget");
  o.case_timeout = f.real("case-timeout");
  o.cases = static_cast<int>(f.integer("cases"));
  o.seed = f.seed("seed");
  o.corpus = f.text("corpus");
  return o;
}

std::string corpus_root(const std::string& corpus) {
  if (!corpus.empty()) return corpus;
  const char* env = std::getenv("MLACHECK_CORPUS_DIR");
  if (env && *env) return env;
  // An installed or bundled mlacheck (bin/mlacheck beside share/mlacheck/corpus).
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "mlacheck" / "corpus";
    if (fs::is_directory(installed / "regressions", ec)) return installed.string();
  }
#ifdef MLACHECK_SOURCE_DIR
  return std::string(MLACHECK_SOURCE_DIR) + "/corpus";
#else
  return "corpus";
#endif
}

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The .case files of dir whose property passes keep, sorted by name.
std::vector<std::pair<fs::path, CaseText>> case_files(const fs::path& dir,
                                                       const std::function<bool(const PropertyEntry&)>& keep) {
  std::vector<std::pair<fs::path, CaseText>> out;
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".case") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    try {
      CaseText c = CaseText::parse(read_input_file(f.string()));  // bounded: a corpus folder is the user's
      if (keep(property_registry().find(c.word("property")))) out.emplace_back(f, std::move(c));
    } catch (const Error&) {
      // A malformed file is the corpus tests' business (corpus/CMakeLists.txt), not a kill.
    }
  }
  return out;
}

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// The times of one implementation's row, from its start: the suite proper (and the named check)
// until main_end, the contract probe until end, and no child past its hard end (5% after its
// deadline): what a child is doing then is not judged. steady_clock is one clock across fork.
struct RowClock {
  Clock::time_point start, main_end, end;
  double slack = 0;  // seconds a child may run past its deadline before it is killed
  Clock::time_point hard(Clock::time_point deadline) const { return deadline + seconds(slack); }
  static double left(Clock::time_point until) {
    return std::max(0.05, std::chrono::duration<double>(until - Clock::now()).count());
  }
};

// Settles the named check without running it when there is nothing to run: no property named, or
// nothing failed, or the named one was the first failure. False when it must run alone.
bool named_settled(SuiteResult& row) {
  if (row.named == "(none)") {
    row.named_result = "not named";
    return true;
  }
  if (!row.failed || row.first.check == row.named) {
    row.named_result = row.failed ? "first kill" : "survived";
    return true;
  }
  return false;
}

// The run of one implementation, inside the child.
double case_timeout(const SuiteOptions& o);

class SuiteRun {
 public:
  SuiteRun(const SuiteOptions& o, const std::string& impl, const std::string& progress_file, const RowClock& clock)
      : o_(o), impl_(impl), op_(impl.substr(0, impl.find('@'))), progress_(progress_file),
        target_(find_target(op_)), clock_(clock), start_(clock.start) {
    case_clock::state().progress_file = progress_file;  // for an implementation's own allowance
    case_clock::state().case_timeout = case_timeout(o);
  }

  // Stages 1-3 until the first failure or the end of the suite's share of the budget; the property
  // suite may take up to a third of it.
  void first_failure(SuiteResult& row) {
    const Clock::time_point deadline = clock_.main_end;
    const Clock::time_point suite_deadline = start_ + (clock_.main_end - start_) / 3;
    std::optional<SuiteFinding> k;
    for (const PropertyEntry* p : properties()) {
      if ((k = run_files(seeds_of(*p), "properties", suite_deadline, row))) break;
    }
    for (int r = 0; !k && r < o_.cases; ++r) {
      for (const PropertyEntry* p : properties()) {
        if ((k = run_random(p, r, "properties", suite_deadline, row))) break;
      }
    }
    if (!k) k = run_files(case_files(fs::path(corpus_root(o_.corpus)) / "regressions",
                                     [&](const PropertyEntry& p) {
                                       return p.op == op_ && (o_.property.empty() || p.name == o_.property);
                                     }),
                          "regressions", deadline, row);
    const PropertyEntry* only = o_.property.empty() ? nullptr : properties().front();
    for (int r = 0; !k && Clock::now() < deadline; ++r) k = run_random(only, r, "fuzz", deadline, row);
    if (k) row.failed = true, row.first = *k;
  }

  // Shrinks found, a random case's failure, in this child (run_suite_proper starts one for it, so a
  // smaller case that crashes costs only the shrinking, never the finding).
  void shrink_random(SuiteFinding& found, Clock::time_point until, SuiteResult& row) {
    const PropertyEntry* p = found.random_property.empty() ? nullptr : &property_registry().find(found.random_property);
    const std::string bytes = random_input(p, found.random_index, found.stage);
    const FuzzCase fc = decode_fuzz_input(target_, bytes, impl_, o_.backend);
    shrink(bytes, *fc.property, found.stage, fc.property->name + " random case " + std::to_string(found.random_index),
           until, row, found);
  }

  // The named check alone (when the first failure was another), for what is left of the suite's
  // share of the budget.
  void named_check(SuiteResult& row) {
    if (named_settled(row)) return;
    const PropertyEntry& p = property_registry().find(row.named);
    const Clock::time_point deadline = clock_.main_end;
    if (Clock::now() >= deadline) {
      row.named_result = "not run (budget spent)";
      return;
    }
    std::optional<SuiteFinding> k = run_files(case_files(fs::path(corpus_root(o_.corpus)) / "regressions",
                                                 [&](const PropertyEntry& e) { return &e == &p; }),
                                      "regressions", deadline, row);
    if (!k) k = run_files(seeds_of(p), "properties", deadline, row);
    for (int r = 0; !k && Clock::now() < deadline; ++r) k = run_random(&p, r, "properties", deadline, row);
    row.named_result = k ? "killed" : "survived";
    if (k) row.named_verdict = k->stage + ": " + k->verdict;
  }

  // The contract probe: cases drawn from the whole spec that lie outside the implementation's
  // contract, run with the contract ignored until deadline. A failure is counted (if <op>@ref
  // passes the case) and the first kept; a lost context ends the child (the parent reports it).
  void probe(SuiteResult& row, Clock::time_point deadline) {
    for (int r = 0; Clock::now() < deadline; ++r) {
      alive();  // most draws are inside the contract and run nothing: not a case running long
      FuzzCase fc;
      try {
        fc = decode_fuzz_input(target_, random_input(nullptr, r, "probe"), op_ + "@ref", o_.backend);
      } catch (const Error&) {
        continue;  // refused by the case rules
      }
      if (fc.property->ref_only) continue;
      CaseText c = fc.text;
      c.set("impl", impl_);
      const std::string why = outside_contract(c, impl_);
      if (why.empty()) continue;  // inside: the suite's business
      note("probe: " + fc.property->name + " random case " + std::to_string(r), c, row);
      ++row.probe_cases;
      const ReproResult res = run_case_text(c, o_.backend, impl_, /*ignore_contract=*/true);
      if (!res.fault.empty()) throw ContextLost(*res.verdict, res.fault);
      if (!res.verdict || run_case_text(c, o_.backend, op_ + "@ref", true).verdict) continue;
      if (row.probe_failures++ == 0) {
        row.probe_first = SuiteFinding{"probe", res.property, *res.verdict + " (outside the contract: " + why + ")",
                                       std::chrono::duration<double>(Clock::now() - start_).count(), c.format(), "", -1};
      }
    }
  }

  // The budget of the suite proper: all of it, or three quarters when a probe takes the rest.
  static double main_budget(const SuiteOptions& o, const std::string& impl) {
    return o.contract_probe && !kernels::registry().contract(impl)->empty() ? o.budget * 0.75 : o.budget;
  }

 private:
  static const FuzzTarget& find_target(const std::string& op) {
    for (const FuzzTarget& t : fuzz_targets()) {
      if (t.op == op) return t;
    }
    throw Error("no fuzz target applies the properties of op '" + op + "'");
  }
  std::vector<const PropertyEntry*> properties() const {
    std::vector<const PropertyEntry*> out;
    for (const PropertyEntry* p : fuzz_target_properties(target_)) {
      if (!p->ref_only && (o_.property.empty() || p->name == o_.property)) out.push_back(p);
    }
    MLA_REQUIRE(!out.empty(), "--property ", o_.property, " is not a property ", impl_, " runs");
    return out;
  }
  std::vector<std::pair<fs::path, CaseText>> seeds_of(const PropertyEntry& p) const {
    return case_files(fs::path(corpus_root(o_.corpus)) / target_.name, [&](const PropertyEntry& e) { return &e == &p; });
  }

  // Tells the parent's watchdog this child is between cases, not stuck in one (the file's age).
  void alive() const { ::utimensat(AT_FDCWD, progress_.c_str(), nullptr, 0); }

  // Where the child is, for a crash report or a case timeout: the cases run so far and a tab, where
  // (one line), then the case text. The file's age is the case's (the parent's watchdog).
  void note(const std::string& what, const CaseText& c, const SuiteResult& row) const {
    std::ofstream(progress_, std::ios::trunc) << row.cases_run << '\t' << what << '\n' << c.format();
  }

  std::optional<SuiteFinding> run_one(const CaseText& c, const std::string& stage, const std::string& what, SuiteResult& row) {
    note(stage + ": " + what, c, row);
    // An Error here is the matrix's own trouble (a malformed corpus case, a backend not usable in
    // this process), never a finding and never to be skipped: it ends the command with its line.
    const ReproResult r = run_case_text(c, o_.backend, impl_);
    if (!r.outside.empty()) {
      if (r.outside.rfind("beyond the Triton interpreter's reach", 0) == 0) {
        if (row.beyond_reach++ == 0) row.beyond_reach_why = stage + ": " + what + ": " + r.outside;
        return std::nullopt;
      }
      ++row.outside_contract;  // a seed or regression case the implementation does not take
      return std::nullopt;
    }
    ++row.cases_run;
    // A lost device context ends this child: the parent reads the case from the progress file,
    // checks it on <op>@ref in a child of its own and reports the crash (run_suite).
    if (!r.fault.empty()) throw ContextLost(*r.verdict, r.fault);
    if (!r.verdict) return std::nullopt;
    // A failure counts only if the correct implementation passes the same case; otherwise the suite
    // itself is wrong there (a false positive, reported apart, with its case).
    const ReproResult ref = run_case_text(c, o_.backend, op_ + "@ref");
    if (!ref.fault.empty()) throw ContextLost(*r.verdict + " (then the device faulted: " + *ref.verdict + ")", ref.fault);
    if (ref.verdict) {
      if (row.false_positives++ == 0) {
        CaseText shown = c;
        shown.set("impl", op_ + "@ref").set("backend", o_.backend);
        row.false_positive = r.property + ": " + *ref.verdict;
        row.false_positive_case = shown.format();
      }
      return std::nullopt;
    }
    CaseText shown = c;
    shown.set("impl", impl_).set("backend", o_.backend);
    return SuiteFinding{stage, r.property, *r.verdict, std::chrono::duration<double>(Clock::now() - start_).count(),
                shown.format(), "", -1};
  }

  std::optional<SuiteFinding> run_files(const std::vector<std::pair<fs::path, CaseText>>& files, const std::string& stage,
                                Clock::time_point deadline, SuiteResult& row) {
    for (const auto& [path, text] : files) {
      if (Clock::now() >= deadline) return std::nullopt;
      if (auto k = run_one(text, stage, path.filename().string(), row)) {
        k->verdict += " (" + path.filename().string() + ")";
        return k;
      }
    }
    return std::nullopt;
  }

  // Random case r of property p (nullptr: any property of the target, as the fuzzer's first byte
  // picks one), from bytes seeded by the implementation, the property and r.
  std::optional<SuiteFinding> run_random(const PropertyEntry* p, int r, const std::string& stage, Clock::time_point deadline,
                                 SuiteResult& row) {
    if (Clock::now() >= deadline) return std::nullopt;
    alive();  // a draw the case rules refuse runs nothing
    FuzzCase fc;
    try {
      fc = decode_fuzz_input(target_, random_input(p, r, stage), impl_, o_.backend);
    } catch (const Error&) {
      return std::nullopt;  // refused by the case rules
    }
    if (fc.property->ref_only) return std::nullopt;
    std::optional<SuiteFinding> k = run_one(fc.text, stage, fc.property->name + " random case " + std::to_string(r), row);
    if (k) k->random_property = p ? p->name : "", k->random_index = r;
    return k;
  }

  // A random case that failed, made smaller: its bytes with a chunk removed or zeroed (halves, then
  // quarters, ... single bytes), kept whenever the same property still fails on the implementation
  // and holds on <op>@ref (run_one's test) on a case of shorter text, until nothing smaller fails,
  // 200 tries or the deadline.
  // Small bytes decode to small cases (harness/case_bytes.h), so the saved case shrinks too.
  void shrink(std::string bytes, const PropertyEntry& property, const std::string& stage, const std::string& what,
              Clock::time_point deadline, SuiteResult& row, SuiteFinding& found) {
    const std::string before = found.case_text;
    const Clock::time_point until = deadline;
    int tries = 0, kept = 0;
    auto attempt = [&](const std::string& candidate) {
      if (tries >= 200 || Clock::now() >= until) return false;
      FuzzCase fc;
      try {
        fc = decode_fuzz_input(target_, candidate, impl_, o_.backend);
      } catch (const Error&) {
        return false;  // refused by the case rules
      }
      if (fc.property != &property) return false;
      ++tries;
      std::optional<SuiteFinding> k = run_one(fc.text, stage, what + " (shrinking)", row);
      // Fewer bytes usually decode to a smaller case, not always (a zeroed byte can pick a wider
      // range): a candidate is kept only when its case text is shorter too.
      if (!k || k->check != found.check || k->case_text.size() >= found.case_text.size()) return false;
      // The same failure, not another one of the same property: a wrong answer must not shrink into
      // a case the implementation refuses (a NaN finding became a worker's KeyError that way).
      const auto threw = [](const std::string& v) { return v.rfind("the implementation threw", 0) == 0; };
      if (threw(k->verdict) != threw(found.verdict)) return false;
      const double first_seen = found.seconds;  // when it was found, not when it was last made smaller
      found = *k;
      found.seconds = first_seen;
      ++kept;
      return true;
    };
    for (size_t chunk = std::max<size_t>(1, bytes.size() / 2); chunk >= 1 && tries < 200; chunk /= 2) {
      for (size_t at = 0; at < bytes.size() && tries < 200;) {
        std::string removed = bytes;
        removed.erase(at, chunk);
        if (attempt(removed)) {
          bytes = removed;
          continue;  // the same place again: it holds the next chunk now
        }
        std::string zeroed = bytes;
        bool changed = false;
        for (size_t i = at; i < std::min(bytes.size(), at + chunk); ++i) changed |= zeroed[i] != 0, zeroed[i] = 0;
        if (changed && attempt(zeroed)) bytes = zeroed;
        at += chunk;
      }
      if (chunk == 1) break;
    }
    if (kept > 0) {
      found.verdict += " (shrunk in " + std::to_string(tries) + " tries: " + std::to_string(before.size()) + " to " +
                       std::to_string(found.case_text.size()) + " bytes of case text)";
    }
  }

  // The bytes of random case r of property p (nullptr: any property of the target, as the fuzzer's
  // first byte picks one), seeded by the implementation, the property (or salt) and r.
  std::string random_input(const PropertyEntry* p, int r, const std::string& salt) const {
    std::seed_seq seq{o_.seed, std::hash<std::string>{}(impl_), std::hash<std::string>{}(p ? p->name : salt),
                      static_cast<uint64_t>(r)};
    std::mt19937_64 rng(seq);
    std::string bytes;
    if (p) {
      const std::vector<const PropertyEntry*> all = fuzz_target_properties(target_);
      const int64_t index = std::find(all.begin(), all.end(), p) - all.begin();
      ByteWriter w;
      w.in_range(index, 0, static_cast<int64_t>(all.size()) - 1);
      bytes = w.bytes();
    }
    // Mostly small bytes, so mostly small cases (a byte's value is how far into its range a value
    // lies, harness/case_bytes.h), and now and then any byte, for the large values.
    const size_t n = 8 + rng() % 248;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t roll = rng() % 16;
      bytes.push_back(static_cast<char>(roll < 12 ? rng() % 16 : roll < 15 ? rng() % 224 : rng() % 256));
    }
    return bytes;
  }

  const SuiteOptions& o_;
  std::string impl_, op_, progress_;
  const FuzzTarget& target_;
  RowClock clock_;
  Clock::time_point start_;
};

// A result <-> one line through the isolation pipe (fields separated by 0x1f).
constexpr char kSep = '\x1f', kNewline = '\x1e';
std::string serialize(const SuiteResult& r) {
  std::string s = "suite-result";
  for (const std::string& f : {std::string(r.failed ? "1" : "0"), r.first.stage, r.first.check, r.first.verdict,
                               std::to_string(r.first.seconds), std::to_string(r.cases_run), r.named_result,
                               r.named_verdict, r.first.case_text, std::to_string(r.false_positives),
                               r.false_positive, r.false_positive_case, std::to_string(r.outside_contract),
                               std::to_string(r.probe_cases), std::to_string(r.probe_failures), r.probe_first.check,
                               r.probe_first.verdict, r.probe_first.case_text, r.first.random_property,
                               std::to_string(r.first.random_index), std::to_string(r.beyond_reach),
                               r.beyond_reach_why}) {
    std::string field = f;
    std::replace(field.begin(), field.end(), '\n', kNewline);  // the pipe carries one line
    s += kSep + field;
  }
  return s;
}
bool deserialize(const std::string& s, SuiteResult& r) {
  std::vector<std::string> f;
  std::string cur;
  for (char c : s) {
    if (c == kSep) {
      f.push_back(cur), cur.clear();
    } else {
      cur += c == kNewline ? '\n' : c;
    }
  }
  f.push_back(cur);
  if (f.size() != 23 || f[0] != "suite-result") return false;
  r.beyond_reach = std::atoi(f[21].c_str()), r.beyond_reach_why = f[22];
  r.first.random_property = f[19];
  r.first.random_index = std::atoi(f[20].c_str());
  r.failed = f[1] == "1";
  r.first.stage = f[2], r.first.check = f[3], r.first.verdict = f[4];
  r.first.seconds = std::atof(f[5].c_str());
  r.cases_run = std::atoi(f[6].c_str());
  r.named_result = f[7], r.named_verdict = f[8], r.first.case_text = f[9];
  r.false_positives = std::atoi(f[10].c_str());
  r.false_positive = f[11], r.false_positive_case = f[12];
  r.outside_contract = std::atoi(f[13].c_str());
  r.probe_cases = std::atoi(f[14].c_str()), r.probe_failures = std::atoi(f[15].c_str());
  r.probe_first.check = f[16], r.probe_first.verdict = f[17], r.probe_first.case_text = f[18];
  if (!r.probe_first.check.empty()) r.probe_first.stage = "probe";
  return true;
}

// How a child that gave no verdict ended, as the check column prints it: "crashed", "hang",
// or "crashed (cudaErrorIllegalAddress)" for a lost device context (run_one's "crashed (<fault>)"
// verdict, or else the first cudaError... word of the message).
std::string crash_name(const IsolatedOutcome& out) {
  if (out.kind == IsolatedOutcome::kViolation) return "violation";
  // Judged only once a case ran past the case timeout (a child killed at the end of the budget is
  // not a finding): a hang, as a host block past its step limit is.
  if (out.kind == IsolatedOutcome::kTimedOut) return "hang";
  if (out.kind != IsolatedOutcome::kStickyFault) return isolated_outcome_name(out.kind);
  if (out.message.rfind("crashed (", 0) == 0) return out.message.substr(0, out.message.find(')') + 1);
  const size_t at = out.message.find("cudaError");
  if (at == std::string::npos) return "crashed (device context lost)";
  size_t end = at;
  while (end < out.message.size() && std::isalnum(static_cast<unsigned char>(out.message[end]))) ++end;
  return "crashed (" + out.message.substr(at, end - at) + ")";
}

}  // namespace

namespace {

// message without prefix (the check column already says "crashed (<fault>)").
std::string without_prefix(const std::string& message, const std::string& prefix) {
  return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
}

// What a child that ended without a result had written to its progress file (SuiteRun::note).
struct Progress {
  int cases_run = 0;
  std::string where, case_text;
  double age = 0;  // seconds since the file was written: how long its case had run
};
double age_of(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<double>(now.tv_sec - st.st_mtim.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec - st.st_mtim.tv_nsec);
}
Progress read_progress(const std::string& path) {
  Progress p;
  p.age = age_of(path);
  const std::string text = read_file(path);
  const size_t tab = text.find('\t'), nl = text.find('\n');
  if (tab == std::string::npos || nl == std::string::npos || tab > nl) return p;
  p.cases_run = std::atoi(text.substr(0, tab).c_str());
  p.where = text.substr(tab + 1, nl - tab - 1);
  p.case_text = text.substr(nl + 1);
  return p;
}

double case_timeout(const SuiteOptions& o) {
  return o.case_timeout > 0 ? o.case_timeout : std::clamp(o.budget / 3, 10.0, 60.0);
}

// A temporary progress file, removed with the object.
struct ProgressFile {
  std::string path;
  ProgressFile() {
    char name[] = "/tmp/mlacheck-suite-XXXXXX";
    const int fd = ::mkstemp(name);
    MLA_REQUIRE(fd >= 0, "cannot make a temporary file in /tmp");
    ::close(fd);
    path = name;
  }
  ~ProgressFile() { ::unlink(path.c_str()); }
  ProgressFile(const ProgressFile&) = delete;
  ProgressFile& operator=(const ProgressFile&) = delete;
};

// The options of a child that works until deadline: killed at the row's hard end of it, or when one
// case has run past the case timeout (its progress file that old; *case_timed_out is set).
IsolationOptions child_options(const SuiteOptions& o, const RowClock& clock, Clock::time_point deadline,
                               const std::string& progress, bool* case_timed_out) {
  IsolationOptions opts;
  opts.timeout_seconds = RowClock::left(clock.hard(deadline));
#ifdef MLACHECK_HAVE_CUDA
  opts.is_sticky = cuda::is_sticky_fault;
#endif
  const double limit = case_timeout(o);
  opts.watchdog = [progress, limit, case_timed_out]() -> std::string {
    if (age_of(progress) <= limit) return "";
    *case_timed_out = true;
    char line[120];
    std::snprintf(line, sizeof line, "one case ran past the case timeout of %.0f s and was killed", limit);
    return line;
  };
  return opts;
}

// What the row says when its child was killed at the end of the budget while a case ran (not a
// failure: the case had not run as long as the case timeout).
std::string budget_note(const Progress& p, const SuiteOptions& o) {
  char line[400];
  std::snprintf(line, sizeof line, "the budget ended during %s (after %.1f s of it; not judged: the case timeout is %.0f s)",
                p.where.empty() ? "the child's start" : p.where.c_str(), p.age, case_timeout(o));
  return line;
}

SuiteResult run_suite_proper(const SuiteOptions& o, const std::string& impl, const std::string& named,
                             const RowClock& clock);

// The contract probe of row's implementation, in a child of its own until the end of the budget.
void run_probe(const SuiteOptions& o, SuiteResult& row, const RowClock& clock) {
  if (!o.contract_probe) return;
  if (kernels::registry().contract(row.impl)->empty()) {
    row.probe_note = "no probe: " + row.impl + " declares no contract (it takes the whole spec)";
    return;
  }
  if (Clock::now() >= clock.end) {
    row.probe_note = "no probe: the budget was spent before it";
    return;
  }
  const ProgressFile progress;
  bool case_timed_out = false;
  const IsolatedOutcome out = run_isolated(
      [&]() -> std::string {
        SuiteResult r = row;
        r.probe_cases = r.probe_failures = 0;
        SuiteRun(o, row.impl, progress.path, clock).probe(r, clock.end);
        return serialize(r);
      },
      child_options(o, clock, clock.end, progress.path, &case_timed_out));
  SuiteResult parsed = row;
  if (out.kind == IsolatedOutcome::kViolation && deserialize(out.message, parsed)) {
    row.probe_cases = parsed.probe_cases, row.probe_failures = parsed.probe_failures;
    row.probe_first = parsed.probe_first;
    return;
  }
  const Progress p = read_progress(progress.path);
  if (out.kind == IsolatedOutcome::kTimedOut && !case_timed_out) {
    row.probe_cases = p.cases_run;
    row.probe_note = "probe: " + budget_note(p, o);
    return;
  }
  // The probe crashed, hung or lost the context on a case outside the contract: reported apart too.
  ++row.probe_failures;
  row.probe_first = SuiteFinding{"probe", crash_name(out),
                                 without_prefix(out.message, crash_name(out) + ": ") + " (during " + p.where + ")", 0,
                                 p.case_text, "", -1};
}

}  // namespace

void check_contract_names(const std::string& impl, const std::string& corpus) {
  const std::shared_ptr<const Contract> contract = kernels::registry().contract(impl);
  if (!contract || contract->empty()) return;
  const std::string op = impl.substr(0, impl.find('@'));
  std::set<std::string> keys;
  const fs::path root(corpus_root(corpus));
  for (const FuzzTarget& t : fuzz_targets()) {
    if (t.op != op) continue;
    for (const fs::path& dir : {root / t.name, root / "regressions"}) {
      for (const auto& [path, text] : case_files(dir, [&](const PropertyEntry& p) { return p.op == op; })) {
        std::istringstream lines(text.format());
        std::string line;
        while (std::getline(lines, line)) {
          if (!line.empty() && line[0] != '#') keys.insert(line.substr(0, line.find(' ')));
        }
      }
    }
  }
  if (keys.empty()) return;  // no corpus cases of the op to read its keys from
  const std::vector<std::string> term_keys = contract_term_keys(op);
  for (const KeyLimit& l : contract->limits) {
    if (std::find(term_keys.begin(), term_keys.end(), l.key) != term_keys.end()) continue;  // a term's own
    const bool known = std::any_of(keys.begin(), keys.end(), [&](const std::string& k) { return l.matches(k); });
    std::string terms;
    for (const std::string& t : contract_terms(op)) terms += (terms.empty() ? "" : "; ") + t;
    MLA_REQUIRE(known, impl, ": its contract bounds '", l.key, "', which is no term of ", op,
                " and no key of its cases (", op, "'s terms: ", terms, ")");
  }
}

SuiteResult run_suite(const SuiteOptions& o, const std::string& impl, const std::string& named) {
  // What an interpreted kernel's calls cost, shared by this row's children (case_clock.h).
  const ProgressFile costs;
  case_clock::state().cost_file = costs.path;
  RowClock clock;
  clock.start = Clock::now() + seconds(o.start_seconds);
  clock.main_end = clock.start + seconds(SuiteRun::main_budget(o, impl));
  clock.end = clock.start + seconds(o.budget);
  clock.slack = 0.05 * o.budget;
  SuiteResult row = run_suite_proper(o, impl, named, clock);
  run_probe(o, row, clock);
  std::remove((costs.path + "." + row.op).c_str());  // the cost file of an interpreted op, if any
  return row;
}

namespace {

// Shrinks row's random failure in a child of its own, for what is left of the row's budget (the
// search stops sooner: 200 tries, or nothing smaller fails); a child that crashes, hangs or finds
// nothing smaller leaves the finding as it was. Not a tenth of the budget, as it was: a child that
// must start a Python worker (seconds under load) spent all of that on its start and shrank nothing.
void shrink_in_child(const SuiteOptions& o, const std::string& impl, const RowClock& clock, SuiteResult& row) {
  const Clock::time_point until = clock.end;
  if (Clock::now() + seconds(0.5) >= until) return;
  const ProgressFile progress;
  bool case_timed_out = false;
  const SuiteResult before = row;
  const IsolatedOutcome out = run_isolated(
      [&]() -> std::string {
        SuiteResult r = before;
        SuiteRun run(o, impl, progress.path, clock);
        run.shrink_random(r.first, until, r);
        return serialize(r);
      },
      child_options(o, clock, until, progress.path, &case_timed_out));
  SuiteResult shrunk = before;
  if (out.kind == IsolatedOutcome::kViolation && deserialize(out.message, shrunk) && shrunk.failed &&
      shrunk.first.check == before.first.check) {
    row.first = shrunk.first;
  }
}

SuiteResult run_suite_proper(const SuiteOptions& o, const std::string& impl, const std::string& named,
                             const RowClock& clock) {
  SuiteResult row;
  row.impl = impl;
  row.op = impl.substr(0, impl.find('@'));
  row.named = named.empty() ? "(none)" : named;
  for (const kernels::ImplementationInfo& i : kernels::registry().list()) {
    if (i.qualified() == impl) row.summary = i.summary;
  }
  const ProgressFile progress;
  bool case_timed_out = false;
  const IsolatedOutcome out = run_isolated(
      [&]() -> std::string {
        SuiteResult r = row;
        SuiteRun run(o, impl, progress.path, clock);
        run.first_failure(r);
        run.named_check(r);
        return serialize(r);
      },
      child_options(o, clock, clock.main_end, progress.path, &case_timed_out));
  SuiteResult parsed = row;
  if (out.kind == IsolatedOutcome::kViolation && deserialize(out.message, parsed)) {
    if (o.shrink && parsed.failed && parsed.first.random_index >= 0) shrink_in_child(o, impl, clock, parsed);
    return parsed;
  }
  if (out.kind == IsolatedOutcome::kViolation && out.message.rfind("error: ", 0) == 0) {
    throw Error(impl + ": " + out.message.substr(7));  // the run's own setup failed: no finding
  }
  const Progress p = read_progress(progress.path);
  row.cases_run = p.cases_run;
  if (out.kind == IsolatedOutcome::kTimedOut && !case_timed_out) {
    // Killed at the end of the budget inside a case younger than the case timeout: nothing found.
    row.budget_note = budget_note(p, o);
    row.named_result = row.named == "(none)" ? "not named" : "survived";
    return row;
  }
  // The child crashed, lost the device context, hung on one case or threw: a failure by that, where it was.
  row.failed = out.kind != IsolatedOutcome::kPassed;
  row.first.stage = p.where.substr(0, p.where.find(':'));
  row.first.check = crash_name(out);
  row.first.verdict = without_prefix(out.message, row.first.check + ": ") + (p.where.empty() ? "" : " (during " + p.where + ")");
  row.first.seconds = std::chrono::duration<double>(Clock::now() - clock.start).count();
  if (row.failed && !p.case_text.empty()) {
    CaseText shown = CaseText::parse(p.case_text);
    shown.set("impl", impl).set("backend", o.backend);
    row.first.case_text = shown.format();
    // As for any failure: it counts only if <op>@ref passes the case (in a fresh child: this one's
    // context may be gone), within one case timeout.
    IsolationOptions ref_opts;
    ref_opts.timeout_seconds = case_timeout(o);
#ifdef MLACHECK_HAVE_CUDA
    ref_opts.is_sticky = cuda::is_sticky_fault;
#endif
    const IsolatedOutcome ref = run_isolated(
        [&]() -> std::string { return run_case_text(shown, o.backend, row.op + "@ref").verdict.value_or(""); },
        ref_opts);
    if (!ref.passed()) {
      row.failed = false;
      row.false_positives = 1;
      row.false_positive = row.first.check + " on " + impl + " and " + crash_name(ref) + " on " + row.op + "@ref: " +
                           ref.message + " (the run stopped there)";
      if (case_timed_out && ref.kind == IsolatedOutcome::kTimedOut) {
        row.false_positive = "a case ran past the case timeout of " + std::to_string(static_cast<int>(case_timeout(o))) +
                             " s on " + impl + " and on " + row.op + "@ref too: a slow case, not a hang (--case-timeout "
                             "raises it; the run stopped there)";
      }
      CaseText ref_case = shown;
      ref_case.set("impl", row.op + "@ref");
      row.false_positive_case = ref_case.format();
      row.first = SuiteFinding{};
    }
  }
  // The named check on its own, in a child of its own, for what is left of the suite's share of the
  // budget: does it fail the implementation before any crash?
  if (named_settled(row)) return row;
  if (Clock::now() >= clock.main_end) {
    row.named_result = "not run (budget spent)";
    return row;
  }
  bool named_timed_out = false;
  const IsolatedOutcome named_run = run_isolated(
      [&]() -> std::string {
        SuiteResult r = row;
        SuiteRun(o, impl, progress.path, clock).named_check(r);
        return serialize(r);
      },
      child_options(o, clock, clock.main_end, progress.path, &named_timed_out));
  SuiteResult with_named = row;
  if (named_run.kind == IsolatedOutcome::kViolation && deserialize(named_run.message, with_named)) {
    row.named_result = with_named.named_result, row.named_verdict = with_named.named_verdict;
  } else if (named_run.kind == IsolatedOutcome::kTimedOut && !named_timed_out) {
    row.named_result = "unfinished (budget spent)";
  } else {
    row.named_result = "crashed too: " + crash_name(named_run);
  }
  return row;
}

}  // namespace

}  // namespace mlacheck
