/* mlacheck's plugin interface: how a shared library of your own kernels is driven by mlacheck.
 *
 * (One header past 500 lines on purpose: a plugin includes nothing of mlacheck's but this file.)
 *
 * A plugin is a shared library that includes only this header and defines one symbol with
 * MLACHECK_DEFINE_PLUGIN: a version field and a registration function. mlacheck (`--plugin PATH`
 * on check, fuzz, repro and mutants; MLACHECK_PLUGIN for a fuzz harness) opens the library, refuses
 * it unless its version is this header's, and calls the registration function, which registers
 * implementations by op and name:
 *
 *   #include "mlacheck/plugin.h"
 *
 *   static int my_topk(const mlacheck_device* device, const mlacheck_topk_decode_args* a,
 *                      char* error, size_t error_size) {
 *     if (device->backend != MLACHECK_BACKEND_HOST) return mlacheck_error(error, error_size, "host only");
 *     ... read a->logits, a->seq_lens; write a->out ...
 *     return 0;
 *   }
 *   static int register_impls(const mlacheck_plugin_api* api) {
 *     return MLACHECK_ADD_TOPK_DECODE(api, "mine", "my radix top-k", my_topk);
 *   }
 *   MLACHECK_DEFINE_PLUGIN("my_kernels", register_impls)
 *
 * after which `mlacheck check --plugin ./libmy_kernels.so --impl topk_decode@mine` runs every
 * top-k property on it. What each op computes, and the shapes and dtypes of its arguments, is
 * docs/ops.md's contract; the argument structs below say which section.
 *
 * Contracts (version 2). A real kernel is narrower than the spec: it assumes a contiguous output,
 * k up to what its shared memory holds, lengths >= 0, finite inputs. It says so after adding the
 * implementation, one clause per line:
 *
 *     MLACHECK_CONTRACT(api, "topk_decode", "mine",
 *                       "k <= 2048\n"            a bound: NAME <= N, >= N, = N, in [A, B]
 *                       "out contiguous\n"       a layout: contiguous, padded-rows, strided
 *                       "seq_lens >= next_n\n"   a bound by another quantity
 *                       "finite");               no NaN or +-inf in the inputs
 *
 * mlacheck then draws cases only inside the contract, never reports a case outside it as a
 * failure (`check --contract-probe` runs a few apart and reports them in their own section), and
 * `mlacheck list --plugin` prints it, with each op's terms (docs/plugins.md, "Contracts", has them all).
 * A malformed contract refuses the plugin at load with one line naming the clause.
 *
 * Calls: mlacheck calls an implementation with a device and the op's arguments; it returns 0 when
 * it has launched (cuda: enqueued on device->stream, work on any other stream joined to it before
 * returning, since mlacheck queues its guard check behind the stream and synchronizes that) or run
 * (host) the op,
 * or a non-zero value after writing one line into error saying why it refused (mlacheck reports
 * that as the implementation refusing a valid case). Every pointer mlacheck passes stays valid
 * only for the call. Implementations are called from one thread at a time.
 *
 * Memory: on the host backend every data pointer is host memory; on the cuda backend a device
 * pointer. Either way it points into a guarded buffer: poison around and between the views, red
 * zones past the allocation, all checked after the call, so a write outside an output view is
 * reported with the view, row and column it hit.
 *
 * Versions: any change to this header's types bumps MLACHECK_PLUGIN_ABI_VERSION; a plugin built
 * against a version this mlacheck does not speak is refused with a message naming both. Version 1
 * plugins (no contracts) load unchanged: a version only appends to the structs it changes.
 */
#ifndef MLACHECK_PLUGIN_H_
#define MLACHECK_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version 2 added contract (mlacheck_plugin_api); version 3 the stateful decode_metadata builder;
 * version 4 indexer_k_cache_insert; version 5 indexer_k_cache_gather. mlacheck loads plugins of
 * versions 1 to 5. */
#define MLACHECK_PLUGIN_ABI_VERSION 5u
#define MLACHECK_MAX_RANK 8

/* Element types (docs/ops.md "Conventions"). */
typedef enum mlacheck_dtype {
  MLACHECK_F64 = 0,
  MLACHECK_F32 = 1,
  MLACHECK_BF16 = 2,
  MLACHECK_F16 = 3,
  MLACHECK_FP8_E4M3 = 4, /* OCP e4m3fn */
  MLACHECK_FP8_E5M2 = 5,
  MLACHECK_UE8M0 = 6,    /* power-of-two scale exponents */
  MLACHECK_I64 = 7,
  MLACHECK_I32 = 8,
  MLACHECK_U8 = 9        /* raw bytes: KV caches with mixed fields */
} mlacheck_dtype;

