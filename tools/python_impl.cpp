// Python callables as implementations (tools/python_impl.h): the embedded interpreter, the DLPack
// producer that lends the guarded views to torch, and the topk_decode adapter.
#include "tools/python_impl.h"

#include <pybind11/embed.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "core/backend/isolate.h"
#include "core/error.h"
#include "kernels/registry.h"
#include "kernels/topk_glue.h"

namespace py = pybind11;

namespace mlacheck::kernels {
namespace {

// ---- DLPack (v0.8 ABI, the one torch 1.13 and later read), written out to need no header ---------

struct DLDevice {
  int32_t device_type;  // 1 kDLCPU, 2 kDLCUDA
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float, 4 bfloat
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

// One lent view: the DLPack record and its shape and strides. The memory stays mlacheck's (a guarded
// buffer that outlives the call); the deleter frees only this record.
struct Lent {
  DLManagedTensor managed{};
  int64_t shape[8]{}, strides[8]{};
};

DLDataType dl_dtype(DType t) {
  switch (t) {
    case DType::kF64: return {2, 64, 1};
    case DType::kF32: return {2, 32, 1};
    case DType::kF16: return {2, 16, 1};
    case DType::kBF16: return {4, 16, 1};
    case DType::kI64: return {0, 64, 1};
    case DType::kI32: return {0, 32, 1};
    default: return {1, 8, 1};  // uint8, fp8 and ue8m0: raw bytes
  }
}

// A capsule named "dltensor" holding the view (torch.from_dlpack takes it). The data pointer is the
// view's element 0 and byte_offset is 0: torch 1.13's from_dlpack ignores byte_offset.
py::object capsule_of(const DeviceTensor& t, Backend backend) {
  if (t.base == nullptr) return py::none();
  auto* lent = new Lent;
  DLTensor& d = lent->managed.dl_tensor;
  d.data = static_cast<uint8_t*>(t.base) + t.view.byte_offset();
  d.device = {backend == Backend::kCuda ? 2 : 1, 0};
  d.ndim = t.view.rank();
  MLA_REQUIRE(d.ndim <= 8, "a view of rank ", d.ndim, " cannot be lent to Python (at most 8)");
  d.dtype = dl_dtype(t.view.dtype());
  for (int i = 0; i < d.ndim; ++i) lent->shape[i] = t.view.size(i), lent->strides[i] = t.view.stride(i);
  d.shape = lent->shape, d.strides = lent->strides, d.byte_offset = 0;
  lent->managed.manager_ctx = lent;
  lent->managed.deleter = [](DLManagedTensor* self) { delete static_cast<Lent*>(self->manager_ctx); };
  // A capsule never consumed (the callable raised first) frees its record itself; a consumed one
  // is renamed "used_dltensor" and torch calls the deleter when the tensor dies.
  PyObject* c = PyCapsule_New(&lent->managed, "dltensor", [](PyObject* cap) {
    if (PyCapsule_IsValid(cap, "dltensor")) {
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
      m->deleter(m);
    }
  });
  if (c == nullptr) {
    delete lent;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(c);
}

// ---- the interpreter and the callable, started once per process that calls it --------------------

struct PyState {
  std::string spec, module, callable;
  bool started = false;
  std::string start_error;  // why starting failed, repeated on every later call
  py::object fn, from_dlpack, torch;
};
PyState& state() {
  static auto* s = new PyState;  // never destroyed: the objects would need the interpreter at exit
  return *s;
}

std::string one_line(std::string s) {
  for (char& c : s) c = (c == '\n' || c == '\r') ? ' ' : c;
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s.size() > 600 ? s.substr(0, 597) + "..." : s;
}

// "ValueError: message (at file.py:12 in fn)", from a raised Python exception; the GIL is held.
std::string describe(py::error_already_set& e) {
  std::string what;
  try {
    what = py::str(e.type().attr("__name__")).cast<std::string>() + ": " + py::str(e.value()).cast<std::string>();
    if (e.trace()) {
      const py::list frames = py::module_::import("traceback").attr("extract_tb")(e.trace());
      if (!frames.empty()) {
        const py::object last = frames[frames.size() - 1];
        what += " (at " + py::str(last.attr("filename")).cast<std::string>() + ":" +
                py::str(last.attr("lineno")).cast<std::string>() + " in " +
                py::str(last.attr("name")).cast<std::string>() + ")";
      }
    }
  } catch (const std::exception&) {
    what = e.what();
  }
  return one_line(what);
}

// Starts Python (once), imports torch and the module and finds the callable; then releases the GIL,
// so each call takes it from whichever thread makes it. Throws mlacheck::Error with one line.
void start() {
  PyState& s = state();
  if (s.started) return;
  MLA_REQUIRE(s.start_error.empty(), s.start_error);
  std::string error;
  if (!Py_IsInitialized()) {
    // The program is the Python CMake found (MLACHECK_PYTHON_EXECUTABLE), so the standard library
    // and site-packages are that Python's, whatever python3 comes first on PATH (a pyenv shim, a
    // /usr/local build). No signal handlers: Ctrl-C and the parent's SIGKILL stay mlacheck's.
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0;
    PyConfig_SetBytesString(&config, &config.program_name, MLACHECK_PYTHON_EXECUTABLE);
    py::initialize_interpreter(&config, 0, nullptr, /*add_program_dir_to_path=*/false);
  }
  try {
    py::module_ sys = py::module_::import("sys");
    std::string module = s.module, folder = ".";
    if (module.size() > 3 && module.compare(module.size() - 3, 3, ".py") == 0) {  // a path to a .py file
      const size_t slash = module.rfind('/');
      if (slash != std::string::npos) folder = module.substr(0, slash + 1), module = module.substr(slash + 1);
      module = module.substr(0, module.size() - 3);
    }
    sys.attr("path").attr("insert")(0, py::module_::import("os").attr("path").attr("abspath")(folder));
    try {
      s.torch = py::module_::import("torch");
      s.from_dlpack = s.torch.attr("utils").attr("dlpack").attr("from_dlpack");
    } catch (py::error_already_set& e) {
      error = "torch does not import (" + describe(e) + "); --python hands the callable torch tensors "
              "(Debian's python3-torch, or pip's torch for " + py::str(sys.attr("executable")).cast<std::string>() +
              " " + py::str(sys.attr("version")).cast<std::string>().substr(0, 6) + ")";
    }
    if (error.empty()) {
      const py::object m = py::module_::import(module.c_str());
      if (!py::hasattr(m, s.callable.c_str())) {
        error = "module '" + module + "' (" + py::str(py::getattr(m, "__file__", py::str("?"))).cast<std::string>() +
                ") has no '" + s.callable + "'";
      } else {
        s.fn = m.attr(s.callable.c_str());
        if (!PyCallable_Check(s.fn.ptr())) error = "'" + s.callable + "' of module '" + module + "' is not callable";
      }
    }
  } catch (py::error_already_set& e) {
    error = describe(e);
  }
  PyEval_SaveThread();  // from here each call takes the GIL with gil_scoped_acquire
  if (!error.empty()) {
    s.start_error = "--python " + s.spec + ": " + error;
    throw Error(s.start_error);
  }
  s.started = true;
}

// ---- the adapter: topk_decode(logits, next_n, seq_lens, k, out) -------------------------------------

TopkPath python_topk_decode(Device& device, const DeviceTensor& logits, int64_t next_n, const DeviceTensor& seq_lens,
                            int64_t k, const DeviceTensor& out, const DeviceTensor&, const DeviceTensor&) {
  start();
  PyState& s = state();
  MLA_REQUIRE(device.backend() != Backend::kHip, "topk_decode@py: torch has no hip device here");
  device.synchronize();  // the uploads are done before torch reads (torch uses its own stream)
  std::string failure;
  {
    py::gil_scoped_acquire gil;
    try {
      const Backend b = device.backend();
      const py::object t_out = s.from_dlpack(capsule_of(out, b));
      const py::object r = s.fn(s.from_dlpack(capsule_of(logits, b)), next_n, s.from_dlpack(capsule_of(seq_lens, b)),
                                k, t_out);
      if (b == Backend::kCuda) s.torch.attr("cuda").attr("synchronize")();
      // The result is written into out in place; a callable that returns something else (a new
      // tensor, most likely, with the answer nobody reads) is told so.
      if (!r.is_none() && !r.is(t_out)) {
        failure = "returned a " + py::str(py::type::of(r).attr("__name__")).cast<std::string>() +
                  " instead of None: write the answer into out in place (its return value is not read)";
      }
    } catch (py::error_already_set& e) {
      failure = "raised " + describe(e);
    } catch (const std::exception& e) {
      failure = one_line(e.what());
    }
  }
  MLA_REQUIRE(failure.empty(), "topk_decode@py (", s.spec, ") ", failure);
  return TopkPath::kUnstated;  // a callable's paths are its own
}

}  // namespace

bool python_component_built(std::string* why_not) {
  if (why_not != nullptr) why_not->clear();
  return true;
}

std::string python_spec() { return state().spec; }

std::string load_python_isolated(const std::string& spec) {
  PyState& s = state();
  MLA_REQUIRE(s.spec.empty(), "--python ", spec, ": one --python callable per run in this version (",
              s.spec, " is topk_decode@py already)");
  const size_t colon = spec.rfind(':');
  MLA_REQUIRE(colon != std::string::npos && colon > 0 && colon + 1 < spec.size(), "--python '", spec,
              "' is not MODULE:CALLABLE (a module on sys.path or a .py file, then the function's name)");
  s.spec = spec, s.module = spec.substr(0, colon), s.callable = spec.substr(colon + 1);
  // Python starts in a child here and in the children that call it, never in this process: the
  // commands fork their children from it, and torch's thread pools do not survive a fork.
  IsolationOptions opts;
  opts.timeout_seconds = 120;
  const IsolatedOutcome probe = run_isolated(
      [&]() -> std::string {
        start();
        return "";
      },
      opts);
  if (probe.kind == IsolatedOutcome::kViolation) {
    s.spec.clear();
    throw Error(probe.message.rfind("error: ", 0) == 0 ? probe.message.substr(7) : probe.message);
  }
  if (!probe.passed()) {
    const std::string why = std::string(isolated_outcome_name(probe.kind)) + " (" + probe.message + ")";
    s.spec.clear();
    throw Error("--python " + spec + ": importing it " + why);
  }
  registry().add({"topk_decode", "py", "python " + spec + ": a Python callable (docs/python.md)"},
                 &python_topk_decode);
  return "topk_decode@py";
}

}  // namespace mlacheck::kernels
