// The kill matrix (tools/mutants_command.h): every seeded-bug variant against the property suite,
// the corpus regressions and random fuzzing, each variant in a child process.
#include "tools/mutants_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "core/backend/backend.h"
#include "core/backend/isolate.h"
#include "core/error.h"
#include "kernels/device.h"
#include "kernels/registry.h"
#include "properties/case_bytes.h"
#include "properties/fuzz_input.h"
#include "properties/property_registry.h"
#ifdef MLACHECK_HAVE_CUDA
#include "core/backend/cuda_runtime.h"
#endif

namespace mlacheck {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// The check each row of BUGS.md names ("what must catch it"), as the property that carries it.
const std::map<std::string, std::string>& named_checks() {
  static const std::map<std::string, std::string> m = {
      {"decode_metadata@U1", "decode_metadata.equals_oracle"},              // non-uniform batch
      {"decode_metadata@U2", "decode_metadata.equals_oracle"},              // rows == tokens
      {"decode_metadata@U3", "decode_metadata.equals_oracle"},              // lengths in [0, L]
      {"decode_metadata@U5", "decode_metadata.steps_equal_oracle"},         // shrinking batches
      {"decode_metadata@U6", "decode_metadata.fast_path_equals_general_path"},  // path equivalence
      {"decode_metadata@C1", "decode_metadata.equals_oracle"},              // strides of the view
      {"decode_metadata@C2", "decode_metadata.steps_equal_oracle"},         // address stability
      {"decode_metadata@C3", "decode_metadata.equals_oracle"},              // shape against next_n'
      {"indexer_decode_step@R1", "indexer_decode_step.equals_oracle"},  // guard of the top-k rows
      {"indexer_decode_step@R2", "indexer_decode_step.equals_oracle"},
      {"topk_decode@R4", "topk_decode.rows_admissible"},
      {"mla_decode@T5", "mla_decode.equals_oracle"},                    // defined output for empty rows
      {"mla_decode_impl@T1", "mla_decode_impl.replay_equals_eager"},    // replay after lengths grow
      {"mla_decode_impl@T2", "mla_decode_impl.engine_sequence"},        // address stability
      {"mla_decode_impl@K1", "mla_decode_impl.calls_equal_oracle"},     // scales change between calls
      {"mla_decode_impl@K3", "mla_decode_impl.calls_equal_oracle"},     // the workspace never moves
      {"mla_decode_impl@K2", "mla_decode_impl.nonuniform_query_lengths_refused"},  // shape contract
  };
  return m;
}

bool is_bug_id(const std::string& name) {
  return name.size() >= 2 && name[0] >= 'A' && name[0] <= 'Z' &&
         std::all_of(name.begin() + 1, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

struct Options {
  std::string backend = "host";
  double budget = 60;
  std::string format = "table";
  std::vector<std::string> only;
  int cases = 20;
  uint64_t seed = 1;
  std::string corpus;
  std::string save_dir;  // --save: each kill's case as <op>-<id>.case
};

// A kill: where (stage), by what (a property, or "crash"), the verdict line, when.
struct Kill {
  std::string stage, check, verdict;
  double seconds = 0;
  std::string case_text;  // the case that killed it (what `mlacheck repro` reruns)
};

struct Row {
  std::string variant, op, summary, named;
  bool killed = false;
  Kill first;
  int cases_run = 0;
  std::string named_result = "not run";  // "killed", "survived", "first kill", "not run"
  std::string named_verdict;
  // Cases that failed on the variant and on <op>@ref too: the suite's own false positives.
  int false_positives = 0;
  std::string false_positive, false_positive_case;
};

std::string corpus_root(const Options& o) {
  if (!o.corpus.empty()) return o.corpus;
  const char* env = std::getenv("MLACHECK_CORPUS_DIR");
  if (env && *env) return env;
#ifdef MLACHECK_SOURCE_DIR
  return std::string(MLACHECK_SOURCE_DIR) + "/corpus";
#else
  return "corpus";
#endif
}

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
      CaseText c = CaseText::parse(read_file(f));
      if (keep(property_registry().find(c.word("property")))) out.emplace_back(f, std::move(c));
    } catch (const Error&) {
      // A malformed file is the corpus tests' business (corpus/CMakeLists.txt), not a kill.
    }
  }
  return out;
}

// The run of one variant, inside the child.
class VariantRun {
 public:
  VariantRun(const Options& o, const std::string& variant, const std::string& progress_file)
      : o_(o), variant_(variant), op_(variant.substr(0, variant.find('@'))), progress_(progress_file),
        target_(find_target(op_)), start_(Clock::now()) {}