/* A view: data points at element [0, ..., 0]; strides are in elements and may be padded, zero or
 * larger than the shape (a view inside a larger buffer). An absent optional tensor has data NULL
 * and rank 0. */
typedef struct mlacheck_tensor {
  void* data;
  int32_t dtype; /* mlacheck_dtype */
  int32_t rank;
  int64_t shape[MLACHECK_MAX_RANK];
  int64_t strides[MLACHECK_MAX_RANK];
} mlacheck_tensor;

typedef enum mlacheck_backend {
  MLACHECK_BACKEND_HOST = 0, /* host memory, run on the calling thread */
  MLACHECK_BACKEND_CUDA = 1, /* device memory, launch on stream */
  MLACHECK_BACKEND_HIP = 2
} mlacheck_backend;

typedef struct mlacheck_device {
  int32_t backend; /* mlacheck_backend */
  int32_t device_index;
  void* stream;    /* cudaStream_t / hipStream_t; NULL on the host */
} mlacheck_device;

/* ---- the ops -------------------------------------------------------------------------------- */

/* docs/ops.md 3, decode: logits fp32 [rows, cols] (column stride may exceed 1); row r = b * next_n + j
 * has length seq_lens[b, j] (int32 [B, next_n]) or max(0, seq_lens[b] - next_n + j + 1) (int32 [B]);
 * out int32 [rows, k] gets each row's top k column indices, -1 after the row's length. workspace is
 * mlacheck's own top-k scratch (uint8; may be empty): use it or not. */
typedef struct mlacheck_topk_decode_args {
  mlacheck_tensor logits;
  int64_t next_n;
  mlacheck_tensor seq_lens;
  int64_t k;
  mlacheck_tensor out;
  mlacheck_tensor workspace;
} mlacheck_topk_decode_args;

/* docs/ops.md 3, prefill: row r spans columns [ks[r], ke[r]) of logits; indices are relative to ks[r]. */
typedef struct mlacheck_topk_prefill_args {
  mlacheck_tensor logits;
  mlacheck_tensor ks, ke; /* int32 [rows] */
  int64_t k;
  mlacheck_tensor out;
  mlacheck_tensor workspace;
} mlacheck_topk_prefill_args;

/* docs/ops.md 2.1: q fp8 [B, next_n, H, D]; kv_blocks uint8 [num_blocks, block_stride] (per block:
 * block_size tokens x D fp8 key bytes, then block_size fp32 scales); weights fp32 [B * next_n, H];
 * context_lens int32 [B] or [B, next_n]; block_table int32 [B, W]; logits fp32
 * [B * next_n, max_context_len]. clean: columns past a row's length get -inf (else they are free).
 * host_context_lens: the lengths on the host (row-major), or NULL. */
typedef struct mlacheck_paged_mqa_logits_args {
  mlacheck_tensor q, kv_blocks, weights, context_lens, block_table, logits;
  int64_t block_size, max_context_len;
  int32_t clean;
  const int32_t* host_context_lens;
  int64_t host_context_lens_count;
} mlacheck_paged_mqa_logits_args;

/* docs/ops.md 2.2: q fp8 [M, H, D], k fp8 [N, D], k_scale fp32 [N], weights fp32 [M, H], ks/ke int32
 * [M], logits fp32 [M, N]; host_ks / host_ke: the ranges on the host, or NULL. */
typedef struct mlacheck_mqa_logits_args {
  mlacheck_tensor q, k, k_scale, weights, ks, ke, logits;
  int32_t clean;
  const int32_t* host_ks;
  const int32_t* host_ke;
  int64_t host_rows;
} mlacheck_mqa_logits_args;

/* docs/ops.md 6 step 2 and its inverse: query_start_loc int32 [B + 1]; tokens [T, ...] <-> packed
 * [B, next_n', ...] left-aligned (pack writes every slot, padding slots zero; unpack writes exactly
 * the T token rows). */
typedef struct mlacheck_pack_decode_args {
  mlacheck_tensor query_start_loc, tokens, packed;
} mlacheck_pack_decode_args;

/* docs/ops.md 6 step 6: local int32 [T, k] request-local indices (or -1) -> global int32 [T, k] slots
 * block_table[b, i / page] * page + i % page; global may be local itself. */
