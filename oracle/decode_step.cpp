// Oracle of docs/ops.md section 6 (the indexer decode step end to end), composed of the per-op oracles.
#include "oracle/decode_step.h"

#include <algorithm>

#include "core/error.h"
#include "oracle/topk.h"

namespace mlacheck::oracle {
namespace {

// Inserts a size-1 dimension after the first: [T, ...] -> [T, 1, ...], the s_q = 1 of sparse MLA.
View with_single_query(const View& v) {
  std::vector<int64_t> shape = v.shape(), strides = v.strides();
  shape.insert(shape.begin() + 1, 1);
  strides.insert(strides.begin() + 1, strides.empty() ? 1 : strides[0]);
  return View(v.dtype(), shape, strides, v.byte_offset());
}

}  // namespace

DecodeStepResult indexer_decode_step(const DecodeStepInputs& in) {
  const View& q = in.index_q.view;
  MLA_REQUIRE(q.rank() == 3, "decode step: index_q must be fp8 [T, H, D], got ", q.to_string());
  const bool attention = in.mla_q.base != nullptr;
  MLA_REQUIRE(!attention || (in.mla_cache.view.rank() == 3 && in.mla_cache.view.size(1) == in.index_cache.block_size),
              "decode step: the attention cache ", in.mla_cache.view.to_string(), " must have pages of ",
              in.index_cache.block_size, " tokens, like the indexer cache (one block table serves both)");
  const int64_t B = in.batch.seq_lens.view.size(0);
  MLA_REQUIRE(in.batch.decode_lens.view.rank() == 1 && in.batch.decode_lens.view.size(0) == B,
              "decode step: decode_lens ", in.batch.decode_lens.view.to_string(), " must have one entry per request (", B, ")");
  int64_t T = 0;
  for (int64_t b = 0; b < B; ++b) T += in.batch.decode_lens.at<int32_t>({b});
  MLA_REQUIRE(q.size(0) == T, "decode step: index_q has ", q.size(0), " tokens but the decode lengths sum to ", T);
  // 1. Metadata, flattened: one row per token, its context length and its request's block-table row.
  const FlattenedMetadata meta = flattened_metadata(in.batch, T);

  DecodeStepResult res;
  for (int64_t b = 0; b < B; ++b) {
    for (int32_t t = 0; t < in.batch.decode_lens.at<int32_t>({b}); ++t) res.request.push_back(b);
  }
  res.context_len.assign(meta.seq_lens.begin(), meta.seq_lens.begin() + T);
  int64_t max_len = 0;
  for (int64_t b = 0; b < B; ++b) max_len = std::max<int64_t>(max_len, in.batch.seq_lens.at<int32_t>({b}));

  // 2. Logits of each token as a request of its own with next_n = 1 and a 2-D length [T, 1].
  std::vector<int32_t> lens(meta.seq_lens.begin(), meta.seq_lens.begin() + T);
  IntMatrix tables = meta.block_table.topRows(T);
  const View iq = in.index_q.view;
  res.logits = paged_mqa_logits(
      {HostTensor(in.index_q.base, View(iq.dtype(), {T, 1, iq.size(1), iq.size(2)},
                                        {iq.stride(0), iq.stride(0), iq.stride(1), iq.stride(2)}, iq.byte_offset())),
       in.index_cache, in.index_weights, HostTensor(lens.data(), View::contiguous(DType::kI32, {T, 1})),
       HostTensor(tables.data(), View::contiguous(DType::kI32, {T, tables.cols()})), max_len});

  // 3. Top-k of each row, then global slots through the token's request's block table.
  res.topk_local.resize(T, in.topk);
  res.topk_global.resize(T, in.topk);
  for (int64_t r = 0; r < T; ++r) {
    const std::vector<int32_t> row =
        topk_reference_row(res.logits.logits.values.data() + r * max_len, res.context_len[static_cast<size_t>(r)], in.topk);
    for (int64_t i = 0; i < in.topk; ++i) {
      res.topk_local(r, i) = row[static_cast<size_t>(i)];
      res.topk_global(r, i) = topk_to_global(row[static_cast<size_t>(i)], in.batch.block_table,
                                             res.request[static_cast<size_t>(r)], in.index_cache.block_size);
    }
  }

  // 4. Sparse attention of each token over its global slots (when the inputs have it).
  if (attention) res.attention = decode_step_attention(
      in, HostTensor(res.topk_global.data(), View::contiguous(DType::kI32, {T, in.topk})));
  return res;
}

IntMatrix topk_buffer_after(const DecodeStepResult& step, const HostTensor& buffer_before) {
  const View& v = buffer_before.view;
  const int64_t T = step.topk_local.rows(), k = step.topk_local.cols();
  MLA_REQUIRE(v.dtype() == DType::kI32 && v.rank() == 2 && v.size(0) >= T && v.size(1) == k,
              "decode step: the top-k buffer must be int32 [>= ", T, " tokens, topk = ", k, "], got ", v.to_string());
  IntMatrix after(v.size(0), k);
  for (int64_t r = 0; r < v.size(0); ++r) {
    for (int64_t i = 0; i < k; ++i) after(r, i) = r < T ? step.topk_local(r, i) : buffer_before.at<int32_t>({r, i});
  }
  return after;
}

SparseMlaResult decode_step_attention(const DecodeStepInputs& in, const HostTensor& global_indices) {
  const View& g = global_indices.view;
  MLA_REQUIRE(g.dtype() == DType::kI32 && g.rank() == 2, "decode step: global indices must be int32 [T, topk], got ",
              g.to_string());
  return sparse_mla_decode({HostTensor(in.mla_q.base, with_single_query(in.mla_q.view)), in.mla_cache,
                            HostTensor(global_indices.base, with_single_query(g)), std::nullopt, in.softmax_scale,
                            in.attn_sink, MlaPrecision{}});
}

}  // namespace mlacheck::oracle
