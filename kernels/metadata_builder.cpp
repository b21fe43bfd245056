// The decode metadata builder (kernels/metadata_builder.h): checks a step's batch, launches the
// docs/ops.md 1 kernels into persistent buffers and hands out views of them.
#include "kernels/metadata_builder.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "kernels/decode_metadata.h"

namespace mlacheck::kernels {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// A contiguous int32 [n] device view with memory behind it.
void require_vector(const DeviceTensor& t, int64_t n, const char* name) {
  const View& v = t.view;
  MLA_REQUIRE(v.dtype() == DType::kI32 && v.rank() == 1 && v.size(0) == n && v.is_contiguous(),
              "metadata builder: ", name, " must be contiguous int32 [", n, "], got ", v.to_string());
  MLA_REQUIRE(n == 0 || t.base != nullptr, "metadata builder: ", name, " has no memory behind it");
}

}  // namespace

MetadataStepShape check_metadata_batch(const MetadataBatch& batch, const MetadataLimits& limits) {
  const View& s = batch.seq_lens.view;
  MLA_REQUIRE(s.rank() == 1, "metadata builder: seq_lens must be int32 [B], got ", s.to_string());
  const int64_t B = s.size(0);
  MLA_REQUIRE(B <= limits.max_requests, "metadata builder: ", B, " requests exceed max_requests = ",
              limits.max_requests);
  require_vector(batch.seq_lens, B, "seq_lens");
  require_vector(batch.decode_lens, B, "decode_lens");
  // The flattened general path places rows by query_start_loc; the native kernel never reads it.
  if (batch.layout == MetadataLayout::kFlattened || batch.query_start_loc.base != nullptr) {
    require_vector(batch.query_start_loc, B + 1, "query_start_loc");
  }
  const View& t = batch.block_table.view;
  MLA_REQUIRE(t.dtype() == DType::kI32 && t.rank() == 2 && t.size(0) == B, "metadata builder: block_table must be int32 [",
              B, ", W], got ", t.to_string());
  MLA_REQUIRE(t.size(1) <= 1 || t.stride(1) == 1, "metadata builder: block_table ", t.to_string(),
              " must have unit column stride");
  MLA_REQUIRE(t.size(1) <= limits.block_table_width, "metadata builder: block_table has ", t.size(1),
              " columns, more than the configured width ", limits.block_table_width);
  MLA_REQUIRE(t.numel() == 0 || batch.block_table.base != nullptr, "metadata builder: block_table has no memory behind it");

  MetadataStepShape step;
  step.B = static_cast<int32_t>(B);
  MLA_REQUIRE(static_cast<int64_t>(batch.host_decode_lens.size()) == B, "metadata builder: ",
              batch.host_decode_lens.size(), " host decode_lens for ", B, " requests");
  step.min_len = limits.next_n;
  for (int64_t b = 0; b < B; ++b) {
    const int32_t d = batch.host_decode_lens[static_cast<size_t>(b)];
    MLA_REQUIRE(d >= 0 && d <= limits.next_n, "metadata builder: decode_lens[", b, "] = ", d,
                " is outside [0, next_n = ", limits.next_n, "]");
    step.num_tokens += d;
    step.min_len = std::min(step.min_len, d);
    step.max_len = std::max(step.max_len, d);
  }
  if (B == 0) step.min_len = 0;
  MLA_REQUIRE(batch.host_seq_lens.empty() || static_cast<int64_t>(batch.host_seq_lens.size()) == B,
              "metadata builder: ", batch.host_seq_lens.size(), " host seq_lens for ", B, " requests");
  for (size_t b = 0; b < batch.host_seq_lens.size(); ++b) {
    MLA_REQUIRE(batch.host_seq_lens[b] >= 0, "metadata builder: seq_lens[", b, "] = ", batch.host_seq_lens[b],
                " is negative");
  }
  // The token count is required to equal the sum, never derived from B * max_len: the two differ
  // as soon as a batch is non-uniform or padded (vLLM #39458).
  MLA_REQUIRE(batch.num_decode_tokens < 0 || batch.num_decode_tokens == step.num_tokens,
              "metadata builder: num_decode_tokens = ", batch.num_decode_tokens, " but decode_lens sum to ",
              step.num_tokens);
  MLA_REQUIRE(step.num_tokens <= limits.max_batched_tokens, "metadata builder: ", step.num_tokens,
              " decode tokens exceed max_batched_tokens = ", limits.max_batched_tokens);
  step.rows = batch.num_padded_tokens < 0 ? step.num_tokens : batch.num_padded_tokens;
  if (batch.layout == MetadataLayout::kFlattened) {
    MLA_REQUIRE(step.rows >= step.num_tokens && step.rows <= limits.max_batched_tokens,
                "metadata builder: num_padded_tokens = ", step.rows, " is outside [num_decode_tokens = ",
                step.num_tokens, ", max_batched_tokens = ", limits.max_batched_tokens, "]");
  } else {
    MLA_REQUIRE(batch.layout == MetadataLayout::kNative, "metadata builder: unknown layout ", int(batch.layout));
    MLA_REQUIRE(step.rows == step.num_tokens, "metadata builder: num_padded_tokens applies to the flattened layout; ",
                "pad a native batch with padding requests (decode_len 0)");
  }
  MLA_REQUIRE(batch.path == MetadataPathChoice::kAuto || batch.path == MetadataPathChoice::kGeneral,
              "metadata builder: unknown path choice ", int(batch.path));
  return step;
}

