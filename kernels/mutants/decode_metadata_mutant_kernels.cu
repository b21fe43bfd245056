// The decode-metadata expansion kernels (kernels/decode_metadata.cu) with one wrong decision each,
// for the seeded variants U3 and U6. The row writer and the grid-stride loops are the production
// ones written out again; only the context length differs:
//   U3 (vLLM #51538): no clamp at 0, so a padding request (L = 0) gets L - d + t + 1 < 0;
//   U6: the uniform fused kernel's context length is one more than the general path's.
#include "core/backend/simt.h"
#include "kernels/mutants/decode_metadata_mutant_kernels.h"

namespace mlacheck::kernels::MLA_BACKEND_NS {
namespace {

constexpr int64_t kMaxThreads = 256, kMinThreads = 64, kMaxBlocks = 1 << 16, kThreadsPerRow = 32;

enum Bug { kU3, kU6 };

// The production context length, max(0, L - d + t + 1), with the variant's wrong decision.
template <Bug kBug>
MLA_DEVICE int32_t context_len(int32_t seq_len, int32_t decode_len, int32_t token) {
  const int64_t ctx = int64_t(seq_len) - decode_len + token + 1;
  if constexpr (kBug == kU3) {
    return static_cast<int32_t>(ctx);  // U3: no clamp at 0
  } else {
    return (ctx > 0 ? static_cast<int32_t>(ctx) : 0) + 1;  // U6: one past the correct length
  }
}

MLA_DEVICE void write_row(const FlatMetadataOutputs& out, int64_t row, int32_t seq_len, int32_t decode_len,
                          const int32_t* src, int32_t src_width) {
  const int lane = simt::lane_id(), lanes = simt::warp_size();
  int32_t* dst = out.block_table + row * out.block_table_row_stride;
  for (int32_t i = lane; i < src_width; i += lanes) dst[i] = src[i];
  for (int32_t i = src_width + lane; i < out.width; i += lanes) dst[i] = 0;
  if (lane == 0) {
    out.seq_lens[row] = seq_len;
    out.decode_lens[row] = decode_len;
  }
}

MLA_DEVICE int64_t first_warp() {
  const int64_t warps_per_block = simt::block_dim().x / simt::warp_size();
  return int64_t(simt::block_idx().x) * warps_per_block + simt::warp_id();
}
MLA_DEVICE int64_t warp_stride() { return int64_t(simt::grid_dim().x) * (simt::block_dim().x / simt::warp_size()); }

template <Bug kBug>
MLA_KERNEL void expand_uniform_kernel(ExpandMetadataParams p) {
  const int32_t d = p.uniform_decode_len;
  for (int64_t r = first_warp(); r < p.num_tokens; r += warp_stride()) {
    const int32_t b = static_cast<int32_t>(r / d), t = static_cast<int32_t>(r % d);
    write_row(p.out, r, context_len<kBug>(p.seq_lens[b], d, t), 1, p.block_table + b * p.block_table_row_stride,
              p.block_table_width);
  }
}

template <Bug kBug>
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

simt::LaunchConfig config_for(int64_t threads_wanted, void* stream) {
  int64_t threads = (threads_wanted + kMinThreads - 1) / kMinThreads * kMinThreads;
  threads = threads < kMinThreads ? kMinThreads : threads > kMaxThreads ? kMaxThreads : threads;
  int64_t blocks = (threads_wanted + threads - 1) / threads;
  blocks = blocks < 1 ? 1 : blocks > kMaxBlocks ? kMaxBlocks : blocks;
  return simt::LaunchConfig{{unsigned(blocks)}, {unsigned(threads)}, 0, static_cast<simt::Stream>(stream)};
}

}  // namespace

void expand_metadata_uniform_u3(const ExpandMetadataParams& p, void* stream) {
  if (p.num_tokens <= 0) return;
  MLA_LAUNCH(expand_uniform_kernel<kU3>, config_for(p.num_tokens * kThreadsPerRow, stream), p);
}
void expand_metadata_general_u3(const ExpandMetadataParams& p, void* stream) {
  if (p.num_tokens <= 0) return;
  MLA_LAUNCH(expand_general_kernel<kU3>, config_for(p.num_tokens * kThreadsPerRow, stream), p);
}
void expand_metadata_uniform_u6(const ExpandMetadataParams& p, void* stream) {
  if (p.num_tokens <= 0) return;
  MLA_LAUNCH(expand_uniform_kernel<kU6>, config_for(p.num_tokens * kThreadsPerRow, stream), p);
}

}  // namespace mlacheck::kernels::MLA_BACKEND_NS
