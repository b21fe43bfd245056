// Plugins: shared libraries of kernels written against include/mlacheck/plugin.h, loaded into the
// implementation registry (kernels/registry.h) beside the built-in ones.
//
// Each implementation a plugin registers becomes "<op>@<name>" with the op's C++ entry-point type,
// so every property, fuzzer, corpus case and command that takes an implementation takes it too.
// A call converts the views to the C tensor descriptors (data pointer at element 0, shape, strides
// in elements), calls the plugin, and turns a non-zero return into mlacheck::Error carrying the
// plugin's message. The libraries stay loaded for the life of the process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

struct mlacheck_plugin_info;

namespace mlacheck::kernels {

struct LoadedPlugin {
  std::string path, name;                    // name: the one the plugin gives itself
  uint32_t abi_version = 0;                  // the plugin ABI version it was built against (1 to 5)
  std::vector<std::string> implementations;  // "op@name", in registration order
};

// Loads the plugin at path into registry(). Throws mlacheck::Error with one line naming path when
// the library cannot be opened, defines no mlacheck_plugin symbol, was built against a plugin ABI
// version this mlacheck does not speak, or its registration fails (an unknown op, a name taken, a
// bad name, a malformed contract, a contract from a version 1 plugin, the plugin's own refusal). A plugin that crashes while registering crashes the caller: see probe_plugin.
LoadedPlugin load_plugin(const std::string& path);

// Registers a plugin that is already in this process (kernels/python_bridge.cpp makes one whose
// functions call Python), exactly as load_plugin does once it has found info in a library; path
// names it in messages.
LoadedPlugin register_plugin(const mlacheck_plugin_info& info, const std::string& path);

// Loads the plugin in a forked child first (so a crash, hang or failure while it registers becomes
// an mlacheck::Error naming path and what happened), then in this process. The commands use this.
LoadedPlugin load_plugin_isolated(const std::string& path);

// The ops a plugin may implement (include/mlacheck/plugin.h), sorted.
std::vector<std::string> plugin_ops();

// The paths of $MLACHECK_PLUGIN (several separated by ':'), or none.
std::vector<std::string> plugin_paths_from_environment();

// How many implementations of one op all plugins together may register in a process.
constexpr int kMaxPluginImplementationsPerOp = 64;

}  // namespace mlacheck::kernels
