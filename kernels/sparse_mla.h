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
  // O3: a key's scales are fetched from its slot's address before the slot is checked, and dropped
  // afterwards when it is invalid: slot -1 (an unused top-k entry) reads the bytes before the
  // cache's first token, a slot past the cache reads past it. The values are never used.
  kO3ScalesBeforeSlotCheck,
  // H1 (after vLLM #51035, a sparse decode kernel that spun forever): the row's tile count computed
  // as (n - 1) / 32 + 1 in unsigned 64-bit arithmetic, so an empty row (topk_length 0) walks 2^59
  // tiles of nothing, two barriers each: the kernel does not end. (In 32 bits it was 2^27 tiles,
  // which an H100 walks in about 13 s: slow, not endless.)
  kH1TilesOfAnEmptyRow,
  // H2: the same count in unsigned 32-bit arithmetic, as the kernel of vLLM #51035 had it: 2^27
  // tiles of nothing for an empty row, which an H100 walks in about 13 s. It ends, and is wrong all
  // the same: a loop whose work has nothing to do with the case's, told from a slow case by work.
  kH2TilesOfAnEmptyRow32,
  // D2 (a missing barrier): the barrier between staging a tile's keys in shared memory and reading
  // them for the scores is left out, so a thread may read keys another thread has not staged yet
  // (on a GPU, another warp's; on the host backend, any thread that runs later).
  kD2NoBarrierAfterStaging,
  // W2 (32-bit offsets): a slot's byte offset in the cache, block x block stride + offset x token
  // stride, computed in int32. Right while the cache is under 2 GiB (3.27 M slots of 656 bytes);
  // past byte 2^31 it turns negative and the key is dropped as if its slot were invalid, past
  // 2^32 it wraps to a token 4 GiB lower in the cache.
  kW2SlotOffsetIn32Bits,
};

#define MLA_SPARSE_MLA_LAUNCHERS                                                 \
  void launch_sparse_mla_decode(const SparseMlaParams& p, void* stream);        \
  void launch_sparse_mla_decode_seeded(const SparseMlaParams& p, SparseMlaBug bug, void* stream);
namespace host { MLA_SPARSE_MLA_LAUNCHERS }
namespace cuda { MLA_SPARSE_MLA_LAUNCHERS }
namespace hip { MLA_SPARSE_MLA_LAUNCHERS }
#undef MLA_SPARSE_MLA_LAUNCHERS

}  // namespace mlacheck::kernels
