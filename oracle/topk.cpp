// Oracle of docs/ops.md section 3 (top-k per row and conversion to global slots).
#include "oracle/topk.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "oracle/decode_rows.h"

namespace mlacheck::oracle {

std::vector<int64_t> topk_decode_row_lengths(const HostTensor& seq_lens, int64_t next_n) {
  const View& v = seq_lens.view;
  MLA_REQUIRE(v.dtype() == DType::kI32 && (v.rank() == 1 || v.rank() == 2), "top-k decode: seq_lens must be int32 [B] or [B, next_n], got ", v.to_string());
  MLA_REQUIRE(next_n >= 1, "top-k decode: next_n is ", next_n, "; it must be at least 1");
  const int64_t B = v.size(0);
  std::vector<int64_t> n(static_cast<size_t>(B * next_n));
  if (v.rank() == 2) {
    MLA_REQUIRE(v.size(1) == next_n, "top-k decode: 2-D seq_lens ", v.to_string(), " has ", v.size(1), " columns, next_n is ", next_n);
    // The kernel indexes seq_lens[b * next_n + j]: anything but C-contiguous reads the wrong lengths.
    MLA_REQUIRE(v.stride(1) == 1 && (B <= 1 || v.stride(0) == next_n), "top-k decode: 2-D seq_lens ", v.to_string(),
                " is not C-contiguous (strides must be (", next_n, ", 1))");
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t j = 0; j < next_n; ++j) n[static_cast<size_t>(b * next_n + j)] = std::max<int64_t>(0, seq_lens.at<int32_t>({b, j}));
    }
  } else {
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t j = 0; j < next_n; ++j) {
        n[static_cast<size_t>(b * next_n + j)] = decode_row_length(seq_lens.at<int32_t>({b}), next_n, j);
      }
    }
  }
  return n;
}

std::vector<int64_t> topk_prefill_row_lengths(const HostTensor& ks, const HostTensor& ke) {
  MLA_REQUIRE(ks.view.dtype() == DType::kI32 && ks.view.rank() == 1 && ke.view.dtype() == DType::kI32 &&
                  ke.view.rank() == 1 && ks.view.size(0) == ke.view.size(0),
              "top-k prefill: ks and ke must be int32 [M] of one length, got ", ks.view.to_string(), " and ", ke.view.to_string());
  std::vector<int64_t> n(static_cast<size_t>(ks.view.size(0)));
  for (int64_t m = 0; m < ks.view.size(0); ++m) {
    const int32_t s = ks.at<int32_t>({m}), e = ke.at<int32_t>({m});
    MLA_REQUIRE(0 <= s && s <= e, "top-k prefill: row ", m, " has ks ", s, " and ke ", e, "; need 0 <= ks <= ke");
    n[static_cast<size_t>(m)] = e - s;
  }
  return n;
}

std::vector<int32_t> topk_reference_row(const double* values, int64_t n, int64_t k) {
  MLA_REQUIRE(k >= 1, "top-k: k is ", k, "; it must be at least 1");
  std::vector<int32_t> out(static_cast<size_t>(k), -1);
  if (n <= k) {
    for (int64_t i = 0; i < std::max<int64_t>(n, 0); ++i) out[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    return out;
  }
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  // NaN ranks with −inf, below every number, so the order stays a strict weak order.
  auto key = [&](int32_t i) { return std::isnan(values[i]) ? -HUGE_VAL : values[i]; };
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return key(a) > key(b) || (key(a) == key(b) && a < b);
  });
  std::copy(order.begin(), order.begin() + k, out.begin());
  return out;
}

int32_t topk_to_global(int32_t index, const HostTensor& block_table, int64_t req, int64_t page) {
  MLA_REQUIRE(page >= 1, "top-k to global: page size ", page);
  const View& v = block_table.view;
  MLA_REQUIRE(v.dtype() == DType::kI32 && v.rank() == 2 && req >= 0 && req < v.size(0),
              "top-k to global: request ", req, " of block_table ", v.to_string());
  if (index < 0) return -1;
  const int64_t column = index / page;
  if (column >= v.size(1)) return -1;
  return static_cast<int32_t>(int64_t(block_table.at<int32_t>({req, column})) * page + index % page);
}

}  // namespace mlacheck::oracle
