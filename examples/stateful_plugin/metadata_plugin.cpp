// An example stateful plugin: the indexer's decode metadata builder (docs/ops.md 1) as a kernel engineer
// would write one against include/mlacheck/plugin.h alone, registered as decode_metadata@example.
// The builder lives across steps: it remembers how far its last steps wrote, so a smaller step
// resets the rows a larger one left (the stale-row bug of a persistent buffer). Built with
// METADATA_PLUGIN_BUG=1 it is its twin, decode_metadata@example_buggy, which forgets that and resets
// only its own padding: mlacheck must catch it.
//
//   mlacheck check --plugin ./libmlacheck_metadata_plugin.so
//   mlacheck check --plugin ./libmlacheck_metadata_plugin_buggy.so   # FAIL: stale rows, with the case
#include <new>

#include "metadata_step.h"
#include "mlacheck/plugin.h"

namespace example_metadata {
namespace {

#if METADATA_PLUGIN_BUG
constexpr const char* kName = "example_buggy";
constexpr const char* kSummary = "example builder's twin: a smaller step leaves a larger one's rows behind";
#else
constexpr const char* kName = "example";
constexpr const char* kSummary = "example builder: one kernel per layout, resets what its last steps wrote";
#endif

void destroy(void* state) { delete static_cast<Builder*>(state); }

int make(const mlacheck_device* device, const mlacheck_decode_metadata_limits* limits,
         const mlacheck_decode_metadata_buffers* buffers, mlacheck_decode_metadata_builder* out, char* error,
         size_t error_size) {
#if !METADATA_PLUGIN_CUDA
  if (device->backend != MLACHECK_BACKEND_HOST) return mlacheck_error(error, error_size, "built without CUDA: host only");
#else
  (void)device;
#endif
  Builder* s = new (std::nothrow) Builder{*limits, *buffers};
  if (s == nullptr) return mlacheck_error(error, error_size, "out of memory");
  *out = mlacheck_decode_metadata_builder{s, &build, &destroy};
  return 0;
}

#if !METADATA_PLUGIN_CUDA
}  // namespace
int launch_flat(const FlatStep&, void*) { return 1; }
int launch_native(const NativeStep&, void*) { return 1; }
namespace {
#endif

int register_impls(const mlacheck_plugin_api* api) {
  return MLACHECK_ADD_DECODE_METADATA(api, kName, kSummary, make);
}

}  // namespace
}  // namespace example_metadata

MLACHECK_DEFINE_PLUGIN("example_metadata", example_metadata::register_impls)
