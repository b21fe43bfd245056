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
#include "tools/flags.h"
#include "properties/property_registry.h"
#include "tools/report_formats.h"
#include "tools/report_html.h"
#include "tools/suite_runner.h"

namespace mlacheck {

namespace {

namespace fs = std::filesystem;

struct Options {
  SuiteOptions suite;
  std::vector<std::string> impls, plugins;
  std::vector<std::string> python;  // --python [OP=]MODULE:CALLABLE, each
  std::string save_dir = "mlacheck-cases", format = "table";  // a failure's case is always saved
  std::string report = "none", report_dir = "mlacheck-report";  // --report html: a page per stray access
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
  return (o.plugins.empty() ? "" : " --plugin " + o.plugins.front()) + kernels::python_flags();
}

std::string saved_name(const std::string& impl) {
  std::string name = impl;
  std::replace(name.begin(), name.end(), '@', '-');
  return name + ".case";
}

// A case that failed on <op>@ref too: saved so the suite's own fault can be looked at.
std::string false_positive_name(const std::string& impl) {
  const std::string name = saved_name(impl);
  return name.substr(0, name.size() - 5) + "-false-positive-on-ref.case";
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
  std::snprintf(line, sizeof line, "%-*s  %-6s  %6s  %s\n", static_cast<int>(w), "implementation", "result", "cases",
                "first failure (stage: check): verdict");
  out << line;
  for (const SuiteResult& r : rows) {
    std::string what = r.failed ? r.first.stage + ": " + r.first.check + ": " + r.first.verdict
                       : r.ran_nothing() ? r.ran_nothing_reason() : "-";
    if (what.size() > 400) {  // cut in the verdict, keeping --report html's "; picture: PATH" at its end
      const size_t at = what.rfind("; picture: ");
      const std::string note = at == std::string::npos ? "" : what.substr(at);
      what = what.substr(0, 397 - std::min<size_t>(note.size(), 200)) + "..." + note;
    }
    std::snprintf(line, sizeof line, "%-*s  %-6s  %6d  %s\n", static_cast<int>(w), r.impl.c_str(),
                  r.failed ? "FAIL" : r.ran_nothing() ? "NO RUN" : "PASS", r.cases_run, what.c_str());
    out << line;
  }
  const auto failed = std::count_if(rows.begin(), rows.end(), [](const SuiteResult& r) { return r.failed; });
  const auto empty = std::count_if(rows.begin(), rows.end(), [](const SuiteResult& r) { return r.ran_nothing(); });
  out << "\n" << rows.size() - static_cast<size_t>(failed + empty) << " of " << rows.size() << " passed";
  if (empty > 0) out << ", " << empty << " ran no case (not a pass: give a longer --budget)";
  out << '\n';
  for (const SuiteResult& r : rows) {
    if (!r.failed || r.first.case_text.empty()) continue;
    out << "\n" << r.impl << " failed on this case (saved as " << (fs::path(o.save_dir) / saved_name(r.impl)).string()
        << "); rerun it with `mlacheck repro FILE" << rerun_flags(o)
        << "`:\n" << r.first.case_text;
  }
  for (const SuiteResult& r : rows) {
    const auto contract = kernels::registry().contract(r.impl);
    if (contract->empty()) continue;
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
    if (r.beyond_reach > 0) {
      out << r.impl << ": " << r.beyond_reach << " case(s) not run, neither passed nor failed; first: " << r.beyond_reach_why
          << '\n';
    }
  }
  for (const SuiteResult& r : rows) {
    if (r.false_positives > 0) {
      out << "suite false positive: " << r.false_positives << " case(s) run for " << r.impl << " failed on " << r.op
          << "@ref too (not counted against it); first: " << r.false_positive;
      if (!r.false_positive_case.empty()) out << "; its case is saved as " << (fs::path(o.save_dir) / false_positive_name(r.impl)).string();
      out << '\n';
    }
  }
}

// The properties the suite runs on op (its fuzz target's, less the reference-only ones), in order.
std::vector<std::string> properties_of(const std::string& op) {
  std::vector<std::string> out;
  for (const FuzzTarget& t : fuzz_targets()) {
    if (t.op != op) continue;
    for (const PropertyEntry* p : fuzz_target_properties(t)) {
      if (!p->ref_only) out.push_back(p->name);
    }
  }
  return out;
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
    s.seconds = r.failed ? r.first.seconds : o.suite.budget;  // a passing suite runs to its budget
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
    const std::string rerun = "saved as " + (fs::path(o.save_dir) / saved_name(r.impl)).string() +
                              "; rerun it with `mlacheck repro FILE" +
                              rerun_flags(o) + "`:\n";
    const auto failure = [&](const std::string& name) {
      TestCase t;
      t.name = name, t.classname = r.impl, t.outcome = TestCase::Outcome::kFailed, t.seconds = r.first.seconds;
      t.message = r.first.stage + ": " + r.first.verdict;
      t.type = r.first.check == name && name.find('.') != std::string::npos ? "property violation" : r.first.check;
      t.details = t.message + "\n" + (r.first.case_text.empty() ? "" : rerun + r.first.case_text);
      return t;
    };
    bool placed = false;
    for (const std::string& p : properties_of(r.op.empty() ? r.impl.substr(0, r.impl.find('@')) : r.op)) {
      if (r.failed && r.first.check == p) {
        s.cases.push_back(failure(p));
        placed = true;
        continue;
      }
      TestCase t;
      t.name = p, t.classname = r.impl;
      if (r.failed) {
        t.outcome = TestCase::Outcome::kSkipped;
        t.message = "not judged to the end: the suite stops at its first failure (" + r.first.check + ")";
      }
      s.cases.push_back(t);
    }
    // A crash, a hang or a lost device context: a test case named after it.
    if (r.failed && !placed) s.cases.push_back(failure(r.first.check));
    if (r.ran_nothing()) {  // never a pass: a failed test case of its own
      TestCase t;
      t.name = "cases run", t.classname = r.impl, t.outcome = TestCase::Outcome::kFailed;
      t.message = r.ran_nothing_reason(), t.type = "no case ran", t.details = t.message;
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
    out << "  {\"implementation\": " << report::json_quote(r.impl) << ", \"summary\": " << report::json_quote(r.summary)
        << ", \"passed\": " << (r.failed || r.ran_nothing() ? "false" : "true")
        << ", \"result\": " << report::json_quote(r.failed ? "FAIL" : r.ran_nothing() ? "NO RUN" : "PASS")
        << ", \"cases_run\": " << r.cases_run
        << ", \"stage\": " << report::json_quote(r.first.stage) << ", \"check\": " << report::json_quote(r.first.check)
        << ", \"verdict\": " << report::json_quote(r.ran_nothing() ? r.ran_nothing_reason() : r.first.verdict) << ", \"seconds\": " << fixed(r.first.seconds, 3)
        << ", \"case\": " << report::json_quote(r.first.case_text) << ", \"false_positives\": " << r.false_positives
        << ", \"contract\": " << report::json_quote(kernels::registry().contract(r.impl)->describe())
        << ", \"outside_contract_skipped\": " << r.outside_contract << ", \"probe_cases\": " << r.probe_cases
        << ", \"probe_failures\": " << r.probe_failures << ", \"probe_first\": " << report::json_quote(r.probe_first.verdict)
        << ", \"probe_case\": " << report::json_quote(r.probe_first.case_text)
        << ", \"budget_note\": " << report::json_quote(r.budget_note) << ", \"beyond_reach\": " << r.beyond_reach
        << ", \"beyond_reach_first\": " << report::json_quote(r.beyond_reach_why) << "}"
        << (i + 1 < rows.size() ? "," : "") << '\n';
  }
  out << "]}\n";
}

}  // namespace

int run_check_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Options o;
  auto bad = [&](const std::string& why) { return flags::usage_error(err, "check", why); };
  try {
    flags::Parsed f;
    if (const int rc = flags::parse("check", args, f, out, err); rc >= 0) return rc;
    o.impls = f.list("impl");
    o.plugins = f.list("plugin");
    o.python = f.list("python");
    o.suite = suite_options(f);
    o.suite.contract_probe = f.on("contract-probe");
    o.suite.property = f.text("property");
    o.suite.shrink = true;
    o.save_dir = f.text("save");
    o.format = f.text("format");
    o.report = f.text("report");
    o.report_dir = f.text("report-dir");
    flags::apply_max_mb(f);
    const auto b = parse_backend(o.suite.backend);
    if (!b) return bad("--backend '" + o.suite.backend + "' is not one of host, cuda, hip");
    // A GPU backend is not touched in this process (each implementation's child uses it).
    std::string why;
    if (*b == Backend::kHost && !kernels::device_usable(*b, &why)) {
      err << flags::prefix("check") << "host: not usable: " << why << '\n';
      return 2;
    }
    const std::string corpus = corpus_root(o.suite.corpus);
    MLA_REQUIRE(fs::is_directory(fs::path(corpus) / "regressions"), "no corpus at '", corpus,
                "' (a folder with regressions/ and one folder per fuzz target; --corpus DIR)");
    std::vector<std::string> from_plugins;
    for (const std::string& path : o.plugins) {
      const kernels::LoadedPlugin p = kernels::load_plugin_isolated(path);
      from_plugins.insert(from_plugins.end(), p.implementations.begin(), p.implementations.end());
    }
    for (const std::string& name : kernels::load_python_isolated(o.python)) from_plugins.push_back(name);
    std::vector<std::string> impls = o.impls;
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
      check_contract_names(impl, o.suite.corpus);
      if (!o.suite.property.empty()) {
        const std::string op = impl.substr(0, impl.find('@'));
        std::string runs;
        bool found = false;
        for (const PropertyEntry& p : property_registry().list()) {
          if (p.op != op || p.ref_only) continue;
          runs += (runs.empty() ? "" : ", ") + p.name;
          found = found || p.name == o.suite.property;
        }
        MLA_REQUIRE(found, "--property '", o.suite.property, "' is not a property ", impl, " runs (", op, "'s: ", runs,
                    ")");
      }
    }
    MLA_REQUIRE(!o.save_dir.empty(), "--save needs a folder");
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
        fs::create_directories(o.save_dir, ec);
        MLA_REQUIRE(fs::is_directory(o.save_dir), "--save: cannot make the folder '", o.save_dir, "'");
        std::ofstream(fs::path(o.save_dir) / false_positive_name(impl)) << r.false_positive_case;
      }
      if (r.failed && !r.first.case_text.empty()) {
        std::error_code ec;
        fs::create_directories(o.save_dir, ec);
        MLA_REQUIRE(fs::is_directory(o.save_dir), "--save: cannot make the folder '", o.save_dir, "'");
        std::ofstream(fs::path(o.save_dir) / saved_name(impl)) << r.first.case_text;
        // --report html: the failing case rerun in a child with the guard picture on; a stray
        // write's page is named like the saved case, and its path ends the verdict.
        if (o.report == "html") {
          const std::string name = saved_name(impl);
          const std::string page = picture_of_case(
              r.first.case_text, o.suite.backend, impl, o.report_dir, name.substr(0, name.size() - 5),
              "check " + impl + " (" + o.suite.backend + "): " + r.first.stage + ": " + r.first.check,
              o.suite.case_timeout > 0 ? o.suite.case_timeout : 60);
          rows.back().first.verdict += picture_note(page);
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
    return std::any_of(rows.begin(), rows.end(), [](const SuiteResult& r) { return r.failed || r.ran_nothing(); }) ? 1 : 0;
  } catch (const Error& e) {
    err << flags::prefix("check") << e.what() << '\n';
    return 2;
  }
}

}  // namespace mlacheck
