// The dense MLA decode implementation object (kernels/mla_decode_impl.h).
#include "kernels/mla_decode_impl.h"

#include <algorithm>
#include <sstream>
#include <string>

#include "core/error.h"
#include "kernels/mla_decode_glue.h"

namespace mlacheck::kernels {
namespace {

constexpr const char* kOp = "mla_decode_impl";

std::string list_of(const std::vector<int32_t>& v) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < v.size() && i < 8; ++i) os << (i ? ", " : "") << v[i];
  if (v.size() > 8) os << ", ...";
  os << ']';
  return os.str();
}

}  // namespace

MlaDecodeImpl::MlaDecodeImpl(Device& device, const MlaDecodeImplConfig& c) : device_(device), config_(c) {
  MLA_REQUIRE(c.max_batch >= 1 && c.heads >= 1 && c.max_q_len >= 1 && c.max_q_len <= kMlaMaxQueryLen &&
                  c.max_splits >= 1 && c.max_splits <= kMlaMaxSplits && c.block_table_width >= 1 && c.page >= 1,
              kOp, ": configuration out of range: max_batch ", c.max_batch, " max_q_len ", c.max_q_len, " (1..",
              kMlaMaxQueryLen, ") heads ", c.heads, " max_splits ", c.max_splits, " (1..", kMlaMaxSplits,
              ") block_table_width ", c.block_table_width, " page ", c.page);
  MLA_REQUIRE(c.q_dtype == DType::kBF16 || c.q_dtype == DType::kFP8E4M3, kOp, ": q dtype must be bf16 or fp8_e4m3");
  const int64_t rows = c.max_batch * c.max_q_len * c.heads;
  workspace_ = device.allocate("mla workspace",
                               4 * mla_decode_workspace_floats(c.max_batch, c.max_q_len, c.heads, c.max_splits));
  q_ = device.allocate("mla graph q", rows * kMlaHeadDim * static_cast<int64_t>(dtype_size(c.q_dtype)));
  seq_lens_ = device.allocate("mla graph seq_lens", 4 * c.max_batch);
  block_table_ = device.allocate("mla graph block_table", 4 * c.max_batch * c.block_table_width);
  o_ = device.allocate("mla graph o", 2 * rows * kMlaValueDim);
  lse_ = device.allocate("mla graph lse", 4 * rows);
  const std::vector<int32_t> zeros(static_cast<size_t>(c.max_batch * c.block_table_width), 0);
  seq_lens_->write(0, zeros.data(), 4 * c.max_batch);
  block_table_->write(0, zeros.data(), 4 * c.max_batch * c.block_table_width);
}

MlaDecodeImpl::~MlaDecodeImpl() = default;

int64_t MlaDecodeImpl::splits_for(int64_t batch, int64_t q_len, int64_t max_seq_len) const {
  const int64_t s = mla_decode_num_splits(batch, q_len, config_.heads, max_seq_len, device_.multiprocessors());
  return std::clamp<int64_t>(s, 1, config_.max_splits);
}

void MlaDecodeImpl::launch(const MlaDecodeCall& call, int64_t num_splits) {
  const View& q = call.q.view;
  MLA_REQUIRE(q.rank() == 4 && q.size(2) == config_.heads && q.size(3) == kMlaHeadDim, kOp, ": q must be [B, q_len, H = ",
              config_.heads, ", 576], got ", q.to_string());
  const int64_t B = q.size(0), q_len = q.size(1);
  MLA_REQUIRE(B <= config_.max_batch && q_len >= 1 && q_len <= config_.max_q_len, kOp, ": a batch of ", B,
              " requests with q_len ", q_len, " is past the configured max_batch ", config_.max_batch, " / max_q_len ",
              config_.max_q_len, " (the workspace is sized once for those)");
  MlaDecodeArgs a;
  a.q = call.q;
  a.kv_cache = call.kv_cache;
  a.block_table = call.block_table;
  a.seq_lens = call.seq_lens;
  a.base_scale = call.base_scale;
  a.q_scale = call.q_scale;
  a.k_scale = call.k_scale;
  a.num_splits = num_splits;
  a.workspace = {workspace_->data(),
                 View::contiguous(DType::kF32, {mla_decode_workspace_floats(B, q_len, config_.heads, num_splits)})};
  a.o = call.o;
  a.lse = call.lse;
  a.host_seq_lens = call.host_seq_lens.empty() ? nullptr : &call.host_seq_lens;
  mla_decode(device_, a);
  last_num_splits_ = num_splits;
}

