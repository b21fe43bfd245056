// Decode metadata kernels (docs/ops.md 1): the flattened expansion (uniform fast path, general path),
// the reset of the flat buffers' tail, and the native 2-D context_lens. One source for every backend.
#include "core/backend/simt.h"
#include "kernels/decode_metadata.h"

namespace mlacheck::kernels::MLA_BACKEND_NS {
namespace {

// Launch shape: blocks of up to 256 threads, whole 64-lane wavefronts; grid-stride loops cover what
// the grid does not, so the launchers never need the warp size (32 on CUDA, 64 on gfx9).
constexpr int64_t kMaxThreads = 256;
constexpr int64_t kMinThreads = 64;
constexpr int64_t kMaxBlocks = 1 << 16;

// Four block-table entries: a row copy moves 16 bytes per lane and load when both rows allow it.
struct alignas(16) Int4 {
  int32_t x, y, z, w;
};

MLA_DEVICE bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// ctx(b, t) = max(0, L - d + t + 1), in 64 bits so that no int32 input wraps: a padding request
// (L = 0) gets 0, never a negative length that a consumer would read as 4e9 keys. kBug is
// MetadataBug::kNone but for a seeded variant (kernels/mutants/).
template <MetadataBug kBug = MetadataBug::kNone>
MLA_DEVICE int32_t context_len(int32_t seq_len, int32_t decode_len, int32_t token) {
  const int64_t ctx = int64_t(seq_len) - decode_len + token + 1;
  if (kBug == MetadataBug::kU3NoClampAtZero) return static_cast<int32_t>(ctx);
  const int32_t clamped = ctx > 0 ? static_cast<int32_t>(ctx) : 0;
  return kBug == MetadataBug::kU6UniformOneLonger ? clamped + 1 : clamped;
}

// The calling warp writes one output row: block-table columns [0, src_width) from src (nothing past
// src_width is read), columns [src_width, width) zero; lane 0 writes the row's seq_len and
// decode_len. src may be null when src_width is 0 (a reset row).
MLA_DEVICE void write_row(const FlatMetadataOutputs& out, int64_t row, int32_t seq_len, int32_t decode_len,
                          const int32_t* src, int32_t src_width) {
  const int lane = simt::lane_id(), lanes = simt::warp_size();
  int32_t* dst = out.block_table + row * out.block_table_row_stride;
  int32_t c = 0;
  if (src_width >= 4 && aligned16(src) && aligned16(dst)) {
    // Fast path: whole 16-byte quads of the source row; the last src_width % 4 columns go below.
    const int32_t quads = src_width / 4;
    for (int32_t q = lane; q < quads; q += lanes) reinterpret_cast<Int4*>(dst)[q] = reinterpret_cast<const Int4*>(src)[q];
    c = quads * 4;
  }
  for (int32_t i = c + lane; i < src_width; i += lanes) dst[i] = src[i];
  // Zero the rest of the row, by quads when the first zero column starts one.
  int32_t z = src_width;
  if (z % 4 == 0 && aligned16(dst)) {
    const Int4 zero{0, 0, 0, 0};
    for (int32_t q = z / 4 + lane; q < out.width / 4; q += lanes) reinterpret_cast<Int4*>(dst)[q] = zero;
    z = out.width / 4 * 4 > z ? out.width / 4 * 4 : z;
  }
  for (int32_t i = z + lane; i < out.width; i += lanes) dst[i] = 0;
  if (lane == 0) {
    out.seq_lens[row] = seq_len;
    out.decode_lens[row] = decode_len;
  }
}

// This warp's first row and the distance to its next one in a grid-stride loop over rows.
MLA_DEVICE int64_t first_warp() {
  const int64_t warps_per_block = simt::block_dim().x / simt::warp_size();
  return int64_t(simt::block_idx().x) * warps_per_block + simt::warp_id();
}
MLA_DEVICE int64_t warp_stride() { return int64_t(simt::grid_dim().x) * (simt::block_dim().x / simt::warp_size()); }

// Uniform fast path: every request has d = uniform_decode_len >= 1 tokens, so row r is token r % d of
// request r / d; no prefix sums are read. Only valid when all d_b are equal and none is padding.
template <MetadataBug kBug>
MLA_KERNEL void expand_uniform_kernel(ExpandMetadataParams p) {
  const int32_t d = p.uniform_decode_len;
  for (int64_t r = first_warp(); r < p.num_tokens; r += warp_stride()) {
    const int32_t b = static_cast<int32_t>(r / d), t = static_cast<int32_t>(r % d);
    write_row(p.out, r, context_len<kBug>(p.seq_lens[b], d, t), 1, p.block_table + b * p.block_table_row_stride,
              p.block_table_width);
  }
}

// General path: row r belongs to the last request b with query_start_loc[b] <= r (a padding request
// shares its start with the next one and owns no row), found by binary search; t = r - start.
template <MetadataBug kBug>
MLA_KERNEL void expand_general_kernel(ExpandMetadataParams p) {
  for (int64_t r = first_warp(); r < p.num_tokens; r += warp_stride()) {
    int32_t lo = 0, hi = p.num_requests - 1;
    while (lo < hi) {
      const int32_t mid = (lo + hi + 1) / 2;
      if (p.query_start_loc[mid] <= r) lo = mid;
      else hi = mid - 1;
    }
    const int32_t t = static_cast<int32_t>(r - p.query_start_loc[lo]), d = p.decode_lens[lo];
    write_row(p.out, r, context_len<kBug>(p.seq_lens[lo], d, t), 1, p.block_table + lo * p.block_table_row_stride,
              p.block_table_width);
  }
}

MLA_KERNEL void reset_tail_kernel(ResetFlatTailParams p) {
  for (int64_t r = p.begin + first_warp(); r < p.end; r += warp_stride()) write_row(p.out, r, 0, 0, nullptr, 0);
}

// One thread per element of the context_lens buffer up to reset_end (live block and tail at once).
MLA_KERNEL void native_context_lens_kernel(NativeContextLensParams p) {
  const int64_t live = int64_t(p.num_requests) * p.row_stride;
  const int64_t stride = int64_t(simt::grid_dim().x) * simt::block_dim().x;
  for (int64_t i = int64_t(simt::block_idx().x) * simt::block_dim().x + simt::thread_idx().x; i < p.reset_end;
       i += stride) {
    int32_t value = 0;
    if (i < live) {
      const int64_t b = i / p.row_stride;
      const int32_t j = static_cast<int32_t>(i % p.row_stride), d = p.decode_lens[b];
      if (j < d) value = context_len(p.seq_lens[b], d, j);  // slot j >= d_b is padding: 0
    }
    p.context_lens[i] = value;
  }
}

// A launch of at least threads_wanted threads (a grid-stride kernel loops over the rest).
simt::LaunchConfig config_for(int64_t threads_wanted, void* stream) {
  int64_t threads = (threads_wanted + kMinThreads - 1) / kMinThreads * kMinThreads;
  threads = threads < kMinThreads ? kMinThreads : threads > kMaxThreads ? kMaxThreads : threads;
  int64_t blocks = (threads_wanted + threads - 1) / threads;
  blocks = blocks < 1 ? 1 : blocks > kMaxBlocks ? kMaxBlocks : blocks;
  return simt::LaunchConfig{{unsigned(blocks)}, {unsigned(threads)}, 0, static_cast<simt::Stream>(stream)};
}

// One warp per row: ask for 32 threads per row (a 64-lane warp then takes two rows in turn).
constexpr int64_t kThreadsPerRow = 32;

// The expansion on one path, compiled with kBug's decision.
template <MetadataBug kBug>
void launch_expand(bool uniform, const simt::LaunchConfig& config, const ExpandMetadataParams& p) {
  if (uniform) {
    MLA_LAUNCH(expand_uniform_kernel<kBug>, config, p);
  } else {
    MLA_LAUNCH(expand_general_kernel<kBug>, config, p);
  }
}

}  // namespace

void expand_metadata_uniform(const ExpandMetadataParams& p, void* stream) {
  expand_metadata_seeded(true, p, MetadataBug::kNone, stream);
}

void expand_metadata_general(const ExpandMetadataParams& p, void* stream) {
  expand_metadata_seeded(false, p, MetadataBug::kNone, stream);
}

void expand_metadata_seeded(bool uniform, const ExpandMetadataParams& p, MetadataBug bug, void* stream) {
  if (p.num_tokens <= 0) return;
  const simt::LaunchConfig config = config_for(p.num_tokens * kThreadsPerRow, stream);
  switch (bug) {
    case MetadataBug::kNone: return launch_expand<MetadataBug::kNone>(uniform, config, p);
    case MetadataBug::kU3NoClampAtZero: return launch_expand<MetadataBug::kU3NoClampAtZero>(uniform, config, p);
    case MetadataBug::kU6UniformOneLonger:  // the uniform path's alone
      return uniform ? launch_expand<MetadataBug::kU6UniformOneLonger>(true, config, p)
                     : launch_expand<MetadataBug::kNone>(false, config, p);
  }
}

void reset_flat_metadata_tail(const ResetFlatTailParams& p, void* stream) {
  if (p.end <= p.begin) return;
  MLA_LAUNCH(reset_tail_kernel, config_for(int64_t(p.end - p.begin) * kThreadsPerRow, stream), p);
}

void native_context_lens(const NativeContextLensParams& p, void* stream) {
  if (p.reset_end <= 0) return;
  MLA_LAUNCH(native_context_lens_kernel, config_for(p.reset_end, stream), p);
}

}  // namespace mlacheck::kernels::MLA_BACKEND_NS
