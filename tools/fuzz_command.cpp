// The fuzz command (tools/fuzz_command.h): its flags, the plugins and Python callables loaded once,
// one campaign per target (tools/fuzz_campaign.h: the harness run as a child, its crashes triaged),
// the SARIF log and the summary table of `--target all`.
#include "tools/fuzz_command.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz/fuzz_input.h"
#include "kernels/device.h"
#include "kernels/plugin.h"
#include "kernels/python_bridge.h"
#include "tools/adapters.h"
#include "tools/flags_typed.h"
#include "tools/fuzz_campaign.h"
#include "tools/report_formats.h"

namespace fs = std::filesystem;

namespace mlacheck {

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
  FuzzOptions o;
  flags::FuzzFlags& f = o;
  if (const int rc = flags::parse_fuzz(args, f, out, err); rc >= 0) return rc;
  // An empty --harness-dir is a mistake, not "look where you would without it".
  if (f.given.harness_dir && o.harness_dir.empty()) return flags::usage_error(err, "fuzz", "--harness-dir is empty");
  o.python_specs = python_specs(f.python, f.adapter);
  if (f.given.time && f.given.runs) return flags::usage_error(err, "fuzz", "give --time or --runs, not both");
  if (o.target.empty()) {
    return flags::usage_error(err, "fuzz", "--target T is required (mlacheck targets lists them; all runs each in turn)");
  }
  flags::apply_max_mb(f.given.max_mb, f.max_mb);
  try {
    // Loaded here (a plugin that cannot be loaded is one line, before any harness starts) and, by
    // MLACHECK_PLUGIN, in every harness process.
    for (std::string& path : o.plugin) {
      kernels::load_plugin_isolated(path);
      path = fs::absolute(path).string();
    }
    // A Python callable is probed here (one line if it does not load) and registered again, from
    // $MLACHECK_PYTHON_LOADED without a probe, in every harness process.
    std::vector<std::string> python_ops;
    for (const std::string& name : kernels::load_python_isolated(o.python_specs)) python_ops.push_back(name.substr(0, name.find('@')));
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
    if (!o.sarif.empty()) {
      sarif_file.open(o.sarif, std::ios::trunc);
      MLA_REQUIRE(sarif_file.is_open(), "--sarif: cannot write '", o.sarif, "'");
    }
    std::vector<CampaignSummary> done;
    for (const std::string& t : targets) {
      FuzzOptions one = o;
      one.target = t;
      if (targets.size() > 1) one.out = (fs::path(o.out.empty() ? "mlacheck-fuzz" : o.out) / t).string();
      done.push_back(run_fuzz_campaign(one, text));
    }
    size_t distinct = 0, ran_nothing = 0;
    for (const CampaignSummary& d : done) distinct += d.distinct, ran_nothing += d.ran_nothing ? 1 : 0;
    if (o.format == "sarif" || sarif_file.is_open()) {
      report::SarifRun run;
      run.tool_version = MLACHECK_VERSION;
      run.source_root = MLACHECK_SOURCE_DIR;
      run.command_line = "mlacheck fuzz";
      for (const std::string& a : args) run.command_line += " " + a;
      for (const CampaignSummary& d : done) run.findings.insert(run.findings.end(), d.findings.begin(), d.findings.end());
      if (o.format == "sarif") report::write_sarif(out, run);
      if (sarif_file.is_open()) {
        report::write_sarif(sarif_file, run);
        sarif_file.close();
        MLA_REQUIRE(!sarif_file.fail(), "--sarif: cannot write '", o.sarif, "'");
      }
    }
    if (done.size() > 1) {
      text << "\nfuzz campaign summary (" << o.backend << ", " << (o.given.runs ? std::to_string(o.runs) + " runs" : std::to_string(o.time) + " s")
          << " per target):\n  target                   inputs   exec/s  coverage  corpus  crashes (distinct)\n";
      for (const CampaignSummary& d : done) {
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

}  // namespace mlacheck
