// Kernel side of docs/ops.md 4, sparse MLA decode over FlashMLA's fp8_ds_mla layout: the launch
// parameters and the launcher. The checked entry point is in kernels/sparse_mla_glue.h.
#pragma once

#include <cstdint>

namespace mlacheck::kernels {

// The 656-byte token of the fp8_ds_mla cache: 512 fp8 latent codes (4 tiles of 128), 4 fp32 tile
// scales, 64 bf16 rope values. K = [latent * scale, rope] (576), V = K[0:512].
constexpr int kSparseMlaTokenBytes = 656;
constexpr int kSparseMlaLatent = 512;
constexpr int kSparseMlaRope = 64;
constexpr int kSparseMlaHeadDim = kSparseMlaLatent + kSparseMlaRope;  // 576
constexpr int kSparseMlaScaleTile = 128;

// The kernel's work split (kernels/sparse_mla.cu says how these are used): a block of 256 threads
// per (16 heads, query token), walking the row's top-k entries 32 at a time.
constexpr int kSparseMlaHeadsPerBlock = 16;
constexpr int kSparseMlaTileKeys = 32;
constexpr int kSparseMlaThreads = 256;
// Dynamic shared memory of a block, all fp32: q [16][576], keys [32][576], probabilities [16][32],
// rescale factors, final max and sum [3][16], latent scales [32][4]: 113,344 bytes, within the
// 112 KiB per block that lets two blocks share an H100/H200 SM.
constexpr int64_t kSparseMlaSharedBytes =
    4 * (int64_t(kSparseMlaHeadsPerBlock) * kSparseMlaHeadDim + int64_t(kSparseMlaTileKeys) * kSparseMlaHeadDim +
         kSparseMlaHeadsPerBlock * kSparseMlaTileKeys + 3 * kSparseMlaHeadsPerBlock + kSparseMlaTileKeys * 4);
static_assert(kSparseMlaSharedBytes <= 112 * 1024, "two blocks per SM");

// Row (b, s) of indices holds topk global slots; slot = block * page + offset lives at
// kv + block * kv_block_stride + offset * kv_token_stride. A slot < 0 or >= num_blocks * page is
// skipped; with topk_length, only the first topk_length[b] entries of a row count.
struct SparseMlaParams {
  const uint16_t* q = nullptr;  // bf16 [b, s_q, h, 576], contiguous
  const uint8_t* kv = nullptr;
  int64_t kv_block_stride = 0;  // bytes between blocks
  int64_t kv_token_stride = kSparseMlaTokenBytes;  // bytes between tokens of a block (>= 656)
  int32_t num_blocks = 0;
  int32_t page = 1;
  const int32_t* indices = nullptr;  // [b, s_q, topk], contiguous
  const int32_t* topk_length = nullptr;  // [b] or null
  const float* attn_sink = nullptr;      // [h] or null
  float softmax_scale = 1.0f;
  int32_t batch = 0, s_q = 0, heads = 0, topk = 0;
  uint16_t* out = nullptr;  // bf16 [b, s_q, h, 512], contiguous
  float* lse = nullptr;     // fp32 [b, h, s_q], contiguous (transposed, as FlashMLA returns it)
};

// The seeded-bug variants' decisions inside the production kernel (docs/bugs.md), switched at
// compile time: kNone is production.
enum class SparseMlaBug {
  kNone,
#define MLACHECK_BUG(variant, check, needs, enumerator) enumerator,
#include "kernels/sparse_mla_bugs.def"
#undef MLACHECK_BUG
#undef MLACHECK_HOOK_BUG
};

#define MLA_SPARSE_MLA_LAUNCHERS                                                 \
  void launch_sparse_mla_decode(const SparseMlaParams& p, void* stream);        \
  void launch_sparse_mla_decode_seeded(const SparseMlaParams& p, SparseMlaBug bug, void* stream);
namespace host { MLA_SPARSE_MLA_LAUNCHERS }
namespace cuda { MLA_SPARSE_MLA_LAUNCHERS }
namespace hip { MLA_SPARSE_MLA_LAUNCHERS }
#undef MLA_SPARSE_MLA_LAUNCHERS

}  // namespace mlacheck::kernels
