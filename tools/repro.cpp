// The repro command (tools/repro.h). A cuda case runs in a child process (core/backend/isolate.h):
// a sticky fault or a crash there becomes a verdict, and the parent never touches CUDA.
#include "tools/repro.h"

#include <fstream>
#include <ostream>
#include <sstream>

#include "core/backend/backend.h"
#include "core/backend/isolate.h"
#include "core/error.h"
#include "properties/case_text.h"
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

int run_repro_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string file, backend, impl;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--backend" || args[i] == "--impl") {
      if (i + 1 >= args.size()) {
        err << "mlacheck: repro: " << args[i] << " needs a value (see mlacheck --help)\n";
        return 2;
      }
      (args[i] == "--backend" ? backend : impl) = args[i + 1];
      ++i;
    } else if (!args[i].empty() && args[i][0] == '-') {
      err << "mlacheck: repro: unknown option '" << args[i] << "' (see mlacheck --help)\n";
      return 2;
    } else if (file.empty()) {
      file = args[i];
    } else {
      err << "mlacheck: repro: one case file at a time, got '" << file << "' and '" << args[i] << "'\n";
      return 2;
    }
  }
  if (file.empty()) {
    err << "mlacheck: repro: no case file given (see mlacheck --help)\n";
    return 2;
  }
  try {
    const CaseText c = CaseText::parse(read_file(file));
    const std::string property = c.word("property");
    const std::string use_backend = backend.empty() ? c.word("backend") : backend;
    const std::string use_impl = impl.empty() ? c.word("impl") : impl;
    property_registry().find(property);  // an unknown property is bad input, before any run
    const auto b = parse_backend(use_backend);
    MLA_REQUIRE(b.has_value(), "backend '", use_backend, "' is not one of host, cuda, hip");
    const std::string header = "repro " + file + ": " + property + " on " + use_impl + " (" + use_backend + ")\n";
    if (*b == Backend::kHost) {
      const ReproResult r = run_case_text(c, use_backend, use_impl);
      out << header << (r.verdict ? "FAIL  " + *r.verdict : std::string("PASS  the property holds")) << '\n';
      return r.verdict ? 1 : 0;
    }
    // Any other backend: in a child, so a sticky fault or a crash cannot take the command down.
    IsolationOptions opts;
    opts.timeout_seconds = 600;
#ifdef MLACHECK_HAVE_CUDA
    opts.is_sticky = cuda::is_sticky_fault;
#endif
    const IsolatedOutcome o = run_isolated(
        [&]() -> std::string {
          const ReproResult r = run_case_text(c, use_backend, use_impl);
          return r.verdict.value_or("");
        },
        opts);
    if (o.kind == IsolatedOutcome::kViolation && o.message.rfind(kErrorPrefix, 0) == 0) {
      err << "mlacheck: repro: " << o.message.substr(std::string(kErrorPrefix).size()) << '\n';
      return 2;
    }
    out << header;
    if (o.kind == IsolatedOutcome::kPassed) {
      out << "PASS  the property holds\n";
      return 0;
    }
    out << "FAIL  " << (o.kind == IsolatedOutcome::kViolation ? "" : std::string(isolated_outcome_name(o.kind)) + ": ")
        << o.message << '\n';
    return 1;
  } catch (const Error& e) {
    err << "mlacheck: repro: " << e.what() << '\n';
    return 2;
  }
}

}  // namespace mlacheck
