// The suite runner (tools/suite_runner.h): one implementation against the property suite, the
// corpus regressions and random fuzzing of its op, in a child process.
//
// Over 500 lines, on purpose: the two sides of one isolation protocol. The child's run (SuiteRun:
// the three stages, writing its progress file) and the parent's reading of how the child ended
// (the result line through the pipe, the progress file of a child that crashed, hung or ran out
// of budget, the rerun on @ref that tells a finding from a false positive) share the row's clock,
// the result's wire format and the progress file's, and are read together when either changes.
// What the cases are (the corpus's files, the random cases' bytes, the shrinking walk) is apart, in
// tools/suite_cases.h.
#include "tools/suite_runner.h"
#include "tools/suite_cases.h"
#include "tools/suite_wire.h"

#include "kernels/case_clock.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "core/backend/isolate.h"
#include "core/contract.h"
#include "core/error.h"
#include "harness/input_file.h"
#include "harness/memory_budget.h"
#include "kernels/registry.h"
#include "harness/case_bytes.h"
#include "fuzz/fuzz_input.h"
#include "properties/property_registry.h"
#ifdef MLACHECK_HAVE_CUDA
#include "core/backend/cuda_runtime.h"
#endif

namespace mlacheck {

void PropertyTally::add_not_taken(int count, const std::string& why) {
  const auto contract_refusal = [](const std::string& w) {
    return w.empty() || w.find("outside the contract") != std::string::npos || w.find("within the contract") != std::string::npos;
  };
  if (not_taken == 0 || (contract_refusal(not_taken_why) && !contract_refusal(why))) not_taken_why = why;
  not_taken += count;
}

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using suite_wire::deserialize;
using suite_wire::found_line;
using suite_wire::pack_tally;
using suite_wire::read_found;
using suite_wire::serialize;
using suite_wire::split_on;
using suite_wire::unpack_tally;

std::string read_file(const fs::path& p);

}  // namespace

std::vector<std::string> SuiteResult::unjudged() const {
  std::vector<std::string> out;
  std::set<std::string> failed_ones;
  for (const SuiteFinding* f : findings()) failed_ones.insert(f->property);
  for (const std::string& p : properties) {
    const auto t = tally.find(p);
    if (!failed_ones.count(p) && (t == tally.end() || t->second.cases == 0)) out.push_back(p);
  }
  return out;
}

std::string SuiteResult::no_case_reason(const std::string& p) const {
  const auto t = tally.find(p);
  if (t != tally.end() && t->second.not_taken > 0) {
    return std::to_string(t->second.not_taken) + " not taken: " + t->second.not_taken_why;
  }
  if (false_positive_case.find("property " + p + "\n") != std::string::npos) {
    return "its case failed on " + op + "@ref too, below";
  }
  if (stopped_at_first_failure) return "not run: --fail-fast stopped the check at its first failure";
  return "the budget ended first: give a longer --budget";
}

std::string SuiteResult::unjudged_reason() const {
  std::string out;
  for (const std::string& p : unjudged()) out += (out.empty() ? "" : "; ") + p + ": no case ran (" + no_case_reason(p) + ")";
  return out;
}

