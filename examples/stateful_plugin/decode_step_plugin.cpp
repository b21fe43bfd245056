// An example stateful plugin: the indexer's decode step (docs/ops.md 6) as a kernel engineer would
// write one against include/mlacheck/plugin.h alone, registered as indexer_decode_step@example: its
// metadata (metadata_step.h, as the example builder), paged fp8 logits over the metadata's rows,
// top-k per row and global KV slots, on the host or as one CUDA kernel per stage (step_rows.h). The
// flattened layout runs one row per token straight into the shared top-k buffer; the native layout
// runs [B, next_n'] slot rows into the lent padded rows and unpacks the tokens' rows from there.
// Built with STEP_PLUGIN_BUG=1 it is its twin, indexer_decode_step@example_buggy, which runs a
// flattened step's top-k over every padded row the metadata has (graph padding included) straight
// into the shared buffer, overwriting rows that belong to prefill tokens: mlacheck must catch it.
//
//   mlacheck check --plugin ./libmlacheck_decode_step_plugin.so
//   mlacheck check --plugin ./libmlacheck_decode_step_plugin_buggy.so   # FAIL: a write past the token rows
#include <cstdio>
#include <new>

#include "metadata_step.h"
#include "mlacheck/plugin.h"
#include "plugin_error.h"
#include "step_rows.h"

namespace example_step {
namespace {

#if STEP_PLUGIN_BUG
constexpr const char* kName = "example_buggy";
constexpr const char* kSummary = "example step's twin: flattened top-k over the padded rows, into the shared buffer";
#else
constexpr const char* kName = "example";
constexpr const char* kSummary = "example step: metadata, logits, top-k and global slots, a kernel per stage";
#endif

struct Step {
  mlacheck_indexer_decode_step_limits limits;
  mlacheck_indexer_decode_step_buffers buffers;
  example_metadata::Builder metadata;
  bool cuda;
};

using example_plugins::fail;

// int32 [>= rows, k] with unit column stride.
bool is_topk_rows(const mlacheck_tensor& t, int64_t rows, int64_t k) {
  return t.data != nullptr && t.dtype == MLACHECK_I32 && t.rank == 2 && t.shape[0] >= rows && t.shape[1] == k &&
         (k <= 1 || t.strides[1] == 1) && t.strides[0] >= k;
}

int run(void* state, const mlacheck_device* device, const mlacheck_indexer_decode_step_inputs* in,
        mlacheck_indexer_decode_step_result* result, char* error, size_t error_size) {
  Step& s = *static_cast<Step*>(state);
  const mlacheck_indexer_decode_step_limits& l = s.limits;
  const mlacheck_decode_metadata_batch& batch = in->batch;
  const int64_t T = batch.num_decode_tokens, H = l.heads, D = l.head_dim, k = l.topk;
  // ---- every check before the first launch ----
  if (in->max_context_len < 0 || in->max_context_len > l.max_context_len) {
    return fail(error, error_size, "max_context_len %lld outside [0, %lld]", (long long)in->max_context_len,
                (long long)l.max_context_len);
  }
  if (batch.host_seq_lens != nullptr) {
    for (int64_t b = 0; b < batch.batch_size; ++b) {
      if (batch.host_seq_lens[b] > in->max_context_len) {
        return fail(error, error_size, "request %lld has length %d past max_context_len %lld", (long long)b,
                    batch.host_seq_lens[b], (long long)in->max_context_len);
      }
    }
  }
  if (in->index_q.dtype != MLACHECK_FP8_E4M3 || in->index_q.rank != 3 || in->index_q.shape[0] < T ||
      in->index_q.shape[1] != H || in->index_q.shape[2] != D || in->index_q.strides[0] != H * D) {
    return fail(error, error_size, "index_q must be contiguous fp8 [>= %lld, %lld, %lld]", (long long)T, (long long)H,
                (long long)D);
  }
  if (in->index_weights.dtype != MLACHECK_F32 || in->index_weights.rank != 2 || in->index_weights.shape[0] < T ||
      in->index_weights.shape[1] != H || in->index_weights.strides[0] != H) {
    return fail(error, error_size, "index_weights must be contiguous fp32 [>= %lld, %lld]", (long long)T, (long long)H);
  }
  if (in->kv_blocks.dtype != MLACHECK_U8 || in->kv_blocks.rank != 2 || in->block_size < 1 ||
      in->kv_blocks.shape[1] < in->block_size * (D + 4)) {
    return fail(error, error_size, "kv_blocks must be uint8 [blocks, >= %lld] for block_size %lld",
                (long long)(in->block_size * (D + 4)), (long long)in->block_size);
  }
  if (!is_topk_rows(in->topk_buffer, T, k) || !is_topk_rows(in->topk_global, T, k)) {
    return fail(error, error_size, "topk_buffer and topk_global must be int32 [>= %lld, %lld], unit column stride",
                (long long)T, (long long)k);
  }
  // ---- metadata, then the stages over its rows ----
  if (example_metadata::build(&s.metadata, device, &batch, &result->metadata, error, error_size) != 0) return 1;
  const bool native = batch.layout == 1;
  StepJob j{};
  j.qsl = static_cast<const int32_t*>(batch.query_start_loc.data);
  j.table = static_cast<const int32_t*>(batch.block_table.data);
  j.table_stride = batch.block_table.strides[0];
  j.W = batch.block_table.rank == 2 ? batch.block_table.shape[1] : 0;
  j.B = batch.batch_size, j.T = T;
  j.native = native;
  j.n = result->metadata.next_n_live;
  j.token_lens = static_cast<const int32_t*>(s.buffers.metadata.seq_lens.data);
  j.token_table = static_cast<const int32_t*>(s.buffers.metadata.block_table.data);
  j.token_table_stride = l.metadata.block_table_width;
  j.context_lens = static_cast<const int32_t*>(s.buffers.metadata.context_lens.data);
  j.q = static_cast<const uint8_t*>(in->index_q.data);
  j.weights = static_cast<const float*>(in->index_weights.data);
  j.kv = static_cast<const uint8_t*>(in->kv_blocks.data);
  j.block_stride = in->kv_blocks.strides[0], j.block_size = in->block_size, j.H = H, j.D = D;
#if STEP_PLUGIN_BUG
  j.rows = native ? j.B * j.n : batch.num_padded_tokens;  // the bug: the padded rows run into the shared buffer
#else
  j.rows = native ? j.B * j.n : T;
#endif
  j.cols = in->max_context_len, j.k = k;
  j.logits = static_cast<float*>(s.buffers.logits.data);
  j.logits_stride = l.max_context_len;
  j.topk_buffer = static_cast<int32_t*>(in->topk_buffer.data);
  j.topk_buffer_stride = in->topk_buffer.strides[0];
  j.global = static_cast<int32_t*>(in->topk_global.data);
  j.global_stride = in->topk_global.strides[0];
  j.topk_rows = native ? static_cast<int32_t*>(s.buffers.padded_topk.data) : j.topk_buffer;
  j.topk_rows_stride = native ? k : j.topk_buffer_stride;
  if (s.cuda) {
    int rc = launch_logits(j, device->stream);
    if (rc == 0) rc = launch_topk(j, device->stream);
    if (rc == 0 && native) rc = launch_unpack(j, device->stream);
    if (rc == 0) rc = launch_global(j, device->stream);
    if (rc != 0) return fail(error, error_size, "CUDA error %d launching the step's kernels", rc);
  } else {
    const int64_t topk_cols = j.cols > k ? j.cols : k;
    for (int64_t r = 0; r < j.rows; ++r) {
      for (int64_t c = 0; c < j.cols; ++c) logit_element(j, r, c);
    }
    for (int64_t r = 0; r < j.rows; ++r) {
      for (int64_t i = 0; i < topk_cols; ++i) topk_element(j, r, i);
    }
    for (int64_t t = 0; t < T && native; ++t) {
      for (int64_t i = 0; i < k; ++i) unpack_element(j, t, i);
    }
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < k; ++i) global_element(j, t, i);
    }
  }
  // ---- what the step did ----
  result->num_decode_tokens = T;
  result->rows = j.rows;
  result->next_n = native ? j.n : 1;
  result->packed = 0;  // q and weights are read in place through query_start_loc
  result->padded_topk = native;
  result->logits = s.buffers.logits;
  result->logits.shape[0] = j.rows, result->logits.shape[1] = j.cols;
  // Each token's logits row: its own (flattened) or its slot's (native), from the host decode_lens.
  for (int64_t b = 0, t = 0; b < batch.batch_size; ++b) {
    for (int32_t slot = 0; slot < batch.host_decode_lens[b] && t < T; ++slot, ++t) {
      result->logits_row_of_token[t] = native ? b * j.n + slot : t;
    }
  }
  result->topk = in->topk_buffer;
  result->topk.shape[0] = T;
  result->global = in->topk_global;
  result->global.shape[0] = T;
  return 0;
}

