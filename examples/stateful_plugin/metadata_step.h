// The example decode metadata builder's step (docs/ops.md 1), shared by the builder plugin
// (metadata_plugin.cpp) and the decode step plugin (decode_step_plugin.cpp), which builds its
// metadata the same way. The state remembers how far its last steps wrote, so a smaller step resets
// the rows a larger one left (the stale-row bug of a persistent buffer); with METADATA_PLUGIN_BUG=1
// it forgets that and resets only its own padding.
#pragma once

#include <algorithm>
#include <cstdio>

#include "metadata_rows.h"
#include "mlacheck/plugin.h"

namespace example_metadata {

struct Builder {
  mlacheck_decode_metadata_limits limits;
  mlacheck_decode_metadata_buffers buffers;
  int64_t flat_dirty = 0;    // rows the last flattened steps may have left non-zero
  int64_t native_dirty = 0;  // elements of context_lens likewise
};

inline int fail(char* error, size_t size, const char* what, long long a, long long b) {
  if (error != nullptr && size > 0) std::snprintf(error, size, what, a, b);
  return 1;
}

inline int build(void* state, const mlacheck_device* device, const mlacheck_decode_metadata_batch* batch,
                 mlacheck_decode_metadata_result* result, char* error, size_t error_size) {
  Builder& s = *static_cast<Builder*>(state);
  const mlacheck_decode_metadata_batch& b = *batch;
  const int64_t B = b.batch_size, W = b.block_table.rank == 2 ? b.block_table.shape[1] : 0;
  if (B < 0 || B > s.limits.max_requests) return fail(error, error_size, "batch of %lld requests, at most %lld", B, s.limits.max_requests);
  if (W > s.limits.block_table_width) return fail(error, error_size, "block table width %lld, at most %lld", W, s.limits.block_table_width);
  int64_t T = 0, n = 0;
  bool uniform = B > 0;  // an empty batch takes the general path
  for (int64_t i = 0; i < B; ++i) {
    const int32_t d = b.host_decode_lens[i];
    if (d < 0 || d > s.limits.next_n) return fail(error, error_size, "decode_lens[%lld] = %lld outside [0, next_n]", i, d);
    if (b.host_seq_lens != nullptr && b.host_seq_lens[i] < 0) return fail(error, error_size, "seq_lens[%lld] = %lld < 0", i, b.host_seq_lens[i]);
    uniform = uniform && d > 0 && d == b.host_decode_lens[0];
    T += d;
    n = std::max<int64_t>(n, d);
  }
  if (b.num_decode_tokens != T) return fail(error, error_size, "num_decode_tokens %lld, decode_lens sum to %lld", b.num_decode_tokens, T);
  const bool cuda = device->backend == MLACHECK_BACKEND_CUDA;
  *result = mlacheck_decode_metadata_result{};
  result->layout = b.layout;
  result->num_decode_tokens = T;
  result->next_n_live = static_cast<int32_t>(n);
  if (b.layout == 0) {
    const int64_t rows = b.num_padded_tokens;
    if (rows < T || rows > s.limits.max_batched_tokens) {
      return fail(error, error_size, "%lld padded rows, want the tokens to %lld", rows, s.limits.max_batched_tokens);
    }
    FlatStep f;
    f.seq_lens = static_cast<const int32_t*>(b.seq_lens.data);
    f.decode_lens = static_cast<const int32_t*>(b.decode_lens.data);
    f.qsl = static_cast<const int32_t*>(b.query_start_loc.data);
    f.table = static_cast<const int32_t*>(b.block_table.data);
    f.table_stride = b.block_table.strides[0];
    f.W = W, f.B = B, f.T = T;
#if METADATA_PLUGIN_BUG
    f.reset_end = rows;  // the bug: forgets what earlier steps wrote past this one's rows
#else
    f.reset_end = std::max(rows, s.flat_dirty);
#endif
    f.out_seq_lens = static_cast<int32_t*>(s.buffers.seq_lens.data);
    f.out_decode_lens = static_cast<int32_t*>(s.buffers.decode_lens.data);
    f.out_table = static_cast<int32_t*>(s.buffers.block_table.data);
    f.width = s.limits.block_table_width;
    if (cuda) {
      if (const int rc = launch_flat(f, device->stream)) return fail(error, error_size, "CUDA error %lld launching the flat kernel over %lld rows", rc, f.reset_end);
    } else {
      for (int64_t r = 0; r < f.reset_end; ++r) flat_row(f, r);
    }
    s.flat_dirty = T;
    result->path = uniform && !b.general_only ? 0 : 1;
    result->rows = rows;
    const auto view = [](void* data, int64_t rank, int64_t r0, int64_t r1, int64_t s0) {
      mlacheck_tensor t{};
      t.data = data, t.dtype = MLACHECK_I32, t.rank = static_cast<int32_t>(rank);
      t.shape[0] = r0, t.strides[0] = s0;
      if (rank == 2) t.shape[1] = r1, t.strides[1] = 1;
      return t;
    };
    result->seq_lens = view(s.buffers.seq_lens.data, 1, rows, 0, 1);
    result->decode_lens = view(s.buffers.decode_lens.data, 1, rows, 0, 1);
    result->block_table = view(s.buffers.block_table.data, 2, rows, W, s.limits.block_table_width);
    return 0;
  }
  NativeStep e;
  e.seq_lens = static_cast<const int32_t*>(b.seq_lens.data);
  e.decode_lens = static_cast<const int32_t*>(b.decode_lens.data);
  e.B = B, e.n = n;
  e.reset_end = std::max(B * n, s.native_dirty);
  e.context_lens = static_cast<int32_t*>(s.buffers.context_lens.data);
  if (cuda) {
    if (const int rc = launch_native(e, device->stream)) return fail(error, error_size, "CUDA error %lld launching the native kernel over %lld elements", rc, e.reset_end);
  } else {
    for (int64_t i = 0; i < e.reset_end; ++i) native_element(e, i);
  }
  s.native_dirty = B * n;
  result->path = 2;
  result->context_lens.data = s.buffers.context_lens.data;
  result->context_lens.dtype = MLACHECK_I32;
  result->context_lens.rank = 2;
  result->context_lens.shape[0] = B, result->context_lens.shape[1] = n;
  result->context_lens.strides[0] = n, result->context_lens.strides[1] = 1;
  result->block_table = b.block_table;
  return 0;
}

}  // namespace example_metadata
