// The kill matrix (tools/mutants_command.h): every seeded-bug variant against the property suite,
// the corpus regressions and random fuzzing, each variant in a child process.
#include "tools/mutants_command.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/backend/backend.h"
#include "core/error.h"
#include "core/read_fence.h"
#include "kernels/device.h"
#include "kernels/plugin.h"
#include "kernels/python_bridge.h"
#include "kernels/registry.h"
#include "fuzz/fuzz_input.h"
#include "harness/memory_budget.h"
#include "tools/adapters.h"
#include "tools/flags_typed.h"
#include "kernels/mutants/bugs.h"
#include "properties/property_registry.h"
#include "tools/report_formats.h"
#include "tools/suite_runner.h"

namespace mlacheck {

namespace {

namespace fs = std::filesystem;

// The check each row of docs/bugs.md names ("what must catch it"), as the property that carries it
// (the bugs tables, kernels/mutants/bugs.h).
const std::map<std::string, std::string>& named_checks() {
  static const std::map<std::string, std::string> m = [] {
    std::map<std::string, std::string> out;
    for (const kernels::SeededBug& b : kernels::seeded_bugs()) out.emplace(b.variant, b.check);
    return out;
  }();
  return m;
}

// Variants whose bug changes no result, so that only the check of their class can kill them: where
// this build or backend lacks that check they are listed as not run, never counted as survivors.
// "" when the variant needs nothing, else why it cannot be run here.
std::string missing_check(const std::string& variant, const std::string& backend) {
  const auto& bugs = kernels::seeded_bugs();
  const auto row = std::find_if(bugs.begin(), bugs.end(), [&](const kernels::SeededBug& b) { return variant == b.variant; });
  if (row == bugs.end() || !row->needs_read_fence) return "";
  if (backend == "cuda") {
    return ReadFence::device_fences() ? ""
                                      : "a read past a view, which on cuda only memcheck with the views as NVTX "
                                        "regions sees: `mlacheck mutants --sanitize memcheck` runs it";
  }
  if (backend != "host") return "a read past a view, which no fence sees on " + backend;
  if (!ReadFence::available()) {
    return "a read past a view, which only the read fence sees: this build has no AddressSanitizer (the sanitizer "
           "build runs it: cmake --preset asan, or scripts/test.sh, which builds it)";
  }
  return "";
}

bool is_bug_id(const std::string& name) {
  return name.size() >= 2 && name[0] >= 'A' && name[0] <= 'Z' &&
         std::all_of(name.begin() + 1, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The mutants command's typed flags (tools/flags.def, through tools/flags_typed.h), and what follows
// from them.
struct Options : flags::MutantsFlags {
  SuiteOptions suite;
  std::vector<std::string> python_specs;       // --python and --adapter: each callable a variant, <op>@py
  std::map<std::string, std::string> mirrors;  // a Python variant -> the docs/bugs.md row it mirrors
};

// A variant as the matrix shows it: a Python one with the row it mirrors ("mla_decode_impl@py (T1)").
std::string shown(const Options& o, const std::string& impl) {
  const auto m = o.mirrors.find(impl);
  return m == o.mirrors.end() ? impl : impl + " (" + m->second + ")";
}

using Row = SuiteResult;

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

using NotRun = std::vector<std::pair<std::string, std::string>>;

}  // namespace

// A loaded machine can put an interpreted regression past the interpreter's reach (mutants.triton,
// 2026-12-07): the survivor then says so.
std::string survivor_text(const SuiteResult& r) {
  std::string out = std::to_string(r.cases_run) + " cases run, none failed";
  if (r.beyond_reach > 0) {
    out += "; " + std::to_string(r.beyond_reach) + " not run (" + r.beyond_reach_why + ")";
  }
  if (r.outside_contract > 0) out += "; " + std::to_string(r.outside_contract) + " seed or regression cases outside the contract";
  return out;
}

namespace {

void print_table(const Options& o, const std::vector<Row>& rows, const NotRun& not_run, std::ostream& out) {
  out << "mlacheck mutants: " << rows.size() << " seeded-bug variant(s) on the " << o.suite.backend << " backend, "
      << fixed(o.suite.budget, 0) << " s budget each, " << today() << "\n\n";
  size_t w = 8;
  for (const Row& r : rows) w = std::max(w, shown(o, r.impl).size());
  char line[512];
  std::snprintf(line, sizeof line, "%-*s  %-8s  %-45s  %8s  %-11s  %s\n", static_cast<int>(w), "variant", "result",
                "first kill (stage: check)", "time", "named check", "verdict");
  out << line;
  std::vector<double> times;
  int killed = 0;
  for (const Row& r : rows) {
    const std::string by = r.failed ? r.first.stage + ": " + r.first.check : "-";
    std::string verdict = r.failed ? r.first.verdict : survivor_text(r);
    if (verdict.size() > 240) verdict = verdict.substr(0, 237) + "...";
    std::snprintf(line, sizeof line, "%-*s  %-8s  %-45s  %7ss  %-11s  %s\n", static_cast<int>(w), shown(o, r.impl).c_str(),
                  r.failed ? "killed" : "SURVIVED", by.c_str(), r.failed ? fixed(r.first.seconds, 2).c_str() : "-",
                  r.named_result.c_str(), verdict.c_str());
    out << line;
    if (r.failed) ++killed, times.push_back(r.first.seconds);
  }
  std::sort(times.begin(), times.end());
  // Exact counts: the variants run, and apart those this build or backend cannot run (each named
  // below with why), never folded into "every seeded bug".
  out << "\n" << killed << " of " << rows.size() << (not_run.empty() ? "" : " runnable") << " killed";
  if (!not_run.empty()) {
    out << "; " << not_run.size() << " not run here (below: each needs another build or backend)";
  }
  if (!times.empty()) {
    const double median = times.size() % 2 ? times[times.size() / 2]
                                           : (times[times.size() / 2 - 1] + times[times.size() / 2]) / 2;
    out << "; time to kill: median " << fixed(median, 2) << " s, max " << fixed(times.back(), 2) << " s";
  }
  out << "\nnamed check: the property docs/bugs.md's row names; \"first kill\" when it killed first, else whether it "
         "kills the variant when run alone\n";
  for (const Row& r : rows) {
    if (r.named_result == "killed") out << "  " << shown(o, r.impl) << " named check " << r.named << ": " << r.named_verdict << '\n';
  }
  for (const Row& r : rows) {
    if (!r.budget_note.empty()) out << "  " << r.impl << ": " << r.budget_note << '\n';
  }
  for (const auto& [v, why] : not_run) out << "not run: " << v << ": " << why << '\n';
  for (const Row& r : rows) {
    if (r.false_positives > 0) {
      out << "suite false positive: " << r.false_positives << " case(s) run for " << r.impl
          << " failed on " << r.op << "@ref too (not counted as kills); first: " << r.false_positive
          << (o.save.empty() ? "" : " (saved with --save)") << '\n';
    }
  }
}

// JUnit: one test suite, a test case per variant; killed passes, survived fails (tools/report_formats.h).
void print_junit(const Options& o, const std::vector<Row>& rows, const NotRun& not_run, std::ostream& out) {
  using report::TestCase;
  report::TestSuite s;
  s.name = "mlacheck mutants (" + o.suite.backend + ")";
  s.timestamp = report::junit_timestamp();
  s.properties = {{"backend", o.suite.backend},
                  {"budget_seconds", fixed(o.suite.budget, 1)},
                  {"seed", std::to_string(o.suite.seed)},
                  {"date", today()}};
  for (const Row& r : rows) {
    TestCase t;
    t.name = shown(o, r.impl);
    t.classname = r.op.empty() ? r.impl.substr(0, r.impl.find('@')) : r.op;
    std::string said = r.failed ? "killed by " + r.first.stage + ": " + r.first.check + " after " +
                                      fixed(r.first.seconds, 2) + " s: " + r.first.verdict + "\n"
                                : survivor_text(r) + "\n";
    said += "named check " + r.named + ": " + r.named_result + (r.named_verdict.empty() ? "" : ": " + r.named_verdict) + "\n";
    if (!r.budget_note.empty()) said += r.budget_note + "\n";
    if (r.false_positives > 0) {
      said += "suite false positive: " + std::to_string(r.false_positives) + " case(s) failed on " + r.op +
              "@ref too (not counted as kills); first: " + r.false_positive + "\n";
    }
    if (r.failed) {
      t.seconds = r.first.seconds;
      t.output = said + (r.first.case_text.empty() ? "" : "the killing case:\n" + r.first.case_text);
    } else {
      t.outcome = TestCase::Outcome::kFailed;
      t.seconds = o.suite.budget;
      t.type = "survived";
      t.message = "survived: " + survivor_text(r) + " (the suite misses this seeded bug)";
      t.details = said;
    }
    s.cases.push_back(std::move(t));
  }
  for (const auto& [v, why] : not_run) {
    TestCase t;
    t.name = v;
    t.classname = v.substr(0, v.find('@'));
    t.outcome = TestCase::Outcome::kSkipped;
    t.message = "not run: " + why;
    s.cases.push_back(std::move(t));
  }
  report::write_junit(out, "mlacheck mutants", {s});
}

void print_json(const Options& o, const std::vector<Row>& rows, const NotRun& not_run, std::ostream& out) {
  out << "{\"date\": " << report::json_quote(today()) << ", \"backend\": " << report::json_quote(o.suite.backend)
      << ", \"budget_seconds\": " << fixed(o.suite.budget, 1) << ", \"variants\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const auto m = o.mirrors.find(r.impl);
    out << "  {\"variant\": " << report::json_quote(r.impl) << ", \"mirrors\": "
        << report::json_quote(m == o.mirrors.end() ? "" : m->second) << ", \"summary\": " << report::json_quote(r.summary)
        << ", \"killed\": " << (r.failed ? "true" : "false") << ", \"stage\": " << report::json_quote(r.first.stage)
        << ", \"check\": " << report::json_quote(r.first.check) << ", \"verdict\": " << report::json_quote(r.first.verdict)
        << ", \"seconds\": " << fixed(r.first.seconds, 3) << ", \"cases_run\": " << r.cases_run
        << ", \"beyond_reach\": " << r.beyond_reach << ", \"outside_contract\": " << r.outside_contract
        << ", \"named_check\": " << report::json_quote(r.named) << ", \"named_result\": " << report::json_quote(r.named_result)
        << ", \"named_verdict\": " << report::json_quote(r.named_verdict) << ", \"case\": " << report::json_quote(r.first.case_text)
        << ", \"false_positives\": " << r.false_positives << ", \"false_positive\": " << report::json_quote(r.false_positive)
        << ", \"false_positive_case\": " << report::json_quote(r.false_positive_case) << "}" << (i + 1 < rows.size() ? "," : "") << '\n';
  }
  out << "], \"not_run\": [";
  for (size_t i = 0; i < not_run.size(); ++i) {
    out << (i ? ", " : "") << "{\"variant\": " << report::json_quote(not_run[i].first)
        << ", \"why\": " << report::json_quote(not_run[i].second) << "}";
  }
  out << "]}\n";
}

}  // namespace

const std::string& named_check_of(const std::string& variant) {
  const auto it = named_checks().find(variant);
  MLA_REQUIRE(it != named_checks().end(), "seeded-bug variant '", variant,
              "' names no check (add its row, with its docs/bugs.md row's property, to its op's kernels/<family>_bugs.def)");
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
  auto bad = [&](const std::string& why) { return flags::usage_error(err, "mutants", why); };
  try {
    flags::MutantsFlags& f = o;
    if (const int rc = flags::parse_mutants(args, f, out, err); rc >= 0) return rc;
    o.suite = suite_options(f);
    o.python_specs = python_specs(f.python, f.adapter);
    flags::apply_max_mb(f.given.max_mb, f.max_mb);
    const auto b = parse_backend(o.suite.backend);
    if (!b) return bad("--backend '" + o.suite.backend + "' is not one of host, cuda, hip");
    // The host backend is checked here; a GPU backend is not touched in this process (a CUDA
    // context does not survive the fork of each variant's child), so the first child reports it.
    std::string why;
    if (*b == Backend::kHost && !kernels::device_usable(*b, &why)) {
      err << flags::prefix("mutants") << why << '\n';
      return 2;
    }
    const std::string corpus = corpus_root(o.suite.corpus);
    MLA_REQUIRE(fs::is_directory(fs::path(corpus) / "regressions"), "no corpus at '", corpus,
                "' (a folder with regressions/ and one folder per fuzz target; --corpus DIR)");
    // A plugin's implementations named like bug ids join the matrix; any other can be named by --only.
    for (const std::string& path : o.plugin) kernels::load_plugin_isolated(path);
    // Each Python callable is a variant of its own (a seeded twin, say a Triton kernel with one
    // wrong decision, run on the host in Triton's interpreter), named after the row it mirrors.
    kernels::set_python_start_limit(o.suite.budget);
    const std::vector<std::string> from_python = kernels::load_python_isolated(o.python_specs);
    for (const std::string& impl : from_python) {
      const std::string id = kernels::python_mirrors(impl.substr(0, impl.find('@')));
      if (id.empty()) continue;
      MLA_REQUIRE(named_checks().count(impl.substr(0, impl.find('@')) + "@" + id), "--python: ", impl,
                  " mirrors '", id, "', which is no row of docs/bugs.md for its op (mlacheck list shows the variants)");
      o.mirrors[impl] = id;
    }
    std::vector<std::string> variants;
    if (o.only.empty()) variants = o.python_specs.empty() ? seeded_variants() : from_python;
    for (const std::string& want : o.only) {
      std::string found;
      for (const std::string& v : seeded_variants()) {
        if (v == want || v.substr(v.find('@') + 1) == want) found = v;
      }
      if (found.empty() && want.find('@') != std::string::npos && want.substr(want.find('@') + 1) != "ref" &&
          kernels::registry().contains(want)) {
        found = want;  // a plugin's implementation, run as a variant
      }
      if (found.empty()) {
        return bad("--only '" + want + "' is no seeded-bug variant or registered implementation (mlacheck list shows them)");
      }
      variants.push_back(found);
    }
    if (variants.empty()) return bad("no seeded-bug variants are registered");
    if (!o.save.empty()) {
      std::error_code ec;
      fs::create_directories(o.save, ec);
      MLA_REQUIRE(fs::is_directory(o.save), "--save: cannot make the folder '", o.save, "'");
    }
    std::vector<Row> rows;
    std::vector<std::pair<std::string, std::string>> not_run;  // variant, why
    for (const std::string& v : variants) {
      if (std::string why = missing_check(v, o.suite.backend); !why.empty()) {
        not_run.emplace_back(v, std::move(why));
        continue;
      }
      if (o.format == "table") err << "mutants: " << shown(o, v) << " ...\n";
      const auto mirrored = o.mirrors.find(v);
      const auto named = named_checks().find(mirrored == o.mirrors.end() ? v : v.substr(0, v.find('@') + 1) + mirrored->second);
      SuiteOptions suite = o.suite;
      // A Python variant's children each start a worker first: its time is not the budget's.
      if (v.size() > 3 && v.compare(v.size() - 3, 3, "@py") == 0) suite.start_seconds = kernels::python_start_seconds();
      rows.push_back(run_suite(suite, v, named == named_checks().end() ? "(none)" : named->second));
      const Row& r = rows.back();
      std::string name = v;
      std::replace(name.begin(), name.end(), '@', '-');
      if (!o.save.empty() && r.failed && !r.first.case_text.empty()) {
        std::ofstream(fs::path(o.save) / (name + ".case")) << r.first.case_text;
      }
      if (!o.save.empty() && !r.false_positive_case.empty()) {
        std::ofstream(fs::path(o.save) / (name + "-false-positive-on-ref.case")) << r.false_positive_case;
      }
    }
    if (o.format == "json") {
      print_json(o, rows, not_run, out);
    } else if (o.format == "junit") {
      print_junit(o, rows, not_run, out);
    } else {
      print_table(o, rows, not_run, out);
    }
    if (rows.empty()) {  // nothing ran: never a clean exit (the table says why each was not run)
      if (o.format == "table") out << "NO RUN: no variant could run on this build and backend\n";
      return 1;
    }
    return std::all_of(rows.begin(), rows.end(), [](const Row& r) { return r.failed; }) ? 0 : 1;
  } catch (const Error& e) {
    err << flags::prefix("mutants") << e.what() << '\n';
    return 2;
  }
}

}  // namespace mlacheck
