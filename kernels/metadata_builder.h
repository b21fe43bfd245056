// The indexer's decode metadata builder (docs/ops.md 1): persistent output buffers, allocated once at
// their maximum size, and a per-step build() that checks the batch, picks the uniform fast kernel or
// the general one, resets the tail it owns and returns views of the outputs.
//
//   MetadataBuilder builder(device, {max_batched_tokens, max_requests, next_n, block_table_width});
//   MetadataBatch batch;  // device seq_lens, decode_lens, query_start_loc, block_table + host decode_lens
//   MetadataResult m = builder.build(batch);  // m.seq_lens, m.block_table, m.decode_lens (flattened)
//
// The builder owns its buffers; the device must outlive it. Buffer addresses never change across
// steps (a captured CUDA graph keeps reading the same memory), and after every build each buffer
// holds zeros everywhere outside the live region the returned views cover, so a smaller step never
// hands on rows of a larger one, and graph-padding rows read as zeros.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/guarded_buffer.h"
#include "kernels/decode_metadata.h"
#include "kernels/device.h"

namespace mlacheck::kernels {

struct MetadataLimits {
  int64_t max_batched_tokens = 0;  // rows of the flattened buffers
  int64_t max_requests = 0;        // B at most; rows of the native buffer
  int32_t next_n = 1;              // configured query tokens per request (1 + speculative tokens)
  int64_t block_table_width = 0;   // W at most; columns of the flattened block table
};

enum class MetadataLayout {
  kFlattened,  // one row per token: seq_lens [T], block_table [T, W], decode_lens [T]
  kNative,     // one row per request: context_lens [B, next_n'] C-contiguous, the source block_table
};

// Which kernel produced the result.
enum class MetadataPath { kUniform, kGeneral, kNative };

// kAuto takes the uniform fast kernel exactly when every d_b is equal and none is 0; kGeneral always
// takes the general kernel (the reference the fast path must match bit for bit).
enum class MetadataPathChoice { kAuto, kGeneral };

// One step's decode requests. Device tensors are int32 views on the builder's device: seq_lens [B]
// and decode_lens [B] and query_start_loc [B + 1] contiguous (any byte offset), block_table [B, W]
// with unit column stride and any row stride. query_start_loc must hold the prefix sums of
// decode_lens (it lives on the device, so only its shape is checked).
struct MetadataBatch {
  DeviceTensor seq_lens;
  DeviceTensor decode_lens;
  DeviceTensor query_start_loc;
  DeviceTensor block_table;
  // The host copy of decode_lens (vLLM keeps it on the CPU): it sizes the step and picks the path.
  std::vector<int32_t> host_decode_lens;
  // Optional host copy of seq_lens; when given (size B) it is checked for negative lengths.
  std::vector<int32_t> host_seq_lens;
  // The scheduler's token count; must equal the sum of decode_lens (-1: take that sum).
  int64_t num_decode_tokens = -1;
  // Flattened only: the rows the consumer will read (CUDA-graph padding), >= num_decode_tokens;
  // rows past num_decode_tokens come out zero. -1: num_decode_tokens.
  int64_t num_padded_tokens = -1;
  MetadataLayout layout = MetadataLayout::kFlattened;
  MetadataPathChoice path = MetadataPathChoice::kAuto;
};

// Views of the builder's buffers (valid until the next build; the addresses stay the same).
struct MetadataResult {
  MetadataLayout layout = MetadataLayout::kFlattened;
  MetadataPath path = MetadataPath::kGeneral;
  int64_t num_decode_tokens = 0;
  int64_t rows = 0;         // flattened: rows of the views (num_padded_tokens)
  int32_t next_n_live = 0;  // next_n' = max_b d_b
  // Flattened: seq_lens int32 [rows] and decode_lens int32 [rows] contiguous, block_table int32
  // [rows, W] with row stride block_table_width. Native: block_table is the batch's own view and
  // seq_lens / decode_lens are empty.
  DeviceTensor seq_lens;
  DeviceTensor block_table;
  DeviceTensor decode_lens;
  // Native: int32 [B, next_n'] C-contiguous (strides (next_n', 1)). Empty in the flattened layout.
  DeviceTensor context_lens;
};

// What build() learns from checking a batch.
struct MetadataStepShape {
  int32_t B = 0;
  int64_t num_tokens = 0;
  int64_t rows = 0;  // flattened views' rows
  int32_t min_len = 0, max_len = 0;
};
// Checks a batch against the contract and the limits (what build() does first); throws
// mlacheck::Error with one line when it breaks them.
MetadataStepShape check_metadata_batch(const MetadataBatch& batch, const MetadataLimits& limits);

class MetadataBuilder {
 public:
  // Allocates every output buffer at its maximum size and zeroes it (on the device's stream).
  // Throws mlacheck::Error for limits that are not positive.
  MetadataBuilder(Device& device, const MetadataLimits& limits);
  MetadataBuilder(const MetadataBuilder&) = delete;
  MetadataBuilder& operator=(const MetadataBuilder&) = delete;
  virtual ~MetadataBuilder();

  // Checks the batch (a one-line mlacheck::Error before any launch when it breaks the contract or
  // the limits), launches the step's kernels on the device's stream and returns the views. Does not
  // synchronize. (Virtual for plugins' builders, kernels/plugin_stateful.cpp.)
  virtual MetadataResult build(const MetadataBatch& batch);

  const MetadataLimits& limits() const { return limits_; }

  // The persistent buffers, for guarded checks (declare outputs, arm, check) and for reading back:
  // seq_lens and decode_lens int32 [max_batched_tokens], block_table int32 [max_batched_tokens,
  // block_table_width], context_lens int32 [max_requests * next_n].
  GuardedMemory& seq_lens_memory() { return *seq_lens_; }
  GuardedMemory& decode_lens_memory() { return *decode_lens_; }
  GuardedMemory& block_table_memory() { return *block_table_; }
  GuardedMemory& context_lens_memory() { return *context_lens_; }
  // How far the last builds may have left non-zero values: rows of the flat buffers, elements of the
  // context_lens buffer. The next build of each layout writes [0, max(live, this)) and nothing else.
  int64_t flat_dirty_rows() const { return flat_dirty_rows_; }
  int64_t native_dirty_elements() const { return native_dirty_elements_; }

 protected:
  // The decisions build() makes that docs/bugs.md's metadata rows get wrong, each returning the
  // production answer. A seeded-bug variant (kernels/mutants/) overrides exactly one, so @ref and
  // every variant run this same build().
  virtual MetadataStepShape checked_step(const MetadataBatch& batch);                          // U2
  virtual bool uniform_path(const MetadataStepShape& step, const MetadataBatch& batch) const;  // U1
  virtual int64_t flat_reset_end(const MetadataStepShape& step) const;                         // U5
  virtual int32_t native_row_stride(const MetadataStepShape& step) const;                      // C1, C3
  virtual View native_view(const MetadataStepShape& step) const;                               // C1, C3
  virtual GuardedMemory& native_buffer();                                                      // C2
  virtual void expand(bool uniform, const ExpandMetadataParams& p);                            // U3, U6

  Device& device_;
  MetadataLimits limits_;
  std::unique_ptr<GuardedMemory> seq_lens_;
  std::unique_ptr<GuardedMemory> decode_lens_;
  std::unique_ptr<GuardedMemory> block_table_;
  std::unique_ptr<GuardedMemory> context_lens_;
  int64_t flat_dirty_rows_ = 0;
  int64_t native_dirty_elements_ = 0;
};

}  // namespace mlacheck::kernels