typedef struct mlacheck_topk_to_global_args {
  mlacheck_tensor query_start_loc, local, block_table, global;
  int64_t page;
} mlacheck_topk_to_global_args;

/* docs/ops.md 2.3 (version 4): k bf16 [T, D] (unit column stride) quantized per token to fp8 into
 * kv_cache uint8 [num_blocks, block_stride], the block-flat layout of 2.1 (a block's block_size x D
 * codes, then its block_size fp32 scales); slot_mapping int32 [T], -1 for a token not written;
 * ue8m0 non-zero for power-of-two scales. */
typedef struct mlacheck_indexer_k_cache_insert_args {
  mlacheck_tensor k, slot_mapping, kv_cache;
  int64_t block_size;
  int32_t ue8m0;
} mlacheck_indexer_k_cache_insert_args;

/* docs/ops.md 2.4 (version 5): the inverse reader of 2.3. Token p of request b (p below
 * cu_seq_lens[b + 1] - cu_seq_lens[b]) lives in slot p % block_size of block block_table[b, p /
 * block_size] of kv_cache (uint8 [num_blocks, block_stride], block-flat as in 2.1); its D code bytes
 * go to row t = cu_seq_lens[b] + p of dst_k (uint8 [T, D], unit column stride, any row stride) and
 * its scale's 4 bytes to dst_scale[t] (float32 [T], contiguous), unchanged. block_table int32 [B, W]
 * (unit column stride, any row stride; columns past a request's blocks hold anything); cu_seq_lens
 * int32 [B + 1]. Rows from cu_seq_lens[B] to T are left as they are. */
typedef struct mlacheck_indexer_k_cache_gather_args {
  mlacheck_tensor kv_cache, block_table, cu_seq_lens, dst_k, dst_scale;
  int64_t block_size;
} mlacheck_indexer_k_cache_gather_args;

/* docs/ops.md 4: q bf16 [b, s_q, h, 576]; kv_cache uint8 [num_blocks, page, 656] (fp8_ds_mla tokens);
 * indices int32 [b, s_q, topk]; topk_length int32 [b] and attn_sink fp32 [h] optional; out bf16
 * [b, s_q, h, 512]; lse fp32 [b, h, s_q]. */
typedef struct mlacheck_sparse_mla_decode_args {
  mlacheck_tensor q, kv_cache, indices, topk_length, attn_sink, out, lse;
  double softmax_scale;
} mlacheck_sparse_mla_decode_args;

/* docs/ops.md 5: q bf16 or fp8 [B, q_len, H, 576]; kv_cache bf16 or fp8 [num_blocks, page, 576];
 * block_table int32 [B, W]; seq_lens int32 [B]; softmax scale base_scale * q_scale * k_scale,
 * output scale k_scale; workspace fp32 (mlacheck's split scratch for num_splits: use it or not);
 * o bf16 [B, q_len, H, 512]; lse fp32 [B, q_len, H]; host_seq_lens: the lengths on the host, or
 * NULL. */
typedef struct mlacheck_mla_decode_args {
  mlacheck_tensor q, kv_cache, block_table, seq_lens, workspace, o, lse;
  double base_scale, q_scale, k_scale;
  int64_t num_splits;
  const int32_t* host_seq_lens;
  int64_t host_seq_lens_count;
} mlacheck_mla_decode_args;

/* ---- stateful ops (version 3) ------------------------------------------------------------------
 *
 * A stateful op is an object with a life: mlacheck calls the registered function to make one, then
 * calls it step after step (as an engine does), then destroys it. The object keeps what it needs
 * between steps in its own state.
 *
 * docs/ops.md 1, the decode metadata builder. Its persistent outputs are allocated by mlacheck once, at
 * their maximum size, zeroed, and lent to the builder for its whole life (so mlacheck can guard
 * every byte past what a step may write and see that no step moves them, as a captured CUDA graph
 * needs): the builder writes only there and keeps their addresses. */
typedef struct mlacheck_decode_metadata_limits {
  int64_t max_batched_tokens; /* rows of the flattened buffers */
  int64_t max_requests;       /* B at most */
  int32_t next_n;             /* configured query tokens per request */
  int64_t block_table_width;  /* W at most: the row stride of the flattened block table */
} mlacheck_decode_metadata_limits;

