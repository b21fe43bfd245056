// The dense MLA decode kernels (kernels/mla_decode.cu) with one wrong decision each, for the seeded
// variants:
//   T5 (vLLM #51065): the merge has no branch for a row without keys (seq_len 0, a padding row), so
//   it divides 0 by 0 and writes NaN.
// The rest of the merge is the production one written out again.
#include <cmath>

#include "core/backend/simt.h"
#include "kernels/mutants/mla_decode_mutant_kernels.h"

namespace mlacheck::kernels::MLA_BACKEND_NS {
namespace {

constexpr int kMergeThreads = 128, kMergeHeads = 4;
constexpr int kMergeLanes = kMergeThreads / kMergeHeads, kMergeColumns = kMlaValueDim / kMergeLanes;

MLA_DEVICE float negative_infinity() { return bits_float(0xFF800000u); }

MLA_KERNEL void merge_without_empty_row_branch(MlaDecodeParams p) {
  const int tid = static_cast<int>(simt::thread_idx().x);
  const int64_t rows = int64_t(p.batch) * p.q_len * p.heads;
  const int64_t r = int64_t(simt::block_idx().x) * kMergeHeads + tid / kMergeLanes;
  if (r >= rows) return;
  const int lane = tid % kMergeLanes;
  const float* w = p.workspace + r * p.num_splits * kMlaWorkspaceRow;
  float m = negative_infinity();
  for (int s = 0; s < p.num_splits; ++s) {
    const float x = w[int64_t(s) * kMlaWorkspaceRow + kMlaValueDim];
    if (x != x || x > m) m = x;
    if (m != m) break;
  }
  uint16_t* o = p.o + r * kMlaValueDim;
  // T5: no "m == -inf: o = 0, lse = -inf" branch here.
  float sum = 0.0f, acc[kMergeColumns] = {};
  for (int s = 0; s < p.num_splits; ++s) {
    const float* split = w + int64_t(s) * kMlaWorkspaceRow;
    const float x = split[kMlaValueDim];
    if (x == negative_infinity()) continue;
    const float weight = expf(x - m);
    sum += weight;
    for (int c = 0; c < kMergeColumns; ++c) acc[c] += weight * split[lane + c * kMergeLanes];
  }
  const float scale = p.output_scale / sum;
  for (int c = 0; c < kMergeColumns; ++c) o[lane + c * kMergeLanes] = simt::float_to_bf16(acc[c] * scale);
  if (lane == 0) p.lse[r] = m + logf(sum);
}

}  // namespace

void launch_mla_decode_merge_t5(const MlaDecodeParams& p, void* stream) {
  const int64_t rows = int64_t(p.batch) * p.q_len * p.heads;
  if (rows == 0) return;
  const simt::LaunchConfig config{{static_cast<unsigned>((rows + kMergeHeads - 1) / kMergeHeads)},
                                  {kMergeThreads},
                                  0,
                                  static_cast<simt::Stream>(stream)};
  MLA_LAUNCH(merge_without_empty_row_branch, config, p);
}

}  // namespace mlacheck::kernels::MLA_BACKEND_NS
