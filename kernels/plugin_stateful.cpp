// The adapters that put a plugin's stateful objects behind mlacheck's own classes (kernels/
// plugin_calls.h), so every stateful property drives them: the decode metadata builder, the MLA
// decode impl and the indexer decode step. The base class allocates the persistent buffers
// (guarded, zeroed) and lends them; a plugin's own allocations (mlacheck_allocator) are guarded too
// and their red zones checked after every call.
#include <algorithm>
#include <limits>
#include <utility>

#include "core/error.h"
#include "core/guarded_buffer.h"
#include "kernels/plugin_calls.h"

namespace mlacheck::kernels::plugin_calls {
namespace {

// ---- memory a plugin asks for ------------------------------------------------------------------

class Allocations {
 public:
  Allocations(Device& device, const PluginImpl& impl) : device_(device), impl_(impl) {}
  mlacheck_allocator c() { return {this, &allocate}; }

  // After a call: waits for it, then throws the first write past one of the plugin's allocations.
  void check() {
    if (memory_.empty()) return;
    device_.synchronize();
    for (const auto& m : memory_) {
      const GuardReport r = m->check();
      MLA_REQUIRE(r.ok(), impl_.qualified, " (plugin ", impl_.plugin, ") wrote past its own allocation: ",
                  r.describe());
    }
  }

 private:
  static constexpr int64_t kMaxBytes = int64_t(1) << 36;

  static int allocate(void* context, const char* name, int64_t bytes, void** data, char* error, size_t error_size) {
    auto& self = *static_cast<Allocations*>(context);
    const std::string n = name != nullptr && *name ? name : "unnamed";
    const auto fail = [&](const std::string& why) {
      if (error != nullptr && error_size > 0) std::snprintf(error, error_size, "%s", why.c_str());
      return 1;
    };
    if (data == nullptr) return fail("allocate '" + n + "': data is NULL");
    *data = nullptr;
    if (bytes < 0 || bytes > kMaxBytes) {
      return fail("allocate '" + n + "': " + std::to_string(bytes) + " bytes is outside [0, 2^36]");
    }
    try {
      std::unique_ptr<GuardedMemory> m = self.device_.allocate(self.impl_.qualified + " allocation " + n, bytes);
      if (bytes > 0) m->declare_output(n, View::contiguous(DType::kU8, {bytes}));
      m->arm();  // the red zones are checked from now on; the interior belongs to the plugin
      const std::vector<uint8_t> zeros(static_cast<size_t>(bytes), 0);
      if (bytes > 0) m->write(0, zeros.data(), bytes);
      *data = m->data();
      self.memory_.push_back(std::move(m));
      return 0;
    } catch (const Error& e) {
      return fail("allocate '" + n + "' (" + std::to_string(bytes) + " bytes): " + e.what());
    }
  }