void MlaDecodeImpl::forward(const MlaDecodeCall& call) {
  const View& q = call.q.view;
  MLA_REQUIRE(q.rank() == 4, kOp, ": q must be [B, q_len, H, 576], got ", q.to_string());
  const int64_t B = q.size(0), q_len = q.size(1);
  // vLLM #41778: non-uniform query lengths "handled" by viewing q as one token per row broke the
  // pairing of q rows with block_table and seq_lens rows. Refuse instead.
  if (!call.host_query_lens.empty()) {
    const bool uniform = static_cast<int64_t>(call.host_query_lens.size()) == B &&
                         std::all_of(call.host_query_lens.begin(), call.host_query_lens.end(),
                                     [&](int32_t n) { return n == q_len; });
    MLA_REQUIRE(uniform, kOp, ": query lengths ", list_of(call.host_query_lens), " of ",
                call.host_query_lens.size(), " requests are not all q_len = ", q_len, " of q ", q.to_string(),
                ": split the batch by query length or pad it (this impl never reshapes q)");
  }
  int64_t longest = 0;
  if (!call.host_seq_lens.empty()) {
    for (int32_t l : call.host_seq_lens) longest = std::max<int64_t>(longest, l);
  } else {
    const View& t = call.block_table.view;
    const View& kv = call.kv_cache.view;
    longest = (t.rank() == 2 ? t.size(1) : 0) * (kv.rank() == 3 ? kv.size(1) : 1);
  }
  launch(call, splits_for(B, q_len, longest));
}

MlaGraphBuffers MlaDecodeImpl::graph_buffers(int64_t B, int64_t q_len) const {
  MLA_REQUIRE(B >= 1 && B <= config_.max_batch && q_len >= 1 && q_len <= config_.max_q_len, kOp,
              ": graph batch ", B, " x q_len ", q_len, " is outside the configured ", config_.max_batch, " x ",
              config_.max_q_len);
  const int64_t H = config_.heads, W = config_.block_table_width;
  return {{q_->data(), View::contiguous(config_.q_dtype, {B, q_len, H, kMlaHeadDim})},
          {seq_lens_->data(), View::contiguous(DType::kI32, {B})},
          {block_table_->data(), View::contiguous(DType::kI32, {B, W})},
          {o_->data(), View::contiguous(DType::kBF16, {B, q_len, H, kMlaValueDim})},
          {lse_->data(), View::contiguous(DType::kF32, {B, q_len, H})}};
}

std::unique_ptr<DeviceGraph> MlaDecodeImpl::capture(int64_t B, int64_t q_len, const DeviceTensor& kv_cache,
                                                    double base_scale, double q_scale, double k_scale) {
  const MlaGraphBuffers g = graph_buffers(B, q_len);
  const View& kv = kv_cache.view;
  MLA_REQUIRE(kv.rank() == 3 && kv.size(1) == config_.page, kOp, ": the graph's cache must have pages of the configured ",
              config_.page, " tokens, got ", kv.to_string());
  MlaDecodeCall call;
  call.q = g.q;
  call.kv_cache = kv_cache;
  const int64_t W = graph_table_columns(B);
  call.block_table = {g.block_table.base, View(DType::kI32, {B, W}, {config_.block_table_width, 1},
                                               g.block_table.view.byte_offset())};
  call.seq_lens = g.seq_lens;
  call.base_scale = base_scale;
  call.q_scale = q_scale;
  call.k_scale = k_scale;
  call.o = g.o;
  call.lse = g.lse;
  // The split count is fixed by the capture, so it is chosen for the longest sequence the graph's
  // block table can hold; the bounds of each split come from the device seq_lens at replay.
  const int64_t splits = splits_for(B, q_len, config_.block_table_width * config_.page);
  return device_.capture([&] { launch(call, splits); });
}

int64_t MlaDecodeImpl::graph_table_columns(int64_t) {
  // All of them: a replay's sequences may reach any length the table holds, and the kernel bounds
  // each row by its seq_len on the device.
  return config_.block_table_width;
}

}  // namespace mlacheck::kernels