typedef struct mlacheck_decode_metadata_buffers {
  mlacheck_tensor seq_lens;     /* int32 [max_batched_tokens] */
  mlacheck_tensor decode_lens;  /* int32 [max_batched_tokens] */
  mlacheck_tensor block_table;  /* int32 [max_batched_tokens, block_table_width] */
  mlacheck_tensor context_lens; /* int32 [max_requests * next_n] */
} mlacheck_decode_metadata_buffers;

/* One step: device int32 seq_lens [B], decode_lens [B], query_start_loc [B + 1] (contiguous) and
 * block_table [B, W] (unit column stride, any row stride); the host copy of decode_lens (it sizes
 * the step) and, when not NULL, of seq_lens; num_decode_tokens = the sum of decode_lens;
 * num_padded_tokens >= it (flattened: rows the consumer reads; rows past the tokens are zero);
 * layout 0 flattened (one row per token), 1 native ([B, next_n'] context_lens, next_n' = max d_b);
 * general_only: take the general path even for a uniform batch. */
typedef struct mlacheck_decode_metadata_batch {
  mlacheck_tensor seq_lens, decode_lens, query_start_loc, block_table;
  const int32_t* host_decode_lens;
  const int32_t* host_seq_lens; /* or NULL */
  int64_t batch_size;           /* B: the length of the host arrays */
  int64_t num_decode_tokens, num_padded_tokens;
  int32_t layout;
  int32_t general_only;
} mlacheck_decode_metadata_batch;

/* What a step returns: the layout; path 0 uniform fast kernel, 1 general, 2 native; the token count,
 * the flattened views' rows, next_n' = max d_b; views of the lent buffers (flattened: seq_lens
 * [rows], decode_lens [rows], block_table [rows, W] with row stride block_table_width; native:
 * context_lens [B, next_n'] C-contiguous and block_table = the batch's own view). A view the layout
 * leaves empty has data NULL. */
typedef struct mlacheck_decode_metadata_result {
  int32_t layout, path;
  int64_t num_decode_tokens, rows;
  int32_t next_n_live;
  mlacheck_tensor seq_lens, block_table, decode_lens, context_lens;
} mlacheck_decode_metadata_result;

/* The object the registered function makes: its state and its two calls. build launches the step on
 * the device's stream (it need not synchronize) and returns 0, or non-zero after writing why into
 * error (a batch it refuses); destroy frees the state. */
typedef struct mlacheck_decode_metadata_builder {
  void* state;
  int (*build)(void* state, const mlacheck_device* device, const mlacheck_decode_metadata_batch* batch,
               mlacheck_decode_metadata_result* result, char* error, size_t error_size);
  void (*destroy)(void* state);
} mlacheck_decode_metadata_builder;

/* Memory a stateful object asks for when it needs persistent buffers of its own sizes (split
 * scratch, per-graph parameters, a scheduler's metadata): allocate gives bytes of guarded memory of
 * the device's kind, zeroed, lent until the object is destroyed (do not free it). Red zones around
 * it are checked after every call, so a write past it is reported with its name. Returns 0 with
 * *data set, or non-zero after writing why into error. Call it from the make function or any call. */
typedef struct mlacheck_allocator {
  void* context;
  int (*allocate)(void* context, const char* name, int64_t bytes, void** data, char* error, size_t error_size);
} mlacheck_allocator;

/* docs/ops.md 5, the MLA decode impl an engine holds: eager calls that take their scales from each call,
 * and graphs captured once for a padded batch and replayed after the engine writes a new step's q,
 * seq_lens and block_table into fixed graph buffers. mlacheck lends a workspace (its own split
 * scratch, for the configuration's worst case: use it or not) and the graph buffers, allocated once
 * and never moved, as a captured graph needs. A graph's life, as a C author expresses it:
 *   capture: record one decode over the graph views with these scales (cuda: cudaStreamBeginCapture
 *            on device->stream, the launches, cudaStreamEndCapture, cudaGraphInstantiate; the host:
 *            remember the launch) and return a handle;
 *   replay:  run it again (cudaGraphLaunch on device->stream): it must read the buffers' contents at
 *            replay time, and only what the capture fixed (scales, shape) from the capture;
 *   release: free the handle (mlacheck releases every graph before destroying the impl). */
