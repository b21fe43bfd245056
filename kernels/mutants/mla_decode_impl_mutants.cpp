// MLA decode impl seeded bugs (kernels/mutants/mutants.h): the production impl (kernels/
// mla_decode_impl.h) with one wrong decision about its scales, its workspace or its captures, each
// overriding only the call where that decision is made.
#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/mla_decode.h"
#include "kernels/mla_decode_impl.h"
#include "kernels/mutants/mutants.h"

namespace mlacheck::kernels {

namespace {

// K1 (vLLM #41778): the softmax and output scales are taken from the first call (in vLLM a
// profiling run with scale 1.0) and kept: later calls and captures launch with them.
class ScalesCachedOnFirstCall final : public MlaDecodeImpl {
 public:
  using MlaDecodeImpl::MlaDecodeImpl;
  void forward(const MlaDecodeCall& call) override {
    MlaDecodeCall c = call;
    use_cached(c.base_scale, c.q_scale, c.k_scale);
    MlaDecodeImpl::forward(c);
  }
  std::unique_ptr<DeviceGraph> capture(int64_t padded_batch, int64_t q_len, const DeviceTensor& kv_cache,
                                       double base_scale, double q_scale, double k_scale) override {
    use_cached(base_scale, q_scale, k_scale);
    return MlaDecodeImpl::capture(padded_batch, q_len, kv_cache, base_scale, q_scale, k_scale);
  }

 private:
  void use_cached(double& base, double& q, double& k) {
    if (!cached_) cached_ = std::array<double, 3>{base, q, k};
    base = (*cached_)[0], q = (*cached_)[1], k = (*cached_)[2];
  }
  std::optional<std::array<double, 3>> cached_;
};

// The workspace's size, as the constructor allocates it.
int64_t full_workspace_bytes(const MlaDecodeImplConfig& c) {
  return 4 * mla_decode_workspace_floats(c.max_batch, c.max_q_len, c.heads, c.max_splits);
}

// T2 (vLLM #42885): the split workspace is allocated afresh for every eager call, so a graph
// captured earlier keeps the address of a workspace that a later call freed.
class WorkspacePerCall final : public MlaDecodeImpl {
 public:
  using MlaDecodeImpl::MlaDecodeImpl;
  void forward(const MlaDecodeCall& call) override {
    workspace_ = device_.allocate("mla workspace", full_workspace_bytes(config_));
    MlaDecodeImpl::forward(call);
  }
};

// T3 (TensorRT-LLM #15534, #16290): a capture gets its split workspace as per-call scratch,
// allocated for the call and freed when it returns, as a torch::empty in the op would be: the
// graph keeps its address and every replay writes memory the allocator has taken back. Eager calls
// use the impl's workspace, so every eager result and every replay's result is right; only what
// the freed bytes are given to next goes wrong.
class WorkspacePerCapture final : public MlaDecodeImpl {
 public:
  using MlaDecodeImpl::MlaDecodeImpl;
  std::unique_ptr<DeviceGraph> capture(int64_t padded_batch, int64_t q_len, const DeviceTensor& kv_cache,
                                       double base_scale, double q_scale, double k_scale) override {
    std::unique_ptr<GuardedMemory> scratch = device_.allocate("mla capture scratch", full_workspace_bytes(config_));
    workspace_.swap(scratch);  // the captured launches use the scratch
    std::unique_ptr<DeviceGraph> graph;
    try {
      graph = MlaDecodeImpl::capture(padded_batch, q_len, kv_cache, base_scale, q_scale, k_scale);
    } catch (...) {
      workspace_.swap(scratch);
      throw;
    }
    workspace_.swap(scratch);
    return graph;  // and scratch is freed here
  }
};

// T4 (TensorRT-LLM #15534, #16290, the workspace as a torch::empty inside the op): every launch
// takes its split workspace as scratch allocated for the call and freed when the call returns. Eager
// calls are right (the scratch outlives its kernels on the stream). Inside a capture the scratch is
// freed before the capture even ends, so the graph holds an address the allocator has taken back
// at its first replay; each replay's result is still right.
class WorkspacePerLaunch final : public MlaDecodeImpl {
 public:
  using MlaDecodeImpl::MlaDecodeImpl;

 protected:
  void launch(const MlaDecodeCall& call, int64_t num_splits) override {
    std::unique_ptr<GuardedMemory> scratch = device_.allocate("mla per-call scratch", full_workspace_bytes(config_));
    workspace_.swap(scratch);
    try {
      MlaDecodeImpl::launch(call, num_splits);
    } catch (...) {
      workspace_.swap(scratch);
      throw;
    }
    workspace_.swap(scratch);
  }  // the scratch is freed here, inside the capture when a capture made the call
};

// K3 (vLLM #41778): the workspace is sized for the q_len of the first call's shape (one token)
// instead of the configured maximum, and grown by a new allocation when a call needs more; the old
// one is kept, never released, and every graph captured before holds a stale address.
class WorkspaceGrownOnDemand final : public MlaDecodeImpl {
 public:
  WorkspaceGrownOnDemand(Device& device, const MlaDecodeImplConfig& c) : MlaDecodeImpl(device, c) {
    workspace_ = device_.allocate("mla workspace",
                                  4 * mla_decode_workspace_floats(c.max_batch, 1, c.heads, c.max_splits));
  }
  void forward(const MlaDecodeCall& call) override {
    const View& q = call.q.view;
    if (q.rank() == 4) {
      const int64_t need = 4 * mla_decode_workspace_floats(q.size(0), q.size(1), config_.heads, config_.max_splits);
      if (need > workspace_->size()) {
        retired_.push_back(std::move(workspace_));
        workspace_ = device_.allocate("mla workspace", need);
      }
    }
    MlaDecodeImpl::forward(call);
  }

