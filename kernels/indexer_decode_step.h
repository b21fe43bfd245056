// The indexer's decode step of docs/ops.md 6 as an engine runs it, written once in C++ over the op glue:
// metadata -> pack if non-uniform -> paged logits (unclean) -> top-k into padded rows -> unpack ->
// the token rows of the shared top-k buffer (prefill rows untouched) -> global KV slots.
//
//   IndexerDecodeStep step(device, limits);   // every scratch buffer allocated once, at its maximum
//   IndexerDecodeStepInputs in;               // the batch, q, weights, cache, the two output views
//   IndexerDecodeStepResult r = step.run(in); // launches on the device's stream; no synchronize
//
// Which route a step takes:
// - flattened layout (one row per token, next_n = 1): logits and top-k over the metadata's rows;
//   with graph padding (num_padded_tokens > T) top-k runs over every padded row into the step's own
//   padded buffer and the T token rows are copied out, so nothing is written past the token rows of
//   the shared buffer (docs/bugs.md R1);
// - native layout (one row per request, next_n' = max decode length columns): a uniform batch (every
//   d_b == next_n', no padding request) reads q, weights and writes top-k in place; otherwise q and
//   weights are packed left-aligned into [B, next_n'] slots (padding slots carry zero weights), and
//   top-k runs over the B * next_n' padded rows, unpacked back to token order with the explicit
//   next_n' (docs/bugs.md R2).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/guarded_buffer.h"
#include "kernels/device.h"
#include "kernels/metadata_builder.h"
#include "kernels/topk_glue.h"

namespace mlacheck::kernels {

struct IndexerDecodeStepLimits {
  MetadataLimits metadata;       // max tokens, max requests, configured next_n, block-table width
  int64_t heads = 64;            // H of index_q and of the weights
  int64_t head_dim = 128;        // D of index_q and of each cached key
  int64_t topk = 2048;           // k: columns of the top-k rows
  int64_t max_context_len = 0;   // the longest L_b of any step: columns of the logits buffer
};

struct IndexerDecodeStepInputs {
  // Device views and host copies as for MetadataBuilder::build; its layout and path choose the
  // route. With host_seq_lens given, lengths past max_context_len and block tables narrower than
  // a request needs are refused before any launch.
  MetadataBatch batch;
  DeviceTensor index_q;        // fp8 [T, H, D], contiguous, T = sum of decode_lens
  DeviceTensor index_weights;  // fp32 [T, H], contiguous
  DeviceTensor kv_blocks;      // u8 [num_blocks, block_stride]: the block-flat fp8 indexer cache
  int64_t block_size = 64;     // tokens per KV block (the page size of the block table)
  int64_t max_context_len = 0; // this step's logits columns: >= every L_b, <= the limit
  // Outputs: rows [0, T) of each are written and nothing else. topk_buffer is the shared buffer
  // int32 [max_tokens, topk] (its rows >= T belong to prefill tokens); topk_global int32 [>= T, topk]
  // gets the global KV slots. Unit column stride, any row stride; the two must not overlap.
  DeviceTensor topk_buffer;
  DeviceTensor topk_global;
};

struct IndexerDecodeStepResult {
  MetadataResult metadata;
  int64_t num_decode_tokens = 0;  // T
  int64_t rows = 0;               // rows of the logits and top-k launches
  int64_t next_n = 1;             // next_n of those launches: 1 (flattened) or next_n' (native)
  bool packed = false;            // q and weights were packed into [B, next_n'] slots
  bool padded_topk = false;       // top-k ran into the step's padded buffer, then unpack or copy
  TopkPath topk_path = TopkPath::kGeneral;
  // The logits the top-k read: fp32 [rows, max_context_len] (row stride: the limit's
  // max_context_len), unclean past each row's length; valid until the next run.
  DeviceTensor logits;
  std::vector<int64_t> logits_row_of_token;  // [T]: the logits row of each token
  DeviceTensor topk;    // int32 [T, topk]: rows [0, T) of the shared buffer
  DeviceTensor global;  // int32 [T, topk]: rows [0, T) of topk_global
};

class IndexerDecodeStep {
 public:
  // Allocates the metadata buffers, the packed q and weights [max_requests * next_n, ...], the
  // logits [max rows, max_context_len], the padded top-k rows and the top-k workspace, once. Max
  // rows = max(max_batched_tokens, max_requests * next_n). Throws for limits that are not positive.
  IndexerDecodeStep(Device& device, const IndexerDecodeStepLimits& limits);
  IndexerDecodeStep(const IndexerDecodeStep&) = delete;
  IndexerDecodeStep& operator=(const IndexerDecodeStep&) = delete;
  virtual ~IndexerDecodeStep();

  // Checks every input against the limits and the others (one-line mlacheck::Error before any
  // launch), then launches the step on the device's stream. Does not synchronize.
  virtual IndexerDecodeStepResult run(const IndexerDecodeStepInputs& in);

  const IndexerDecodeStepLimits& limits() const { return limits_; }
  int64_t max_rows() const { return max_rows_; }
  MetadataBuilder& metadata_builder() { return metadata_; }
  // The persistent scratch, for guarded checks and address-stability tests.
  GuardedMemory& packed_q_memory() { return *packed_q_; }
  GuardedMemory& packed_weights_memory() { return *packed_weights_; }
  GuardedMemory& logits_memory() { return *logits_; }
  GuardedMemory& padded_topk_memory() { return *padded_topk_; }
  GuardedMemory& workspace_memory() { return *workspace_; }

 protected:
  // The decisions run() makes that docs/bugs.md's rows R1 and R2 get wrong, each returning the
  // production answer; a seeded-bug variant (kernels/mutants/) overrides one, so @ref and the
  // variants run this same run().
  // Flattened with graph padding: how many of the padded top-k rows go into the shared buffer.
  virtual int64_t rows_into_shared_buffer(const IndexerDecodeStepResult& r, const IndexerDecodeStepInputs& in) const;
  // Native and packed: the slots per request the padded top-k rows are regrouped by to unpack.
  virtual int64_t unpack_next_n(const IndexerDecodeStepResult& r) const;

  Device& device_;
  IndexerDecodeStepLimits limits_;
  int64_t max_rows_ = 0;
  MetadataBuilder metadata_;
  std::unique_ptr<GuardedMemory> packed_q_;
  std::unique_ptr<GuardedMemory> packed_weights_;
  std::unique_ptr<GuardedMemory> logits_;
  std::unique_ptr<GuardedMemory> padded_topk_;
  std::unique_ptr<GuardedMemory> workspace_;
};

}  // namespace mlacheck::kernels
