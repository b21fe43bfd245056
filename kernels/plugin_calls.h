// What kernels/plugin.cpp and kernels/plugin_stateful.cpp share (not installed): the conversions
// between mlacheck's views and the C descriptors of include/mlacheck/plugin.h, the record of one
// plugin implementation, and the adapters that put a plugin's stateful objects behind mlacheck's
// MetadataBuilder, MlaDecodeImpl and IndexerDecodeStep.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "kernels/device.h"
#include "kernels/indexer_decode_step.h"
#include "kernels/metadata_builder.h"
#include "kernels/mla_decode_impl.h"
#include "mlacheck/plugin.h"

namespace mlacheck::kernels::plugin_calls {

// One implementation a plugin registered: "op@name", the plugin's name, its function as registered.
struct PluginImpl {
  std::string qualified, plugin;
  mlacheck_impl_fn fn = nullptr;
};

int32_t c_dtype(DType t);
// An absent tensor (no memory behind it) is data NULL, rank 0.
mlacheck_tensor c_tensor(const DeviceTensor& t);
mlacheck_device c_device(Device& device);

// A view the plugin returned, based at whichever known buffer holds its first element (the closest
// base at or below it), so a property can tell a view of a lent buffer from one of somewhere else. A
// NULL or malformed descriptor gives an empty tensor.
DeviceTensor cpp_tensor(const mlacheck_tensor& t, const std::vector<DeviceTensor>& known);

// Throws the one-line mlacheck::Error for a plugin call that returned rc != 0 ("what" is "the call",
// "the step", "to make a builder", ...), with the plugin's message or "it gave no reason".
[[noreturn]] void refused(const PluginImpl& impl, const std::string& what, int rc, const char* error);

// The adapters (kernels/plugin_stateful.cpp): mlacheck's base class allocates the persistent
// buffers (guarded, zeroed), the plugin's object is made over them, and every call goes through it.
std::unique_ptr<MetadataBuilder> make_metadata_builder(Device& device, const MetadataLimits& limits,
                                                       const PluginImpl& impl);
std::unique_ptr<MlaDecodeImpl> make_mla_decode_impl(Device& device, const MlaDecodeImplConfig& config,
                                                    const PluginImpl& impl);
std::unique_ptr<IndexerDecodeStep> make_indexer_decode_step(Device& device, const IndexerDecodeStepLimits& limits,
                                                            const PluginImpl& impl);

}  // namespace mlacheck::kernels::plugin_calls