std::vector<const SuiteFinding*> SuiteResult::findings() const {
  std::vector<const SuiteFinding*> out;
  if (failed) out.push_back(&first);
  for (const SuiteFinding& f : more) out.push_back(&f);
  return out;
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
  // found_file: where each failure is appended as it is found (a line of suite_wire::found_line), so the
  // parent keeps them when a later case crashes this child. skip: properties not to run (those
  // that failed in an earlier child of the row).
  SuiteRun(const SuiteOptions& o, const std::string& impl, const std::string& progress_file, const RowClock& clock,
           const std::string& found_file = "", const std::set<std::string>& skip = {})
      : o_(o), impl_(impl), op_(impl.substr(0, impl.find('@'))), progress_(progress_file), found_(found_file),
        target_(find_target(op_)),
        random_(o.seed, impl, target_, fs::path(corpus_root(o.corpus)) / target_.name, o.start_seconds == 0),
        clock_(clock), start_(clock.start), dead_(skip) {
    case_clock::state().progress_file = progress_file;  // for an implementation's own allowance
    case_clock::state().case_timeout = case_timeout(o);
  }

  // Stages 1-3 until the end of the suite's share of the budget, or the first failure (without
  // every_property), or every property failed; the property suite may take up to a third of it
  // (all of it without fuzz, which then ends the run after the regressions).
  void judge(SuiteResult& row) {
    const Clock::time_point deadline = clock_.main_end;
    const Clock::time_point suite_deadline = o_.fuzz ? start_ + (clock_.main_end - start_) / 3 : deadline;
    const std::vector<const PropertyEntry*> props = properties();
    bool stop = false;
    for (const PropertyEntry* p : props) {
      if (stop) break;
      if (!dead_.count(p->name)) stop = run_files(seeds_of(*p), "properties", suite_deadline, row);
    }
    for (int r = 0; !stop && r < o_.cases; ++r) {
      for (const PropertyEntry* p : props) {
        if (stop) break;
        if (dead_.count(p->name)) continue;
        if (auto k = run_random(p, r, "properties", suite_deadline, row)) stop = record(row, *k);
      }
    }
    if (!stop) {
      auto regressions = case_files(fs::path(corpus_root(o_.corpus)) / "regressions", [&](const PropertyEntry& p) {
        return p.op == op_ && o_.selected(p.name);
      });
      // The named check's regressions first (mutants names the check each variant's bug must fail):
      // on a loaded machine the stage's other cases, interpreted, could take what is left of the
      // budget before the one that kills the variant (a CI run survived T1 so, 2026-12-07).
      std::stable_partition(regressions.begin(), regressions.end(),
                            [&](const auto& file) { return file.second.word("property") == row.named; });
      stop = run_files(regressions, "regressions", deadline, row);
    }
    // Random cases of any property of the op, or of the selected ones in turn.
    for (int r = 0; o_.fuzz && !stop && Clock::now() < deadline; ++r) {
      const PropertyEntry* p = o_.only.empty() ? nullptr : props[static_cast<size_t>(r) % props.size()];
      if (p != nullptr && dead_.count(p->name)) continue;
      if (auto k = run_random(p, r, "fuzz", deadline, row)) stop = record(row, *k);
    }
  }

  // Shrinks found, a random case's failure, in this child (run_suite_proper starts one for it, so a
  // smaller case that crashes costs only the shrinking, never the finding).
  void shrink_random(SuiteFinding& found, Clock::time_point until, SuiteResult& row) {
    const PropertyEntry* p = found.random_property.empty() ? nullptr : &property_registry().find(found.random_property);
    const std::string bytes = random_.bytes(p, found.random_index, found.stage);
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
    std::optional<SuiteFinding> k;
    const int before = row.cases_run;
    const auto files = [&](const std::vector<std::pair<fs::path, CaseText>>& list, const std::string& stage) {
      for (const auto& [path, text] : list) {
        if (k || Clock::now() >= deadline) return;
        if ((k = run_one(text, stage, path.filename().string(), row))) k->verdict += " (" + path.filename().string() + ")";
      }
    };
    files(case_files(fs::path(corpus_root(o_.corpus)) / "regressions", [&](const PropertyEntry& e) { return &e == &p; }),
          "regressions");
    files(seeds_of(p), "properties");
    for (int r = 0; !k && Clock::now() < deadline; ++r) k = run_random(&p, r, "properties", deadline, row);
    // "survived" only for a check that ran: one the budget ended before is said as such.
    row.named_result = k ? "killed" : row.cases_run > before ? "survived" : "not run (budget spent)";
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
        fc = decode_fuzz_input(target_, random_.bytes(nullptr, r, "probe"), op_ + "@ref", o_.backend);
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
                                       std::chrono::duration<double>(Clock::now() - start_).count(), c.format(), "", -1,
                                       res.property};
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
      if (!p->ref_only && o_.selected(p->name)) out.push_back(p);
    }
    MLA_REQUIRE(!out.empty(), "--property: none of the properties named is one ", impl_, " runs");
    return out;
  }

  // Keeps a failure (the row's first, or one more) and leaves its property out from now on; true
  // when the run should stop: at the first failure without every_property, or nothing left to run.
  bool record(SuiteResult& row, SuiteFinding k) {
    if (k.property.empty()) k.property = k.check;
    if (!found_.empty()) {
      std::ofstream(found_, std::ios::app) << found_line(k) << '\n';
    }
    dead_.insert(k.property);
    if (!row.failed) {
      row.failed = true;
      row.first = std::move(k);
    } else {
      row.more.push_back(std::move(k));
    }
    if (!o_.every_property) return true;
    for (const PropertyEntry* p : properties()) {
      if (!dead_.count(p->name)) return false;
    }
    return true;
  }
  std::vector<std::pair<fs::path, CaseText>> seeds_of(const PropertyEntry& p) const {
    return case_files(fs::path(corpus_root(o_.corpus)) / target_.name, [&](const PropertyEntry& e) { return &e == &p; });
  }

  // Tells the parent's watchdog this child is between cases, not stuck in one (the file's age).
  void alive() const { ::utimensat(AT_FDCWD, progress_.c_str(), nullptr, 0); }

  // Where the child is, for a crash report or a case timeout: a head line of the cases run so far,
  // where, and what each property got (pack_tally), separated by tabs, then the case text. The
  // file's age is the case's (the parent's watchdog).
  void note(const std::string& what, const CaseText& c, const SuiteResult& row) const {
    std::ofstream(progress_, std::ios::trunc) << row.cases_run << '\t' << what << '\t' << pack_tally(row.tally) << '\n'
                                              << c.format();
  }

  std::optional<SuiteFinding> run_one(const CaseText& c, const std::string& stage, const std::string& what, SuiteResult& row) {
    note(stage + ": " + what, c, row);
    // An Error here is the matrix's own trouble (a malformed corpus case, a backend not usable in
    // this process), never a finding and never to be skipped: it ends the command with its line.
    // The case's memory is counted, never refused (the suite draws within its own limits), so a
    // failing case can record what it took for repro (kMaxMbKey).
    std::optional<ScopedCaseMemory> memory(std::in_place, std::numeric_limits<int64_t>::max());
    const ReproResult r = run_case_text(c, o_.backend, impl_);
    const int64_t took = memory->used();
    memory.reset();
    if (!r.outside.empty()) {
      PropertyTally& t = row.tally[r.property];
      t.add_not_taken(1, r.outside);
      if (r.outside.rfind("beyond the Triton interpreter's reach", 0) == 0) {
        if (row.beyond_reach++ == 0) row.beyond_reach_why = stage + ": " + what + ": " + r.outside;
        return std::nullopt;
      }
      ++row.outside_contract;  // a seed or regression case the implementation does not take
      return std::nullopt;
    }
    ++row.cases_run;
    ++row.tally[r.property].cases;
    // A lost device context ends this child: the parent reads the case from the progress file,
    // checks it on <op>@ref in a child of its own and reports the crash (run_suite).
    if (!r.fault.empty()) throw ContextLost(*r.verdict, r.fault);
    if (!r.verdict) return std::nullopt;
    // A failure counts only if the correct implementation passes the same case; otherwise the suite
    // itself is wrong there (a suite defect, reported apart, with its case). The reference itself is
    // compared with the oracle alone: its failure counts.
    if (impl_ != op_ + "@ref") {
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
    }
    CaseText shown = c;
    shown.set("impl", impl_).set("backend", o_.backend);
    // Past the memory budget repro would run it under (--max-mb, else the default): recorded.
    if (took > case_memory_budget_bytes()) shown.set(kMaxMbKey, (took + (int64_t{1} << 20) - 1) >> 20);
    return SuiteFinding{stage, r.property, *r.verdict, std::chrono::duration<double>(Clock::now() - start_).count(),
                        shown.format(), "", -1, r.property};
  }

  // Runs the files (those of properties still running) until deadline; each failure is recorded.
  // True when the run should stop (record's answer).
  bool run_files(const std::vector<std::pair<fs::path, CaseText>>& files, const std::string& stage,
                 Clock::time_point deadline, SuiteResult& row) {
    for (const auto& [path, text] : files) {
      if (Clock::now() >= deadline) return false;
      if (dead_.count(text.word("property"))) continue;
      if (auto k = run_one(text, stage, path.filename().string(), row)) {
        k->verdict += " (" + path.filename().string() + ")";
        if (record(row, *k)) return true;
      }
    }
    return false;
  }

  // Random case r of property p (nullptr: any property of the target, as the fuzzer's first byte
  // picks one), from bytes seeded by the implementation, the property and r.
  std::optional<SuiteFinding> run_random(const PropertyEntry* p, int r, const std::string& stage, Clock::time_point deadline,
                                 SuiteResult& row) {
    if (Clock::now() >= deadline) return std::nullopt;
    alive();  // a draw the case rules refuse runs nothing
    FuzzCase fc;
    try {
      fc = decode_fuzz_input(target_, random_.bytes(p, r, stage), impl_, o_.backend);
    } catch (const Error&) {
      return std::nullopt;  // refused by the case rules
    }
    if (fc.property->ref_only || dead_.count(fc.property->name)) return std::nullopt;
    std::optional<SuiteFinding> k = run_one(fc.text, stage, fc.property->name + " random case " + std::to_string(r), row);
    if (k) k->random_property = p ? p->name : "", k->random_index = r;
    return k;
  }

  // A random case that failed, made smaller (shrink_bytes: chunks removed or zeroed, then bytes
  // lowered): a candidate is kept whenever the same property still fails on the implementation the
  // same way and holds on <op>@ref (run_one's test) on a case of shorter text (or, lowering a
  // byte, no longer), until nothing smaller fails, 200 tries or the deadline.
  void shrink(std::string bytes, const PropertyEntry& property, const std::string& stage, const std::string& what,
              Clock::time_point deadline, SuiteResult& row, SuiteFinding& found) {
    const std::string before = found.case_text;
    const Clock::time_point until = deadline;
    int tries = 0, kept = 0;
    // same_size: a candidate whose case text is as long is kept too (a value lowered: 216 columns
    // and 128 are both three digits); removals and zeroings must shorten it.
    auto attempt = [&](const std::string& candidate, bool same_size = false) {
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
      if (!k || k->check != found.check || k->case_text.size() > found.case_text.size() ||
          (!same_size && k->case_text.size() == found.case_text.size())) {
        return false;
      }
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
    shrink_bytes(std::move(bytes), attempt, [&] { return tries >= 200 || Clock::now() >= until; });
    if (kept > 0) {
      found.verdict += " (shrunk in " + std::to_string(tries) + " tries: " + std::to_string(before.size()) + " to " +
                       std::to_string(found.case_text.size()) + " bytes of case text)";
    }
  }

  const SuiteOptions& o_;
  std::string impl_, op_, progress_, found_;
  const FuzzTarget& target_;
  RandomCases random_;  // the random cases' bytes (tools/suite_cases.h)
  RowClock clock_;
  Clock::time_point start_;
  std::set<std::string> dead_;  // properties that failed (here or in an earlier child): not run again
};

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
  std::map<std::string, PropertyTally> tally;  // what each property got so far
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
  const size_t nl = text.find('\n');
  if (nl == std::string::npos) return p;
  const std::vector<std::string> head = split_on(text.substr(0, nl), '\t');
  if (head.size() < 2) return p;
  p.cases_run = std::atoi(head[0].c_str());
  p.where = head[1];
  if (head.size() > 2) p.tally = unpack_tally(head[2]);
  p.case_text = text.substr(nl + 1);
  return p;
}

