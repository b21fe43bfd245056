// The backends a kernel can run on (host, cuda, hip), their names, and whether each is built and usable on this machine.
//
// `mlacheck list` prints backend_statuses(), so a user sees at once why the cuda tests were
// skipped ("no GPU (cudaErrorNoDevice)") or that this build has no CUDA at all. Compiles with or
// without CUDA: the cuda status comes from cuda::probe_device() only when the build defines
// MLACHECK_HAVE_CUDA (core/CMakeLists.txt does, on mlacheck_backend's users, when nvcc was found).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlacheck {

enum class Backend { kHost, kCuda, kHip };

// "host", "cuda", "hip": the names used on the command line, in case files and in reports.
const char* backend_name(Backend b);
// The inverse of backend_name; nullopt for any other text.
std::optional<Backend> parse_backend(std::string_view name);

struct BackendStatus {
  Backend backend = Backend::kHost;
  bool built = false;   // this binary holds the backend's code (for hip: its kernels were compile-checked)
  bool usable = false;  // kernels can run on it here
  std::string detail;   // one line: what it runs on, or why it cannot run
};

// One status per backend, in the order host, cuda, hip. For cuda this creates a CUDA context
// (cuda::probe_device), so a process that forks CUDA children must call it after forking them.
std::vector<BackendStatus> backend_statuses();

// Whether device code compiled for a CMake CUDA architecture list ("90a,100a"; ',' or ';'
// separated) can run on a device of compute capability major.minor: "90a" runs only on 9.0,
// "90-real" on 9.x with x >= 0, "90" and "90-virtual" (PTX) on 9.0 and later, "100f" on 10.x,
// "all", "all-major" and "native" on anything.
bool cuda_archs_run_on(std::string_view archs, int cc_major, int cc_minor);

}  // namespace mlacheck
