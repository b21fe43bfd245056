// The shipped adapters and --adapter (tools/adapters.h).
#include "tools/adapters.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/error.h"

namespace mlacheck {

namespace fs = std::filesystem;

std::string python_package_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share/mlacheck/python";
    if (fs::exists(installed / "mlacheck/__init__.py", ec)) return installed.string();
  }
#ifdef MLACHECK_SOURCE_DIR
  const fs::path source = fs::path(MLACHECK_SOURCE_DIR) / "python";
  if (fs::exists(source / "mlacheck/__init__.py", ec)) return source.string();
#endif
  return "";
}

namespace {

fs::path adapters_dir() {
  const std::string package = python_package_dir();
  return package.empty() ? fs::path() : fs::path(package) / "mlacheck" / "adapters";
}

// The adapters of one module's text: a decorator line `@implements("OP"` followed (after more
// decorator lines) by `def NAME(`.
std::vector<AdapterInfo> adapters_in(const fs::path& file) {
  std::ifstream in(file);
  std::vector<AdapterInfo> out;
  static const std::regex marked(R"(^@implements\(\s*["']([a-z_0-9]+)["'])");
  static const std::regex def(R"(^def\s+([A-Za-z_][A-Za-z_0-9]*)\s*\()");
  std::string op;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, marked)) {
      op = m[1];
    } else if (!op.empty() && std::regex_search(line, m, def)) {
      out.push_back({file.stem().string() + "." + m[1].str(), op, file.string() + ":" + m[1].str()});
      op.clear();
    } else if (!op.empty() && !line.empty() && line[0] != '@' && line[0] != ' ' && line[0] != ')') {
      op.clear();  // the decorator belonged to something else
    }
  }
  return out;
}

}  // namespace

std::vector<AdapterInfo> shipped_adapters() {
  std::vector<AdapterInfo> out;
  const fs::path dir = adapters_dir();
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".py" || e.path().stem().string().front() == '_') continue;
    const std::vector<AdapterInfo> found = adapters_in(e.path());
    out.insert(out.end(), found.begin(), found.end());
  }
  std::sort(out.begin(), out.end(), [](const AdapterInfo& a, const AdapterInfo& b) { return a.name < b.name; });
  return out;
}

std::vector<std::string> python_specs(const std::vector<std::string>& python, const std::vector<std::string>& names) {
  std::vector<std::string> specs = python;
  if (names.empty()) return specs;
  const std::vector<AdapterInfo> shipped = shipped_adapters();
  for (const std::string& name : names) {
    const auto it = std::find_if(shipped.begin(), shipped.end(), [&](const AdapterInfo& a) { return a.name == name; });
    if (it != shipped.end()) {
      specs.push_back(it->spec);
      continue;
    }
    std::string known;
    for (const AdapterInfo& a : shipped) known += (known.empty() ? "" : ", ") + a.name;
    if (shipped.empty()) {
      throw Error("--adapter '" + name + "': no adapters found (the Python package's mlacheck/adapters/ is not at '" +
                  adapters_dir().string() + "')");
    }
    throw Error("--adapter '" + name + "' is not a shipped adapter (mlacheck list shows them: " + known + ")");
  }
  return specs;
}

}  // namespace mlacheck
