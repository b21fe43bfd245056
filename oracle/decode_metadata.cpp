// Oracle of docs/ops.md section 1 (decode metadata).
#include "oracle/decode_metadata.h"

#include <algorithm>

#include "core/error.h"

namespace mlacheck::oracle {
namespace {

// Checks the views' shapes and the lengths' ranges; returns B.
int64_t validate(const DecodeBatchViews& in) {
  const View& s = in.seq_lens.view;
  const View& d = in.decode_lens.view;
  const View& t = in.block_table.view;
  MLA_REQUIRE(s.dtype() == DType::kI32 && s.rank() == 1, "decode metadata: seq_lens must be int32 [B], got ",
              s.to_string());
  MLA_REQUIRE(d.dtype() == DType::kI32 && d.rank() == 1 && d.size(0) == s.size(0),
              "decode metadata: decode_lens must be int32 [", s.size(0), "] like seq_lens, got ", d.to_string());
  MLA_REQUIRE(t.dtype() == DType::kI32 && t.rank() == 2 && t.size(0) == s.size(0) && (t.size(1) <= 1 || t.stride(1) == 1),
              "decode metadata: block_table must be int32 [", s.size(0), ", W] with unit column stride, got ",
              t.to_string());
  MLA_REQUIRE(in.next_n >= 1, "decode metadata: next_n is ", in.next_n, "; it must be at least 1");
  for (int64_t b = 0; b < s.size(0); ++b) {
    const int32_t L = in.seq_lens.at<int32_t>({b}), n = in.decode_lens.at<int32_t>({b});
    MLA_REQUIRE(n >= 0 && n <= in.next_n, "decode metadata: decode_lens[", b, "] = ", n, " is outside [0, next_n = ",
                in.next_n, "]");
    MLA_REQUIRE(L >= 0, "decode metadata: seq_lens[", b, "] = ", L, " is negative");
  }
  return s.size(0);
}

IntMatrix source_rows(const HostTensor& table) {
  const int64_t B = table.view.size(0), W = table.view.size(1);
  IntMatrix out(B, W);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t w = 0; w < W; ++w) out(b, w) = table.at<int32_t>({b, w});
  }
  return out;
}

}  // namespace

int32_t context_len(int32_t seq_len, int32_t decode_len, int32_t token) {
  const int64_t ctx = int64_t(seq_len) - decode_len + token + 1;
  return static_cast<int32_t>(std::max<int64_t>(0, ctx));
}

FlattenedMetadata flattened_metadata(const DecodeBatchViews& batch, int64_t rows_allocated) {
  const int64_t B = validate(batch);
  const IntMatrix table = source_rows(batch.block_table);
  FlattenedMetadata out;
  for (int64_t b = 0; b < B; ++b) out.num_decode_tokens += batch.decode_lens.at<int32_t>({b});
  MLA_REQUIRE(rows_allocated >= out.num_decode_tokens, "decode metadata: ", out.num_decode_tokens,
              " decode tokens do not fit in ", rows_allocated, " allocated rows");
  out.seq_lens.assign(static_cast<size_t>(rows_allocated), 0);
  out.decode_lens.assign(static_cast<size_t>(rows_allocated), 0);
  out.block_table = IntMatrix::Zero(rows_allocated, table.cols());
  int64_t r = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int32_t L = batch.seq_lens.at<int32_t>({b}), d = batch.decode_lens.at<int32_t>({b});
    for (int32_t t = 0; t < d; ++t, ++r) {
      out.seq_lens[r] = context_len(L, d, t);
      out.block_table.row(r) = table.row(b);
      out.decode_lens[r] = 1;
    }
  }
  return out;
}

NativeMetadata native_metadata(const DecodeBatchViews& batch) {
  const int64_t B = validate(batch);
  NativeMetadata out;
  for (int64_t b = 0; b < B; ++b) out.next_n_live = std::max(out.next_n_live, batch.decode_lens.at<int32_t>({b}));
  out.context_lens = IntMatrix::Zero(B, out.next_n_live);
  for (int64_t b = 0; b < B; ++b) {
    const int32_t L = batch.seq_lens.at<int32_t>({b}), d = batch.decode_lens.at<int32_t>({b});
    for (int32_t j = 0; j < d; ++j) out.context_lens(b, j) = context_len(L, d, j);
  }
  out.block_table = source_rows(batch.block_table);
  return out;
}

bool is_uniform(const DecodeBatchViews& batch) {
  const int64_t B = validate(batch);
  if (B == 0) return true;
  const int32_t d0 = batch.decode_lens.at<int32_t>({0});
  for (int64_t b = 0; b < B; ++b) {
    if (batch.decode_lens.at<int32_t>({b}) != d0 || d0 == 0) return false;
  }
  return true;
}

}  // namespace mlacheck::oracle