  Device& device_;
  const PluginImpl& impl_;
  std::vector<std::unique_ptr<GuardedMemory>> memory_;
};

// Calls a plugin's object function and throws its refusal.
template <class Fn, class... Args>
void call_object(const PluginImpl& impl, const char* what, Fn fn, Args... args) {
  char error[1024] = "";
  const int rc = fn(args..., error, sizeof error);
  error[sizeof error - 1] = '\0';
  if (rc != 0) refused(impl, what, rc, error);
}

template <class TypedFn>
TypedFn typed(const PluginImpl& impl) {
  return reinterpret_cast<TypedFn>(reinterpret_cast<void (*)()>(impl.fn));
}

// ---- the decode metadata builder ------------------------------------------------------------------

mlacheck_decode_metadata_batch c_batch(const MetadataBatch& batch) {
  int64_t tokens = 0;
  for (int32_t d : batch.host_decode_lens) tokens += d;
  mlacheck_decode_metadata_batch c{};
  c.seq_lens = c_tensor(batch.seq_lens), c.decode_lens = c_tensor(batch.decode_lens);
  c.query_start_loc = c_tensor(batch.query_start_loc), c.block_table = c_tensor(batch.block_table);
  c.host_decode_lens = batch.host_decode_lens.data();
  c.host_seq_lens = batch.host_seq_lens.size() == batch.host_decode_lens.size() ? batch.host_seq_lens.data() : nullptr;
  c.batch_size = static_cast<int64_t>(batch.host_decode_lens.size());
  c.num_decode_tokens = batch.num_decode_tokens >= 0 ? batch.num_decode_tokens : tokens;
  c.num_padded_tokens = batch.num_padded_tokens >= 0 ? batch.num_padded_tokens : c.num_decode_tokens;
  c.layout = batch.layout == MetadataLayout::kNative ? 1 : 0;
  c.general_only = batch.path == MetadataPathChoice::kGeneral ? 1 : 0;
  return c;
}

mlacheck_decode_metadata_buffers c_metadata_buffers(MetadataBuilder& m, const MetadataLimits& limits) {
  const int64_t rows = limits.max_batched_tokens;
  return {c_tensor({m.seq_lens_memory().data(), View::contiguous(DType::kI32, {rows})}),
          c_tensor({m.decode_lens_memory().data(), View::contiguous(DType::kI32, {rows})}),
          c_tensor({m.block_table_memory().data(), View::contiguous(DType::kI32, {rows, limits.block_table_width})}),
          c_tensor({m.context_lens_memory().data(),
                    View::contiguous(DType::kI32, {limits.max_requests * limits.next_n})})};
}

// The metadata a plugin returned, its views based at the builder's buffers (or the batch's table).
MetadataResult cpp_metadata_result(const mlacheck_decode_metadata_result& r, MetadataBuilder& m,
                                   const MetadataBatch& batch) {
  MetadataResult out;
  out.layout = r.layout == 1 ? MetadataLayout::kNative : MetadataLayout::kFlattened;
  out.path = r.path == 0 ? MetadataPath::kUniform : r.path == 2 ? MetadataPath::kNative : MetadataPath::kGeneral;
  out.num_decode_tokens = r.num_decode_tokens;
  out.rows = r.rows;
  out.next_n_live = r.next_n_live;
  const std::vector<DeviceTensor> known = {{m.seq_lens_memory().data(), {}},    {m.decode_lens_memory().data(), {}},
                                           {m.block_table_memory().data(), {}}, {m.context_lens_memory().data(), {}},
                                           batch.block_table};
  out.seq_lens = cpp_tensor(r.seq_lens, known);
  out.block_table = cpp_tensor(r.block_table, known);
  out.decode_lens = cpp_tensor(r.decode_lens, known);
  out.context_lens = cpp_tensor(r.context_lens, known);
  return out;
}

class PluginMetadataBuilder final : public MetadataBuilder {
 public:
  PluginMetadataBuilder(Device& device, const MetadataLimits& limits, const PluginImpl& impl)
      : MetadataBuilder(device, limits), impl_(impl) {
    const mlacheck_decode_metadata_limits l{limits.max_batched_tokens, limits.max_requests, limits.next_n,
                                            limits.block_table_width};
    const mlacheck_decode_metadata_buffers b = c_metadata_buffers(*this, limits);
    device.synchronize();  // the buffers are zeroed before the plugin sees them
    const mlacheck_device d = c_device(device);
    call_object(impl, "to make a builder", typed<mlacheck_decode_metadata_fn>(impl), &d, &l, &b, &object_);
    MLA_REQUIRE(object_.build != nullptr, impl.qualified, " (plugin ", impl.plugin,
                ") made a builder without a build function");
  }
  ~PluginMetadataBuilder() override {
    if (object_.destroy != nullptr) object_.destroy(object_.state);
  }

  MetadataResult build(const MetadataBatch& batch) override {
    const mlacheck_decode_metadata_batch c = c_batch(batch);
    mlacheck_decode_metadata_result r{};
    const mlacheck_device d = c_device(device_);
    call_object(impl_, "the step", object_.build, object_.state, &d, &c, &r);
    // What the next step may have to reset: this one's live region (the rest it left zero).
    if (r.layout == 0) {
      flat_dirty_rows_ = std::max<int64_t>(0, r.num_decode_tokens);
    } else {
      native_dirty_elements_ = std::max<int64_t>(0, c.batch_size * r.next_n_live);
    }
    return cpp_metadata_result(r, *this, batch);
  }

 private:
  const PluginImpl& impl_;
  mlacheck_decode_metadata_builder object_{};
};

// ---- the MLA decode impl --------------------------------------------------------------------------

// The plugin's impl object, shared by the adapter and its graphs: destroyed after the last of them.
struct MlaObject {
  mlacheck_mla_decode_impl object{};
  ~MlaObject() {
    if (object.destroy != nullptr) object.destroy(object.state);
  }
};

class PluginMlaGraph final : public DeviceGraph {
 public:
  PluginMlaGraph(std::shared_ptr<MlaObject> object, void* graph, Device& device, const PluginImpl& impl,
                 std::shared_ptr<Allocations> allocations)
      : object_(std::move(object)), graph_(graph), device_(device), impl_(impl), allocations_(std::move(allocations)) {}
  ~PluginMlaGraph() override {
    if (object_->object.release != nullptr) object_->object.release(object_->object.state, graph_);
  }
  void replay() override {
    const mlacheck_device d = c_device(device_);
    call_object(impl_, "to replay a graph", object_->object.replay, object_->object.state, &d, graph_);
    allocations_->check();
  }
  size_t launch_count() const override { return 1; }  // the plugin's graph is one opaque launch to mlacheck

