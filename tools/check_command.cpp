// `mlacheck check` (tools/check_command.h).
#include "tools/check_command.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>

#include "core/backend/backend.h"
#include "core/error.h"
#include "kernels/device.h"
#include "kernels/plugin.h"
#include "kernels/registry.h"
#include "kernels/python_bridge.h"
#include "fuzz/fuzz_input.h"
#include "harness/memory_budget.h"
#include "tools/adapters.h"
#include "tools/flags_typed.h"
#include "properties/property_registry.h"
#include "tools/report_formats.h"
#include "tools/report_html.h"
#include "tools/suite_runner.h"

namespace mlacheck {

namespace {

namespace fs = std::filesystem;

// The check command's typed flags (tools/flags.def, through tools/flags_typed.h), and what follows
// from them: the suite's options and the Python callables as specs.
struct Options : flags::CheckFlags {
  SuiteOptions suite;
  std::vector<std::string> python_specs;  // --python [OP=]MODULE:CALLABLE and --adapter NAME, each
};

bool has_target(const std::string& op) {
  return std::any_of(fuzz_targets().begin(), fuzz_targets().end(), [&](const FuzzTarget& t) { return t.op == op; });
}

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// What `mlacheck repro FILE` needs besides the file: the first plugin, the Python callable.
std::string rerun_flags(const Options& o) {
  return (o.plugin.empty() ? "" : " --plugin " + o.plugin.front()) + kernels::python_flags();
}

std::string saved_name(const std::string& impl) {
  std::string name = impl;
  std::replace(name.begin(), name.end(), '@', '-');
  return name + ".case";
}

// The file of a row's failure: the first's is <op>-<name>.case, a further property's
// <op>-<name>.<property without the op>.case.
std::string saved_name(const SuiteResult& r, const SuiteFinding& f) {
  if (&f == &r.first) return saved_name(r.impl);
  const std::string base = saved_name(r.impl);
  std::string what = f.property.empty() ? f.check : f.property;
  if (what.rfind(r.op + ".", 0) == 0) what = what.substr(r.op.size() + 1);
  for (char& c : what) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') c = '_';
  }
  return base.substr(0, base.size() - 5) + "." + what + ".case";
}

const char* result_word(const SuiteResult& r) {
  return r.failed ? "FAIL" : r.ran_nothing() ? "NO RUN" : r.partial() ? "PARTIAL" : r.suite_defect() ? "DEFECT" : "PASS";
}

// A case that failed on <op>@ref too: saved so the suite's own fault can be looked at.
std::string false_positive_name(const std::string& impl) {
  const std::string name = saved_name(impl);
  return name.substr(0, name.size() - 5) + "-false-positive-on-ref.case";
}

// A row whose only trouble is the suite's: its cases that failed on <op>@ref too.
std::string suite_defect_text(const SuiteResult& r) {
  return "suite defect: " + std::to_string(r.false_positives) + " case(s) fail on " + r.op +
         "@ref too (the suite is wrong there, not " + r.impl + "); first: " + r.false_positive;
}

void print_table(const Options& o, const std::vector<SuiteResult>& rows, std::ostream& out) {
  out << "mlacheck check: " << rows.size() << " implementation(s) on the " << o.suite.backend << " backend, up to "
      << fixed(o.suite.budget, 0) << " s each";
  if (kernels::python_start_seconds() > 0) {
    out << " (after " << fixed(kernels::python_start_seconds(), 1) << " s to start each Python worker)";
  }
  out << "\n\n";
  size_t w = 14;
  for (const SuiteResult& r : rows) w = std::max(w, r.impl.size());
  char line[640];
  const auto cut = [](std::string what) {  // keeps --report html's "; picture: PATH" at its end
    if (what.size() > 400) {
      const size_t at = what.rfind("; picture: ");
      const std::string note = at == std::string::npos ? "" : what.substr(at);
      what = what.substr(0, 397 - std::min<size_t>(note.size(), 200)) + "..." + note;
    }
    return what;
  };
  std::snprintf(line, sizeof line, "%-*s  %-7s  %6s  %s\n", static_cast<int>(w), "implementation", "result", "cases",
                "failures, one row per failing property (stage: check: verdict)");
  out << line;
  for (const SuiteResult& r : rows) {
    const std::string what = r.failed ? r.first.stage + ": " + r.first.check + ": " + r.first.verdict
                             : r.ran_nothing()  ? r.ran_nothing_reason()
                             : r.partial()      ? "not judged: " + r.unjudged_reason()
                             : r.suite_defect() ? suite_defect_text(r)
                                                : "-";
    std::snprintf(line, sizeof line, "%-*s  %-7s  %6d  %s\n", static_cast<int>(w), r.impl.c_str(), result_word(r),
                  r.cases_run, cut(what).c_str());
    out << line;
    for (const SuiteFinding& f : r.more) {
      std::snprintf(line, sizeof line, "%-*s  %-7s  %6s  %s\n", static_cast<int>(w), "", "FAIL", "",
                    cut(f.stage + ": " + f.check + ": " + f.verdict).c_str());
      out << line;
    }
    if (r.failed && !r.unjudged().empty()) {
      std::snprintf(line, sizeof line, "%-*s  %-7s  %6s  %s\n", static_cast<int>(w), "", "-", "",
                    cut("not judged: " + r.unjudged_reason()).c_str());
      out << line;
    }
  }
  const auto failed = std::count_if(rows.begin(), rows.end(), [](const SuiteResult& r) { return r.failed; });
  const auto empty = std::count_if(rows.begin(), rows.end(), [](const SuiteResult& r) { return r.ran_nothing(); });
  const auto partial = std::count_if(rows.begin(), rows.end(), [](const SuiteResult& r) { return r.partial(); });
  const auto defect = std::count_if(rows.begin(), rows.end(), [](const SuiteResult& r) {
    return !r.failed && !r.ran_nothing() && !r.partial() && r.suite_defect();
  });
  out << "\n" << rows.size() - static_cast<size_t>(failed + empty + partial + defect) << " of " << rows.size() << " passed";
  if (empty > 0) out << ", " << empty << " ran no case (not a pass: give a longer --budget)";
  if (partial > 0) out << ", " << partial << " left a property unjudged (not a pass)";
  if (defect > 0) out << ", " << defect << " met a suite defect (not a pass: a case fails on the reference too)";
  out << '\n';
  for (const SuiteResult& r : rows) {
    for (const SuiteFinding* f : r.findings()) {
      if (f->case_text.empty()) continue;
      out << "\n" << r.impl << " failed " << (f->property.empty() ? f->check : f->property) << " on this case (saved as "
          << (fs::path(o.save) / saved_name(r, *f)).string() << "); rerun it with `mlacheck repro FILE"
          << rerun_flags(o) << "`:\n"
          << f->case_text;
    }
  }
  for (const SuiteResult& r : rows) {
    const auto contract = kernels::registry().contract(r.impl);
    if (contract->clauses.empty()) continue;  // declarations (precision, padding) count: no limit, but said
    out << "\n" << r.impl << " declares the contract: " << contract->describe() << '\n';
    if (r.outside_contract > 0) {
      out << "  " << r.outside_contract << " seed or regression case(s) outside it were not run\n";
    }
    if (!o.suite.contract_probe) continue;
    const bool probe_crashed = r.probe_first.check.rfind("crashed", 0) == 0 || r.probe_first.check == "hang";
    out << "outside the declared contract (probe, never a failure): ";
    if (probe_crashed) {
      out << r.probe_cases << " case(s) ran, then one " << r.probe_first.check << " (the probe stopped there)\n";
    } else {
      out << r.probe_cases << " case(s) run, " << r.probe_failures << " failed\n";
    }
    if (r.probe_failures > 0) {
      out << "  first: " << r.probe_first.check << ": " << r.probe_first.verdict << '\n' << r.probe_first.case_text;
    }
  }
  for (const SuiteResult& r : rows) {
    if (!r.probe_note.empty()) out << r.impl << ": " << r.probe_note << '\n';
    if (!r.budget_note.empty() && !r.ran_nothing()) out << r.impl << ": " << r.budget_note << '\n';
    if (r.slow_cases > 0) out << r.impl << ": " << r.slow_cases << " slow case(s), not hangs; first: " << r.slow_case << '\n';
    if (r.failed || r.partial()) {  // what each property got
      out << r.impl << ": ";
      for (size_t i = 0; i < r.properties.size(); ++i) {
        const std::string& p = r.properties[i];
        const auto t = r.tally.find(p);
        const int n = t == r.tally.end() ? 0 : t->second.cases;
        const auto fs = r.findings();
        const bool failed_p = std::any_of(fs.begin(), fs.end(), [&](const SuiteFinding* f) { return f->property == p; });
        out << (i ? ", " : "") << p << " " << (failed_p ? "FAIL" : n > 0 ? "pass" : "not judged") << " (" << n
            << (n == 1 ? " case)" : " cases)");
      }
      out << '\n';
    }
    if (r.beyond_reach > 0) {
      out << r.impl << ": " << r.beyond_reach << " case(s) not run, neither passed nor failed; first: " << r.beyond_reach_why
          << '\n';
    }
  }
  for (const SuiteResult& r : rows) {
    if (r.false_positives > 0) {
      out << "suite defect: " << r.false_positives << " case(s) run for " << r.impl << " failed on " << r.op
          << "@ref too (not counted against it; a failure of the suite, exit 1); first: " << r.false_positive;
      if (!r.false_positive_case.empty()) out << "; its case is saved as " << (fs::path(o.save) / false_positive_name(r.impl)).string();
      out << '\n';
    }
  }
}

// JUnit: a test suite per implementation, a test case per property of its op (tools/report_formats.h).
void print_junit(const Options& o, const std::vector<SuiteResult>& rows, std::ostream& out) {
  using report::TestCase;
  std::vector<report::TestSuite> suites;
  const std::string stamp = report::junit_timestamp();
  for (const SuiteResult& r : rows) {
    report::TestSuite s;
    s.name = "mlacheck check " + r.impl;
    s.timestamp = stamp;
    s.seconds = r.seconds;  // the row's own time: every property is judged, so not its first failure's
    s.properties = {{"backend", o.suite.backend},
                    {"budget_seconds", fixed(o.suite.budget, 1)},
                    {"seed", std::to_string(o.suite.seed)},
                    {"cases_run", std::to_string(r.cases_run)},
                    {"contract", kernels::registry().contract(r.impl)->describe()}};
    if (r.outside_contract > 0) s.properties.push_back({"outside_contract_skipped", std::to_string(r.outside_contract)});
    if (!r.budget_note.empty()) s.properties.push_back({"budget_note", r.budget_note});
    if (r.false_positives > 0) {
      s.properties.push_back({"suite_false_positives", std::to_string(r.false_positives) + "; first: " + r.false_positive});
    }
    const auto failure = [&](const SuiteFinding& f, const std::string& name) {
      TestCase t;
      t.name = name, t.classname = r.impl, t.outcome = TestCase::Outcome::kFailed, t.seconds = f.seconds;
      t.message = f.stage + ": " + f.verdict;
      t.type = f.check == name && name.find('.') != std::string::npos ? "property violation" : f.check;
      const std::string rerun = "saved as " + (fs::path(o.save) / saved_name(r, f)).string() +
                                "; rerun it with `mlacheck repro FILE" + rerun_flags(o) + "`:\n";
      t.details = t.message + "\n" + (f.case_text.empty() ? "" : rerun + f.case_text);
      return t;
    };
    const std::vector<const SuiteFinding*> found = r.findings();
    std::vector<const SuiteFinding*> placed;
    for (const std::string& p : r.properties) {
      const auto f = std::find_if(found.begin(), found.end(), [&](const SuiteFinding* x) { return x->property == p; });
      if (f != found.end()) {
        // A crash or a hang is named after itself, its property beside it.
        s.cases.push_back(failure(**f, (*f)->check == p ? p : p + " (" + (*f)->check + ")"));
        placed.push_back(*f);
        continue;
      }
      TestCase t;
      t.name = p, t.classname = r.impl;
      const auto tl = r.tally.find(p);
      if (tl == r.tally.end() || tl->second.cases == 0) {  // never a pass: failed, with why
        t.outcome = TestCase::Outcome::kFailed;
        t.type = "not judged";
        t.message = p + ": no case ran (" + r.no_case_reason(p) + ")";
        t.details = t.message;
      } else {
        t.output = std::to_string(tl->second.cases) + " case(s) run";
      }
      s.cases.push_back(t);
    }
    // A failure without a property of the row (a crash before any case): a test case named after it.
    for (const SuiteFinding* f : found) {
      if (std::find(placed.begin(), placed.end(), f) == placed.end()) s.cases.push_back(failure(*f, f->check));
    }
    // A case that failed on <op>@ref too: the suite's defect, an error of its own (never a pass).
    if (r.suite_defect()) {
      TestCase t;
      t.name = "suite defect", t.classname = r.impl, t.outcome = TestCase::Outcome::kError, t.type = "suite defect";
      t.message = suite_defect_text(r);
      t.details = t.message + (r.false_positive_case.empty()
                                   ? std::string()
                                   : "\nsaved as " + (fs::path(o.save) / false_positive_name(r.impl)).string() +
                                         ":\n" + r.false_positive_case);
      s.cases.push_back(t);
    }
    if (o.suite.contract_probe && r.probe_note.empty()) {
      TestCase t;
      t.name = "contract probe (outside the declared contract, never a failure)", t.classname = r.impl;
      t.output = std::to_string(r.probe_cases) + " case(s) run, " + std::to_string(r.probe_failures) + " failed" +
                 (r.probe_failures > 0 ? "\nfirst: " + r.probe_first.check + ": " + r.probe_first.verdict + "\n" +
                                             r.probe_first.case_text
                                       : "\n");
      s.cases.push_back(t);
    }
    suites.push_back(std::move(s));
  }
  report::write_junit(out, "mlacheck check", suites);
}

void print_json(const Options& o, const std::vector<SuiteResult>& rows, std::ostream& out) {
  out << "{\"backend\": " << report::json_quote(o.suite.backend) << ", \"budget_seconds\": " << fixed(o.suite.budget, 1)
      << ", \"implementations\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const SuiteResult& r = rows[i];
    const std::string verdict = r.ran_nothing()    ? r.ran_nothing_reason()
                                : r.partial()      ? "not judged: " + r.unjudged_reason()
                                : !r.failed && r.suite_defect() ? suite_defect_text(r)
                                                   : r.first.verdict;
    out << "  {\"implementation\": " << report::json_quote(r.impl) << ", \"summary\": " << report::json_quote(r.summary)
        << ", \"passed\": " << (r.passed() ? "true" : "false")
        << ", \"result\": " << report::json_quote(result_word(r))
        << ", \"cases_run\": " << r.cases_run
        << ", \"stage\": " << report::json_quote(r.first.stage) << ", \"check\": " << report::json_quote(r.first.check)
        << ", \"verdict\": " << report::json_quote(verdict) << ", \"seconds\": " << fixed(r.first.seconds, 3)
        << ", \"case\": " << report::json_quote(r.first.case_text) << ", \"false_positives\": " << r.false_positives
        << ", \"contract\": " << report::json_quote(kernels::registry().contract(r.impl)->describe())
        << ", \"outside_contract_skipped\": " << r.outside_contract << ", \"probe_cases\": " << r.probe_cases
        << ", \"probe_failures\": " << r.probe_failures << ", \"probe_first\": " << report::json_quote(r.probe_first.verdict)
        << ", \"probe_case\": " << report::json_quote(r.probe_first.case_text)
        << ", \"budget_note\": " << report::json_quote(r.budget_note) << ", \"beyond_reach\": " << r.beyond_reach
        << ", \"beyond_reach_first\": " << report::json_quote(r.beyond_reach_why)
        << ", \"slow_cases\": " << r.slow_cases << ", \"slow_first\": " << report::json_quote(r.slow_case)
        << ", \"unjudged\": " << report::json_quote(r.unjudged_reason()) << ", \"failures\": [";
    const std::vector<const SuiteFinding*> found = r.findings();
    for (size_t j = 0; j < found.size(); ++j) {
      const SuiteFinding& f = *found[j];
      out << (j ? ", " : "") << "{\"property\": " << report::json_quote(f.property)
          << ", \"stage\": " << report::json_quote(f.stage) << ", \"check\": " << report::json_quote(f.check)
          << ", \"verdict\": " << report::json_quote(f.verdict) << ", \"seconds\": " << fixed(f.seconds, 3)
          << ", \"case\": " << report::json_quote(f.case_text) << ", \"saved_as\": "
          << report::json_quote(f.case_text.empty() ? "" : (fs::path(o.save) / saved_name(r, f)).string()) << "}";
    }
    out << "], \"properties\": [";
    for (size_t j = 0; j < r.properties.size(); ++j) {
      const std::string& p = r.properties[j];
      const auto t = r.tally.find(p);
      const bool failed_p = std::any_of(found.begin(), found.end(), [&](const SuiteFinding* f) { return f->property == p; });
      const int n = t == r.tally.end() ? 0 : t->second.cases;
      out << (j ? ", " : "") << "{\"name\": " << report::json_quote(p) << ", \"result\": "
          << report::json_quote(failed_p ? "FAIL" : n > 0 ? "PASS" : "NOT JUDGED") << ", \"cases\": " << n
          << ", \"not_taken\": " << (t == r.tally.end() ? 0 : t->second.not_taken) << ", \"not_taken_first\": "
          << report::json_quote(t == r.tally.end() ? "" : t->second.not_taken_why) << "}";
    }
    out << "]}" << (i + 1 < rows.size() ? "," : "") << '\n';
  }
  out << "]}\n";
}

}  // namespace

