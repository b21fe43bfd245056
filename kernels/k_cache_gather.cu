// The indexer's K-cache gather (docs/ops.md 2.4): each request's cached keys, fp8 codes and their
// fp32 scale, copied out of the block-flat paged cache (2.1) into contiguous token rows. One source
// for every backend.
#include "core/backend/simt.h"
#include "kernels/k_cache_gather.h"

namespace mlacheck::kernels::MLA_BACKEND_NS {
namespace {

constexpr int kLanes = 32;       // threads copying one row's codes
constexpr int kRowsPerBlock = 4;

// The request that owns row t < cu_seq_lens[B]: the first b whose end cu_seq_lens[b + 1] is past
// t (so requests of length 0 are skipped). kBug is KCacheGatherBug::kNone but for a seeded variant
// (kernels/mutants/).
template <KCacheGatherBug kBug>
MLA_DEVICE int32_t request_of(const KCacheGatherParams& p, int32_t t) {
  int32_t lo = 0, hi = p.num_requests - 1;
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo) / 2;
    const int32_t end = p.cu_seq_lens[mid + 1];
    if (kBug == KCacheGatherBug::kG2RequestEndInclusive ? end >= t : end > t) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// Request b's table row.
template <KCacheGatherBug kBug>
MLA_DEVICE const int32_t* table_row(const KCacheGatherParams& p, int32_t b) {
  return p.block_table + int64_t(b) * (kBug == KCacheGatherBug::kG1TableRowsAtWidth ? int64_t(p.table_cols)
                                                                                     : p.table_row_stride);
}

// A block of kRowsPerBlock rows, kLanes threads a row: the row's codes byte by byte, then (lane 0)
// its scale. No shared memory and no barrier, so a thread with no row returns at once.
template <KCacheGatherBug kBug>
MLA_KERNEL void k_cache_gather_kernel(KCacheGatherParams p) {
  const int64_t row = int64_t(simt::block_idx().x) * kRowsPerBlock + simt::thread_idx().y;
  const int lane = static_cast<int>(simt::thread_idx().x);
  if (row >= p.num_rows) return;
  const int32_t t = static_cast<int32_t>(row);
  // Past the last request: left as it is (T may be an allocation's upper bound).
  if (kBug != KCacheGatherBug::kG3RowsPastTheLastRequest && t >= p.cu_seq_lens[p.num_requests]) return;
  const int32_t b = request_of<kBug>(p, t);
  const int32_t pos = t - p.cu_seq_lens[b];
  const int64_t block = table_row<kBug>(p, b)[pos / p.block_size];
  const int64_t slot = pos % p.block_size;
  const uint8_t* start = p.cache + block * p.block_stride;
  const uint8_t* codes = start + slot * p.head_dim;
  uint8_t* out = p.dst_k + int64_t(t) * p.dst_row_stride;
  for (int32_t d = lane; d < p.head_dim; d += kLanes) out[d] = codes[d];
  if (lane == 0) {
    // Byte by byte: block_size * D may leave the scale unaligned. Its bits are copied, never
    // converted (a NaN keeps its payload).
    const uint8_t* scale = start + int64_t(p.block_size) * p.head_dim + 4 * slot;
    p.dst_scale[t] = uint32_t(scale[0]) | uint32_t(scale[1]) << 8 | uint32_t(scale[2]) << 16 | uint32_t(scale[3]) << 24;
  }
}

}  // namespace

void k_cache_gather(const KCacheGatherParams& p, void* stream) { k_cache_gather_seeded(p, KCacheGatherBug::kNone, stream); }

void k_cache_gather_seeded(const KCacheGatherParams& p, KCacheGatherBug bug, void* stream) {
  if (p.num_rows <= 0 || p.num_requests <= 0) return;
  const unsigned blocks = static_cast<unsigned>((int64_t(p.num_rows) + kRowsPerBlock - 1) / kRowsPerBlock);
  const simt::LaunchConfig config{{blocks}, {kLanes, kRowsPerBlock}, 0, static_cast<simt::Stream>(stream)};
  if (bug == KCacheGatherBug::kG1TableRowsAtWidth) {
    MLA_LAUNCH(k_cache_gather_kernel<KCacheGatherBug::kG1TableRowsAtWidth>, config, p);
  } else if (bug == KCacheGatherBug::kG2RequestEndInclusive) {
    MLA_LAUNCH(k_cache_gather_kernel<KCacheGatherBug::kG2RequestEndInclusive>, config, p);
  } else if (bug == KCacheGatherBug::kG3RowsPastTheLastRequest) {
    MLA_LAUNCH(k_cache_gather_kernel<KCacheGatherBug::kG3RowsPastTheLastRequest>, config, p);
  } else {
    MLA_LAUNCH(k_cache_gather_kernel<KCacheGatherBug::kNone>, config, p);
  }
}

}  // namespace mlacheck::kernels::MLA_BACKEND_NS
