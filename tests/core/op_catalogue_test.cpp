// The catalogue test of the op table (core/ops.def): every op it declares is present in every layer
// that must have it, and nothing outside it claims to be an op. Remove an op's entry from any layer
// (its @ref registration, its properties, its seeds, a tolerance, its fuzz harness, its plugin entry
// point, its file families, its section of docs/ops.md, its place in the public headers) and a check
// here names the op and the layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "core/ops.h"
#include "core/tolerances.h"
#include "kernels/plugin.h"
#include "kernels/registry.h"
#include "fuzz/fuzz_input.h"
#include "properties/property_registry.h"

namespace mlacheck {
namespace {

namespace fs = std::filesystem;
const fs::path kSource = MLACHECK_SOURCE_DIR;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::set<std::string> op_names() {
  std::set<std::string> out;
  for (const OpInfo& op : spec_ops()) out.insert(std::string(op.name));
  return out;
}

TEST(OpCatalogue, TheTableHasDistinctOpsWithEveryField) {
  EXPECT_FALSE(spec_ops().empty());
  EXPECT_EQ(op_names().size(), spec_ops().size()) << "an op is declared twice in core/ops.def";
  for (const OpInfo& op : spec_ops()) {
    EXPECT_FALSE(op.section.empty() || op.kernels.empty() || op.properties.empty() || op.summary.empty() ||
                 op.fuzz_summary.empty())
        << op.name << ": a field of its core/ops.def row is empty";
  }
}

TEST(OpCatalogue, EveryOpHasARefImplementationAndNothingElseIsAnOp) {
  std::set<std::string> registered;
  for (const kernels::ImplementationInfo& info : kernels::registry().list()) registered.insert(info.op);
  for (const std::string& op : op_names()) {
    EXPECT_TRUE(kernels::registry().contains(op + "@ref")) << op << ": no " << op << "@ref in kernels/registry_builtin.cpp";
  }
  for (const std::string& op : registered) {
    EXPECT_TRUE(op_names().count(op)) << "the registry has implementations of '" << op << "', which core/ops.def does not declare";
  }
}

TEST(OpCatalogue, EveryOpHasPropertiesAndEveryPropertyAnOp) {
  std::set<std::string> with_properties;
  for (const PropertyEntry& p : property_registry().list()) {
    EXPECT_TRUE(op_names().count(p.op)) << "property " << p.name << " belongs to '" << p.op << "', not an op of core/ops.def";
    EXPECT_EQ(p.name.rfind(p.op + ".", 0), 0u) << "property " << p.name << " is not named <op>.<property>";
    with_properties.insert(p.op);
  }
  for (const std::string& op : op_names()) {
    EXPECT_TRUE(with_properties.count(op))
        << op << ": no property registered (its family's register_<family>_properties, called for each family of the table)";
  }
  // The registry calls the families the build lists from the table, not a list of its own.
  EXPECT_NE(read(kSource / "properties" / "property_registry_builtin.cpp").find("#include \"property_families.inc\""),
            std::string::npos)
      << "properties/property_registry_builtin.cpp no longer registers the families the op table lists";
}

TEST(OpCatalogue, EveryOpHasSeedCasesAndAFuzzHarness) {
  // The build reads the table once (cmake/OpTable.cmake): a harness for each op, a properties
  // library for each family.
  EXPECT_NE(read(kSource / "cmake" / "OpTable.cmake").find("core/ops.def"), std::string::npos)
      << "cmake/OpTable.cmake no longer reads the op table";
  const std::string fuzz_cmake = read(kSource / "fuzz" / "CMakeLists.txt");
  EXPECT_NE(fuzz_cmake.find("${MLACHECK_OPS}"), std::string::npos) << "fuzz/CMakeLists.txt no longer takes the table's ops";
  EXPECT_NE(read(kSource / "properties" / "CMakeLists.txt").find("${MLACHECK_PROPERTY_FAMILIES}"), std::string::npos)
      << "properties/CMakeLists.txt no longer takes the table's properties families";
  for (const OpInfo& op : spec_ops()) {
    const std::string name(op.name);
    EXPECT_EQ(find_fuzz_target(name).op, name);
    int seeds = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(kSource / "corpus" / name, ec)) seeds += e.path().extension() == ".case";
    EXPECT_GT(seeds, 0) << name << ": no seed cases in corpus/" << name << "/";
    // Its harness is generated from the template (fuzz/CMakeLists.txt refuses a hand-written one).
    EXPECT_FALSE(fs::exists(kSource / "fuzz" / (name + "_fuzzer.cpp")))
        << name << ": fuzz/" << name << "_fuzzer.cpp is written by hand; the build generates it";
  }
  const std::string harness = read(kSource / "fuzz" / "op_fuzzer.cpp.in");
  EXPECT_NE(harness.find("MLACHECK_FUZZ_HARNESS(\"@OP@\")"), std::string::npos)
      << "fuzz/op_fuzzer.cpp.in no longer defines a harness for its op";
  EXPECT_NE(fuzz_cmake.find("configure_file(op_fuzzer.cpp.in"), std::string::npos)
      << "fuzz/CMakeLists.txt no longer generates the op harnesses";
}

TEST(OpCatalogue, EveryFloatOutputHasATolerance) {
  std::set<std::string> used;
  for (const OpInfo& op : spec_ops()) {
    std::istringstream entries{std::string(op.tolerances)};
    for (std::string entry; entries >> entry;) {
      const size_t colon = entry.find(':');
      ASSERT_NE(colon, std::string::npos) << op.name << ": tolerance '" << entry << "' is not op:output";
      const std::string of = entry.substr(0, colon), output = entry.substr(colon + 1);
      const auto& table = tolerance_table();
      EXPECT_TRUE(std::any_of(table.begin(), table.end(),
                              [&](const ToleranceEntry& t) { return t.op == of && t.output == output; }))
          << op.name << ": no tolerance " << entry << " in core/tolerances.cpp";
      used.insert(entry);
    }
  }
  for (const ToleranceEntry& t : tolerance_table()) {
    EXPECT_TRUE(used.count(std::string(t.op) + ":" + std::string(t.output)))
        << "core/tolerances.cpp has " << t.op << ":" << t.output << ", which no op of core/ops.def compares with";
  }
}

TEST(OpCatalogue, EveryOpIsAPluginEntryPointAndNothingElseIs) {
  std::set<std::string> pluggable;
  for (const std::string& op : kernels::plugin_ops()) {
    EXPECT_TRUE(op_names().count(op)) << "kernels/plugin.cpp offers '" << op << "', not an op of core/ops.def";
    pluggable.insert(op);
  }
  const std::string header = read(kSource / "include" / "mlacheck" / "plugin.h");
  for (const std::string& op : op_names()) {
    EXPECT_TRUE(pluggable.count(op)) << op << ": no plugin slot table in kernels/plugin.cpp";
    EXPECT_NE(header.find("\"" + op + "\""), std::string::npos) << op << ": include/mlacheck/plugin.h never names it";
  }
}

TEST(OpCatalogue, EveryOpsFileFamiliesExistAndItsSectionIsDocumented) {
  const std::string ops_md = read(kSource / "docs" / "ops.md");
  for (const OpInfo& op : spec_ops()) {
    const std::string name(op.name), kernels(op.kernels), properties(op.properties), section(op.section);
    EXPECT_TRUE(fs::exists(kSource / "kernels" / (kernels + ".h"))) << name << ": no kernels/" << kernels << ".h";
    EXPECT_TRUE(fs::exists(kSource / "properties" / (properties + "_gen.h"))) << name << ": no properties/" << properties << "_gen.h";
    EXPECT_TRUE(fs::exists(kSource / "properties" / (properties + "_properties.h")))
        << name << ": no properties/" << properties << "_properties.h";
    // Its section heading ("## 5. ..." or "### 2.1 ..."), and its name inside that section.
    const std::string heading = section.find('.') == std::string::npos ? "\n## " + section + ". " : "\n### " + section + " ";
    const size_t at = ops_md.find(heading);
    ASSERT_NE(at, std::string::npos) << name << ": docs/ops.md has no section " << section;
    const size_t end = ops_md.find("\n## ", at + heading.size());
    EXPECT_NE(ops_md.substr(at, end == std::string::npos ? std::string::npos : end - at).find("`" + name + "`"),
              std::string::npos)
        << name << ": docs/ops.md section " << section << " never names `" << name << "`";
  }
}

TEST(OpCatalogue, EveryOpIsInThePublicHeaders) {
  const std::string cases = read(kSource / "include" / "mlacheck" / "cases.h");
  const std::string properties = read(kSource / "include" / "mlacheck" / "properties.h");
  for (const OpInfo& op : spec_ops()) {
    const std::string family(op.properties);
    EXPECT_NE(cases.find("#include \"properties/" + family + "_gen.h\""), std::string::npos)
        << op.name << ": include/mlacheck/cases.h does not include properties/" << family << "_gen.h";
    EXPECT_NE(properties.find("#include \"properties/" + family + "_properties.h\""), std::string::npos)
        << op.name << ": include/mlacheck/properties.h does not include properties/" << family << "_properties.h";
  }
}

// A Python callable can implement every op: the bridge passes its arguments, and the worker's op
// list names it (a callable of an op missing there is refused as "not an op"); the package's
// mlacheck.OPS is that list, imported.
TEST(OpCatalogue, EveryOpHasAPythonBridge) {
  const std::string bridge = read(kSource / "kernels" / "python_bridge.cpp");
  const std::string package = read(kSource / "python" / "mlacheck" / "__init__.py");
  const std::string worker = read(kSource / "python" / "mlacheck" / "_worker.py");
  EXPECT_NE(package.find("from ._worker import OPS"), std::string::npos)
      << "python/mlacheck/__init__.py keeps a list of ops of its own again";
  for (const std::string& op : op_names()) {
    EXPECT_NE(bridge.find("add(\"" + op + "\""), std::string::npos)
        << op << ": kernels/python_bridge.cpp's op_arg_names_json() never passes its arguments";
    EXPECT_NE(worker.find("\"" + op + "\""), std::string::npos) << op << ": not in OPS of python/mlacheck/_worker.py";
  }
}

// The package example is what a kernel project copies: it must need nothing but the public API.
TEST(PublicApi, ThePackageExampleIncludesOnlyThePublicHeaders) {
  int quoted = 0;
  for (const auto& entry : fs::directory_iterator(kSource / "examples" / "package_consumer")) {
    if (entry.path().extension() != ".cpp" && entry.path().extension() != ".h") continue;
    std::istringstream lines(read(entry.path()));
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("#include \"", 0) != 0) continue;
      ++quoted;
      EXPECT_EQ(line.rfind("#include \"mlacheck/", 0), 0u)
          << entry.path().filename().string() << " includes a header outside include/mlacheck/: " << line;
    }
  }
  EXPECT_GT(quoted, 0) << "examples/package_consumer includes no mlacheck header at all";
}

}  // namespace
}  // namespace mlacheck
