// Top-k seeded bugs (kernels/mutants/mutants.h): the production glue's parameters and kernels, one
// dispatch decision changed.
#include "kernels/device.h"
#include "kernels/mutants/mutants.h"
#include "kernels/topk.h"
#include "kernels/topk_glue.h"

namespace mlacheck::kernels {

namespace {

// R4: the dispatch compares k >= 2048 where it must compare k == 2048, so every larger k runs the
// kernel compiled for k = 2048 (which selects 2048 and leaves the other slots as they were).
TopkPath topk_decode_r4(Device& device, const DeviceTensor& logits, int64_t next_n, const DeviceTensor& seq_lens,
                        int64_t k, const DeviceTensor& out, const DeviceTensor& workspace,
                        const DeviceTensor& row_class_counts) {
  const TopkParams p = topk_decode_params(logits, next_n, seq_lens, k, out, workspace, row_class_counts);
  if (k >= kTopkFastK) {
    MLA_DISPATCH(device, topk_per_row_k2048, p);
    return TopkPath::kFastK2048;
  }
  MLA_DISPATCH(device, topk_per_row, p);
  return TopkPath::kGeneral;
}

}  // namespace

void register_topk_mutants(Registry& reg) {
  reg.add({"topk_decode", "R4", "seeded bug R4 (vLLM #42072): the k = 2048 fast path runs for any k >= 2048"},
          &topk_decode_r4);
}

}  // namespace mlacheck::kernels
