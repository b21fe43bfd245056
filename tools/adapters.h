// The adapters the project ships (python/mlacheck/adapters/): upstream kernels bound to mlacheck's
// ops, named MODULE.CALLABLE (`--adapter vllm_cuda.top_k_per_row_decode`), and the Python package
// they live in.
#pragma once

#include <string>
#include <vector>

namespace mlacheck {

// The Python package mlacheck runs with: the install's <prefix>/share/mlacheck/python (beside the
// running executable), else the source tree's python/; "" when neither is there.
std::string python_package_dir();

struct AdapterInfo {
  std::string name;  // MODULE.CALLABLE
  std::string op;    // the op its @implements names
  std::string spec;  // the --python SPEC it stands for: FILE:CALLABLE
};

// Every adapter of the package's adapters/ folder: each callable marked @implements("OP", ...) in
// a module there, read from the files' text (nothing is imported: an adapter needs its upstream
// library only when it runs). Sorted by name.
std::vector<AdapterInfo> shipped_adapters();

// The --python specs a command runs: its --python values, then each --adapter NAME as the file and
// callable it names. Throws Error (one line naming the adapters there are) for an unknown name.
std::vector<std::string> python_specs(const std::vector<std::string>& python, const std::vector<std::string>& adapters);

}  // namespace mlacheck
