// Kernel side of docs/ops.md 5, dense MLA decode with split-KV in two stages: the launch parameters,
// the workspace layout and the launchers. The checked entry point is in kernels/mla_decode_glue.h;
// the engine-like object that owns the workspace and captures graphs is kernels/mla_decode_impl.h.
//
// Stage 1 (split): one program per (request b, split s, query token t, group of heads) covers keys
// [s * c, min((s + 1) * c, len)) with len = max(0, seq_lens[b] - q_len + t + 1) and
// c = ceil(len / num_splits), both computed on the device from seq_lens (a CUDA graph replayed after
// the lengths grow must cover the new keys), and writes (acc / l over 512 values, m + ln l) into
// workspace[b, t, h, s, 0..512]; an empty split writes lse -inf.
// Stage 2 (merge): one program per (b, t, group of heads) merges the non-empty splits by
// log-sum-exp, writes o = output_scale * merged (bf16) and lse; no non-empty split: o = 0, lse = -inf.
#pragma once

#include <cstdint>

namespace mlacheck::kernels {

constexpr int kMlaHeadDim = 576;   // 512 latent + 64 rope
constexpr int kMlaValueDim = 512;  // V = K[0:512]
constexpr int kMlaMaxQueryLen = 8;
constexpr int kMlaMaxSplits = 64;
// Floats per (b, t, h, split) in the workspace: 512 values and the split's lse.
constexpr int kMlaWorkspaceRow = kMlaValueDim + 1;

constexpr int64_t mla_decode_workspace_floats(int64_t batch, int64_t q_len, int64_t heads, int64_t splits) {
  return batch * q_len * heads * splits * kMlaWorkspaceRow;
}

struct MlaDecodeParams {
  const void* q = nullptr;  // [B, q_len, H, 576], contiguous: bf16, or fp8 e4m3 when q_fp8
  bool q_fp8 = false;
  const void* kv = nullptr;  // token (block, slot) at kv + block * kv_block_stride + slot * kv_token_stride
  bool kv_fp8 = false;       // fp8 e4m3 codes, else bf16
  int64_t kv_block_stride = 0;  // elements
  int64_t kv_token_stride = kMlaHeadDim;  // elements, >= 576
  int32_t page = 1;
  int32_t num_blocks = 0;  // a page id outside [0, num_blocks) gives NaN keys, never a read
  const int32_t* block_table = nullptr;  // [B, W], unit column stride
  int64_t block_table_stride = 0;
  int32_t block_table_width = 0;  // lengths are clamped to W * page keys
  const int32_t* seq_lens = nullptr;  // [B]
  int32_t batch = 0, q_len = 1, heads = 0;
  int32_t num_splits = 1;  // 1..kMlaMaxSplits
  float softmax_scale = 1.0f;  // base_scale * q_scale * k_scale of this call
  float output_scale = 1.0f;   // k_scale of this call
  float* workspace = nullptr;  // mla_decode_workspace_floats(B, q_len, H, num_splits)
  uint16_t* o = nullptr;       // bf16 [B, q_len, H, 512], contiguous
  float* lse = nullptr;        // fp32 [B, q_len, H], contiguous
};

// The seeded-bug variants' decisions inside the production kernels (docs/bugs.md), switched at
// compile time: kNone is production, and a variant's launch compiles the same kernel source with
// one decision changed.
enum class MlaDecodeBug {
  kNone,
#define MLACHECK_BUG(variant, check, needs, enumerator) enumerator,
#include "kernels/mla_decode_bugs.def"
#undef MLACHECK_BUG
#undef MLACHECK_HOOK_BUG
};

#define MLA_MLA_DECODE_LAUNCHERS                                    \
  void launch_mla_decode_split(const MlaDecodeParams& p, void* stream); \
  void launch_mla_decode_split_seeded(const MlaDecodeParams& p, MlaDecodeBug bug, void* stream); \
  void launch_mla_decode_merge(const MlaDecodeParams& p, void* stream); \
  void launch_mla_decode_merge_seeded(const MlaDecodeParams& p, MlaDecodeBug bug, void* stream);
namespace host { MLA_MLA_DECODE_LAUNCHERS }
namespace cuda { MLA_MLA_DECODE_LAUNCHERS }
namespace hip { MLA_MLA_DECODE_LAUNCHERS }
#undef MLA_MLA_DECODE_LAUNCHERS

}  // namespace mlacheck::kernels
