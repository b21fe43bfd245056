// The indexer's K-cache insert (docs/ops.md 2.3): a token's key quantized to fp8 with a scale of its
// own and stored in the block-flat paged layout the paged logits kernel reads (2.1). One source
// for every backend.
#include "core/backend/simt.h"
#include "core/fp16.h"
#include "core/fp8.h"
#include "kernels/k_cache_insert.h"

namespace mlacheck::kernels::MLA_BACKEND_NS {
namespace {

constexpr int kThreads = 128;

// Where slot s of its block keeps its codes and its scale. kBug is KCacheBug::kNone but for a
// seeded variant (kernels/mutants/).
template <KCacheBug kBug>
MLA_DEVICE int64_t codes_offset(const KCacheInsertParams& p, int64_t s) {
  return kBug == KCacheBug::kL1TokenInterleaved ? s * (p.head_dim + 4) : s * p.head_dim;
}
template <KCacheBug kBug>
MLA_DEVICE int64_t scale_offset(const KCacheInsertParams& p, int64_t s) {
  return kBug == KCacheBug::kL1TokenInterleaved ? s * (p.head_dim + 4) + p.head_dim
                                                : int64_t(p.block_size) * p.head_dim + 4 * s;
}

// One block per token: the block's amax in shared memory, then its codes and (thread 0) its scale.
template <KCacheBug kBug>
MLA_KERNEL void k_cache_insert_kernel(KCacheInsertParams p) {
  MLA_SHARED(float, partial, kThreads);
  const int64_t i = simt::block_idx().x;
  const int tid = static_cast<int>(simt::thread_idx().x);
  const int32_t slot = p.slot_mapping[i];  // the same for every thread: no one returns before a barrier
  const uint16_t* key = p.k + i * p.k_row_stride;
  float amax = 0.0f;
  for (int32_t d = tid; d < p.head_dim; d += kThreads) {
    const float x = bf16_to_float(key[d]);
    amax = x < 0 ? (-x > amax ? -x : amax) : (x > amax ? x : amax);
  }
  partial[tid] = amax;
  simt::sync_threads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (tid < half && partial[tid + half] > partial[tid]) partial[tid] = partial[tid + half];
    simt::sync_threads();
  }
  if (slot < 0) return;  // a padding token: nothing to write (after the last barrier)
  const float scale = p.ue8m0 ? ue8m0_to_float(fp8_e4m3_scale_ue8m0(partial[0])) : fp8_e4m3_scale_fp32(partial[0]);
  uint8_t* block = p.cache + (kBug == KCacheBug::kW4BlockOffsetIn32Bits
                                  ? int64_t(static_cast<int32_t>(static_cast<uint32_t>(slot / p.block_size) *
                                                                 static_cast<uint32_t>(p.block_stride)))
                                  : int64_t(slot / p.block_size) * p.block_stride);
  const int64_t s = slot % p.block_size;
  uint8_t* codes = block + codes_offset<kBug>(p, s);
  for (int32_t d = tid; d < p.head_dim; d += kThreads) codes[d] = float_to_fp8_e4m3(bf16_to_float(key[d]) / scale);
  if (tid == 0) {
    // Byte by byte: block_size * D may leave the scale unaligned.
    const uint32_t bits = float_bits(scale);
    uint8_t* out = block + scale_offset<kBug>(p, s);
    for (int b = 0; b < 4; ++b) out[b] = static_cast<uint8_t>(bits >> (8 * b));
  }
}

}  // namespace

void k_cache_insert(const KCacheInsertParams& p, void* stream) { k_cache_insert_seeded(p, KCacheBug::kNone, stream); }

void k_cache_insert_seeded(const KCacheInsertParams& p, KCacheBug bug, void* stream) {
  if (p.num_tokens <= 0) return;
  const simt::LaunchConfig config{{unsigned(p.num_tokens)}, {kThreads}, 0, static_cast<simt::Stream>(stream)};
  if (bug == KCacheBug::kL1TokenInterleaved) {
    MLA_LAUNCH(k_cache_insert_kernel<KCacheBug::kL1TokenInterleaved>, config, p);
  } else if (bug == KCacheBug::kW4BlockOffsetIn32Bits) {
    MLA_LAUNCH(k_cache_insert_kernel<KCacheBug::kW4BlockOffsetIn32Bits>, config, p);
  } else {
    MLA_LAUNCH(k_cache_insert_kernel<KCacheBug::kNone>, config, p);
  }
}

}  // namespace mlacheck::kernels::MLA_BACKEND_NS
