// Pack and unpack of non-uniform decode rows, and request-local to global KV slots (docs/ops.md 3, 6).
#include "core/backend/simt.h"
#include "kernels/pack_decode.h"

namespace mlacheck::kernels::MLA_BACKEND_NS {
namespace {

constexpr int kThreads = 128;

// One block per packed slot r = b * next_n + j; threads stride over the row's bytes.
MLA_KERNEL void pack_rows_kernel(PackRowsParams p, bool pack) {
  const int64_t r = simt::block_idx().x;
  const int32_t b = static_cast<int32_t>(r / p.next_n), j = static_cast<int32_t>(r % p.next_n);
  const int32_t start = p.query_start_loc[b], d = p.query_start_loc[b + 1] - start;
  const int64_t token = int64_t(start) + j;
  const int64_t slot_row = r;
  for (int64_t i = simt::thread_idx().x; i < p.row_bytes; i += simt::block_dim().x) {
    if (pack) {
      p.dst[slot_row * p.dst_row_stride + i] = j < d ? p.src[token * p.src_row_stride + i] : uint8_t{0};
    } else if (j < d) {
      p.dst[token * p.dst_row_stride + i] = p.src[slot_row * p.src_row_stride + i];
    }
  }
}

// One block per row.
MLA_KERNEL void copy_rows_kernel(CopyRowsParams p) {
  const int64_t r = simt::block_idx().x;
  for (int64_t i = simt::thread_idx().x; i < p.row_bytes; i += simt::block_dim().x) {
    p.dst[r * p.dst_row_stride + i] = p.src[r * p.src_row_stride + i];
  }
}

// One block per token; the token's request is found by binary search over query_start_loc.
template <TopkToGlobalBug kBug>
MLA_KERNEL void topk_to_global_kernel(TopkToGlobalParams p) {
  const int32_t t = static_cast<int32_t>(simt::block_idx().x);
  int32_t lo = 0, hi = p.num_requests - 1;  // the last request b with query_start_loc[b] <= t
  while (lo < hi) {
    const int32_t mid = (lo + hi + 1) / 2;
    if (p.query_start_loc[mid] <= t) lo = mid;
    else hi = mid - 1;
  }
  const int32_t* table = p.block_table + int64_t(lo) * p.block_table_row_stride;
  for (int32_t i = simt::thread_idx().x; i < p.k; i += simt::block_dim().x) {
    const int32_t local = p.local[int64_t(t) * p.local_row_stride + i];
    int32_t global = kBug == TopkToGlobalBug::kS1InvalidAsZero ? 0 : -1;  // the sentinel of "no slot"
    if (local >= 0 && local / p.page < p.block_table_width) global = table[local / p.page] * p.page + local % p.page;
    p.global[int64_t(t) * p.global_row_stride + i] = global;
  }
}

}  // namespace

void pack_rows(const PackRowsParams& p, void* stream) {
  if (p.num_requests == 0 || p.next_n == 0) return;
  const simt::LaunchConfig config{{unsigned(p.num_requests * p.next_n)}, {kThreads}, 0, static_cast<simt::Stream>(stream)};
  MLA_LAUNCH(pack_rows_kernel, config, p, true);
}

void unpack_rows(const PackRowsParams& p, void* stream) {
  if (p.num_requests == 0 || p.next_n == 0) return;
  const simt::LaunchConfig config{{unsigned(p.num_requests * p.next_n)}, {kThreads}, 0, static_cast<simt::Stream>(stream)};
  MLA_LAUNCH(pack_rows_kernel, config, p, false);
}

void copy_rows(const CopyRowsParams& p, void* stream) {
  if (p.rows == 0 || p.row_bytes == 0) return;
  const simt::LaunchConfig config{{unsigned(p.rows)}, {kThreads}, 0, static_cast<simt::Stream>(stream)};
  MLA_LAUNCH(copy_rows_kernel, config, p);
}

void topk_to_global(const TopkToGlobalParams& p, void* stream) { topk_to_global_seeded(p, TopkToGlobalBug::kNone, stream); }

void topk_to_global_seeded(const TopkToGlobalParams& p, TopkToGlobalBug bug, void* stream) {
  if (p.num_tokens == 0) return;
  const simt::LaunchConfig config{{unsigned(p.num_tokens)}, {kThreads}, 0, static_cast<simt::Stream>(stream)};
  if (bug == TopkToGlobalBug::kS1InvalidAsZero) {
    MLA_LAUNCH(topk_to_global_kernel<TopkToGlobalBug::kS1InvalidAsZero>, config, p);
  } else {
    MLA_LAUNCH(topk_to_global_kernel<TopkToGlobalBug::kNone>, config, p);
  }
}

}  // namespace mlacheck::kernels::MLA_BACKEND_NS
