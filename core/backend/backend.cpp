// Backend names and the per-machine status of each backend (built, usable, and why not).
#include "core/backend/backend.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <thread>

#if MLACHECK_HAVE_CUDA
#include "core/backend/cuda_runtime.h"
#endif

namespace mlacheck {

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::kHost: return "host";
    case Backend::kCuda: return "cuda";
    case Backend::kHip: return "hip";
  }
  return "?";
}

std::optional<Backend> parse_backend(std::string_view name) {
  for (Backend b : {Backend::kHost, Backend::kCuda, Backend::kHip}) {
    if (name == backend_name(b)) return b;
  }
  return std::nullopt;
}

bool cuda_archs_run_on(std::string_view archs, int cc_major, int cc_minor) {
  const int cc = cc_major * 10 + cc_minor;
  size_t i = 0;
  while (i < archs.size()) {
    size_t j = i;
    while (j < archs.size() && archs[j] != ',' && archs[j] != ';') ++j;
    std::string_view a = archs.substr(i, j - i);
    i = j + 1;
    if (a.empty()) continue;
    if (a == "all" || a == "all-major" || a == "native") return true;
    size_t k = 0;
    int arch = 0;
    while (k < a.size() && std::isdigit(static_cast<unsigned char>(a[k]))) arch = arch * 10 + (a[k++] - '0');
    if (k == 0) continue;
    const std::string_view suffix = a.substr(k);
    const int arch_major = arch / 10;
    if (suffix == "a" || suffix == "a-real") {
      // Architecture-specific code (wgmma, setmaxnreg...) runs on exactly that compute capability.
      if (cc == arch) return true;
    } else if (suffix == "f" || suffix == "f-real" || suffix == "-real") {
      // Family-specific and plain machine code run on later minors of the same major.
      if (cc_major == arch_major && cc >= arch) return true;
    } else if (suffix.empty() || suffix == "-virtual") {
      // PTX is compiled by the driver for any later device.
      if (cc >= arch) return true;
    }
  }
  return false;
}

namespace {

BackendStatus host_status() {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return {Backend::kHost, true, true,
          "thread blocks as CPU fibers, one worker by default (deterministic); " + std::to_string(cores) + " core" +
              (cores == 1 ? "" : "s") + " here"};
}

BackendStatus cuda_status() {
  BackendStatus s{Backend::kCuda, false, false, ""};
#if MLACHECK_HAVE_CUDA
  s.built = true;
  const cuda::DeviceInfo d = cuda::probe_device();
  if (!d.usable) {
    s.detail = d.why_not;
    return s;
  }
  std::ostringstream os;
  os << d.name << ", " << d.sm_count << " SMs, sm_" << d.cc_major << d.cc_minor;
#ifdef MLACHECK_CUDA_ARCHS
  if (!cuda_archs_run_on(MLACHECK_CUDA_ARCHS, d.cc_major, d.cc_minor)) {
    os << ": this build has device code for " << MLACHECK_CUDA_ARCHS
       << " only (set CMAKE_CUDA_ARCHITECTURES to include " << d.cc_major << d.cc_minor << ")";
    s.detail = os.str();
    return s;
  }
#endif
  s.usable = true;
  s.detail = os.str();
#else
  // nvcc may be installed and still not found (CMake looks on PATH and at CUDACXX).
  s.detail = "this build has no CUDA backend (nvcc was not found when it was configured: set "
             "CUDACXX=/usr/local/cuda/bin/nvcc and configure again)";
#endif
  return s;
}

BackendStatus hip_status() {
  BackendStatus s{Backend::kHip, false, false, ""};
#if MLACHECK_HIP_COMPILE_CHECKS
  s.built = true;
  s.detail =
      "compile-checked only for gfx90a and gfx940; running needs an AMD GPU and a ROCm runtime, "
      "which this build has no runtime support for";
#else
  s.detail =
      "not built (no hipcc on PATH); with it, kernels are compile-checked for gfx90a and gfx940, "
      "never run";
#endif
  return s;
}

}  // namespace

std::vector<BackendStatus> backend_statuses() { return {host_status(), cuda_status(), hip_status()}; }

}  // namespace mlacheck
