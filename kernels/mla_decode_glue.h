// The checked entry point of docs/ops.md 5, dense split-KV MLA decode: validates every view (a one-line
// mlacheck::Error before any launch) and launches both stages of kernels/mla_decode.h on the
// device's backend. The caller owns every buffer, the workspace included.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/device.h"
#include "kernels/mla_decode.h"

namespace mlacheck::kernels {

struct MlaDecodeArgs {
  DeviceTensor q;            // bf16 or fp8 e4m3 [B, q_len, H, 576], contiguous; q_len 1..8
  DeviceTensor kv_cache;     // bf16 or fp8 e4m3 [num_blocks, page, 576], unit stride along the 576
  DeviceTensor block_table;  // int32 [B, W], unit column stride, any row stride
  DeviceTensor seq_lens;     // int32 [B], contiguous
  double base_scale = 1.0;   // softmax scale = base_scale * q_scale * k_scale; output scale = k_scale
  double q_scale = 1.0;
  double k_scale = 1.0;
  int64_t num_splits = 1;    // 1..kMlaMaxSplits
  DeviceTensor workspace;    // fp32, contiguous, >= mla_decode_workspace_floats(B, q_len, H, num_splits)
  DeviceTensor o;            // bf16 [B, q_len, H, 512], contiguous
  DeviceTensor lse;          // fp32 [B, q_len, H], contiguous
  // A host copy of seq_lens, when the caller has one: then negative lengths and block tables
  // narrower than ceil(seq_len / page) are refused too (the kernel clamps them otherwise).
  const std::vector<int32_t>* host_seq_lens = nullptr;
};
void mla_decode(Device& device, const MlaDecodeArgs& args);
// The checks of mla_decode (the same one-line errors) and the kernels' parameters, without a launch.
MlaDecodeParams mla_decode_params(const MlaDecodeArgs& args);

// How many splits a batch should use: enough (split, b, head group) programs to fill sm_count SMs
// about twice over, no split shorter than 256 keys, at most kMlaMaxSplits.
int64_t mla_decode_num_splits(int64_t batch, int64_t q_len, int64_t heads, int64_t max_seq_len, int64_t sm_count);

}  // namespace mlacheck::kernels
