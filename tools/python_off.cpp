// tools/python_impl.h in a build without the Python component (MLACHECK_PYTHON off or not found):
// --python is refused in one line, and nothing links libpython.
#include "tools/python_impl.h"

#include "core/error.h"

namespace mlacheck::kernels {

namespace {
const char* const kWhyNot =
    "this mlacheck was built without the Python component (configure with python3-dev and pybind11-dev "
    "installed, MLACHECK_PYTHON=AUTO or ON; docs/python.md)";
}

bool python_component_built(std::string* why_not) {
  if (why_not != nullptr) *why_not = kWhyNot;
  return false;
}

std::string load_python_isolated(const std::string& spec) {
  throw Error("--python " + spec + ": " + kWhyNot);
}

std::string python_spec() { return ""; }

}  // namespace mlacheck::kernels
