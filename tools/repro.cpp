// The repro command (tools/repro.h). A cuda case, and any case run on a plugin's implementation,
// runs in a child process (core/backend/isolate.h): a sticky fault or a crash there becomes a
// verdict, and the parent never touches CUDA.
#include "tools/repro.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>

#include "core/backend/backend.h"
#include "core/backend/isolate.h"
#include "core/error.h"
#include "kernels/device.h"
#include "kernels/plugin.h"
#include "harness/case_text.h"
#include "fuzz/fuzz_input.h"
#include "properties/property_registry.h"
#ifdef MLACHECK_HAVE_CUDA
#include "core/backend/cuda_runtime.h"
#endif

namespace mlacheck {

namespace {

constexpr const char* kErrorPrefix = "error: ";  // what run_isolated puts before a thrown Error

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MLA_REQUIRE(in.good(), "repro: cannot read '", path, "'");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

}  // namespace

namespace {

struct ReproOptions {
  std::string backend, impl, target;
  bool plugins = false;  // plugins are loaded: every case runs in a child
  bool ignore_contract = false;  // run a case outside the implementation's contract anyway
};

// What the child answers for a case outside the contract (not a verdict).
constexpr const char* kOutsidePrefix = "outside-contract: ";

// The fuzz target a raw input belongs to: --target, or a folder or file name of its path that
// names one (mlacheck fuzz keeps a target's inputs under .../<target>/).
const FuzzTarget& raw_input_target(const std::string& path, const std::string& target) {
  if (!target.empty()) return find_fuzz_target(target);
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    const std::string part = path.substr(start, end - start);
    for (const FuzzTarget& t : fuzz_targets()) {
      if (part == t.name || part.rfind(t.name + "-", 0) == 0 || part == t.name + "_fuzzer") return t;
    }
    start = end + 1;
  }
  throw Error("'" + path + "' is not a case file, and no fuzz target is named by its path: give --target T to decode it as a raw fuzz input");
}

int repro_one(const std::string& file, const ReproOptions& o, std::ostream& out, std::ostream& err) {
  try {
    const std::string bytes = read_file(file);
    CaseText c;
    bool text = false;
    try {
      c = CaseText::parse(bytes);
      text = c.has("property");
    } catch (const Error&) {
      // Not a case file: a raw fuzz input, unless it plainly tried to be a case file and no target
      // says to read it as raw bytes (a fuzzer's mutation of a case file starts like one).
      if (o.target.empty() && (bytes.rfind("# mlacheck case", 0) == 0 || bytes.rfind("property ", 0) == 0)) throw;
    }
    if (!text) {
      const FuzzTarget& t = raw_input_target(file, o.target);
      c = decode_fuzz_input(t, bytes, o.impl, o.backend).text;
      out << "repro " << file << ": a raw " << t.name << " fuzz input (" << bytes.size()
          << " bytes); it decodes to this case:\n" << c.format();
    }
    const std::string property = c.word("property");
    const std::string use_backend = o.backend.empty() ? c.word("backend") : o.backend;
    const std::string use_impl = o.impl.empty() ? c.word("impl") : o.impl;
    property_registry().find(property);  // an unknown property is bad input, before any run
    const auto b = parse_backend(use_backend);
    MLA_REQUIRE(b.has_value(), "backend '", use_backend, "' is not one of host, cuda, hip");
    const std::string header = "repro " + file + ": " + property + " on " + use_impl + " (" + use_backend +
                               (kernels::guards_enabled() ? "" : ", guards off: MLACHECK_GUARDS=0") + ")\n";
    const auto outside = [&](const std::string& why) {
      out << header << "OUTSIDE  the case lies outside " << use_impl << "'s contract: " << why
          << " (not run; --ignore-contract runs it)\n";
      return 0;
    };
    if (*b == Backend::kHost && !o.plugins) {
      const ReproResult r = run_case_text(c, use_backend, use_impl, o.ignore_contract);
      if (!r.outside.empty()) return outside(r.outside);
      out << header << (r.verdict ? "FAIL  " + *r.verdict : std::string("PASS  the property holds")) << '\n';
      return r.verdict ? 1 : 0;
    }
    // Any other backend, or a plugin's code: in a child, so a sticky fault or a crash cannot take
    // the command down.
    IsolationOptions opts;
    opts.timeout_seconds = 600;
#ifdef MLACHECK_HAVE_CUDA
    opts.is_sticky = cuda::is_sticky_fault;
#endif
    const IsolatedOutcome r = run_isolated(
        [&]() -> std::string {
          const ReproResult rr = run_case_text(c, use_backend, use_impl, o.ignore_contract);
          if (!rr.outside.empty()) return kOutsidePrefix + rr.outside;
          return rr.verdict.value_or("");
        },
        opts);
    if (r.kind == IsolatedOutcome::kViolation && r.message.rfind(kErrorPrefix, 0) == 0) {
      err << "mlacheck: repro: " << file << ": " << r.message.substr(std::string(kErrorPrefix).size()) << '\n';
      return 2;
    }
    if (r.kind == IsolatedOutcome::kViolation && r.message.rfind(kOutsidePrefix, 0) == 0) {
      return outside(r.message.substr(std::string(kOutsidePrefix).size()));
    }
    out << header;
    if (r.kind == IsolatedOutcome::kPassed) {
      out << "PASS  the property holds\n";
      return 0;
    }
    out << "FAIL  " << (r.kind == IsolatedOutcome::kViolation ? "" : std::string(isolated_outcome_name(r.kind)) + ": ")
        << r.message << '\n';
    return 1;
  } catch (const Error& e) {
    err << "mlacheck: repro: " << file << ": " << e.what() << '\n';
    return 2;
  }
}

}  // namespace

