// The repro command (tools/repro.h). A cuda case, and any case run on a plugin's implementation,
// runs in a child process (core/backend/isolate.h): a sticky fault or a crash there becomes a
// verdict, and the parent never touches CUDA.
#include "tools/repro.h"

#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <ostream>
#include <sstream>

#include "core/backend/backend.h"
#include "core/backend/isolate.h"
#include "core/error.h"
#include "kernels/device.h"
#include "kernels/plugin.h"
#include "kernels/python_bridge.h"
#include "kernels/python_worker.h"
#include "harness/case_text.h"
#include "harness/input_file.h"
#include "fuzz/fuzz_input.h"
#include "kernels/registry.h"
#include "properties/property_registry.h"
#include "tools/report_formats.h"
#include "harness/memory_budget.h"
#include "tools/adapters.h"
#include "tools/flags_typed.h"
#include "tools/report_html.h"
#ifdef MLACHECK_HAVE_CUDA
#include "core/backend/cuda_runtime.h"
#endif

extern char** environ;  // the environment a .call's Python rerun inherits

namespace mlacheck {

namespace {

constexpr const char* kErrorPrefix = "error: ";  // what run_isolated puts before a thrown Error

// Case files and raw inputs alike: a regular file of at most 4 MiB, its type and size checked
// before a byte is read (harness/input_file.h).
std::string read_file(const std::string& path) { return read_input_file(path, kMaxInputFileBytes); }

}  // namespace

namespace {

// The repro command's typed flags (tools/flags.def, through tools/flags_typed.h), and whether its
// cases run in a child (plugins or Python callables are loaded).
struct ReproOptions : flags::ReproFlags {
  bool in_child = false;
};

// How long a case in a child may run: as check confirmed a hang (four times the case timeout, and
// a worker's start), from --case-timeout or the case timeout a hang was saved with.
constexpr int kReproHangFactor = 4;
constexpr double kReproStartSeconds = 5;
constexpr double kReproDefaultTimeout = 600;

// The memory budget raised for one case (a saved case's max_mb), restored after it.
struct RaisedCaseMemory {
  explicit RaisedCaseMemory(int64_t bytes) : before(case_memory_budget_bytes()) { set_case_memory_budget_bytes(bytes); }
  ~RaisedCaseMemory() { set_case_memory_budget_bytes(before); }
  RaisedCaseMemory(const RaisedCaseMemory&) = delete;
  RaisedCaseMemory& operator=(const RaisedCaseMemory&) = delete;
  int64_t before;
};

// What the child answers for a case outside the contract (not a verdict).
constexpr const char* kOutsidePrefix = "outside-contract: ";
// repro_one's status for a case it did not run (OUTSIDE): exit 1 alone, counted apart by --all.
constexpr int kNotRun = 3;
constexpr int kNotLoaded = 4;  // the case's implementation is no built-in one and no plugin was given

// The fuzz target a raw input belongs to: --target, or a folder or file name of its path that
// names one (mlacheck fuzz keeps a target's inputs under .../<target>/). bytes: for the message
// when there is none.
const FuzzTarget& raw_input_target(const std::string& path, const std::string& target, const std::string& bytes) {
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
  // Text that parses as case lines (at least one) but names no property: a case file missing its
  // property line.
  bool case_lines = false;
  try {
    case_lines = !(CaseText::parse(bytes) == CaseText());
  } catch (const Error&) {
  }
  if (case_lines) {
    throw Error("case lines without a 'property' line (mlacheck list shows the properties), and no fuzz target is named by the path: give --target T to decode it as a raw fuzz input");
  }
  throw Error("not a case file (no 'property' line), and no fuzz target is named by the path: give --target T to decode it as a raw fuzz input");
}

int repro_one(const std::string& file, const ReproOptions& o, std::ostream& out, std::ostream& err) {
  std::string bytes;
  try {
    bytes = read_file(file);
  } catch (const Error& e) {
    err << flags::prefix("repro") << e.what() << '\n';  // the message starts with the file
    return 2;
  }
  CaseText c;  // outside the try: its errors are told with the line of the key they name
  try {
    bool text = false;
    // Recognised by content: text with a line "property P" is a case file wherever that line is
    // (regression files open with comment headers), and its parse errors are reported. Only with
    // --target is such text that does not parse read as raw bytes (a fuzzer's mutation of a case
    // file still looks like one).
    if (CaseText::names_a_property(bytes)) {
      try {
        c = CaseText::parse(bytes);
        text = true;
      } catch (const Error&) {
        if (o.target.empty()) throw;
      }
    }
    if (!text) {
      const FuzzTarget& t = raw_input_target(file, o.target, bytes);
      c = decode_fuzz_input(t, bytes, o.impl, o.backend).text;
      out << "repro " << file << ": a raw " << t.name << " fuzz input (" << bytes.size()
          << " bytes); it decodes to this case:\n" << c.format();
    }
    const std::string property = c.word("property");
    // A case that check or mutants saved records the memory it took (max_mb): the budget is
    // raised to it for this case, unless --max-mb was given, or the machine has less memory (then
    // the refusal names the flag and the figure).
    std::optional<RaisedCaseMemory> raised;
    if (c.has(kMaxMbKey)) {
      const int64_t need = c.integer(kMaxMbKey, 1, int64_t{1} << 30) << 20;
      if (!o.given.max_mb && need > case_memory_budget_bytes() &&
          (physical_memory_bytes() == 0 || need <= physical_memory_bytes())) {
        raised.emplace(need);
      }
    }
    const std::string use_backend = o.backend.empty() ? c.word("backend") : o.backend;
    const std::string use_impl = o.impl.empty() ? c.word("impl") : o.impl;
    property_registry().find(property);  // an unknown property is bad input, before any run
    if (!o.in_child && !kernels::registry().contains(use_impl)) {
      // Not a malformed case: what runs it is not loaded (a plugin's or a Python callable's name).
      const bool py = use_impl.size() > 3 && use_impl.compare(use_impl.size() - 3, 3, "@py") == 0;
      err << flags::prefix("repro") << file << ": its implementation '" << use_impl << "' is not loaded here ("
          << (py ? "a Python callable's needs --python MODULE:CALLABLE" : "give the --plugin or --python that registers it")
          << "; mlacheck list shows what is)\n";
      return kNotLoaded;
    }
    const auto b = parse_backend(use_backend);
    MLA_REQUIRE(b.has_value(), "backend '", use_backend, "' is not one of host, cuda, hip");
    const std::string header = "repro " + file + ": " + property + " on " + use_impl + " (" + use_backend +
                               (kernels::guards_enabled() ? "" : ", guards off: MLACHECK_GUARDS=0") + ")\n";
    const auto outside = [&](const std::string& why) {
      out << header << "OUTSIDE  the case lies outside " << use_impl << "'s contract: " << why
          << " (not run; --ignore-contract runs it)\n";
      return kNotRun;
    };
    // --report html: a stray write's page (tools/report_html.h), named after the case file; its
    // path ends the FAIL line.
    const auto picture = [&](const GuardPictureSink& sink, const std::string& verdict) {
      return picture_note(write_picture_for_verdict(sink, verdict, o.report_dir,
                                                    std::filesystem::path(file).stem().string(),
                                                    header.substr(0, header.size() - 1)));
    };
    // The reference kernels on the host run in this process; a seeded variant (which may crash by
    // design: a write through a wrapped offset into reserved memory) and every other backend or
    // plugin run in a child.
    const bool reference = use_impl.size() > 4 && use_impl.compare(use_impl.size() - 4, 4, "@ref") == 0;
    if (*b == Backend::kHost && !o.in_child && reference) {
      const ScopedCaseMemory memory;  // the case's buffers, refused past the budget before they are made
      GuardPictureSink sink;
      std::optional<ScopedGuardPictureSink> on;
      if (o.report == "html") on.emplace(sink);
      const ReproResult r = run_case_text(c, use_backend, use_impl, o.ignore_contract);
      if (!r.outside.empty()) return outside(r.outside);
      const std::string note = r.verdict && on ? picture(sink, *r.verdict) : "";
      out << header << (r.verdict ? "FAIL  " + *r.verdict + note : std::string("PASS  the property holds")) << '\n';
      return r.verdict ? 1 : 0;
    }
    // Any other backend, implementation or plugin: in a child, so a sticky fault or a crash cannot
    // take the command down.
    IsolationOptions opts;
    const double case_timeout =
        o.case_timeout > 0 ? o.case_timeout : c.has(kCaseTimeoutKey) ? static_cast<double>(c.integer(kCaseTimeoutKey, 1, 3600)) : 0;
    opts.timeout_seconds = case_timeout > 0 ? kReproHangFactor * case_timeout + kReproStartSeconds : kReproDefaultTimeout;
#ifdef MLACHECK_HAVE_CUDA
    opts.is_sticky = cuda::is_sticky_fault;
#endif
    const IsolatedOutcome r = run_isolated(
        [&]() -> std::string {
          const ScopedCaseMemory memory;
          GuardPictureSink sink;
          std::optional<ScopedGuardPictureSink> on;
          if (o.report == "html") on.emplace(sink);
          ReproResult rr;
          try {
            rr = run_case_text(c, use_backend, use_impl, o.ignore_contract);
          } catch (const CaseMemoryExceeded& e) {
            throw Error(e.what());  // the parent tells it as bad input
          }
          if (!rr.outside.empty()) return kOutsidePrefix + rr.outside;
          if (rr.verdict && on) return *rr.verdict + picture(sink, *rr.verdict);  // the page is written here
          return rr.verdict.value_or("");
        },
        opts);
    if (r.kind == IsolatedOutcome::kViolation && r.message.rfind(kErrorPrefix, 0) == 0) {
      err << flags::prefix("repro") << file << ": " << c.locate(r.message.substr(std::string(kErrorPrefix).size()))
          << '\n';
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
    if (r.kind == IsolatedOutcome::kTimedOut) {
      char line[300];
      std::snprintf(line, sizeof line, "FAIL  hang: it ran past %.0f s (%s) and was killed\n", opts.timeout_seconds,
                    case_timeout <= 0 ? "repro's limit; --case-timeout sets a shorter one"
                    : o.case_timeout > 0
                        ? "4 times --case-timeout, and a worker's start"
                        : ("4 times the case timeout of " + std::to_string(static_cast<int>(case_timeout)) +
                           " s it was saved with, and a worker's start; --case-timeout sets another").c_str());
      out << line;
      return 1;
    }
    out << "FAIL  " << (r.kind == IsolatedOutcome::kViolation ? "" : std::string(isolated_outcome_name(r.kind)) + ": ")
        << r.message << '\n';
    return 1;
  } catch (const Error& e) {
    err << flags::prefix("repro") << file << ": " << c.locate(e.what()) << '\n';
    return 2;
  } catch (const CaseMemoryExceeded& e) {
    err << flags::prefix("repro") << file << ": " << e.what() << '\n';
    return 2;
  }
}

}  // namespace

namespace {

// What one case file gave, for --format json and junit: its exit status and what it printed.
struct ReproRecord {
  std::string file;
  int rc = 0;
  std::string out, err;
  double seconds = 0;
};

// The line of text that starts with prefix (without it and its line end), or "".
std::string line_starting(const std::string& text, const std::string& prefix) {
  const std::string t = "\n" + text;
  const size_t at = t.find("\n" + prefix);
  if (at == std::string::npos) return "";
  const size_t from = at + 1 + prefix.size();
  return t.substr(from, t.find('\n', from) - from);
}

// The report of a run's case files as JSON or JUnit (tools/report_formats.h).
void print_report(const std::string& format, const std::string& dir, const std::vector<ReproRecord>& records,
                  std::ostream& out) {
  using report::TestCase;
  report::TestSuite s;
  s.name = dir.empty() ? "mlacheck repro" : "mlacheck repro --all " + dir;
  s.timestamp = report::junit_timestamp();
  int held = 0, failed = 0, malformed = 0, outside = 0, not_loaded = 0;
  std::string cases;
  for (const ReproRecord& r : records) {
    TestCase t;
    t.name = r.file, t.classname = "repro", t.output = r.out, t.seconds = r.seconds;
    std::string result = "pass", message = line_starting(r.out, "PASS  ");
    if (r.rc == kNotLoaded) {
      result = "not_loaded", ++not_loaded;
      message = r.err.substr(0, r.err.find('\n'));
      t.outcome = TestCase::Outcome::kError, t.type = "implementation not loaded";
    } else if (r.rc == 2) {
      result = "malformed", ++malformed;
      message = r.err.substr(0, r.err.find('\n'));
      t.outcome = TestCase::Outcome::kError, t.type = "malformed case";
    } else if (r.rc == 1) {
      result = "fail", ++failed;
      message = line_starting(r.out, "FAIL  ");
      t.outcome = TestCase::Outcome::kFailed, t.type = "property violation", t.details = r.out;
    } else if (const std::string why = line_starting(r.out, "OUTSIDE  "); !why.empty()) {
      result = "outside", ++outside, message = why;
      t.outcome = TestCase::Outcome::kSkipped;
    } else {
      ++held;
    }
    t.message = message;
    s.cases.push_back(std::move(t));
    cases += std::string(cases.empty() ? "\n" : ",\n") + "  {\"file\": " + report::json_quote(r.file) +
             ", \"result\": \"" + result + "\", \"message\": " + report::json_quote(message) +
             ", \"output\": " + report::json_quote(r.out) + "}";
  }
  if (format == "junit") {
    report::write_junit(out, "mlacheck repro", {s});
    return;
  }
  out << "{\"directory\": " << report::json_quote(dir) << ", \"held\": " << held << ", \"failed\": " << failed
      << ", \"malformed\": " << malformed << ", \"outside\": " << outside << ", \"not_loaded\": " << not_loaded
      << ", \"cases\": [" << cases << "\n]}\n";
}

}  // namespace

namespace {

// A call the Python guard saved (python/mlacheck/guard.py, a .call file): rerun alone by the
// package, `python -m mlacheck.rerun FILE --import MODULE...`, in the interpreter a --python check
// would use, with the package (the install's share/mlacheck/python, else the source tree's python/)
// first on PYTHONPATH. Each --python value names a module or file that registers the op (a
// MODULE:CALLABLE's callable is ignored). Its exit status: 0 clean, 1 the finding again, 2 setup.
int repro_guard_call(const std::string& file, const std::vector<std::string>& imports, const std::string& emit,
                     std::ostream& out, std::ostream& err) {
  const std::string package = python_package_dir();
  std::vector<std::string> argv = {kernels::python_worker::interpreter(), "-m", "mlacheck.rerun", file};
  for (std::string m : imports) {
    const size_t colon = m.rfind(':');
    if (colon != std::string::npos && m.find('/', colon) == std::string::npos) m = m.substr(0, colon);
    const size_t eq = m.find('=');
    if (eq != std::string::npos && m.find('/') > eq) m = m.substr(eq + 1);
    argv.push_back("--import");
    argv.push_back(m);
  }
  if (!emit.empty()) {
    if (emit.rfind("pytest:", 0) != 0 || emit.size() == 7) {
      err << flags::prefix("repro") << "--emit '" << emit << "' is not pytest:FILE\n";
      return 2;
    }
    argv.push_back("--emit-pytest");
    argv.push_back(emit.substr(7));
  }
  const char* old = std::getenv("PYTHONPATH");
  const std::string path = "PYTHONPATH=" + package + (old != nullptr && *old ? ":" + std::string(old) : "");
  std::vector<std::string> env = {path};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "PYTHONPATH=", 11) != 0) env.emplace_back(*e);
  }
  std::vector<char*> av, ev;
  for (std::string& a : argv) av.push_back(a.data());
  for (std::string& e : env) ev.push_back(e.data());
  av.push_back(nullptr);
  ev.push_back(nullptr);
  out.flush();
  err.flush();
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, av[0], nullptr, nullptr, av.data(), ev.data());
  if (rc != 0) {
    err << flags::prefix("repro") << "cannot run the Python interpreter '" << argv[0] << "' (" << std::strerror(rc)
        << "; MLACHECK_PYTHON picks another)\n";
    return 2;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
}

}  // namespace