void destroy(void* state) { delete static_cast<Step*>(state); }

int make(const mlacheck_device* device, const mlacheck_indexer_decode_step_limits* limits,
         const mlacheck_indexer_decode_step_buffers* buffers, const mlacheck_allocator* allocator,
         mlacheck_indexer_decode_step* out, char* error, size_t error_size) {
  (void)allocator;  // the lent buffers are all it needs
#if !STEP_PLUGIN_CUDA
  if (device->backend != MLACHECK_BACKEND_HOST) return mlacheck_error(error, error_size, "built without CUDA: host only");
#endif
  if (device->backend != MLACHECK_BACKEND_HOST && device->backend != MLACHECK_BACKEND_CUDA) {
    return mlacheck_error(error, error_size, "host and cuda only");
  }
  Step* s = new (std::nothrow) Step{*limits, *buffers, {limits->metadata, buffers->metadata}, device->backend == MLACHECK_BACKEND_CUDA};
  if (s == nullptr) return mlacheck_error(error, error_size, "out of memory");
  *out = mlacheck_indexer_decode_step{s, &run, &destroy};
  return 0;
}

int register_impls(const mlacheck_plugin_api* api) {
  return MLACHECK_ADD_INDEXER_DECODE_STEP(api, kName, kSummary, make);
}

}  // namespace

#if !STEP_PLUGIN_CUDA
int launch_logits(const StepJob&, void*) { return 1; }
int launch_topk(const StepJob&, void*) { return 1; }
int launch_unpack(const StepJob&, void*) { return 1; }
int launch_global(const StepJob&, void*) { return 1; }
}  // namespace example_step
namespace example_metadata {
int launch_flat(const FlatStep&, void*) { return 1; }
int launch_native(const NativeStep&, void*) { return 1; }
}  // namespace example_metadata
#else
}  // namespace example_step
#endif

MLACHECK_DEFINE_PLUGIN("example_decode_step", example_step::register_impls)