namespace {

// The flat buffers as kernel outputs: whole rows of the configured width.
FlatMetadataOutputs flat_outputs(GuardedMemory& seq_lens, GuardedMemory& decode_lens, GuardedMemory& block_table,
                                 int64_t width) {
  FlatMetadataOutputs out;
  out.seq_lens = reinterpret_cast<int32_t*>(seq_lens.data());
  out.decode_lens = reinterpret_cast<int32_t*>(decode_lens.data());
  out.block_table = reinterpret_cast<int32_t*>(block_table.data());
  out.block_table_row_stride = width;
  out.width = static_cast<int32_t>(width);
  return out;
}

}  // namespace

MetadataBuilder::MetadataBuilder(Device& device, const MetadataLimits& limits) : device_(device), limits_(limits) {
  MLA_REQUIRE(limits.max_batched_tokens >= 1 && limits.max_batched_tokens <= kInt32Max && limits.max_requests >= 1 &&
                  limits.max_requests <= kInt32Max && limits.next_n >= 1 && limits.block_table_width >= 1 &&
                  limits.block_table_width <= kInt32Max &&
                  limits.max_requests * limits.next_n <= kInt32Max,
              "metadata builder: limits max_batched_tokens = ", limits.max_batched_tokens, ", max_requests = ",
              limits.max_requests, ", next_n = ", limits.next_n, ", block_table_width = ", limits.block_table_width,
              " must be positive and fit int32");
  const int64_t rows = limits.max_batched_tokens, i32 = sizeof(int32_t);
  seq_lens_ = device.allocate("metadata seq_lens", rows * i32);
  decode_lens_ = device.allocate("metadata decode_lens", rows * i32);
  block_table_ = device.allocate("metadata block_table", rows * limits.block_table_width * i32);
  context_lens_ = device.allocate("metadata context_lens", limits.max_requests * limits.next_n * i32);
  // Fresh device memory holds anything (the guarded kind holds poison): zero it all once, so a graph
  // captured before the first step reads zeros and every later step only resets what it dirtied.
  ResetFlatTailParams reset;
  reset.out = flat_outputs(*seq_lens_, *decode_lens_, *block_table_, limits.block_table_width);
  reset.begin = 0;
  reset.end = static_cast<int32_t>(rows);
  MLA_DISPATCH(device_, reset_flat_metadata_tail, reset);
  NativeContextLensParams zero;
  zero.context_lens = reinterpret_cast<int32_t*>(context_lens_->data());
  zero.reset_end = limits.max_requests * limits.next_n;
  MLA_DISPATCH(device_, native_context_lens, zero);
}

MetadataBuilder::~MetadataBuilder() = default;