 private:
  std::shared_ptr<MlaObject> object_;
  void* graph_;
  Device& device_;
  const PluginImpl& impl_;
  std::shared_ptr<Allocations> allocations_;  // the impl's, shared: a graph may outlive the adapter
};

class PluginMlaDecodeImpl final : public MlaDecodeImpl {
 public:
  PluginMlaDecodeImpl(Device& device, const MlaDecodeImplConfig& config, const PluginImpl& impl)
      : MlaDecodeImpl(device, config),
        impl_(impl),
        allocations_(std::make_shared<Allocations>(device, impl)),
        object_(std::make_shared<MlaObject>()) {
    const mlacheck_mla_decode_impl_config c{config.max_batch, config.max_q_len,         config.heads,
                                            config.max_splits, config.block_table_width, config.page,
                                            c_dtype(config.q_dtype)};
    const mlacheck_tensor workspace =
        c_tensor({workspace_->data(), View::contiguous(DType::kF32, {workspace_->size() / 4})});
    const mlacheck_allocator allocator = allocations_->c();
    device.synchronize();  // the graph buffers are zeroed before the plugin sees them
    const mlacheck_device d = c_device(device);
    call_object(impl, "to make an impl", typed<mlacheck_mla_decode_impl_fn>(impl), &d, &c, &workspace, &allocator,
                &object_->object);
    const mlacheck_mla_decode_impl& o = object_->object;
    MLA_REQUIRE(o.forward != nullptr && o.capture != nullptr && o.replay != nullptr, impl.qualified, " (plugin ",
                impl.plugin, ") made an impl without ", o.forward == nullptr ? "a forward" : o.capture == nullptr ? "a capture" : "a replay",
                " function");
  }

  void forward(const MlaDecodeCall& call) override {
    mlacheck_mla_decode_call c{};
    c.q = c_tensor(call.q), c.kv_cache = c_tensor(call.kv_cache), c.block_table = c_tensor(call.block_table);
    c.seq_lens = c_tensor(call.seq_lens), c.o = c_tensor(call.o), c.lse = c_tensor(call.lse);
    if (!call.host_query_lens.empty()) {
      c.host_query_lens = call.host_query_lens.data();
      c.host_query_lens_count = static_cast<int64_t>(call.host_query_lens.size());
    }
    if (!call.host_seq_lens.empty()) {
      c.host_seq_lens = call.host_seq_lens.data();
      c.host_seq_lens_count = static_cast<int64_t>(call.host_seq_lens.size());
    }
    c.base_scale = call.base_scale, c.q_scale = call.q_scale, c.k_scale = call.k_scale;
    int64_t splits = 0;
    const mlacheck_device d = c_device(device_);
    call_object(impl_, "the call", object_->object.forward, object_->object.state, &d, &c, &splits);
    last_num_splits_ = splits;
    allocations_->check();
  }

  std::unique_ptr<DeviceGraph> capture(int64_t B, int64_t q_len, const DeviceTensor& kv_cache, double base_scale,
                                       double q_scale, double k_scale) override {
    const MlaGraphBuffers g = graph_buffers(B, q_len);  // one line for a shape past the configuration
    const View& kv = kv_cache.view;
    MLA_REQUIRE(kv.rank() == 3 && kv.size(1) == config_.page, impl_.qualified,
                ": the graph's cache must have pages of the configured ", config_.page, " tokens, got ", kv.to_string());
    mlacheck_mla_decode_capture c{};
    c.padded_batch = B, c.q_len = q_len;
    c.q = c_tensor(g.q), c.kv_cache = c_tensor(kv_cache), c.block_table = c_tensor(g.block_table);
    c.seq_lens = c_tensor(g.seq_lens), c.o = c_tensor(g.o), c.lse = c_tensor(g.lse);
    c.base_scale = base_scale, c.q_scale = q_scale, c.k_scale = k_scale;
    void* graph = nullptr;
    const mlacheck_device d = c_device(device_);
    call_object(impl_, "to capture a graph", object_->object.capture, object_->object.state, &d, &c, &graph);
    auto out = std::make_unique<PluginMlaGraph>(object_, graph, device_, impl_, allocations_);
    out->hold_freed_memory(device_.hold_freed_memory());
    allocations_->check();
    return out;
  }