// A case past the case timeout runs again alone for this many times the case timeout before it is
// called a hang (run_one_child).
constexpr int kHangConfirmFactor = 4;
// A case past the case timeout whose reference took under 1/kRefTimeFactor of it (in a fresh child,
// its start included, on the same machine at the same time) is a hang by the reference's measure:
// the case timeout scales with what the case costs on <op>@ref in this build.
constexpr int kRefTimeFactor = 16;

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
// The options of a child that works until deadline: killed when one case has run past the case
// timeout (its progress file that old; *case_timed_out is set), or at the row's hard end of
// deadline if it is still starting (no case yet). A case still running at the hard end is given
// up to the case timeout, so it is judged: it ends, or it is a hang.
// judge_last = false (shrinking, the probe: nothing there is a failure of the row) cuts the child
// at the hard end whatever it is doing.
IsolationOptions child_options(const SuiteOptions& o, const RowClock& clock, Clock::time_point deadline,
                               const std::string& progress, bool* case_timed_out, bool judge_last = true) {
  IsolationOptions opts;
  const double limit = case_timeout(o);
  const Clock::time_point hard = clock.hard(deadline);
  opts.timeout_seconds = RowClock::left(hard) + (judge_last ? limit + 1 : 0);  // with judge_last the watchdog ends it
#ifdef MLACHECK_HAVE_CUDA
  opts.is_sticky = cuda::is_sticky_fault;
#endif
  opts.watchdog = [progress, limit, hard, case_timed_out, judge_last]() -> std::string {
    if (age_of(progress) > limit) {
      *case_timed_out = true;
      char line[120];
      std::snprintf(line, sizeof line, "one case ran past the case timeout of %.0f s and was killed", limit);
      return line;
    }
    if (Clock::now() < hard || (judge_last && !read_progress(progress).where.empty())) return "";
    return "the budget ended before the first case";
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
      child_options(o, clock, clock.end, progress.path, &case_timed_out, /*judge_last=*/false));
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
                                 p.case_text, "", -1, ""};
}

}  // namespace