MetadataResult MetadataBuilder::build(const MetadataBatch& batch) {
  const MetadataStepShape step = checked_step(batch);
  MetadataResult result;
  result.layout = batch.layout;
  result.num_decode_tokens = step.num_tokens;
  result.next_n_live = step.max_len;
  const int32_t* seq_lens = batch.seq_lens.data<int32_t>();
  const int32_t* decode_lens = batch.decode_lens.data<int32_t>();

  if (batch.layout == MetadataLayout::kNative) {
    GuardedMemory& buffer = native_buffer();
    NativeContextLensParams p;
    p.seq_lens = seq_lens;
    p.decode_lens = decode_lens;
    p.num_requests = step.B;
    p.row_stride = native_row_stride(step);
    p.context_lens = reinterpret_cast<int32_t*>(buffer.data());
    const int64_t live = int64_t(step.B) * p.row_stride;
    p.reset_end = std::max(live, native_dirty_elements_);
    native_dirty_elements_ = p.reset_end;  // stays conservative if the launch throws
    MLA_DISPATCH(device_, native_context_lens, p);
    native_dirty_elements_ = live;
    result.path = MetadataPath::kNative;
    result.rows = step.B;
    result.context_lens = {buffer.data(), native_view(step)};
    result.block_table = batch.block_table;
    return result;
  }

  const FlatMetadataOutputs out = flat_outputs(*seq_lens_, *decode_lens_, *block_table_, limits_.block_table_width);

  ExpandMetadataParams p;
  p.seq_lens = seq_lens;
  p.decode_lens = decode_lens;
  p.query_start_loc = batch.query_start_loc.data<int32_t>();
  p.block_table = batch.block_table.data<int32_t>();
  p.block_table_row_stride = batch.block_table.view.stride(0);
  p.block_table_width = static_cast<int32_t>(batch.block_table.view.size(1));
  p.num_requests = step.B;
  p.num_tokens = static_cast<int32_t>(step.num_tokens);
  p.out = out;
  const bool uniform = uniform_path(step, batch);
  ResetFlatTailParams reset;
  reset.out = out;
  reset.begin = p.num_tokens;
  reset.end = static_cast<int32_t>(flat_reset_end(step));
  const int64_t dirty_before = flat_dirty_rows_;
  flat_dirty_rows_ = std::max<int64_t>(reset.end, dirty_before);  // stays conservative if a launch throws
  if (uniform) p.uniform_decode_len = step.max_len;
  expand(uniform, p);
  MLA_DISPATCH(device_, reset_flat_metadata_tail, reset);
  // What the next step must reset: this step's tokens, or rows a reset that stopped short left.
  flat_dirty_rows_ = dirty_before > reset.end ? dirty_before : step.num_tokens;

  result.path = uniform ? MetadataPath::kUniform : MetadataPath::kGeneral;
  result.rows = step.rows;
  result.seq_lens = {seq_lens_->data(), View::contiguous(DType::kI32, {step.rows})};
  result.decode_lens = {decode_lens_->data(), View::contiguous(DType::kI32, {step.rows})};
  result.block_table = {block_table_->data(),
                        View(DType::kI32, {step.rows, batch.block_table.view.size(1)}, {limits_.block_table_width, 1})};
  return result;
}

// ---- the decisions, as production makes them ---------------------------------------------------

MetadataStepShape MetadataBuilder::checked_step(const MetadataBatch& batch) {
  return check_metadata_batch(batch, limits_);
}
bool MetadataBuilder::uniform_path(const MetadataStepShape& s, const MetadataBatch& batch) const {
  // The fused kernel maps row r to request r / d: right only when every request has the same d and
  // none is padding (d = 0), i.e. min == max > 0 (vLLM #39458 checked max > 1 alone).
  return batch.path == MetadataPathChoice::kAuto && s.B > 0 && s.min_len == s.max_len && s.min_len > 0;
}
int64_t MetadataBuilder::flat_reset_end(const MetadataStepShape& s) const {
  return std::max(s.num_tokens, flat_dirty_rows_);  // a larger step's rows past this one's go too
}
int32_t MetadataBuilder::native_row_stride(const MetadataStepShape& s) const {
  return s.max_len;  // rows of next_n' (not next_n) elements: C-contiguous, as the consumer steps it
}
View MetadataBuilder::native_view(const MetadataStepShape& s) const {
  return View::contiguous(DType::kI32, {s.B, s.max_len});
}
GuardedMemory& MetadataBuilder::native_buffer() { return *context_lens_; }  // one buffer for life
void MetadataBuilder::expand(bool uniform, const ExpandMetadataParams& p) {
  if (uniform) {
    MLA_DISPATCH(device_, expand_metadata_uniform, p);
  } else {
    MLA_DISPATCH(device_, expand_metadata_general, p);
  }
}

}  // namespace mlacheck::kernels