typedef struct mlacheck_mla_decode_impl_config {
  int64_t max_batch;         /* requests per call (graphs: the largest padded batch) */
  int64_t max_q_len;         /* 1..8 query tokens per request */
  int64_t heads;             /* H of q */
  int64_t max_splits;        /* 1..64: splits per row the lent workspace holds */
  int64_t block_table_width; /* W of the graph block table */
  int64_t page;              /* tokens per KV block */
  int32_t q_dtype;           /* of the graph q buffer: MLACHECK_BF16 or MLACHECK_FP8_E4M3 */
} mlacheck_mla_decode_impl_config;

/* One eager call (tensors as in mlacheck_mla_decode_args). host_query_lens: the query tokens of each
 * request of this step (host_query_lens_count of them), which must all equal q's q_len: an impl
 * refuses a non-uniform batch before any launch; NULL when the caller vouches that the batch is
 * uniform. host_seq_lens: the lengths on the host, or NULL. Softmax scale base_scale * q_scale *
 * k_scale and output scale k_scale, from this call. */
typedef struct mlacheck_mla_decode_call {
  mlacheck_tensor q, kv_cache, block_table, seq_lens, o, lse;
  const int32_t* host_query_lens;
  int64_t host_query_lens_count;
  const int32_t* host_seq_lens;
  int64_t host_seq_lens_count;
  double base_scale, q_scale, k_scale;
} mlacheck_mla_decode_call;

/* One capture: the graph views for padded_batch requests of q_len tokens (C-contiguous, from the
 * start of each graph buffer: q [padded_batch, q_len, H, 576] of the configured q dtype, seq_lens
 * [padded_batch], block_table [padded_batch, W], o bf16 [padded_batch, q_len, H, 512], lse fp32
 * [padded_batch, q_len, H]), the cache the graph reads, and the scales it is captured with. */
typedef struct mlacheck_mla_decode_capture {
  int64_t padded_batch, q_len;
  mlacheck_tensor q, kv_cache, block_table, seq_lens, o, lse;
  double base_scale, q_scale, k_scale;
} mlacheck_mla_decode_capture;

/* The impl the registered function makes. forward launches one eager call on device->stream and
 * writes the split count it chose into *num_splits (for reports; 1 when it does not split); capture
 * records a graph into *graph; replay enqueues it; each returns 0, or non-zero after writing why into
 * error. release (may be NULL) frees a graph; destroy (may be NULL) frees the state. */
typedef struct mlacheck_mla_decode_impl {
  void* state;
  int (*forward)(void* state, const mlacheck_device* device, const mlacheck_mla_decode_call* call, int64_t* num_splits,
                 char* error, size_t error_size);
  int (*capture)(void* state, const mlacheck_device* device, const mlacheck_mla_decode_capture* capture, void** graph,
                 char* error, size_t error_size);
  int (*replay)(void* state, const mlacheck_device* device, void* graph, char* error, size_t error_size);
  void (*release)(void* state, void* graph);
  void (*destroy)(void* state);
} mlacheck_mla_decode_impl;

/* docs/ops.md 6, the indexer's decode step as an engine runs it: metadata, pack if non-uniform, paged
 * logits, top-k into the token rows of a shared buffer (its rows past the tokens belong to prefill
 * tokens and must survive), global KV slots. mlacheck lends the step's persistent buffers, allocated
 * once at their maximum: the metadata buffers (as a decode_metadata builder's), packed q and weights
 * for [max_requests, next_n] slots, the logits, padded top-k rows and mlacheck's own top-k scratch
 * (use them or not; the logits the top-k read must be a view of the lent logits buffer). */
typedef struct mlacheck_indexer_decode_step_limits {
  mlacheck_decode_metadata_limits metadata;
  int64_t heads;           /* H of index_q and of the weights */
  int64_t head_dim;        /* D of index_q and of each cached key */
  int64_t topk;            /* k: columns of the top-k rows */
  int64_t max_context_len; /* the longest L_b of any step: columns of the logits buffer */
} mlacheck_indexer_decode_step_limits;

/* max_rows = max(max_batched_tokens, max_requests * next_n). */
typedef struct mlacheck_indexer_decode_step_buffers {
  mlacheck_decode_metadata_buffers metadata;
  mlacheck_tensor packed_q;       /* fp8 e4m3 [max_requests * next_n, heads, head_dim] */
  mlacheck_tensor packed_weights; /* fp32 [max_requests * next_n, heads] */
  mlacheck_tensor logits;         /* fp32 [max_rows, max_context_len] */
  mlacheck_tensor padded_topk;    /* int32 [max_rows, topk] */
  mlacheck_tensor workspace;      /* uint8: mlacheck's top-k scratch */
} mlacheck_indexer_decode_step_buffers;