void check_contract_names(const std::string& impl) {
  const std::shared_ptr<const Contract> contract = kernels::registry().contract(impl);
  if (!contract || contract->empty()) return;
  const std::string op = impl.substr(0, impl.find('@'));
  const std::set<std::string> keys = case_keys(op);  // the op's case schemas' keys
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
  const Clock::time_point began = Clock::now();
  clock.start = began + seconds(o.start_seconds);
  clock.main_end = clock.start + seconds(SuiteRun::main_budget(o, impl));
  clock.end = clock.start + seconds(o.budget);
  clock.slack = 0.05 * o.budget;
  SuiteResult row = run_suite_proper(o, impl, named, clock);
  row.stopped_at_first_failure = row.failed && !o.every_property;
  run_probe(o, row, clock);
  std::remove((costs.path + "." + row.op).c_str());  // the cost file of an interpreted op, if any
  row.seconds = std::chrono::duration<double>(Clock::now() - began).count();
  return row;
}

namespace {

// Shrinks a random failure of row (found: row.first or one of row.more) in a child of its own,
// for what is left of the row's budget (the search stops sooner: 200 tries, or nothing smaller
// fails); a child that crashes, hangs or finds nothing smaller leaves the finding as it was. Not a
// tenth of the budget, as it was: a child that must start a Python worker (seconds under load)
// spent all of that on its start and shrank nothing.
void shrink_in_child(const SuiteOptions& o, const std::string& impl, const RowClock& clock, SuiteFinding& found) {
  const Clock::time_point until = clock.end;
  if (Clock::now() + seconds(0.5) >= until) return;
  const ProgressFile progress;
  bool case_timed_out = false;
  const SuiteFinding before = found;
  const IsolatedOutcome out = run_isolated(
      [&]() -> std::string {
        SuiteResult r;
        r.failed = true;
        r.first = before;
        SuiteRun run(o, impl, progress.path, clock);
        run.shrink_random(r.first, until, r);
        return serialize(r);
      },
      child_options(o, clock, until, progress.path, &case_timed_out, /*judge_last=*/false));
  SuiteResult shrunk;
  if (out.kind == IsolatedOutcome::kViolation && deserialize(out.message, shrunk) && shrunk.failed &&
      shrunk.first.check == before.check) {
    found = shrunk.first;
  }
}

// How a child of the row ended: at the end of its time (or with every property failed), or early,
// on a case that crashed, hung or lost the context (a failure), or on a slow case (not one).
enum class ChildEnd { kDone, kFailure, kSlowCase };

// What one child of the row gave (SuiteRun::judge until clock.main_end without the properties in
// skip), merged into row, and how it ended (a fresh child may go on after an early end).
ChildEnd run_one_child(const SuiteOptions& o, const std::string& impl, const RowClock& clock,
                   const std::set<std::string>& skip, SuiteResult& row) {
  const ProgressFile progress, found;
  bool case_timed_out = false;
  const SuiteResult start = row;
  const IsolatedOutcome out = run_isolated(
      [&]() -> std::string {
        SuiteResult r;
        r.impl = start.impl, r.op = start.op, r.named = start.named;
        SuiteRun(o, impl, progress.path, clock, found.path, skip).judge(r);
        return serialize(r);
      },
      child_options(o, clock, clock.main_end, progress.path, &case_timed_out));
  // The part's counts and failures join the row's.
  const auto merge = [&row](const SuiteResult& part) {
    row.cases_run += part.cases_run;
    for (const auto& [name, t] : part.tally) {
      PropertyTally& mine = row.tally[name];
      mine.cases += t.cases;
      if (t.not_taken > 0) mine.add_not_taken(t.not_taken, t.not_taken_why);
    }
    for (const SuiteFinding* f : part.findings()) {
      if (!row.failed) {
        row.failed = true, row.first = *f;
      } else {
        row.more.push_back(*f);
      }
    }
    if (row.false_positives == 0) row.false_positive = part.false_positive, row.false_positive_case = part.false_positive_case;
    row.false_positives += part.false_positives;
    row.outside_contract += part.outside_contract;
    if (row.beyond_reach == 0) row.beyond_reach_why = part.beyond_reach_why;
    row.beyond_reach += part.beyond_reach;
  };
  SuiteResult parsed;
  if (out.kind == IsolatedOutcome::kViolation && deserialize(out.message, parsed)) {
    merge(parsed);
    return ChildEnd::kDone;
  }
  if (out.kind == IsolatedOutcome::kViolation && out.message.rfind("error: ", 0) == 0) {
    throw Error(impl + ": " + out.message.substr(7));  // the run's own setup failed: no finding
  }
  const Progress p = read_progress(progress.path);
  SuiteResult part;
  part.cases_run = p.cases_run;
  part.tally = p.tally;
  for (const SuiteFinding& f : read_found(found.path)) {
    if (!part.failed) {
      part.failed = true, part.first = f;
    } else {
      part.more.push_back(f);
    }
  }
  if (out.kind == IsolatedOutcome::kTimedOut && !case_timed_out) {
    // Killed at the end of the budget before its first case (a case under way is given the case
    // timeout): nothing judged there.
    row.budget_note = budget_note(p, o);
    merge(part);
    return ChildEnd::kDone;
  }
  // The child crashed, lost the device context, hung on one case or threw: a failure by that, where it was.
  SuiteFinding crash;
  crash.stage = p.where.substr(0, p.where.find(':'));
  crash.check = crash_name(out);
  crash.verdict = without_prefix(out.message, crash.check + ": ") + (p.where.empty() ? "" : " (during " + p.where + ")");
  crash.seconds = std::chrono::duration<double>(Clock::now() - clock.start).count();
  bool counts = out.kind != IsolatedOutcome::kPassed;
  if (counts && !p.case_text.empty()) {
    CaseText shown = CaseText::parse(p.case_text);
    crash.property = shown.word("property");
    shown.set("impl", impl).set("backend", o.backend);
    crash.case_text = shown.format();
    // As for any failure: it counts only if <op>@ref passes the case (in a fresh child: this one's
    // context may be gone), within one case timeout.
    IsolationOptions ref_opts;
    ref_opts.timeout_seconds = case_timeout(o);
#ifdef MLACHECK_HAVE_CUDA
    ref_opts.is_sticky = cuda::is_sticky_fault;
#endif
    const auto ref_start = Clock::now();
    const IsolatedOutcome ref = run_isolated(
        [&]() -> std::string { return run_case_text(shown, o.backend, row.op + "@ref").verdict.value_or(""); },
        ref_opts);
    const double ref_took = std::chrono::duration<double>(Clock::now() - ref_start).count();
    if (!ref.passed() && case_timed_out && ref.kind == IsolatedOutcome::kTimedOut) {
      // Past the case timeout on <op>@ref too: a slow case (a large one, or a slow build), not a
      // hang and not the suite's fault; counted apart, and the row goes on.
      counts = false;
      if (row.slow_cases++ == 0) {
        row.slow_case = "a case ran past the case timeout of " + std::to_string(static_cast<int>(case_timeout(o))) +
                        " s on " + impl + " and on " + row.op + "@ref too: a slow case, not a hang (--case-timeout " +
                        "raises it) (during " + p.where + ")";
      }
    } else if (!ref.passed() && ref.kind != IsolatedOutcome::kTimedOut) {
      // <op>@ref fails the case too: the suite's defect, not impl's. (A reference that only ran
      // past the case timeout says the case is large, not wrong: impl's crash stands.)
      counts = false;
      part.false_positives = 1;
      part.false_positive = crash.check + " on " + impl + " and " + crash_name(ref) + " on " + row.op + "@ref: " +
                            ref.message + " (its property was not run further)";
      CaseText ref_case = shown;
      ref_case.set("impl", row.op + "@ref");
      part.false_positive_case = ref_case.format();  // not a failure of impl; its property is not run again
    } else if (case_timed_out && o.backend != "host" && o.start_seconds == 0 && ref_took * kRefTimeFactor < case_timeout(o)) {
      // On a GPU the reference ran the case, child start and all, in a sixteenth of the time impl
      // was given: the case is small, and impl's time has nothing to do with it. (On the host a
      // kernel's hang is told by its steps, in run_case_text; what runs past the case timeout there
      // is code the executor does not count, such as a plugin's, left to the rerun below, as is a
      // Python implementation, slow by nature.)
      char line[240];
      std::snprintf(line, sizeof line,
                    "; %s ran the same case in %.2f s in a fresh child: past %d times that, a hang whatever the build",
                    (row.op + "@ref").c_str(), ref_took, kRefTimeFactor);
      crash.verdict += line;
    } else if (case_timed_out) {
      // A hang, or a slow case (a large one, or a machine under load)? The case again, alone, with
      // four times the case timeout (and the implementation's start): ended then, it was slow, and
      // the row goes on; not ended, a hang. What it answers when it ends is judged as ever.
      IsolationOptions again_opts = ref_opts;
      again_opts.timeout_seconds = kHangConfirmFactor * case_timeout(o) + o.start_seconds;
      const auto t0 = Clock::now();
      const IsolatedOutcome again = run_isolated(
          [&]() -> std::string { return run_case_text(shown, o.backend, impl).verdict.value_or(""); }, again_opts);
      const double took = std::chrono::duration<double>(Clock::now() - t0).count();
      char line[320];
      if (again.kind == IsolatedOutcome::kTimedOut) {
        std::snprintf(line, sizeof line, "; run again alone for %.0f s (%d times the case timeout), it did not end either",
                      again_opts.timeout_seconds, kHangConfirmFactor);
        crash.verdict += line;
      } else if (again.passed()) {
        counts = false;
        std::snprintf(line, sizeof line,
                      "a case ran past the case timeout of %.0f s, then alone ended in %.1f s and held: a slow case, "
                      "not a hang (--case-timeout raises it)",
                      case_timeout(o), took);
        if (row.slow_cases++ == 0) row.slow_case = std::string(line) + " (during " + p.where + ")";
      } else {
        crash.check = crash_name(again);
        if (again.kind == IsolatedOutcome::kViolation) crash.check = crash.property;  // it ended, and failed
        std::snprintf(line, sizeof line, " (after running past the case timeout of %.0f s; alone, it ended in %.1f s)",
                      case_timeout(o), took);
        crash.verdict = without_prefix(again.message, crash.check + ": ") + line;
      }
    }
  }
  if (counts && crash.check == "hang") {
    // What repro needs to tell the hang as check did, in time: the case timeout it ran under.
    CaseText saved = CaseText::parse(crash.case_text);
    saved.set(kCaseTimeoutKey, static_cast<int64_t>(std::ceil(case_timeout(o))));
    crash.case_text = saved.format();
  }
  if (counts) {
    if (crash.property.empty()) crash.property = crash.check;
    if (!part.failed) {
      part.failed = true, part.first = crash;
    } else {
      part.more.push_back(crash);
    }
  }
  merge(part);
  if (p.case_text.empty()) return ChildEnd::kDone;  // no case was under way: nothing to go on from
  return counts || !part.findings().empty() || part.false_positives > 0 ? ChildEnd::kFailure : ChildEnd::kSlowCase;
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
  for (const FuzzTarget& t : fuzz_targets()) {
    if (t.op != row.op) continue;
    for (const PropertyEntry* p : fuzz_target_properties(t)) {
      if (!p->ref_only && o.selected(p->name)) row.properties.push_back(p->name);
    }
  }
  // A child until the suite's share of the budget ends; after a slow case, and (judging every
  // property) after a crash, a hang or a lost context, a fresh child without the properties that
  // failed (or whose case failed on <op>@ref too) for what is left of it.
  std::set<std::string> skip;
  size_t false_positives_seen = 0;
  for (;;) {
    const ChildEnd end = run_one_child(o, impl, clock, skip, row);
    if (end == ChildEnd::kDone || (end == ChildEnd::kFailure && !o.every_property) || Clock::now() >= clock.main_end) {
      break;
    }
    for (const SuiteFinding* f : row.findings()) skip.insert(f->property);
    if (static_cast<size_t>(row.false_positives) > false_positives_seen) {
      // The false positive's case names its property: not run further (its line says so).
      const std::string prop = CaseText::parse(row.false_positive_case).word("property");
      if (!prop.empty()) skip.insert(prop);
      false_positives_seen = static_cast<size_t>(row.false_positives);
    }
    const bool left = std::any_of(row.properties.begin(), row.properties.end(),
                                  [&](const std::string& p) { return !skip.count(p); });
    if (!left) break;
  }
  if (o.shrink) {
    if (row.failed && row.first.random_index >= 0) shrink_in_child(o, impl, clock, row.first);
    for (SuiteFinding& f : row.more) {
      if (f.random_index >= 0) shrink_in_child(o, impl, clock, f);
    }
  }
  // The named check on its own, in a child of its own, for what is left of the suite's share of the
  // budget: does it fail the implementation before any crash?
  if (named_settled(row)) return row;
  if (Clock::now() >= clock.main_end) {
    row.named_result = "not run (budget spent)";
    return row;
  }
  const ProgressFile progress;
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
