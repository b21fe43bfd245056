// The dense MLA decode implementation object an engine holds (docs/ops.md 5), over the split-KV kernels
// of kernels/mla_decode.h: it owns its workspace, sized once for the worst case it is configured for
// and never reallocated; it takes the softmax and output scales from every call; it refuses
// non-uniform query lengths; and it captures a decode into a graph for a padded batch size, over
// fixed buffers it owns, replayable after new q, seq_lens and block_table are written into them.
//
//   MlaDecodeImpl impl(device, {max_batch, max_q_len, heads, max_splits, block_table_width});
//   impl.forward(call);                       // eager: scales from this call, splits from its lengths
//   auto g = impl.capture(B_pad, q_len, kv_cache, base_scale, q_scale, k_scale);
//   ... write q, seq_lens, block_table of the step into impl.graph_buffers(B_pad, q_len) ...
//   g->replay();                              // split bounds come from the device seq_lens
//
// On the host backend a capture records the launch sequence and a replay runs it again against the
// same buffers, so the replay checks run in CI too.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "core/guarded_buffer.h"
#include "kernels/device.h"
#include "kernels/mla_decode.h"

namespace mlacheck::kernels {

struct MlaDecodeImplConfig {
  int64_t max_batch = 0;          // requests per call (graph: the largest padded batch)
  int64_t max_q_len = 1;          // 1..kMlaMaxQueryLen
  int64_t heads = 0;              // H of q
  int64_t max_splits = 16;        // 1..kMlaMaxSplits: splits per row the workspace holds
  int64_t block_table_width = 0;  // W of the graph block table
  int64_t page = 64;              // tokens per KV block (graph mode: with W, the longest sequence)
  DType q_dtype = DType::kBF16;   // dtype of the graph q buffer: bf16 or fp8 e4m3
};

// One eager call. Tensors as in MlaDecodeArgs (kernels/mla_decode_glue.h).
struct MlaDecodeCall {
  DeviceTensor q;            // [B, q_len, H, 576], bf16 or fp8
  DeviceTensor kv_cache;     // [num_blocks, page, 576], bf16 or fp8
  DeviceTensor block_table;  // int32 [B, W]
  DeviceTensor seq_lens;     // int32 [B]
  // The query tokens of each request in this step (the differences of query_start_loc): every one
  // must equal q's q_len. Empty: the caller vouches that the batch is uniform.
  std::vector<int32_t> host_query_lens;
  // Optional host copy of seq_lens: the split count follows its longest entry (otherwise W * page),
  // and bad lengths and narrow block tables are refused before the launch.
  std::vector<int32_t> host_seq_lens;
  double base_scale = 1.0;  // softmax scale = base_scale * q_scale * k_scale, output scale = k_scale,
  double q_scale = 1.0;     // both taken from this call
  double k_scale = 1.0;
  DeviceTensor o;    // bf16 [B, q_len, H, 512]
  DeviceTensor lse;  // fp32 [B, q_len, H]
};

// Views of the impl's fixed graph buffers for one padded batch: the first B_pad rows of each.
struct MlaGraphBuffers {
  DeviceTensor q;            // [B_pad, q_len, H, 576] of the configured q dtype
  DeviceTensor seq_lens;     // int32 [B_pad]
  DeviceTensor block_table;  // int32 [B_pad, W]
  DeviceTensor o;            // bf16 [B_pad, q_len, H, 512]
  DeviceTensor lse;          // fp32 [B_pad, q_len, H]
};

class MlaDecodeImpl {
 public:
  // Allocates the workspace (max_batch x max_q_len x heads x max_splits rows of 513 floats) and the
  // graph buffers once; zeroes seq_lens so an unwritten padding row is an empty request. Throws for
  // a configuration out of range.
  MlaDecodeImpl(Device& device, const MlaDecodeImplConfig& config);
  MlaDecodeImpl(const MlaDecodeImpl&) = delete;
  MlaDecodeImpl& operator=(const MlaDecodeImpl&) = delete;
  virtual ~MlaDecodeImpl();

  // Checks the call (one line before any launch: non-uniform query lengths, a batch or q_len past
  // the configuration, ...), picks the split count for its lengths and launches both stages on the
  // device's stream into the impl's workspace. Does not synchronize.
  virtual void forward(const MlaDecodeCall& call);

  // Records one decode over the first padded_batch rows of the graph buffers with these scales and
  // the split count for the longest sequence the graph block table can hold. Nothing runs until a
  // replay; every replay reads the buffers' contents at that time.
  virtual std::unique_ptr<DeviceGraph> capture(int64_t padded_batch, int64_t q_len, const DeviceTensor& kv_cache,
                                               double base_scale, double q_scale, double k_scale);
  MlaGraphBuffers graph_buffers(int64_t padded_batch, int64_t q_len) const;

  // The split count the heuristic gives a batch of this shape whose longest sequence is max_seq_len,
  // clamped to the configuration's max_splits.
  int64_t splits_for(int64_t batch, int64_t q_len, int64_t max_seq_len) const;
  int64_t last_num_splits() const { return last_num_splits_; }

  const MlaDecodeImplConfig& config() const { return config_; }
  GuardedMemory& workspace_memory() { return *workspace_; }
  GuardedMemory& graph_q_memory() { return *q_; }
  GuardedMemory& graph_seq_lens_memory() { return *seq_lens_; }
  GuardedMemory& graph_block_table_memory() { return *block_table_; }
  GuardedMemory& graph_o_memory() { return *o_; }
  GuardedMemory& graph_lse_memory() { return *lse_; }

 protected:
  // The checked launch of both stages into the workspace, eager or inside a capture. Virtual for
  // docs/bugs.md's T4, whose variant gives each launch its own scratch, freed when it returns.
  virtual void launch(const MlaDecodeCall& call, int64_t num_splits);
  // How many columns of the graph block table a capture launches over (the key range a replay can
  // reach is columns x page): all of them. The decision docs/bugs.md's T1 gets wrong; its seeded
  // variant (kernels/mutants/) overrides it, so @ref and T1 run this same capture().
  virtual int64_t graph_table_columns(int64_t padded_batch);

  Device& device_;
  MlaDecodeImplConfig config_;
  int64_t last_num_splits_ = 0;
  std::unique_ptr<GuardedMemory> workspace_;
  std::unique_ptr<GuardedMemory> q_, seq_lens_, block_table_, o_, lse_;
};

}  // namespace mlacheck::kernels