/* One step: the batch as a builder gets it; index_q fp8 [T, H, D] and index_weights fp32 [T, H]
 * (contiguous, T = num_decode_tokens; rows past T may follow: graph padding); kv_blocks uint8
 * [num_blocks, block_stride] (the block-flat fp8 cache of mlacheck_paged_mqa_logits_args);
 * max_context_len: this step's logits columns (>= every length); topk_buffer int32 [>= T, topk] (the
 * shared buffer) and topk_global int32 [>= T, topk]: unit column stride, any row stride, and only
 * rows [0, T) of each may be written. */
typedef struct mlacheck_indexer_decode_step_inputs {
  mlacheck_decode_metadata_batch batch;
  mlacheck_tensor index_q, index_weights, kv_blocks;
  int64_t block_size, max_context_len;
  mlacheck_tensor topk_buffer, topk_global;
} mlacheck_indexer_decode_step_inputs;

/* What a step returns: the metadata it built (views of the lent metadata buffers); T; the rows and
 * next_n of its logits and top-k launches; whether it packed q and weights and ran top-k into the
 * padded rows; logits fp32 [rows, >= max_context_len], a view of the lent logits buffer holding every
 * token's row (columns past a token's length are free); logits_row_of_token, mlacheck's array of
 * max_batched_tokens entries: the step writes the logits row of each of its T tokens; topk and
 * global: rows [0, T) of topk_buffer and topk_global. */
typedef struct mlacheck_indexer_decode_step_result {
  mlacheck_decode_metadata_result metadata;
  int64_t num_decode_tokens, rows, next_n;
  int32_t packed, padded_topk;
  mlacheck_tensor logits;
  int64_t* logits_row_of_token;
  mlacheck_tensor topk, global;
} mlacheck_indexer_decode_step_result;

/* The step the registered function makes: run launches one step on device->stream (it need not
 * synchronize) and returns 0, or non-zero after writing why into error; destroy (may be NULL) frees
 * the state. */
typedef struct mlacheck_indexer_decode_step {
  void* state;
  int (*run)(void* state, const mlacheck_device* device, const mlacheck_indexer_decode_step_inputs* inputs,
             mlacheck_indexer_decode_step_result* result, char* error, size_t error_size);
  void (*destroy)(void* state);
} mlacheck_indexer_decode_step;

/* An implementation's function erased for registration: it is the op's typed function below, cast
 * to this type (the MLACHECK_ADD_* macros do it), and mlacheck calls it through the op's type. */
typedef int (*mlacheck_impl_fn)(const mlacheck_device* device, const void* args, char* error, size_t error_size);

/* The typed forms (MLACHECK_ADD_* checks an implementation against them at compile time). */
typedef int (*mlacheck_topk_decode_fn)(const mlacheck_device*, const mlacheck_topk_decode_args*, char*, size_t);
typedef int (*mlacheck_topk_prefill_fn)(const mlacheck_device*, const mlacheck_topk_prefill_args*, char*, size_t);
typedef int (*mlacheck_paged_mqa_logits_fn)(const mlacheck_device*, const mlacheck_paged_mqa_logits_args*, char*,
                                            size_t);
typedef int (*mlacheck_mqa_logits_fn)(const mlacheck_device*, const mlacheck_mqa_logits_args*, char*, size_t);
typedef int (*mlacheck_pack_decode_fn)(const mlacheck_device*, const mlacheck_pack_decode_args*, char*, size_t);
typedef int (*mlacheck_topk_to_global_fn)(const mlacheck_device*, const mlacheck_topk_to_global_args*, char*, size_t);
typedef int (*mlacheck_sparse_mla_decode_fn)(const mlacheck_device*, const mlacheck_sparse_mla_decode_args*, char*,
                                             size_t);
typedef int (*mlacheck_mla_decode_fn)(const mlacheck_device*, const mlacheck_mla_decode_args*, char*, size_t);
typedef int (*mlacheck_indexer_k_cache_insert_fn)(const mlacheck_device*, const mlacheck_indexer_k_cache_insert_args*,
                                                  char*, size_t);
typedef int (*mlacheck_indexer_k_cache_gather_fn)(const mlacheck_device*, const mlacheck_indexer_k_cache_gather_args*,
                                                  char*, size_t);
/* Stateful: makes a builder into *builder (0), or refuses (non-zero, why in error). */
typedef int (*mlacheck_decode_metadata_fn)(const mlacheck_device*, const mlacheck_decode_metadata_limits*,
                                           const mlacheck_decode_metadata_buffers*,
                                           mlacheck_decode_metadata_builder* builder, char*, size_t);