  // Stages 1-3 until the first kill or the budget; the property suite may take up to a third of it.
  void first_kill(Row& row) {
    const Clock::time_point deadline = start_ + seconds(o_.budget);
    const Clock::time_point suite_deadline = start_ + seconds(o_.budget / 3);
    std::optional<Kill> k;
    for (const PropertyEntry* p : properties()) {
      if ((k = run_files(seeds_of(*p), "properties", suite_deadline, row))) break;
    }
    for (int r = 0; !k && r < o_.cases; ++r) {
      for (const PropertyEntry* p : properties()) {
        if ((k = run_random(p, r, "properties", suite_deadline, row))) break;
      }
    }
    if (!k) k = run_files(case_files(fs::path(corpus_root(o_)) / "regressions",
                                     [&](const PropertyEntry& p) { return p.op == op_; }),
                          "regressions", deadline, row);
    for (int r = 0; !k && Clock::now() < deadline; ++r) k = run_random(nullptr, r, "fuzz", deadline, row);
    if (k) row.killed = true, row.first = *k;
  }

  // The named check alone (when the first kill was another), with its own budget.
  void named_check(Row& row) {
    if (row.named == "(none)") {
      row.named_result = "not named";
      return;
    }
    if (!row.killed || row.first.check == row.named) {
      row.named_result = row.killed ? "first kill" : "survived";
      return;
    }
    const PropertyEntry& p = property_registry().find(row.named);
    const Clock::time_point deadline = Clock::now() + seconds(o_.budget);
    std::optional<Kill> k = run_files(case_files(fs::path(corpus_root(o_)) / "regressions",
                                                 [&](const PropertyEntry& e) { return &e == &p; }),
                                      "regressions", deadline, row);
    if (!k) k = run_files(seeds_of(p), "properties", deadline, row);
    for (int r = 0; !k && Clock::now() < deadline; ++r) k = run_random(&p, r, "properties", deadline, row);
    row.named_result = k ? "killed" : "survived";
    if (k) row.named_verdict = k->stage + ": " + k->verdict;
  }

 private:
  static Clock::duration seconds(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  }
  static const FuzzTarget& find_target(const std::string& op) {
    for (const FuzzTarget& t : fuzz_targets()) {
      if (t.op == op) return t;
    }
    throw Error("no fuzz target applies the properties of op '" + op + "'");
  }
  std::vector<const PropertyEntry*> properties() const {
    std::vector<const PropertyEntry*> out;
    for (const PropertyEntry* p : fuzz_target_properties(target_)) {
      if (!p->ref_only) out.push_back(p);
    }
    return out;
  }
  std::vector<std::pair<fs::path, CaseText>> seeds_of(const PropertyEntry& p) const {
    return case_files(fs::path(corpus_root(o_)) / target_.name, [&](const PropertyEntry& e) { return &e == &p; });
  }

  // Where the child is, for a crash report: one line, then the case text.
  void note(const std::string& what, const CaseText& c) const {
    std::ofstream(progress_, std::ios::trunc) << what << '\n' << c.format();
  }

  std::optional<Kill> run_one(const CaseText& c, const std::string& stage, const std::string& what, Row& row) {
    note(stage + ": " + what, c);
    // An Error here is the matrix's own trouble (a malformed corpus case, a backend not usable in
    // this process), never a kill and never to be skipped: it ends the command with its line.
    const ReproResult r = run_case_text(c, o_.backend, variant_);
    ++row.cases_run;
    if (!r.verdict) return std::nullopt;
    // A kill counts only if the correct implementation passes the same case; otherwise the suite
    // itself is wrong there (a false positive, reported apart, with its case).
    const ReproResult ref = run_case_text(c, o_.backend, op_ + "@ref");
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
    shown.set("impl", variant_).set("backend", o_.backend);
    return Kill{stage, r.property, *r.verdict, std::chrono::duration<double>(Clock::now() - start_).count(),
                shown.format()};
  }