 private:
  std::vector<std::unique_ptr<GuardedMemory>> retired_;
};

// T1 (vLLM #42885): a captured graph's key range comes from the host's max_seq_len at capture
// time instead of the device seq_lens at replay, so replaying with longer sequences drops keys. Here
// the production capture asks for the block-table columns and gets those that cover the longest
// length in the graph seq_lens at capture only (the kernel clamps each row to width x page keys).
class KeyRangeFromCaptureTime final : public MlaDecodeImpl {
 public:
  using MlaDecodeImpl::MlaDecodeImpl;
  int64_t graph_table_columns(int64_t B) override {
    std::vector<int32_t> lens(static_cast<size_t>(B));
    graph_seq_lens_memory().read(0, lens.data(), 4 * B);
    int64_t longest = 1;
    for (int32_t l : lens) longest = std::max<int64_t>(longest, l);
    return std::min<int64_t>(config_.block_table_width, (longest + config_.page - 1) / config_.page);
  }
};

// K2 (vLLM #41778): non-uniform query lengths "handled" by viewing q as one token per row: q's T
// token rows become T requests of q_len 1, while block_table and seq_lens still hold the B
// requests' rows, so the kernel reads T rows of them (rows past B are whatever the buffers hold).
class QueryUnsqueezedPerToken final : public MlaDecodeImpl {
 public:
  using MlaDecodeImpl::MlaDecodeImpl;
  void forward(const MlaDecodeCall& call) override {
    const View& q = call.q.view;
    const bool uniform = call.host_query_lens.empty() || q.rank() != 4 ||
                         std::all_of(call.host_query_lens.begin(), call.host_query_lens.end(),
                                     [&](int32_t n) { return n == q.size(1); });
    if (uniform || static_cast<int64_t>(call.host_query_lens.size()) == q.size(0)) {
      MlaDecodeImpl::forward(call);
      return;
    }
    MlaDecodeCall c = call;
    const int64_t T = q.size(0) * q.size(1);
    c.q = {call.q.base, View::contiguous(q.dtype(), {T, 1, q.size(2), q.size(3)})};
    const View& t = call.block_table.view;
    c.block_table = {call.block_table.base, View(t.dtype(), {T, t.size(1)}, {t.stride(0), 1}, t.byte_offset())};
    c.seq_lens = {call.seq_lens.base, View::contiguous(DType::kI32, {T}, call.seq_lens.view.byte_offset())};
    c.host_query_lens.clear();  // the unsqueezed batch looks uniform
    c.host_seq_lens.clear();    // B of them would not match T rows
    c.o = {call.o.base, View::contiguous(call.o.view.dtype(), {T, 1, call.o.view.size(2), call.o.view.size(3)},
                                         call.o.view.byte_offset())};
    c.lse = {call.lse.base, View::contiguous(DType::kF32, {T, 1, call.lse.view.size(2)}, call.lse.view.byte_offset())};
    MlaDecodeImpl::forward(c);
  }
};


}  // namespace

void register_mla_decode_impl_mutants(Registry& reg) {
  reg.add({"mla_decode_impl", "K1",
           "seeded bug K1 (vLLM #41778): softmax and output scales kept from the first call, never recomputed"},
          &make_variant<ScalesCachedOnFirstCall, MlaDecodeImpl, MlaDecodeImplConfig>);
  reg.add({"mla_decode_impl", "K2",
           "seeded bug K2 (vLLM #41778): non-uniform query lengths run as one token per row; block_table and seq_lens "
           "keep B rows"},
          &make_variant<QueryUnsqueezedPerToken, MlaDecodeImpl, MlaDecodeImplConfig>);
  reg.add({"mla_decode_impl", "T1",
           "seeded bug T1 (vLLM #42885): a graph's key range fixed by the capture-time max_seq_len; replay drops keys"},
          &make_variant<KeyRangeFromCaptureTime, MlaDecodeImpl, MlaDecodeImplConfig>);
  reg.add({"mla_decode_impl", "T2",
           "seeded bug T2 (vLLM #42885): split workspace allocated per eager call; a captured graph keeps a freed one"},
          &make_variant<WorkspacePerCall, MlaDecodeImpl, MlaDecodeImplConfig>);
  reg.add({"mla_decode_impl", "T3",
           "seeded bug T3 (TensorRT-LLM #15534, #16290): a capture's split workspace is per-call scratch, freed when "
           "capture returns; replays write freed memory"},
          &make_variant<WorkspacePerCapture, MlaDecodeImpl, MlaDecodeImplConfig>);
  reg.add({"mla_decode_impl", "T4",
           "seeded bug T4 (TensorRT-LLM #15534, #16290): each launch's split workspace is per-call scratch, freed "
           "inside the captured call; replays write freed memory"},
          &make_variant<WorkspacePerLaunch, MlaDecodeImpl, MlaDecodeImplConfig>);
  reg.add({"mla_decode_impl", "K3",
           "seeded bug K3 (vLLM #41778): workspace sized for q_len 1 and grown per call, the old one kept"},
          &make_variant<WorkspaceGrownOnDemand, MlaDecodeImpl, MlaDecodeImplConfig>);
}

}  // namespace mlacheck::kernels