int run_check_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Options o;
  auto bad = [&](const std::string& why) { return flags::usage_error(err, "check", why); };
  try {
    flags::CheckFlags& f = o;
    if (const int rc = flags::parse_check(args, f, out, err); rc >= 0) return rc;
    o.python_specs = python_specs(f.python, f.adapter);
    o.suite = suite_options(f);
    o.suite.contract_probe = f.contract_probe;
    o.suite.only = f.property;
    o.suite.shrink = !f.no_shrink;
    o.suite.fuzz = !f.no_fuzz;
    o.suite.every_property = !f.fail_fast;
    flags::apply_max_mb(f.given.max_mb, f.max_mb);
    const auto b = parse_backend(o.suite.backend);
    if (!b) return bad("--backend '" + o.suite.backend + "' is not one of host, cuda, hip");
    // A GPU backend is not touched in this process (each implementation's child uses it).
    std::string why;
    if (*b == Backend::kHost && !kernels::device_usable(*b, &why)) {
      err << flags::prefix("check") << why << '\n';
      return 2;
    }
    const std::string corpus = corpus_root(o.suite.corpus);
    MLA_REQUIRE(fs::is_directory(fs::path(corpus) / "regressions"), "no corpus at '", corpus,
                "' (a folder with regressions/ and one folder per fuzz target; --corpus DIR)");
    std::vector<std::string> from_plugins;
    for (const std::string& path : o.plugin) {
      const kernels::LoadedPlugin p = kernels::load_plugin_isolated(path);
      from_plugins.insert(from_plugins.end(), p.implementations.begin(), p.implementations.end());
    }
    // The probe's Python worker is lent to the first child that runs cases (host or cuda).
    const std::string lend = o.suite.backend == "host" || o.suite.backend == "cuda" ? o.suite.backend : "";
    kernels::set_python_start_limit(o.suite.budget);  // a module that hangs on import: told within the budget
    for (const std::string& name : kernels::load_python_isolated(o.python_specs, lend)) from_plugins.push_back(name);
    std::vector<std::string> impls = o.impl;
    if (impls.empty()) impls = from_plugins;
    if (impls.empty()) {
      for (const kernels::ImplementationInfo& i : kernels::registry().list()) {
        if (i.name == "ref" && has_target(i.op)) impls.push_back(i.qualified());
      }
    }
    for (const std::string& impl : impls) {
      MLA_REQUIRE(kernels::registry().contains(impl), "--impl '", impl,
                  "' is not a registered implementation (mlacheck list shows them; a plugin's need --plugin)");
      MLA_REQUIRE(has_target(impl.substr(0, impl.find('@'))), "--impl '", impl, "': its op has no properties to run");
      check_contract_names(impl);
      const std::string op = impl.substr(0, impl.find('@'));
      for (const std::string& named : o.suite.only) {
        std::string runs;
        bool found = false;
        for (const PropertyEntry& p : property_registry().list()) {
          if (p.op != op || p.ref_only) continue;
          runs += (runs.empty() ? "" : ", ") + p.name;
          found = found || p.name == named;
        }
        MLA_REQUIRE(found, "--property '", named, "' is not a property ", impl, " runs (", op, "'s: ", runs, ")");
      }
    }
    MLA_REQUIRE(!o.save.empty(), "--save needs a folder");
    if (o.report == "html") {  // the pages' folder is made before any suite runs
      std::error_code ec;
      fs::create_directories(o.report_dir, ec);
      MLA_REQUIRE(fs::is_directory(o.report_dir), "--report-dir: cannot make the folder '", o.report_dir, "'");
    }
    std::vector<SuiteResult> rows;
    for (const std::string& impl : impls) {
      if (o.format == "table") err << "check: " << impl << " ...\n";
      SuiteOptions suite = o.suite;
      if (impl.size() > 3 && impl.compare(impl.size() - 3, 3, "@py") == 0) suite.start_seconds = kernels::python_start_seconds();
      rows.push_back(run_suite(suite, impl));
      const SuiteResult& r = rows.back();
      if (!r.false_positive_case.empty()) {
        std::error_code ec;
        fs::create_directories(o.save, ec);
        MLA_REQUIRE(fs::is_directory(o.save), "--save: cannot make the folder '", o.save, "'");
        std::ofstream(fs::path(o.save) / false_positive_name(impl)) << r.false_positive_case;
      }
      // A property's case from an earlier run that failed no longer: not left beside this run's.
      {
        const std::string base = saved_name(impl);
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(o.save, ec)) {
          const std::string n = e.path().filename().string();
          if (n.size() > base.size() && n.rfind(base.substr(0, base.size() - 4), 0) == 0 &&
              n.compare(n.size() - 5, 5, ".case") == 0 && n.find("-false-positive-on-ref") == std::string::npos &&
              n.find('.', base.size() - 4) == n.size() - 5) {
            fs::remove(e.path(), ec);
          }
        }
      }
      for (const SuiteFinding* found : r.findings()) {
        if (found->case_text.empty()) continue;
        std::error_code ec;
        fs::create_directories(o.save, ec);
        MLA_REQUIRE(fs::is_directory(o.save), "--save: cannot make the folder '", o.save, "'");
        const std::string name = saved_name(r, *found);
        std::ofstream(fs::path(o.save) / name) << found->case_text;
        // --report html: the failing case rerun in a child with the guard picture on; a stray
        // write's page is named like the saved case, and its path ends the verdict.
        if (o.report == "html") {
          const std::string page = picture_of_case(
              found->case_text, o.suite.backend, impl, o.report_dir, name.substr(0, name.size() - 5),
              "check " + impl + " (" + o.suite.backend + "): " + found->stage + ": " + found->check,
              o.suite.case_timeout > 0 ? o.suite.case_timeout : 60);
          SuiteResult& row = rows.back();
          SuiteFinding& target = found == &row.first ? row.first : row.more[static_cast<size_t>(found - row.more.data())];
          target.verdict += picture_note(page);
        }
      }
    }
    if (o.format == "json") {
      print_json(o, rows, out);
    } else if (o.format == "junit") {
      print_junit(o, rows, out);
    } else {
      print_table(o, rows, out);
    }
    return std::all_of(rows.begin(), rows.end(), [](const SuiteResult& r) { return r.passed(); }) ? 0 : 1;
  } catch (const Error& e) {
    err << flags::prefix("check") << e.what() << '\n';
    return 2;
  }
}

}  // namespace mlacheck
