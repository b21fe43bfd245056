// Top-k seeded bugs (kernels/mutants/mutants.h): the production glue with its dispatch decision
// switched (TopkBug, kernels/topk_glue.h).
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
  return topk_per_row_decode_seeded(device, logits, next_n, seq_lens, k, out, workspace, row_class_counts,
                                    TopkBug::kR4FastPathForAnyLargeK);
}

// D3 (after ATOM #1832, a top-k whose tie fill picked different sets on identical inputs): values
// tied across the threshold are taken in the order threads reach them, not lowest index first.
// Every row stays an admissible top-k; which of the tied columns it holds depends on the schedule.
TopkPath topk_decode_d3(Device& device, const DeviceTensor& logits, int64_t next_n, const DeviceTensor& seq_lens,
                        int64_t k, const DeviceTensor& out, const DeviceTensor& workspace,
                        const DeviceTensor& row_class_counts) {
  return topk_per_row_decode_seeded(device, logits, next_n, seq_lens, k, out, workspace, row_class_counts,
                                    TopkBug::kD3TiesByArrival);
}

// W5 (32-bit offsets): a logits row's element offset, row x row stride, computed in int32, as a
// kernel taking `int` strides does. Right for every logits buffer under 2^31 elements (8 GiB of
// fp32); past it the row is read 16 GiB lower.
TopkPath topk_decode_w5(Device& device, const DeviceTensor& logits, int64_t next_n, const DeviceTensor& seq_lens,
                        int64_t k, const DeviceTensor& out, const DeviceTensor& workspace,
                        const DeviceTensor& row_class_counts) {
  return topk_per_row_decode_seeded(device, logits, next_n, seq_lens, k, out, workspace, row_class_counts,
                                    TopkBug::kW5RowOffsetIn32Bits);
}

// N1: the last radix pass over a long prefill row (longer than the pool: streamed from global
// memory, or the tied elements pooled from it) skips NaN keys, as a `key == key` guard would: a NaN
// the row's top k holds (NaN ranks above +inf, docs/ops.md 3) leaves its slot unwritten. Decode
// rows and short rows are right.
TopkPath topk_prefill_n1(Device& device, const DeviceTensor& logits, const DeviceTensor& ks, const DeviceTensor& ke,
                         int64_t k, const DeviceTensor& out, const DeviceTensor& workspace,
                         const DeviceTensor& row_class_counts) {
  return topk_per_row_prefill_seeded(device, logits, ks, ke, k, out, workspace, row_class_counts,
                                     TopkBug::kN1NanDroppedOnPrefill);
}

}  // namespace

void register_topk_mutants(Registry& reg) {
  reg.add({"topk_decode", "R4", "seeded bug R4 (vLLM #42072): the k = 2048 fast path runs for any k >= 2048"},
          &topk_decode_r4);
  reg.add({"topk_decode", "D3",
           "seeded bug D3 (after ATOM #1832): values tied across the threshold taken in the order threads arrive, "
           "not lowest index first: the selected set depends on the schedule"},
          &topk_decode_d3);
  reg.add({"topk_decode", "W5",
           "seeded bug W5 (32-bit offsets): a logits row's element offset, row x row stride, computed in int32; "
           "wrong past 2^31 elements (8 GiB of fp32 logits)"},
          &topk_decode_w5);
  reg.add({"topk_prefill", "N1",
           "seeded bug N1: the last radix pass over a long prefill row skips NaN keys; a NaN the top k holds leaves "
           "its slot unwritten"},
          &topk_prefill_n1);
}

}  // namespace mlacheck::kernels