/* Stateful: makes an MLA impl over the lent workspace (fp32, contiguous) into *impl. */
typedef int (*mlacheck_mla_decode_impl_fn)(const mlacheck_device*, const mlacheck_mla_decode_impl_config*,
                                           const mlacheck_tensor* workspace, const mlacheck_allocator* allocator,
                                           mlacheck_mla_decode_impl* impl, char*, size_t);
/* Stateful: makes an indexer decode step over the lent buffers into *step. */
typedef int (*mlacheck_indexer_decode_step_fn)(const mlacheck_device*, const mlacheck_indexer_decode_step_limits*,
                                               const mlacheck_indexer_decode_step_buffers*,
                                               const mlacheck_allocator* allocator, mlacheck_indexer_decode_step* step,
                                               char*, size_t);

/* ---- registration ---------------------------------------------------------------------------- */

/* What mlacheck hands the registration function. add registers fn as op@name (op: "topk_decode",
 * "topk_prefill", "paged_mqa_logits", "mqa_logits", "pack_decode", "unpack_decode",
 * "topk_to_global", "sparse_mla_decode", "mla_decode", from version 3 the stateful
 * "decode_metadata", "mla_decode_impl" and "indexer_decode_step", from version 4
 * "indexer_k_cache_insert", from version 5 "indexer_k_cache_gather"; name: letters, digits and '_'),
 * with a one-line summary; it returns 0, or non-zero after writing why into error (an unknown op, a name
 * taken). */
typedef struct mlacheck_plugin_api {
  uint32_t abi_version; /* mlacheck's MLACHECK_PLUGIN_ABI_VERSION */
  void* context;
  int (*add)(void* context, const char* op, const char* name, const char* summary, mlacheck_impl_fn fn, char* error,
             size_t error_size);
  /* Version 2: declares the contract of op@name, added before by this plugin (see the top). Returns
   * 0, or non-zero after writing why into error (a malformed clause, an unknown implementation);
   * either way a failed declaration refuses the plugin at load. */
  int (*contract)(void* context, const char* op, const char* name, const char* contract, char* error,
                  size_t error_size);
} mlacheck_plugin_api;

/* The one symbol a plugin defines (with MLACHECK_DEFINE_PLUGIN): its version and registration. */
typedef struct mlacheck_plugin_info {
  uint32_t abi_version; /* the MLACHECK_PLUGIN_ABI_VERSION the plugin was built against */
  const char* name;
  int (*register_impls)(const mlacheck_plugin_api* api); /* 0, or non-zero to refuse loading */
} mlacheck_plugin_info;

#define MLACHECK_PLUGIN_SYMBOL "mlacheck_plugin"

#if defined(_WIN32)
#define MLACHECK_PLUGIN_EXPORT __declspec(dllexport)
#else
#define MLACHECK_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
#define MLACHECK_PLUGIN_EXTERN_C extern "C"
#else
#define MLACHECK_PLUGIN_EXTERN_C
#endif

#define MLACHECK_DEFINE_PLUGIN(plugin_name, register_fn)                    \
  MLACHECK_PLUGIN_EXTERN_C MLACHECK_PLUGIN_EXPORT const mlacheck_plugin_info mlacheck_plugin = { \
      MLACHECK_PLUGIN_ABI_VERSION, plugin_name, register_fn};

/* Registration with the implementation's type checked against the op's (each passes fn through a
 * parameter of the op's function type, so a wrong signature does not compile in C++ and warns in
 * C). mlacheck remembers why an add failed and reports it when the plugin is loaded. */
#define MLACHECK_TYPED_(op_id)                                                                      \
  static inline mlacheck_impl_fn mlacheck_erase_##op_id(mlacheck_##op_id##_fn f) {                  \
    return (mlacheck_impl_fn)(void (*)(void))f; /* through void (*)(void): no -Wcast-function-type */ \
  }
