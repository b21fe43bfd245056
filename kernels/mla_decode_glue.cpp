// Checked entry point of the dense split-KV MLA decode (kernels/mla_decode_glue.h) and its split heuristic.
#include "kernels/mla_decode_glue.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "core/error.h"

namespace mlacheck::kernels {
namespace {

constexpr const char* kOp = "mla_decode";
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
// The split kernel's head group (kernels/mla_decode.cu): grid x is groups * B * q_len.
constexpr int64_t kHeadsPerProgram = 16;
// No split shorter than this many keys: below it a program's fixed cost (q staging, the merge's
// extra row) outweighs the parallelism it adds.
constexpr int64_t kMinSplitKeys = 256;

bool is_mla_dtype(DType t) { return t == DType::kBF16 || t == DType::kFP8E4M3; }

// A misaligned element is a sticky fault on a GPU (and undefined behaviour on the host).
void require_aligned(const DeviceTensor& t, const char* name) {
  const auto address = reinterpret_cast<std::uintptr_t>(t.data<uint8_t>());
  MLA_REQUIRE(address % static_cast<std::uintptr_t>(t.view.element_size()) == 0, kOp, ": ", name, " ",
              t.view.to_string(), " is not aligned to its ", t.view.element_size(), "-byte elements");
}

// Two views of one buffer that share bytes: an output would be read (or written twice) after it is written.
void require_disjoint(const DeviceTensor& out, const char* out_name, const DeviceTensor& other, const char* other_name) {
  if (out.base != other.base) return;
  const ByteSpan a = out.view.byte_span(), b = other.view.byte_span();
  MLA_REQUIRE(a.empty() || b.empty() || a.end <= b.begin || b.end <= a.begin, kOp, ": ", out_name, " ",
              out.view.to_string(), " overlaps ", other_name, " ", other.view.to_string());
}

}  // namespace

MlaDecodeParams mla_decode_params(const MlaDecodeArgs& a) {
  const View& q = a.q.view;
  MLA_REQUIRE(is_mla_dtype(q.dtype()) && q.rank() == 4 && q.size(3) == kMlaHeadDim && q.is_contiguous(), kOp,
              ": q must be contiguous bf16 or fp8_e4m3 [B, q_len, H, 576], got ", q.to_string());
  const int64_t B = q.size(0), q_len = q.size(1), H = q.size(2);
  MLA_REQUIRE(q_len >= 1 && q_len <= kMlaMaxQueryLen, kOp, ": q ", q.to_string(), " has q_len ", q_len,
              ", outside [1, ", kMlaMaxQueryLen, "]");
  MLA_REQUIRE(H >= 1 && B * q_len * H <= kInt32Max && (H + kHeadsPerProgram - 1) / kHeadsPerProgram * B * q_len <= kInt32Max,
              kOp, ": q ", q.to_string(), " needs H >= 1 and fewer than 2^31 (b, t, h) rows");

  const View& kv = a.kv_cache.view;
  MLA_REQUIRE(is_mla_dtype(kv.dtype()) && kv.rank() == 3 && kv.size(1) >= 1 && kv.size(2) == kMlaHeadDim &&
                  kv.stride(2) == 1,
              kOp, ": kv_cache must be bf16 or fp8_e4m3 [num_blocks, page >= 1, 576] with unit stride along the 576, got ",
              kv.to_string());
  const int64_t num_blocks = kv.size(0), page = kv.size(1);
  MLA_REQUIRE(num_blocks <= kInt32Max && page <= kInt32Max && (page == 1 || kv.stride(1) >= kMlaHeadDim), kOp,
              ": kv_cache ", kv.to_string(), " needs fewer than 2^31 blocks and tokens of a page that do not overlap");

  const View& t = a.block_table.view;
  MLA_REQUIRE(t.dtype() == DType::kI32 && t.rank() == 2 && t.size(0) == B && (t.size(1) <= 1 || t.stride(1) == 1) &&
                  t.size(1) <= kInt32Max,
              kOp, ": block_table must be int32 [B = ", B, ", W] with unit column stride, got ", t.to_string());
  const View& lens = a.seq_lens.view;
  MLA_REQUIRE(lens.dtype() == DType::kI32 && lens.rank() == 1 && lens.size(0) == B && lens.is_contiguous(), kOp,
              ": seq_lens must be contiguous int32 [B = ", B, "], got ", lens.to_string());

  MLA_REQUIRE(a.num_splits >= 1 && a.num_splits <= kMlaMaxSplits, kOp, ": num_splits ", a.num_splits,
              " is outside [1, ", kMlaMaxSplits, "]");
  const double softmax_scale = a.base_scale * a.q_scale * a.k_scale;
  MLA_REQUIRE(std::isfinite(a.base_scale) && std::isfinite(a.q_scale) && std::isfinite(a.k_scale) && a.base_scale > 0 &&
                  a.q_scale > 0 && a.k_scale > 0 && std::isfinite(static_cast<float>(softmax_scale)) &&
                  std::isfinite(static_cast<float>(a.k_scale)),
              kOp, ": scales must be positive and finite in fp32, got base_scale ", a.base_scale, ", q_scale ",
              a.q_scale, ", k_scale ", a.k_scale);

  const View& ws = a.workspace.view;
  const int64_t ws_floats = mla_decode_workspace_floats(B, q_len, H, a.num_splits);
  MLA_REQUIRE(ws.dtype() == DType::kF32 && ws.is_contiguous() && ws.numel() >= ws_floats, kOp,
              ": workspace must be contiguous fp32 with at least ", ws_floats, " floats (B ", B, " x q_len ", q_len,
              " x H ", H, " x num_splits ", a.num_splits, " x ", kMlaWorkspaceRow, "), got ", ws.to_string());
  const View& o = a.o.view;
  MLA_REQUIRE(o.dtype() == DType::kBF16 && o.rank() == 4 && o.size(0) == B && o.size(1) == q_len && o.size(2) == H &&
                  o.size(3) == kMlaValueDim && o.is_contiguous(),
              kOp, ": o must be contiguous bf16 [", B, ", ", q_len, ", ", H, ", 512], got ", o.to_string());
  const View& lse = a.lse.view;
  MLA_REQUIRE(lse.dtype() == DType::kF32 && lse.rank() == 3 && lse.size(0) == B && lse.size(1) == q_len &&
                  lse.size(2) == H && lse.is_contiguous(),
              kOp, ": lse must be contiguous fp32 [", B, ", ", q_len, ", ", H, "], got ", lse.to_string());

  for (const auto& [tensor, name] : {std::pair{&a.q, "q"},
                                     {&a.kv_cache, "kv_cache"},
                                     {&a.block_table, "block_table"},
                                     {&a.seq_lens, "seq_lens"},
                                     {&a.workspace, "workspace"},
                                     {&a.o, "o"},
                                     {&a.lse, "lse"}}) {
    require_aligned(*tensor, name);
  }
  for (const auto& [out, out_name] : {std::pair{&a.workspace, "workspace"}, {&a.o, "o"}, {&a.lse, "lse"}}) {
    for (const auto& [in, in_name] : {std::pair{&a.q, "q"},
                                      {&a.kv_cache, "kv_cache"},
                                      {&a.block_table, "block_table"},
                                      {&a.seq_lens, "seq_lens"}}) {
      require_disjoint(*out, out_name, *in, in_name);
    }
  }
  require_disjoint(a.o, "o", a.lse, "lse");
  require_disjoint(a.o, "o", a.workspace, "workspace");
  require_disjoint(a.lse, "lse", a.workspace, "workspace");

  if (a.host_seq_lens != nullptr) {
    const std::vector<int32_t>& host = *a.host_seq_lens;
    MLA_REQUIRE(static_cast<int64_t>(host.size()) == B, kOp, ": the host copy of seq_lens has ", host.size(),
                " values for B = ", B);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = host[static_cast<size_t>(b)];
      MLA_REQUIRE(len >= 0, kOp, ": seq_lens entry ", b, " is ", len);
      MLA_REQUIRE((len + page - 1) / page <= t.size(1), kOp, ": request ", b, " has seq_len ", len, " and needs ",
                  (len + page - 1) / page, " block_table columns of page ", page, ", but block_table ", t.to_string(),
                  " has ", t.size(1));
    }
  }