int run_repro_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ReproOptions o;
  std::vector<std::string> files, plugins;
  std::string all_dir;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--backend" || args[i] == "--impl" || args[i] == "--target" || args[i] == "--all" ||
        args[i] == "--plugin") {
      if (i + 1 >= args.size()) {
        err << "mlacheck: repro: " << args[i] << " needs a value (see mlacheck --help)\n";
        return 2;
      }
      if (args[i] == "--plugin") {
        plugins.push_back(args[i + 1]);
      } else {
        (args[i] == "--backend" ? o.backend : args[i] == "--impl" ? o.impl : args[i] == "--target" ? o.target : all_dir) =
            args[i + 1];
      }
      ++i;
    } else if (args[i] == "--ignore-contract") {
      o.ignore_contract = true;
    } else if (!args[i].empty() && args[i][0] == '-') {
      err << "mlacheck: repro: unknown option '" << args[i] << "' (see mlacheck --help)\n";
      return 2;
    } else {
      files.push_back(args[i]);
    }
  }
  if (!all_dir.empty()) {
    if (!files.empty()) {
      err << "mlacheck: repro: --all DIR runs a folder's cases; give no other files\n";
      return 2;
    }
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(all_dir, ec)) {
      if (e.is_regular_file() && e.path().extension() == ".case") files.push_back(e.path().string());
    }
    if (ec) {
      err << "mlacheck: repro: cannot read the folder '" << all_dir << "': " << ec.message() << '\n';
      return 2;
    }
    if (files.empty()) {
      err << "mlacheck: repro: no .case files in '" << all_dir << "'\n";
      return 2;
    }
    std::sort(files.begin(), files.end());
  } else if (files.size() > 1) {
    err << "mlacheck: repro: one case file at a time (or --all DIR), got '" << files[0] << "' and '" << files[1]
        << "'\n";
    return 2;
  }
  if (files.empty()) {
    err << "mlacheck: repro: no case file given (see mlacheck --help)\n";
    return 2;
  }
  try {
    for (const std::string& path : plugins) kernels::load_plugin_isolated(path);
  } catch (const Error& e) {
    err << "mlacheck: repro: " << e.what() << '\n';
    return 2;
  }
  o.plugins = !plugins.empty();
  int failed = 0, malformed = 0;
  for (const std::string& f : files) {
    const int rc = repro_one(f, o, out, err);
    failed += rc == 1, malformed += rc == 2;
  }
  if (files.size() > 1) {
    out << "repro --all " << all_dir << ": " << files.size() - failed - malformed << " of " << files.size()
        << " hold, " << failed << " fail, " << malformed << " malformed\n";
  }
  return malformed ? 2 : failed ? 1 : 0;
}

}  // namespace mlacheck
