// The indexer decode step (kernels/indexer_decode_step.h): checks, then the launches of docs/ops.md 6.
#include "kernels/indexer_decode_step.h"

#include <algorithm>
#include <limits>
#include <string>

#include "core/error.h"
#include "kernels/mqa_logits_glue.h"
#include "kernels/pack_decode_glue.h"

namespace mlacheck::kernels {
namespace {

constexpr const char* kOp = "indexer_decode_step";

int64_t max_rows_of(const IndexerDecodeStepLimits& l) {
  return std::max(l.metadata.max_batched_tokens, l.metadata.max_requests * l.metadata.next_n);
}

// Rows [first, first + n) of a 2-D view.
DeviceTensor row_slice(const DeviceTensor& t, int64_t first, int64_t n) {
  const View& v = t.view;
  return {t.base, View(v.dtype(), {n, v.size(1)}, {v.stride(0), v.stride(1)},
                       v.byte_offset() + first * v.stride(0) * v.element_size())};
}

// A contiguous [shape] view at the start of a persistent buffer.
DeviceTensor at_start(GuardedMemory& m, DType dtype, const std::vector<int64_t>& shape) {
  return {m.data(), View::contiguous(dtype, shape)};
}

// An output of `rows` top-k rows: int32 [>= rows, k], unit column stride.
void require_topk_rows(const DeviceTensor& t, int64_t rows, int64_t k, const char* name) {
  const View& v = t.view;
  MLA_REQUIRE(t.base != nullptr && v.dtype() == DType::kI32 && v.rank() == 2 && v.size(0) >= rows &&
                  v.size(1) == k && (k <= 1 || v.stride(1) == 1) && v.stride(0) >= k,
              kOp, ": ", name, " must be int32 [>= ", rows, " tokens, topk = ", k,
              "] with unit column stride and rows that do not overlap, got ", v.to_string());
}

}  // namespace

IndexerDecodeStep::IndexerDecodeStep(Device& device, const IndexerDecodeStepLimits& limits)
    : device_(device), limits_(limits), max_rows_(max_rows_of(limits)), metadata_(device, limits.metadata) {
  MLA_REQUIRE(limits.heads >= 1 && limits.head_dim >= 1 && limits.topk >= 1 && limits.max_context_len >= 1 &&
                  limits.max_context_len <= std::numeric_limits<int32_t>::max() / 2,
              kOp, ": limits need heads, head_dim, topk and max_context_len >= 1, got heads ", limits.heads,
              " head_dim ", limits.head_dim, " topk ", limits.topk, " max_context_len ", limits.max_context_len);
  const int64_t slots = limits.metadata.max_requests * limits.metadata.next_n;
  packed_q_ = device.allocate("indexer step packed q", slots * limits.heads * limits.head_dim);
  packed_weights_ = device.allocate("indexer step packed weights", slots * limits.heads * 4);
  logits_ = device.allocate("indexer step logits", max_rows_ * limits.max_context_len * 4);
  padded_topk_ = device.allocate("indexer step padded top-k", max_rows_ * limits.topk * 4);
  workspace_ = device.allocate("indexer step top-k workspace",
                               topk_workspace_bytes(max_rows_, limits.topk, limits.max_context_len));
}

IndexerDecodeStep::~IndexerDecodeStep() = default;

IndexerDecodeStepResult IndexerDecodeStep::run(const IndexerDecodeStepInputs& in) {
  // ---- every check before the first launch ----
  const MetadataBatch& batch = in.batch;
  const int64_t H = limits_.heads, D = limits_.head_dim, k = limits_.topk;
  const int64_t B = static_cast<int64_t>(batch.host_decode_lens.size());
  int64_t T = 0;
  for (int32_t d : batch.host_decode_lens) {
    MLA_REQUIRE(d >= 0 && d <= limits_.metadata.next_n, kOp, ": decode length ", d, " outside [0, next_n = ",
                limits_.metadata.next_n, "]");
    T += d;
  }
  const bool flattened = batch.layout == MetadataLayout::kFlattened;
  // Rows of q and weights: with graph padding (flattened only) the engine's padded rows.
  const int64_t q_rows = flattened && batch.num_padded_tokens >= T ? batch.num_padded_tokens : T;
  const View& q = in.index_q.view;
  MLA_REQUIRE(q.dtype() == DType::kFP8E4M3 && q.rank() == 3 && q.size(0) == q_rows && q.size(1) == H &&
                  q.size(2) == D && q.is_contiguous(),
              kOp, ": index_q must be contiguous fp8 [", q_rows, " tokens, H = ", H, ", D = ", D, "], got ",
              q.to_string());
  const View& w = in.index_weights.view;
  MLA_REQUIRE(w.dtype() == DType::kF32 && w.rank() == 2 && w.size(0) == q_rows && w.size(1) == H && w.is_contiguous(),
              kOp, ": index_weights must be contiguous fp32 [", q_rows, " tokens, H = ", H, "], got ", w.to_string());
  require_paged_indexer_cache(in.kv_blocks, in.block_size, D, kOp);
  MLA_REQUIRE(in.max_context_len >= 0 && in.max_context_len <= limits_.max_context_len, kOp, ": max_context_len ",
              in.max_context_len, " outside [0, the configured ", limits_.max_context_len, "]");
  const View& table = batch.block_table.view;
  if (!batch.host_seq_lens.empty()) {
    MLA_REQUIRE(static_cast<int64_t>(batch.host_seq_lens.size()) == B, kOp, ": ", batch.host_seq_lens.size(),
                " host seq_lens for ", B, " requests");
    for (int64_t b = 0; b < B; ++b) {
      const int64_t L = batch.host_seq_lens[static_cast<size_t>(b)];
      MLA_REQUIRE(L <= in.max_context_len, kOp, ": request ", b, " has seq_len ", L, " > max_context_len ",
                  in.max_context_len);
      const int64_t needed = (std::max<int64_t>(L, 0) + in.block_size - 1) / in.block_size;
      MLA_REQUIRE(table.rank() == 2 && needed <= table.size(1), kOp, ": request ", b, " needs ", needed,
                  " blocks of ", in.block_size, " tokens for seq_len ", L, " but block_table ", table.to_string(),
                  " has fewer columns");
    }
  }
  require_topk_rows(in.topk_buffer, T, k, "topk_buffer");
  require_topk_rows(in.topk_global, T, k, "topk_global");
  const ByteSpan a = row_slice(in.topk_buffer, 0, T).view.byte_span(), g = row_slice(in.topk_global, 0, T).view.byte_span();
  MLA_REQUIRE(T == 0 || in.topk_buffer.base != in.topk_global.base || a.end <= g.begin || g.end <= a.begin, kOp,
              ": topk_global ", in.topk_global.view.to_string(), " overlaps the token rows of topk_buffer ",
              in.topk_buffer.view.to_string());

  // ---- 1. metadata (checks the batch against the limits before its own launches) ----
  IndexerDecodeStepResult r;
  r.metadata = metadata_.build(batch);
  r.num_decode_tokens = T;
  const MetadataResult& m = r.metadata;

  // ---- 2. q and weights, packed when the native batch is not uniform ----
  DeviceTensor q4, weights, context_lens, block_table;
  std::vector<int32_t> host_lens;  // the logits' host copy of context_lens, when host seq_lens are known
  if (flattened) {
    r.rows = m.rows;
    r.next_n = 1;
    q4 = {in.index_q.base, View(q.dtype(), {r.rows, 1, H, D}, {H * D, H * D, D, 1}, q.byte_offset())};
    weights = in.index_weights;
    context_lens = m.seq_lens;
    block_table = m.block_table;
    for (int64_t t = 0; t < T; ++t) r.logits_row_of_token.push_back(t);
  } else {
    const int64_t n = m.next_n_live;
    r.rows = B * n;
    r.next_n = n;
    bool uniform = B >= 1;
    for (int32_t d : batch.host_decode_lens) uniform = uniform && d == n;
    r.packed = !uniform && r.rows > 0;
    if (r.packed) {
      const DeviceTensor packed_q = at_start(*packed_q_, DType::kFP8E4M3, {B, n, H, D});
      const DeviceTensor packed_w = at_start(*packed_weights_, DType::kF32, {B, n, H});
      pack_decode(device_, batch.query_start_loc, in.index_q, packed_q);
      pack_decode(device_, batch.query_start_loc, in.index_weights, packed_w);
      q4 = packed_q;
      weights = at_start(*packed_weights_, DType::kF32, {r.rows, H});
    } else {
      q4 = {in.index_q.base, View(q.dtype(), {B, n, H, D}, {n * H * D, H * D, D, 1}, q.byte_offset())};
      weights = in.index_weights;
    }
    context_lens = m.context_lens;
    block_table = batch.block_table;
    for (int64_t b = 0; b < B; ++b) {
      for (int32_t j = 0; j < batch.host_decode_lens[static_cast<size_t>(b)]; ++j) r.logits_row_of_token.push_back(b * n + j);
    }
  }
  if (!batch.host_seq_lens.empty()) {
    // ctx(b, t) = max(0, L_b - d_b + t + 1) per token, 0 for padding rows and slots.
    host_lens.assign(static_cast<size_t>(r.rows), 0);
    size_t token = 0;
    for (int64_t b = 0; b < B; ++b) {
      const int32_t d = batch.host_decode_lens[static_cast<size_t>(b)], L = batch.host_seq_lens[static_cast<size_t>(b)];
      for (int32_t t = 0; t < d; ++t, ++token) {
        host_lens[static_cast<size_t>(r.logits_row_of_token[token])] = std::max(0, L - d + t + 1);
      }
    }
  }

  // ---- 3. paged logits, unclean, over every row of the launch ----
  r.logits = {logits_->data(), View::padded_rows(DType::kF32, {r.rows, in.max_context_len}, limits_.max_context_len)};
  if (r.rows > 0) {
    PagedMqaLogitsArgs la;
    la.q = q4;
    la.kv_blocks = in.kv_blocks;
    la.block_size = in.block_size;
    la.weights = weights;
    la.context_lens = context_lens;
    la.block_table = block_table;
    la.max_context_len = in.max_context_len;
    la.logits = r.logits;
    la.mode = LogitsMode::kUnclean;
    la.host_context_lens = host_lens.empty() ? nullptr : &host_lens;
    paged_mqa_logits(device_, la);
  }

  // ---- 4. top-k into the token rows of the shared buffer, through padded rows when needed ----
  r.topk = row_slice(in.topk_buffer, 0, T);
  r.padded_topk = r.packed || r.rows != T;
  r.topk_path = topk_path_for(k);
  if (r.rows > 0) {
    const DeviceTensor workspace{workspace_->data(), View::contiguous(DType::kU8, {workspace_->size()})};
    const DeviceTensor out = r.padded_topk ? at_start(*padded_topk_, DType::kI32, {r.rows, k}) : r.topk;
    r.topk_path = topk_per_row_decode(device_, r.logits, r.next_n, context_lens, k, out, workspace);
    if (r.padded_topk && T > 0) {
      if (flattened) {
        copy_rows(device_, out, row_slice(in.topk_buffer, 0, rows_into_shared_buffer(r, in)));
      } else {
        unpack_decode(device_, batch.query_start_loc,
                      at_start(*padded_topk_, DType::kI32, {B, unpack_next_n(r), k}), r.topk);
      }
    }
  }

  // ---- 5. global KV slots of the token rows ----
  r.global = row_slice(in.topk_global, 0, T);
  topk_to_global(device_, batch.query_start_loc, r.topk, batch.block_table, in.block_size, r.global);
  return r;
}

// ---- the decisions, as production makes them ---------------------------------------------------

int64_t IndexerDecodeStep::rows_into_shared_buffer(const IndexerDecodeStepResult& r,
                                                   const IndexerDecodeStepInputs&) const {
  return r.num_decode_tokens;  // the token rows: the shared buffer's later rows are prefill tokens'
}
int64_t IndexerDecodeStep::unpack_next_n(const IndexerDecodeStepResult& r) const {
  return r.next_n;  // next_n' of this step, explicitly (never the configured next_n, never -1)
}

}  // namespace mlacheck::kernels