 private:
  const PluginImpl& impl_;
  std::shared_ptr<Allocations> allocations_;
  std::shared_ptr<MlaObject> object_;  // declared last, so the plugin's state goes before its memory
};

// ---- the indexer decode step ----------------------------------------------------------------------

class PluginIndexerDecodeStep final : public IndexerDecodeStep {
 public:
  PluginIndexerDecodeStep(Device& device, const IndexerDecodeStepLimits& limits, const PluginImpl& impl)
      : IndexerDecodeStep(device, limits), impl_(impl), allocations_(device, impl) {
    const MetadataLimits& m = limits.metadata;
    const mlacheck_indexer_decode_step_limits l{
        {m.max_batched_tokens, m.max_requests, m.next_n, m.block_table_width},
        limits.heads, limits.head_dim, limits.topk, limits.max_context_len};
    const int64_t slots = m.max_requests * m.next_n;
    const mlacheck_indexer_decode_step_buffers b{
        c_metadata_buffers(metadata_, m),
        c_tensor({packed_q_->data(), View::contiguous(DType::kFP8E4M3, {slots, limits.heads, limits.head_dim})}),
        c_tensor({packed_weights_->data(), View::contiguous(DType::kF32, {slots, limits.heads})}),
        c_tensor({logits_->data(), View::contiguous(DType::kF32, {max_rows_, limits.max_context_len})}),
        c_tensor({padded_topk_->data(), View::contiguous(DType::kI32, {max_rows_, limits.topk})}),
        c_tensor({workspace_->data(), View::contiguous(DType::kU8, {workspace_->size()})})};
    const mlacheck_allocator allocator = allocations_.c();
    device.synchronize();
    const mlacheck_device d = c_device(device);
    call_object(impl, "to make a step", typed<mlacheck_indexer_decode_step_fn>(impl), &d, &l, &b, &allocator, &object_);
    MLA_REQUIRE(object_.run != nullptr, impl.qualified, " (plugin ", impl.plugin, ") made a step without a run function");
  }
  ~PluginIndexerDecodeStep() override {
    if (object_.destroy != nullptr) object_.destroy(object_.state);
  }

  IndexerDecodeStepResult run(const IndexerDecodeStepInputs& in) override {
    mlacheck_indexer_decode_step_inputs c{};
    c.batch = c_batch(in.batch);
    c.index_q = c_tensor(in.index_q), c.index_weights = c_tensor(in.index_weights), c.kv_blocks = c_tensor(in.kv_blocks);
    c.block_size = in.block_size, c.max_context_len = in.max_context_len;
    c.topk_buffer = c_tensor(in.topk_buffer), c.topk_global = c_tensor(in.topk_global);
    const int64_t capacity = limits_.metadata.max_batched_tokens;
    std::vector<int64_t> rows_of_token(static_cast<size_t>(capacity), -1);
    mlacheck_indexer_decode_step_result r{};
    r.logits_row_of_token = rows_of_token.data();
    const mlacheck_device d = c_device(device_);
    call_object(impl_, "the step", object_.run, object_.state, &d, &c, &r);
    allocations_.check();

    IndexerDecodeStepResult out;
    out.metadata = cpp_metadata_result(r.metadata, metadata_, in.batch);
    out.num_decode_tokens = r.num_decode_tokens;
    out.rows = r.rows;
    out.next_n = r.next_n;
    out.packed = r.packed != 0;
    out.padded_topk = r.padded_topk != 0;
    out.topk_path = TopkPath::kUnstated;  // the plugin's paths are its own
    out.logits = cpp_tensor(r.logits, {{logits_->data(), {}}});
    const int64_t T = std::clamp<int64_t>(c.batch.num_decode_tokens, 0, capacity);
    out.logits_row_of_token.assign(rows_of_token.begin(), rows_of_token.begin() + T);
    out.topk = cpp_tensor(r.topk, {in.topk_buffer, in.topk_global});
    out.global = cpp_tensor(r.global, {in.topk_buffer, in.topk_global});
    return out;
  }

 private:
  const PluginImpl& impl_;
  Allocations allocations_;
  mlacheck_indexer_decode_step object_{};
};

}  // namespace

std::unique_ptr<MetadataBuilder> make_metadata_builder(Device& device, const MetadataLimits& limits,
                                                       const PluginImpl& impl) {
  return std::make_unique<PluginMetadataBuilder>(device, limits, impl);
}
std::unique_ptr<MlaDecodeImpl> make_mla_decode_impl(Device& device, const MlaDecodeImplConfig& config,
                                                    const PluginImpl& impl) {
  return std::make_unique<PluginMlaDecodeImpl>(device, config, impl);
}
std::unique_ptr<IndexerDecodeStep> make_indexer_decode_step(Device& device, const IndexerDecodeStepLimits& limits,
                                                            const PluginImpl& impl) {
  return std::make_unique<PluginIndexerDecodeStep>(device, limits, impl);
}

}  // namespace mlacheck::kernels::plugin_calls