  MlaDecodeParams p;
  p.q = a.q.data<void>();
  p.q_fp8 = q.dtype() == DType::kFP8E4M3;
  p.kv = a.kv_cache.data<void>();
  p.kv_fp8 = kv.dtype() == DType::kFP8E4M3;
  p.kv_block_stride = num_blocks > 1 ? kv.stride(0) : 0;
  p.kv_token_stride = page > 1 ? kv.stride(1) : kMlaHeadDim;
  p.page = static_cast<int32_t>(page);
  p.num_blocks = static_cast<int32_t>(num_blocks);
  p.block_table = a.block_table.data<int32_t>();
  p.block_table_stride = B > 1 ? t.stride(0) : 0;
  p.block_table_width = static_cast<int32_t>(t.size(1));
  p.seq_lens = a.seq_lens.data<int32_t>();
  p.batch = static_cast<int32_t>(B);
  p.q_len = static_cast<int32_t>(q_len);
  p.heads = static_cast<int32_t>(H);
  p.num_splits = static_cast<int32_t>(a.num_splits);
  p.softmax_scale = static_cast<float>(softmax_scale);
  p.output_scale = static_cast<float>(a.k_scale);
  p.workspace = a.workspace.data<float>();
  p.o = a.o.data<uint16_t>();
  p.lse = a.lse.data<float>();
  return p;
}

void mla_decode(Device& device, const MlaDecodeArgs& a) {
  const MlaDecodeParams p = mla_decode_params(a);
  MLA_DISPATCH(device, launch_mla_decode_split, p);
  MLA_DISPATCH(device, launch_mla_decode_merge, p);
}

int64_t mla_decode_num_splits(int64_t batch, int64_t q_len, int64_t heads, int64_t max_seq_len, int64_t sm_count) {
  const int64_t programs = std::max<int64_t>(batch, 1) * std::max<int64_t>(q_len, 1) *
                           ((std::max<int64_t>(heads, 1) + kHeadsPerProgram - 1) / kHeadsPerProgram);
  const int64_t target = 2 * std::max<int64_t>(sm_count, 1);  // two programs per SM (113 KiB of shared each)
  int64_t splits = (target + programs - 1) / programs;
  splits = std::min(splits, max_seq_len / kMinSplitKeys);
  return std::clamp<int64_t>(splits, 1, kMlaMaxSplits);
}

}  // namespace mlacheck::kernels
