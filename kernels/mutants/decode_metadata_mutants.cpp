// Decode metadata seeded bugs (kernels/mutants/mutants.h): the production MetadataBuilder
// (kernels/metadata_builder.cpp) with exactly one of its decision hooks overridden, so @ref and
// every variant run the same build().
#include <algorithm>
#include <memory>
#include <vector>

#include "kernels/decode_metadata.h"
#include "kernels/metadata_builder.h"
#include "kernels/mutants/mutants.h"

namespace mlacheck::kernels {

namespace {

// U1 (vLLM #39458): the uniform fused kernel is taken whenever the longest decode length is above
// 1, without checking that every request has it: short requests' tokens get another request's
// context and block-table row.
class UniformPathWhenMaxAboveOne final : public MetadataBuilder {
 public:
  using MetadataBuilder::MetadataBuilder;
  bool uniform_path(const MetadataStepShape& s, const MetadataBatch& batch) const override {
    return batch.path == MetadataPathChoice::kAuto && s.max_len > 1;
  }
};

// U2 (vLLM #39458 as merged): num_decode_tokens is overwritten with B * max_len instead of being
// required to equal the sum of the decode lengths (they differ for non-uniform or padded batches).
class TokenCountFromBatchTimesMax final : public MetadataBuilder {
 public:
  using MetadataBuilder::MetadataBuilder;
  MetadataStepShape checked_step(const MetadataBatch& batch) override {
    MetadataBatch unchecked = batch;
    unchecked.num_decode_tokens = -1;
    MetadataStepShape s = check_metadata_batch(unchecked, limits_);
    s.num_tokens = int64_t(s.B) * s.max_len;
    s.rows = std::max(s.rows, s.num_tokens);
    return s;
  }
};

// U5: the flat buffers' rows past this step's tokens are not reset, so a smaller step after a
// larger one hands the larger step's rows on as if they were graph padding.
class FlatTailNotReset final : public MetadataBuilder {
 public:
  using MetadataBuilder::MetadataBuilder;
  int64_t flat_reset_end(const MetadataStepShape& s) const override { return s.num_tokens; }
};

// C1 (vLLM #42135): native context_lens written in rows of the configured next_n and handed out as
// the [B, next_n'] slice of them: not contiguous when next_n' < next_n and B >= 2, while the
// consumer steps rows by next_n'.
class NativeRowsOfNextNSliced final : public MetadataBuilder {
 public:
  using MetadataBuilder::MetadataBuilder;
  int32_t native_row_stride(const MetadataStepShape&) const override { return static_cast<int32_t>(limits_.next_n); }
  View native_view(const MetadataStepShape& s) const override {
    return View(DType::kI32, {s.B, s.max_len}, {limits_.next_n, 1});
  }
};

// C2 (review of vLLM #42135): C1 "fixed" with a fresh contiguous buffer every native step, so the
// address changes and a graph captured on an earlier step reads the old buffer.
class FreshContextLensEachStep final : public MetadataBuilder {
 public:
  using MetadataBuilder::MetadataBuilder;
  GuardedMemory& native_buffer() override {
    retired_.push_back(std::move(context_lens_));  // a captured graph still points into it
    context_lens_ = device_.allocate("metadata context_lens", limits_.max_requests * limits_.next_n * 4);
    native_dirty_elements_ = limits_.max_requests * limits_.next_n;  // fresh memory: reset it all
    return *context_lens_;
  }

 private:
  std::vector<std::unique_ptr<GuardedMemory>> retired_;
};

// C3: the native layout has next_n columns (the configured next_n) instead of next_n'.
class NativeColumnsOfNextN final : public MetadataBuilder {
 public:
  using MetadataBuilder::MetadataBuilder;
  int32_t native_row_stride(const MetadataStepShape&) const override { return static_cast<int32_t>(limits_.next_n); }
  View native_view(const MetadataStepShape& s) const override {
    return View::contiguous(DType::kI32, {s.B, limits_.next_n});
  }
};

// U3 (vLLM #51538): the expansion kernels do not clamp the context length at 0, so a padding
// request (L = 0), or a request shorter than its decode tokens, gets a negative length.
class ContextLengthNotClamped final : public MetadataBuilder {
 public:
  using MetadataBuilder::MetadataBuilder;
  void expand(bool uniform, const ExpandMetadataParams& p) override {
    MLA_DISPATCH(device_, expand_metadata_seeded, uniform, p, MetadataBug::kU3NoClampAtZero);
  }
};

// U6: the uniform fused kernel's context length is one more than the general path's.
class UniformPathOffByOne final : public MetadataBuilder {
 public:
  using MetadataBuilder::MetadataBuilder;
  void expand(bool uniform, const ExpandMetadataParams& p) override {
    MLA_DISPATCH(device_, expand_metadata_seeded, uniform, p, MetadataBug::kU6UniformOneLonger);
  }
};


}  // namespace

void register_decode_metadata_mutants(Registry& reg) {
  reg.add({"decode_metadata", "U1",
           "seeded bug U1 (vLLM #39458): uniform fast path whenever max decode length > 1, min == max unchecked"},
          &make_variant<UniformPathWhenMaxAboveOne, MetadataBuilder, MetadataLimits>);
  reg.add({"decode_metadata", "U2",
           "seeded bug U2 (vLLM #39458 as merged): num_decode_tokens overwritten with B * max_len"},
          &make_variant<TokenCountFromBatchTimesMax, MetadataBuilder, MetadataLimits>);
  reg.add({"decode_metadata", "U3",
           "seeded bug U3 (vLLM #51538): context length not clamped at 0 (a padding request gets L - d + t + 1 < 0)"},
          &make_variant<ContextLengthNotClamped, MetadataBuilder, MetadataLimits>);
  reg.add({"decode_metadata", "U6", "seeded bug U6: the uniform fast path's context length one past the general path's"},
          &make_variant<UniformPathOffByOne, MetadataBuilder, MetadataLimits>);
  reg.add({"decode_metadata", "U5", "seeded bug U5: flat rows past this step's tokens not reset after a larger step"},
          &make_variant<FlatTailNotReset, MetadataBuilder, MetadataLimits>);
  reg.add({"decode_metadata", "C1",
           "seeded bug C1 (vLLM #42135): native context_lens in rows of next_n, sliced to [B, next_n'] (strided)"},
          &make_variant<NativeRowsOfNextNSliced, MetadataBuilder, MetadataLimits>);
  reg.add({"decode_metadata", "C2",
           "seeded bug C2 (review of vLLM #42135): a fresh context_lens buffer every native step"},
          &make_variant<FreshContextLensEachStep, MetadataBuilder, MetadataLimits>);
  reg.add({"decode_metadata", "C3", "seeded bug C3: native context_lens with next_n columns, not next_n'"},
          &make_variant<NativeColumnsOfNextN, MetadataBuilder, MetadataLimits>);
}

}  // namespace mlacheck::kernels
