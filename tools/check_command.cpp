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
#include "fuzz/fuzz_input.h"
#include "tools/suite_runner.h"

namespace mlacheck {

namespace {

namespace fs = std::filesystem;

struct Options {
  SuiteOptions suite;
  std::vector<std::string> impls, plugins;
  std::string save_dir = "mlacheck-cases", format = "table";  // a failure's case is always saved
};

bool has_target(const std::string& op) {
  return std::any_of(fuzz_targets().begin(), fuzz_targets().end(), [&](const FuzzTarget& t) { return t.op == op; });
}

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string saved_name(const std::string& impl) {
  std::string name = impl;
  std::replace(name.begin(), name.end(), '@', '-');
  return name + ".case";
}

void print_table(const Options& o, const std::vector<SuiteResult>& rows, std::ostream& out) {
  out << "mlacheck check: " << rows.size() << " implementation(s) on the " << o.suite.backend << " backend, up to "
      << fixed(o.suite.budget, 0) << " s each\n\n";
  size_t w = 14;
  for (const SuiteResult& r : rows) w = std::max(w, r.impl.size());
  char line[640];
  std::snprintf(line, sizeof line, "%-*s  %-6s  %6s  %s\n", static_cast<int>(w), "implementation", "result", "cases",
                "first failure (stage: check): verdict");
  out << line;
  for (const SuiteResult& r : rows) {
    std::string what = r.failed ? r.first.stage + ": " + r.first.check + ": " + r.first.verdict : "-";
    if (what.size() > 400) what = what.substr(0, 397) + "...";
    std::snprintf(line, sizeof line, "%-*s  %-6s  %6d  %s\n", static_cast<int>(w), r.impl.c_str(),
                  r.failed ? "FAIL" : "PASS", r.cases_run, what.c_str());
    out << line;
  }
  const auto failed = std::count_if(rows.begin(), rows.end(), [](const SuiteResult& r) { return r.failed; });
  out << "\n" << rows.size() - static_cast<size_t>(failed) << " of " << rows.size() << " passed\n";
  for (const SuiteResult& r : rows) {
    if (!r.failed || r.first.case_text.empty()) continue;
    out << "\n" << r.impl << " failed on this case (saved as " << (fs::path(o.save_dir) / saved_name(r.impl)).string()
        << "); rerun it with `mlacheck repro FILE" << (o.plugins.empty() ? "" : " --plugin " + o.plugins.front())
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
    const bool probe_crashed = r.probe_first.check.rfind("crashed", 0) == 0 || r.probe_first.check == "timed out";
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
    if (!r.budget_note.empty()) out << r.impl << ": " << r.budget_note << '\n';
  }
  for (const SuiteResult& r : rows) {
    if (r.false_positives > 0) {
      out << "suite false positive: " << r.false_positives << " case(s) run for " << r.impl << " failed on " << r.op
          << "@ref too (not counted against it); first: " << r.false_positive << '\n';
    }
  }
}

void print_json(const Options& o, const std::vector<SuiteResult>& rows, std::ostream& out) {
  out << "{\"backend\": " << json_string(o.suite.backend) << ", \"budget_seconds\": " << fixed(o.suite.budget, 1)
      << ", \"implementations\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const SuiteResult& r = rows[i];
    out << "  {\"implementation\": " << json_string(r.impl) << ", \"summary\": " << json_string(r.summary)
        << ", \"passed\": " << (r.failed ? "false" : "true") << ", \"cases_run\": " << r.cases_run
        << ", \"stage\": " << json_string(r.first.stage) << ", \"check\": " << json_string(r.first.check)
        << ", \"verdict\": " << json_string(r.first.verdict) << ", \"seconds\": " << fixed(r.first.seconds, 3)
        << ", \"case\": " << json_string(r.first.case_text) << ", \"false_positives\": " << r.false_positives
        << ", \"contract\": " << json_string(kernels::registry().contract(r.impl)->describe())
        << ", \"outside_contract_skipped\": " << r.outside_contract << ", \"probe_cases\": " << r.probe_cases
        << ", \"probe_failures\": " << r.probe_failures << ", \"probe_first\": " << json_string(r.probe_first.verdict)
        << ", \"probe_case\": " << json_string(r.probe_first.case_text)
        << ", \"budget_note\": " << json_string(r.budget_note) << "}"
        << (i + 1 < rows.size() ? "," : "") << '\n';
  }
  out << "]}\n";
}

}  // namespace