int run_repro_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ReproOptions o;
  flags::ReproFlags& f = o;
  if (const int rc = flags::parse_repro(args, f, out, err); rc >= 0) return rc;
  flags::apply_max_mb(f.given.max_mb, f.max_mb);
  const std::vector<std::string>& plugins = f.plugin;
  std::vector<std::string> files = f.positional;
  const std::string& all_dir = f.all;
  if (f.given.all) {
    if (!files.empty()) return flags::usage_error(err, "repro", "--all DIR runs a folder's cases; give no other files");
    if (all_dir.empty()) return flags::usage_error(err, "repro", "--all needs a folder");
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(all_dir, ec)) {
      if (e.is_regular_file() && e.path().extension() == ".case") files.push_back(e.path().string());
    }
    if (ec) {
      err << flags::prefix("repro") << "cannot read the folder '" << all_dir << "': " << ec.message() << '\n';
      return 2;
    }
    if (files.empty()) {
      err << flags::prefix("repro") << "no .case files in '" << all_dir << "'\n";
      return 2;
    }
    std::sort(files.begin(), files.end());
  }
  if (files.empty()) return flags::usage_error(err, "repro", "no case file given");
  if (files.size() == 1 && std::filesystem::path(files[0]).extension() == ".call") {
    return repro_guard_call(files[0], python_specs(f.python, f.adapter), f.emit, out, err);
  }
  if (f.given.emit) return flags::usage_error(err, "repro", "--emit is for a .call file (a call the guard saved)");
  try {
    for (const std::string& path : plugins) kernels::load_plugin_isolated(path);
    // The probe's Python worker is lent to the first case's child (on --backend, else the host,
    // where saved cases run unless they say otherwise).
    const std::string backend = f.given.backend ? f.backend : "host";
    kernels::load_python_isolated(python_specs(f.python, f.adapter), backend == "host" || backend == "cuda" ? backend : "");
  } catch (const Error& e) {
    err << flags::prefix("repro") << e.what() << '\n';
    return 2;
  }
  o.in_child = !plugins.empty() || f.given.python;  // a Python callable runs in a child too
  if (o.report == "html") {  // the pages' folder is made before any case runs, so it cannot fail after
    std::error_code ec;
    std::filesystem::create_directories(o.report_dir, ec);
    if (!std::filesystem::is_directory(o.report_dir)) {
      err << flags::prefix("repro") << "--report-dir: cannot make the folder '" << o.report_dir << "'"
          << (ec ? ": " + ec.message() : std::string()) << '\n';
      return 2;
    }
  }
  int failed = 0, malformed = 0, not_run = 0, not_loaded = 0;
  std::vector<ReproRecord> records;  // --format json or junit: each file's, for the report
  for (const std::string& f : files) {
    int rc = 0;
    if (o.format == "table") {
      rc = repro_one(f, o, out, err);
    } else {
      std::ostringstream file_out, file_err;
      const auto start = std::chrono::steady_clock::now();
      rc = repro_one(f, o, file_out, file_err);
      err << file_err.str();  // a malformed file's line, on stderr as with the table
      records.push_back({f, rc, file_out.str(), file_err.str(),
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()});
    }
    failed += rc == 1, malformed += rc == 2, not_run += rc == kNotRun, not_loaded += rc == kNotLoaded;
  }
  const int held = static_cast<int>(files.size()) - failed - malformed - not_run - not_loaded;
  if (o.format != "table") {
    print_report(o.format, all_dir, records, out);
  } else if (files.size() > 1 || !all_dir.empty()) {
    out << (all_dir.empty() ? std::string("repro") : "repro --all " + all_dir) << ": " << held << " of " << files.size() << " hold, " << failed << " fail, "
        << not_run << " outside the contract (not run), " << malformed << " malformed"
        << (not_loaded ? ", " + std::to_string(not_loaded) + " whose implementation is not loaded (not run)" : "") << '\n';
  }
  // A case that did not run is never a pass: alone it exits 1, and so does a folder of which none ran;
  // one whose implementation is not loaded is bad input (give its plugin), as a malformed one is.
  return malformed || not_loaded ? 2 : failed ? 1 : held == 0 && not_run > 0 ? 1 : 0;
}

}  // namespace mlacheck
