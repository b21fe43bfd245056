// Indexer decode step seeded bugs (kernels/mutants/mutants.h): the production step (kernels/
// indexer_decode_step.h) with one of its decision hooks overridden, so @ref and each variant run
// the same IndexerDecodeStep::run.
#include <algorithm>
#include <memory>

#include "kernels/indexer_decode_step.h"
#include "kernels/mutants/mutants.h"

namespace mlacheck::kernels {

namespace {

// R1 (vLLM #42072): the top-k's output is the shared buffer sliced to num_decode_tokens rows, but
// the kernel writes all num_padded_tokens rows of its launch: the graph-padding rows' top-k lands in
// the buffer's rows past the tokens, which belong to prefill tokens.
class TopkRowsPastTheView final : public IndexerDecodeStep {
 public:
  using IndexerDecodeStep::IndexerDecodeStep;
  int64_t rows_into_shared_buffer(const IndexerDecodeStepResult& r, const IndexerDecodeStepInputs& in) const override {
    return std::min(r.rows, in.topk_buffer.view.size(0));
  }
};

// R2 (vLLM #42072): the packed top-k rows are regrouped as [B, next_n, k] (the configured next_n)
// instead of [B, next_n', k] before unpacking, so every request after the first reads another
// request's rows (silently, since the shapes divide).
class UnpackWithConfiguredNextN final : public IndexerDecodeStep {
 public:
  using IndexerDecodeStep::IndexerDecodeStep;
  int64_t unpack_next_n(const IndexerDecodeStepResult&) const override { return limits_.metadata.next_n; }
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