int run_check_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Options o;
  o.suite.budget = 30;
  auto bad = [&](const std::string& why) {
    err << "mlacheck: check: " << why << " (see mlacheck --help)\n";
    return 2;
  };
  try {
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      static const std::vector<std::string> valued = {"--impl", "--plugin", "--backend", "--budget", "--cases",
                                                      "--seed", "--corpus", "--save",    "--format",
                                                      "--case-timeout"};
      if (a == "--contract-probe") {
        o.suite.contract_probe = true;
        continue;
      }
      if (std::find(valued.begin(), valued.end(), a) == valued.end()) return bad("unknown argument '" + a + "'");
      if (i + 1 >= args.size()) return bad(a + " needs a value");
      const std::string& v = args[++i];
      char* end = nullptr;
      if (a == "--impl") {
        o.impls.push_back(v);
      } else if (a == "--plugin") {
        o.plugins.push_back(v);
      } else if (a == "--backend") {
        o.suite.backend = v;
      } else if (a == "--budget") {
        o.suite.budget = std::strtod(v.c_str(), &end);
        if (*end || !(o.suite.budget > 0 && o.suite.budget <= 36000)) {
          return bad("--budget '" + v + "' is not 1 to 36000 seconds");
        }
      } else if (a == "--case-timeout") {
        o.suite.case_timeout = std::strtod(v.c_str(), &end);
        if (*end || !(o.suite.case_timeout >= 1 && o.suite.case_timeout <= 3600)) {
          return bad("--case-timeout '" + v + "' is not 1 to 3600 seconds");
        }
      } else if (a == "--cases") {
        o.suite.cases = static_cast<int>(std::strtol(v.c_str(), &end, 10));
        if (*end || o.suite.cases < 0 || o.suite.cases > 100000) return bad("--cases '" + v + "' is not 0 to 100000");
      } else if (a == "--seed") {
        o.suite.seed = std::strtoull(v.c_str(), &end, 10);
        if (*end || v.empty()) return bad("--seed '" + v + "' is not a number");
      } else if (a == "--corpus") {
        o.suite.corpus = v;
      } else if (a == "--save") {
        o.save_dir = v;
      } else if (v != "table" && v != "json") {
        return bad("--format '" + v + "' is not table or json");
      } else {
        o.format = v;
      }
    }
    const auto b = parse_backend(o.suite.backend);
    if (!b) return bad("--backend '" + o.suite.backend + "' is not one of host, cuda, hip");
    // A GPU backend is not touched in this process (each implementation's child uses it).
    std::string why;
    if (*b == Backend::kHost && !kernels::device_usable(*b, &why)) {
      err << "mlacheck: check: host: not usable: " << why << '\n';
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
    }
    MLA_REQUIRE(!o.save_dir.empty(), "--save needs a folder");
    std::vector<SuiteResult> rows;
    for (const std::string& impl : impls) {
      if (o.format == "table") err << "check: " << impl << " ...\n";
      rows.push_back(run_suite(o.suite, impl));
      const SuiteResult& r = rows.back();
      if (r.failed && !r.first.case_text.empty()) {
        std::error_code ec;
        fs::create_directories(o.save_dir, ec);
        MLA_REQUIRE(fs::is_directory(o.save_dir), "--save: cannot make the folder '", o.save_dir, "'");
        std::ofstream(fs::path(o.save_dir) / saved_name(impl)) << r.first.case_text;
      }
    }
    if (o.format == "json") {
      print_json(o, rows, out);
    } else {
      print_table(o, rows, out);
    }
    return std::any_of(rows.begin(), rows.end(), [](const SuiteResult& r) { return r.failed; }) ? 1 : 0;
  } catch (const Error& e) {
    err << "mlacheck: check: " << e.what() << '\n';
    return 2;
  }
}

}  // namespace mlacheck
