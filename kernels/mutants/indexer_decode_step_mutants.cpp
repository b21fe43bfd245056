// Indexer decode step seeded bugs (kernels/mutants/mutants.h): the production step (kernels/
// indexer_decode_step.h) with one wrong decision about the top-k rows' views. Each runs the correct
// step and then does what the wrong decision makes the step do instead, on the same buffers.
#include <algorithm>
#include <memory>

#include "kernels/indexer_decode_step.h"
#include "kernels/mutants/mutants.h"
#include "kernels/pack_decode_glue.h"
#include "kernels/topk_glue.h"

namespace mlacheck::kernels {

namespace {

DeviceTensor rows_of(const DeviceTensor& t, int64_t first, int64_t n) {
  const View& v = t.view;
  return {t.base, View(v.dtype(), {n, v.size(1)}, {v.stride(0), v.stride(1)},
                       v.byte_offset() + first * v.stride(0) * v.element_size())};
}

// R1 (vLLM #42072): the top-k's output is the shared buffer sliced to num_decode_tokens rows, but
// the kernel writes all num_padded_tokens rows of its launch: the graph-padding rows' top-k lands in
// the buffer's rows past the tokens, which belong to prefill tokens.
class TopkRowsPastTheView final : public IndexerDecodeStep {
 public:
  using IndexerDecodeStep::IndexerDecodeStep;
  IndexerDecodeStepResult run(const IndexerDecodeStepInputs& in) override {
    IndexerDecodeStepResult r = IndexerDecodeStep::run(in);
    const int64_t T = r.num_decode_tokens, k = limits_.topk;
    const bool flattened = in.batch.layout == MetadataLayout::kFlattened;
    const int64_t past = std::min(r.rows, in.topk_buffer.view.size(0)) - T;
    if (flattened && r.padded_topk && past > 0) {
      const DeviceTensor padded{padded_topk_->data(), View::contiguous(DType::kI32, {r.rows, k})};
      copy_rows(device_, rows_of(padded, T, past), rows_of(in.topk_buffer, T, past));
    }
    return r;
  }
};

// R2 (vLLM #42072): the packed top-k rows are regrouped as [B, next_n, k] (the configured next_n)
// instead of [B, next_n', k] before unpacking, so every request after the first reads another
// request's rows (silently, since the shapes divide).
class UnpackWithConfiguredNextN final : public IndexerDecodeStep {
 public:
  using IndexerDecodeStep::IndexerDecodeStep;
  IndexerDecodeStepResult run(const IndexerDecodeStepInputs& in) override {
    IndexerDecodeStepResult r = IndexerDecodeStep::run(in);
    const int64_t T = r.num_decode_tokens, k = limits_.topk, next_n = limits_.metadata.next_n;
    if (r.packed && T > 0 && r.next_n != next_n) {
      const int64_t B = r.rows / r.next_n;
      const DeviceTensor packed{padded_topk_->data(), View::contiguous(DType::kI32, {B, next_n, k})};
      unpack_decode(device_, in.batch.query_start_loc, packed, r.topk);
      topk_to_global(device_, in.batch.query_start_loc, r.topk, in.batch.block_table, in.block_size, r.global);
    }
    return r;
  }
};


}  // namespace

void register_indexer_decode_step_mutants(Registry& reg) {
  reg.add({"indexer_decode_step", "R1",
           "seeded bug R1 (vLLM #42072): top-k of all num_padded_tokens rows written into a view of num_decode_tokens"},
          &make_variant<TopkRowsPastTheView, IndexerDecodeStep, IndexerDecodeStepLimits>);
  reg.add({"indexer_decode_step", "R2",
           "seeded bug R2 (vLLM #42072): packed top-k regrouped as [B, next_n, k], not [B, next_n', k]"},
          &make_variant<UnpackWithConfiguredNextN, IndexerDecodeStep, IndexerDecodeStepLimits>);
}

}  // namespace mlacheck::kernels