  std::optional<Kill> run_files(const std::vector<std::pair<fs::path, CaseText>>& files, const std::string& stage,
                                Clock::time_point deadline, Row& row) {
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
  // picks one), from bytes seeded by the variant, the property and r.
  std::optional<Kill> run_random(const PropertyEntry* p, int r, const std::string& stage, Clock::time_point deadline,
                                 Row& row) {
    if (Clock::now() >= deadline) return std::nullopt;
    std::seed_seq seq{o_.seed, std::hash<std::string>{}(variant_), std::hash<std::string>{}(p ? p->name : stage),
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
    // lies, properties/case_bytes.h), and now and then any byte, for the large values.
    const size_t n = 8 + rng() % 248;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t roll = rng() % 16;
      bytes.push_back(static_cast<char>(roll < 12 ? rng() % 16 : roll < 15 ? rng() % 224 : rng() % 256));
    }
    FuzzCase fc;
    try {
      fc = decode_fuzz_input(target_, bytes, variant_, o_.backend);
    } catch (const Error&) {
      return std::nullopt;  // refused by the case rules
    }
    if (fc.property->ref_only) return std::nullopt;
    return run_one(fc.text, stage, fc.property->name + " random case " + std::to_string(r), row);
  }

  const Options& o_;
  std::string variant_, op_, progress_;
  const FuzzTarget& target_;
  Clock::time_point start_;
};

// Row <-> one line through the isolation pipe (fields separated by 0x1f).
constexpr char kSep = '\x1f', kNewline = '\x1e';
std::string serialize(const Row& r) {
  std::string s = "mutants-row";
  for (const std::string& f : {std::string(r.killed ? "1" : "0"), r.first.stage, r.first.check, r.first.verdict,
                               std::to_string(r.first.seconds), std::to_string(r.cases_run), r.named_result,
                               r.named_verdict, r.first.case_text, std::to_string(r.false_positives),
                               r.false_positive, r.false_positive_case}) {
    std::string field = f;
    std::replace(field.begin(), field.end(), '\n', kNewline);  // the pipe carries one line
    s += kSep + field;
  }
  return s;
}
bool deserialize(const std::string& s, Row& r) {
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
  if (f.size() != 13 || f[0] != "mutants-row") return false;
  r.killed = f[1] == "1";
  r.first.stage = f[2], r.first.check = f[3], r.first.verdict = f[4];
  r.first.seconds = std::atof(f[5].c_str());
  r.cases_run = std::atoi(f[6].c_str());
  r.named_result = f[7], r.named_verdict = f[8], r.first.case_text = f[9];
  r.false_positives = std::atoi(f[10].c_str());
  r.false_positive = f[11], r.false_positive_case = f[12];
  return true;
}

Row run_variant(const Options& o, const std::string& variant) {
  Row row;
  row.variant = variant;
  row.op = variant.substr(0, variant.find('@'));
  const auto named = named_checks().find(variant);
  row.named = named == named_checks().end() ? "(none)" : named->second;
  for (const kernels::ImplementationInfo& i : kernels::registry().list()) {
    if (i.qualified() == variant) row.summary = i.summary;
  }
  char progress[] = "/tmp/mlacheck-mutants-XXXXXX";
  const int fd = ::mkstemp(progress);
  MLA_REQUIRE(fd >= 0, "mutants: cannot make a temporary file in /tmp");
  ::close(fd);
  IsolationOptions opts;
  opts.timeout_seconds = 2 * o.budget + 120;
#ifdef MLACHECK_HAVE_CUDA
  opts.is_sticky = cuda::is_sticky_fault;
#endif
  const Clock::time_point start = Clock::now();
  const IsolatedOutcome out = run_isolated(
      [&]() -> std::string {
        Row r = row;
        VariantRun run(o, variant, progress);
        run.first_kill(r);
        run.named_check(r);
        return serialize(r);
      },
      opts);
  Row parsed = row;
  if (out.kind == IsolatedOutcome::kViolation && deserialize(out.message, parsed)) {
    ::unlink(progress);
    return parsed;
  }
  if (out.kind == IsolatedOutcome::kViolation && out.message.rfind("error: ", 0) == 0) {
    ::unlink(progress);
    throw Error(variant + ": " + out.message.substr(7));  // the matrix's own setup failed, no kill
  }
  // The child crashed, hit a sticky fault, timed out or threw: a kill by that, where it was.
  const std::string progress_text = read_file(progress);
  const std::string where = progress_text.substr(0, progress_text.find('\n'));
  if (where.size() < progress_text.size()) row.first.case_text = progress_text.substr(where.size() + 1);
  row.killed = out.kind != IsolatedOutcome::kPassed;
  row.first.stage = where.substr(0, where.find(':'));
  row.first.check = isolated_outcome_name(out.kind);
  row.first.verdict = out.message + (where.empty() ? "" : " (during " + where + ")");
  row.first.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  // The named check on its own, in a child of its own: does it kill the variant before any crash?
  const IsolatedOutcome named_run = run_isolated(
      [&]() -> std::string {
        Row r = row;
        VariantRun(o, variant, progress).named_check(r);
        return serialize(r);
      },
      opts);
  ::unlink(progress);
  Row with_named = row;
  if (named_run.kind == IsolatedOutcome::kViolation && deserialize(named_run.message, with_named)) {
    row.named_result = with_named.named_result, row.named_verdict = with_named.named_verdict;
  } else {
    row.named_result = std::string("crashed too: ") + isolated_outcome_name(named_run.kind);
  }
  return row;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\', out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string today() {
  const std::time_t t = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

void print_table(const Options& o, const std::vector<Row>& rows, std::ostream& out) {
  out << "mlacheck mutants: " << rows.size() << " seeded-bug variant(s) on the " << o.backend << " backend, "
      << fixed(o.budget, 0) << " s budget each, " << today() << "\n\n";
  size_t w = 8;
  for (const Row& r : rows) w = std::max(w, r.variant.size());
  char line[512];
  std::snprintf(line, sizeof line, "%-*s  %-8s  %-45s  %8s  %-11s  %s\n", static_cast<int>(w), "variant", "result",
                "first kill (stage: check)", "time", "named check", "verdict");
  out << line;
  std::vector<double> times;
  int killed = 0;
  for (const Row& r : rows) {
    const std::string by = r.killed ? r.first.stage + ": " + r.first.check : "-";
    std::string verdict = r.killed ? r.first.verdict : std::to_string(r.cases_run) + " cases run, none failed";
    if (verdict.size() > 160) verdict = verdict.substr(0, 157) + "...";
    std::snprintf(line, sizeof line, "%-*s  %-8s  %-45s  %7ss  %-11s  %s\n", static_cast<int>(w), r.variant.c_str(),
                  r.killed ? "killed" : "SURVIVED", by.c_str(), r.killed ? fixed(r.first.seconds, 2).c_str() : "-",
                  r.named_result.c_str(), verdict.c_str());
    out << line;
    if (r.killed) ++killed, times.push_back(r.first.seconds);
  }
  std::sort(times.begin(), times.end());
  out << "\n" << killed << " of " << rows.size() << " killed";
  if (!times.empty()) {
    const double median = times.size() % 2 ? times[times.size() / 2]
                                           : (times[times.size() / 2 - 1] + times[times.size() / 2]) / 2;
    out << "; time to kill: median " << fixed(median, 2) << " s, max " << fixed(times.back(), 2) << " s";
  }
  out << "\nnamed check: the property BUGS.md's row names; \"first kill\" when it killed first, else whether it "
         "kills the variant when run alone\n";
  for (const Row& r : rows) {
    if (r.named_result == "killed") out << "  " << r.variant << " named check " << r.named << ": " << r.named_verdict << '\n';
  }
  for (const Row& r : rows) {
    if (r.false_positives > 0) {
      out << "suite false positive: " << r.false_positives << " case(s) run for " << r.variant
          << " failed on " << r.op << "@ref too (not counted as kills); first: " << r.false_positive
          << (o.save_dir.empty() ? "" : " (saved with --save)") << '\n';
    }
  }
}

void print_json(const Options& o, const std::vector<Row>& rows, std::ostream& out) {
  out << "{\"date\": " << json_string(today()) << ", \"backend\": " << json_string(o.backend)
      << ", \"budget_seconds\": " << fixed(o.budget, 1) << ", \"variants\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    out << "  {\"variant\": " << json_string(r.variant) << ", \"summary\": " << json_string(r.summary)
        << ", \"killed\": " << (r.killed ? "true" : "false") << ", \"stage\": " << json_string(r.first.stage)
        << ", \"check\": " << json_string(r.first.check) << ", \"verdict\": " << json_string(r.first.verdict)
        << ", \"seconds\": " << fixed(r.first.seconds, 3) << ", \"cases_run\": " << r.cases_run
        << ", \"named_check\": " << json_string(r.named) << ", \"named_result\": " << json_string(r.named_result)
        << ", \"named_verdict\": " << json_string(r.named_verdict) << ", \"case\": " << json_string(r.first.case_text)
        << ", \"false_positives\": " << r.false_positives << ", \"false_positive\": " << json_string(r.false_positive)
        << ", \"false_positive_case\": " << json_string(r.false_positive_case) << "}" << (i + 1 < rows.size() ? "," : "") << '\n';
  }
  out << "]}\n";
}

}  // namespace

const std::string& named_check_of(const std::string& variant) {
  const auto it = named_checks().find(variant);
  MLA_REQUIRE(it != named_checks().end(), "seeded-bug variant '", variant,
              "' names no check (add its BUGS.md row's property to tools/mutants_command.cpp)");
  return it->second;
}

std::vector<std::string> seeded_variants() {
  std::vector<std::string> out;
  for (const kernels::ImplementationInfo& i : kernels::registry().list()) {
    if (is_bug_id(i.name)) out.push_back(i.qualified());
  }
  return out;
}

int run_mutants_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Options o;
  auto bad = [&](const std::string& why) {
    err << "mlacheck: mutants: " << why << " (see mlacheck --help)\n";
    return 2;
  };
  try {
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (i + 1 >= args.size()) return bad(a == "--backend" || a == "--budget" || a == "--format" || a == "--only" ||
                                                   a == "--cases" || a == "--seed" || a == "--corpus" || a == "--save"
                                               ? a + " needs a value"
                                               : "unknown argument '" + a + "'");
      const std::string& v = args[++i];
      char* end = nullptr;
      if (a == "--backend") {
        o.backend = v;
      } else if (a == "--budget") {
        o.budget = std::strtod(v.c_str(), &end);
        if (*end || !(o.budget > 0 && o.budget <= 3600)) return bad("--budget '" + v + "' is not 1 to 3600 seconds");
      } else if (a == "--format") {
        if (v != "table" && v != "json") return bad("--format '" + v + "' is not table or json");
        o.format = v;
      } else if (a == "--only") {
        o.only.push_back(v);
      } else if (a == "--cases") {
        o.cases = static_cast<int>(std::strtol(v.c_str(), &end, 10));
        if (*end || o.cases < 0 || o.cases > 100000) return bad("--cases '" + v + "' is not 0 to 100000");
      } else if (a == "--seed") {
        o.seed = std::strtoull(v.c_str(), &end, 10);
        if (*end || v.empty()) return bad("--seed '" + v + "' is not a number");
      } else if (a == "--corpus") {
        o.corpus = v;
      } else if (a == "--save") {
        o.save_dir = v;
      } else {
        return bad("unknown argument '" + a + "'");
      }
    }
    const auto b = parse_backend(o.backend);
    if (!b) return bad("--backend '" + o.backend + "' is not one of host, cuda, hip");
    // The host backend is checked here; a GPU backend is not touched in this process (a CUDA
    // context does not survive the fork of each variant's child), so the first child reports it.
    std::string why;
    if (*b == Backend::kHost && !kernels::device_usable(*b, &why)) {
      err << "mlacheck: mutants: " << o.backend << ": not usable: " << why << '\n';
      return 2;
    }
    MLA_REQUIRE(fs::is_directory(fs::path(corpus_root(o)) / "regressions"), "no corpus at '", corpus_root(o),
                "' (a folder with regressions/ and one folder per fuzz target; --corpus DIR)");
    std::vector<std::string> variants;
    for (const std::string& v : seeded_variants()) {
      const std::string id = v.substr(v.find('@') + 1);
      if (o.only.empty() || std::find(o.only.begin(), o.only.end(), id) != o.only.end() ||
          std::find(o.only.begin(), o.only.end(), v) != o.only.end()) {
        variants.push_back(v);
      }
    }
    for (const std::string& want : o.only) {
      const bool found = std::any_of(variants.begin(), variants.end(), [&](const std::string& v) {
        return v == want || v.substr(v.find('@') + 1) == want;
      });
      if (!found) return bad("--only '" + want + "' is no seeded-bug variant (mlacheck list shows them)");
    }
    if (variants.empty()) return bad("no seeded-bug variants are registered");
    if (!o.save_dir.empty()) {
      std::error_code ec;
      fs::create_directories(o.save_dir, ec);
      MLA_REQUIRE(fs::is_directory(o.save_dir), "--save: cannot make the folder '", o.save_dir, "'");
    }
    std::vector<Row> rows;
    for (const std::string& v : variants) {
      if (o.format == "table") err << "mutants: " << v << " ...\n";
      rows.push_back(run_variant(o, v));
      const Row& r = rows.back();
      std::string name = v;
      std::replace(name.begin(), name.end(), '@', '-');
      if (!o.save_dir.empty() && r.killed && !r.first.case_text.empty()) {
        std::ofstream(fs::path(o.save_dir) / (name + ".case")) << r.first.case_text;
      }
      if (!o.save_dir.empty() && !r.false_positive_case.empty()) {
        std::ofstream(fs::path(o.save_dir) / (name + "-false-positive-on-ref.case")) << r.false_positive_case;
      }
    }
    if (o.format == "json") {
      print_json(o, rows, out);
    } else {
      print_table(o, rows, out);
    }
    return std::all_of(rows.begin(), rows.end(), [](const Row& r) { return r.killed; }) ? 0 : 1;
  } catch (const Error& e) {
    err << "mlacheck: mutants: " << e.what() << '\n';
    return 2;
  }
}

}  // namespace mlacheck