MLACHECK_TYPED_(topk_decode)
MLACHECK_TYPED_(topk_prefill)
MLACHECK_TYPED_(paged_mqa_logits)
MLACHECK_TYPED_(mqa_logits)
MLACHECK_TYPED_(pack_decode)
MLACHECK_TYPED_(topk_to_global)
MLACHECK_TYPED_(sparse_mla_decode)
MLACHECK_TYPED_(mla_decode)
MLACHECK_TYPED_(indexer_k_cache_insert)
MLACHECK_TYPED_(indexer_k_cache_gather)
MLACHECK_TYPED_(decode_metadata)
MLACHECK_TYPED_(mla_decode_impl)
MLACHECK_TYPED_(indexer_decode_step)
#undef MLACHECK_TYPED_
#define MLACHECK_ADD_(api, op, name, summary, erased) \
  ((api)->add((api)->context, op, name, summary, erased, NULL, 0))
#define MLACHECK_ADD_TOPK_DECODE(api, name, summary, fn) \
  MLACHECK_ADD_(api, "topk_decode", name, summary, mlacheck_erase_topk_decode(fn))
#define MLACHECK_ADD_TOPK_PREFILL(api, name, summary, fn) \
  MLACHECK_ADD_(api, "topk_prefill", name, summary, mlacheck_erase_topk_prefill(fn))
#define MLACHECK_ADD_PAGED_MQA_LOGITS(api, name, summary, fn) \
  MLACHECK_ADD_(api, "paged_mqa_logits", name, summary, mlacheck_erase_paged_mqa_logits(fn))
#define MLACHECK_ADD_MQA_LOGITS(api, name, summary, fn) \
  MLACHECK_ADD_(api, "mqa_logits", name, summary, mlacheck_erase_mqa_logits(fn))
#define MLACHECK_ADD_PACK_DECODE(api, name, summary, fn) \
  MLACHECK_ADD_(api, "pack_decode", name, summary, mlacheck_erase_pack_decode(fn))
#define MLACHECK_ADD_UNPACK_DECODE(api, name, summary, fn) \
  MLACHECK_ADD_(api, "unpack_decode", name, summary, mlacheck_erase_pack_decode(fn))
#define MLACHECK_ADD_TOPK_TO_GLOBAL(api, name, summary, fn) \
  MLACHECK_ADD_(api, "topk_to_global", name, summary, mlacheck_erase_topk_to_global(fn))
#define MLACHECK_ADD_SPARSE_MLA_DECODE(api, name, summary, fn) \
  MLACHECK_ADD_(api, "sparse_mla_decode", name, summary, mlacheck_erase_sparse_mla_decode(fn))
#define MLACHECK_ADD_MLA_DECODE(api, name, summary, fn) \
  MLACHECK_ADD_(api, "mla_decode", name, summary, mlacheck_erase_mla_decode(fn))
/* Version 4. */
#define MLACHECK_ADD_INDEXER_K_CACHE_INSERT(api, name, summary, fn) \
  MLACHECK_ADD_(api, "indexer_k_cache_insert", name, summary, mlacheck_erase_indexer_k_cache_insert(fn))
/* Version 5. */
#define MLACHECK_ADD_INDEXER_K_CACHE_GATHER(api, name, summary, fn) \
  MLACHECK_ADD_(api, "indexer_k_cache_gather", name, summary, mlacheck_erase_indexer_k_cache_gather(fn))
/* Version 3: fn makes a decode metadata builder (see "stateful ops"). */
#define MLACHECK_ADD_DECODE_METADATA(api, name, summary, fn) \
  MLACHECK_ADD_(api, "decode_metadata", name, summary, mlacheck_erase_decode_metadata(fn))
/* Version 3: fn makes an MLA decode impl (eager calls, graph capture / replay / release). */
#define MLACHECK_ADD_MLA_DECODE_IMPL(api, name, summary, fn) \
  MLACHECK_ADD_(api, "mla_decode_impl", name, summary, mlacheck_erase_mla_decode_impl(fn))
/* Version 3: fn makes an indexer decode step. */
#define MLACHECK_ADD_INDEXER_DECODE_STEP(api, name, summary, fn) \
  MLACHECK_ADD_(api, "indexer_decode_step", name, summary, mlacheck_erase_indexer_decode_step(fn))

/* Declares op@name's contract (a plugin of version 2 or later). */
#define MLACHECK_CONTRACT(api, op, name, text) ((api)->contract((api)->context, op, name, text, NULL, 0))

/* Writes one line into error (when there is room) and returns 1: `return mlacheck_error(...)`. */
static inline int mlacheck_error(char* error, size_t error_size, const char* message) {
  if (error != NULL && error_size > 0) snprintf(error, error_size, "%s", message);
  return 1;
}

#ifdef __cplusplus
}
#endif

#endif /* MLACHECK_PLUGIN_H_ */
