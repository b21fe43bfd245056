// The checked entry point of docs/ops.md 4, sparse MLA decode: validates every view (a one-line
// mlacheck::Error before any launch) and launches kernels/sparse_mla.h on the device's backend.
#pragma once

#include <cstdint>

#include "kernels/device.h"
#include "kernels/sparse_mla.h"

namespace mlacheck::kernels {

struct SparseMlaArgs {
  DeviceTensor q;         // bf16 [b, s_q, h, 576], contiguous
  DeviceTensor kv_cache;  // u8 [num_blocks, page, 656]: unit stride along the 656 bytes, token stride
                          // >= 656, block stride >= page * token stride, both multiples of 16
  DeviceTensor indices;   // int32 [b, s_q, topk], contiguous
  DeviceTensor topk_length;  // optional (base null): int32 [b], contiguous
  DeviceTensor attn_sink;    // optional (base null): fp32 [h], contiguous
  double softmax_scale = 1.0;
  DeviceTensor out;  // bf16 [b, s_q, h, 512], contiguous
  DeviceTensor lse;  // fp32 [b, h, s_q], contiguous
};
void sparse_mla_decode(Device& device, const SparseMlaArgs& args);
// The same with a seeded variant's decision (kernels/mutants/); sparse_mla_decode is kNone.
void sparse_mla_decode_seeded(Device& device, const SparseMlaArgs& args, SparseMlaBug bug);

}  // namespace mlacheck::kernels
