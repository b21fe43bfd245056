// The Python call path's cost per call, beside the C++ one's (docs/python.md): a small top-k decode
// case (rows 8, cols 256, k 16, contiguous), its guarded buffers armed and checked around every call
// as a property does, called N times through topk_decode@ref and N times through a Python callable
// (--python, by default the null callable benchmarks/python_null.py, whose time is the call path's
// alone: the worker's round trip, the lending of the views, torch's tensor making) and N times
// through a C++ function that does nothing (the C++ call path's own cost). Prints microseconds per
// call, measured in one run; the Python path's overhead per call is the two null rows' difference.
//
//   python_call_bench [--backend host|cuda] [--calls N] [--python SPEC]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "kernels/device.h"
#include "kernels/registry.h"
#include "kernels/topk_glue.h"
#include "kernels/python_bridge.h"

namespace {

using namespace mlacheck;
using Clock = std::chrono::steady_clock;
using TopkFn = decltype(kernels::topk_per_row_decode);

// A C++ implementation that does nothing: the C++ call path alone.
kernels::TopkPath null_topk(kernels::Device&, const kernels::DeviceTensor&, int64_t, const kernels::DeviceTensor&,
                            int64_t, const kernels::DeviceTensor&, const kernels::DeviceTensor&,
                            const kernels::DeviceTensor&) {
  return kernels::TopkPath::kUnstated;
}

// Microseconds per call of impl on the case, with arm and check around each call.
double time_calls(kernels::Device& device, const std::string& impl, int calls) {
  const int64_t rows = 8, cols = 256, k = 16;
  auto logits = device.allocate("logits", rows * cols * 4);
  auto lens = device.allocate("seq_lens", rows * 4);
  auto out = device.allocate("out", rows * k * 4);
  std::vector<float> values(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((i * 2654435761u) % 1000) / 7.0f;
  std::vector<int32_t> n(static_cast<size_t>(rows), static_cast<int32_t>(cols));
  logits->write(0, values.data(), rows * cols * 4);
  lens->write(0, n.data(), rows * 4);
  const View out_view = View::contiguous(DType::kI32, {rows, k});
  out->declare_output("out", out_view);
  const kernels::DeviceTensor l{logits->data(), View::contiguous(DType::kF32, {rows, cols})};
  const kernels::DeviceTensor s{lens->data(), View::contiguous(DType::kI32, {rows})};
  const kernels::DeviceTensor o{out->data(), out_view};
  TopkFn* fn = kernels::registry().find<TopkFn>(impl);
  auto once = [&] {
    out->arm();
    fn(device, l, 1, s, k, o, {}, {});
    device.synchronize();
    MLA_REQUIRE(out->check().ok(), impl, " wrote outside out");
  };
  for (int i = 0; i < 5; ++i) once();  // warm: the worker started, torch and kernels loaded
  const auto t0 = Clock::now();
  for (int i = 0; i < calls; ++i) once();
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / calls;
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "host", spec = std::string(MLACHECK_SOURCE_DIR) + "/benchmarks/python_null.py:topk_decode";
  int calls = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--backend") backend = value;
    else if (flag == "--calls") calls = std::atoi(value.c_str());
    else if (flag == "--python") spec = value;
    else {
      std::fprintf(stderr, "python_call_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  const auto b = parse_backend(backend);
  if (!b || calls < 1) {
    std::fprintf(stderr, "python_call_bench: --backend host|cuda and --calls N >= 1\n");
    return 2;
  }
  // The device is probed in the child: a CUDA context does not survive a fork.
  try {
    kernels::load_python_isolated({"topk_decode=" + spec});
  } catch (const Error& e) {
    std::fprintf(stderr, "python_call_bench: %s\n", e.what());
    return 2;
  }
  // The calls run in a child: a process that lends buffers to Python is a child of the one that
  // loaded the callable (core/shared_arena.h), as check's children are.
  const pid_t pid = fork();
  if (pid == 0) {
    std::string why;
    if (!kernels::device_usable(*b, &why)) {
      std::printf("skipped: %s backend not usable here (%s)\n", backend.c_str(), why.c_str());
      _exit(77);
    }
    try {
      kernels::registry().add({"topk_decode", "null", "does nothing"}, &null_topk);
      auto device = kernels::make_device(*b);
      const double null_cpp = time_calls(*device, "topk_decode@null", calls);
      const double py = time_calls(*device, "topk_decode@py", calls);
      const double ref = time_calls(*device, "topk_decode@ref", calls);
      std::printf("backend %s, %d calls each, rows 8 cols 256 k 16, arm + call + check per call\n", backend.c_str(),
                  calls);
      std::printf("  %-44s %9.1f us/call\n", "C++ function that does nothing", null_cpp);
      std::printf("  %-44s %9.1f us/call\n", ("Python " + spec.substr(spec.rfind('/') + 1)).c_str(), py);
      std::printf("  %-44s %9.1f us/call\n", "topk_decode@ref (mlacheck's kernel)", ref);
      std::printf("  Python path overhead per call: %.1f us (%.1fx the C++ call path)\n", py - null_cpp,
                  py / null_cpp);
      std::fflush(stdout);
      _exit(0);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "python_call_bench: %s\n", e.what());
      _exit(1);
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
