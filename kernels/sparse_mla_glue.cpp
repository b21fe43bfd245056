// Checked entry point of sparse MLA decode (kernels/sparse_mla_glue.h).
#include "kernels/sparse_mla_glue.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "core/error.h"
#include "kernels/sparse_mla.h"

namespace mlacheck::kernels {
namespace {

constexpr const char* kOp = "sparse_mla_decode";
constexpr int64_t kMaxGridYZ = 65535;  // CUDA's limit on gridDim.y and gridDim.z
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// An output that shares bytes with an input (or the other output) would be read after it is
// written, or written twice.
void require_disjoint(const DeviceTensor& out, const char* out_name, const DeviceTensor& other, const char* name) {
  if (other.base == nullptr || out.base != other.base) return;
  const ByteSpan a = out.view.byte_span(), b = other.view.byte_span();
  MLA_REQUIRE(a.empty() || b.empty() || a.end <= b.begin || b.end <= a.begin, kOp, ": ", out_name, " ",
              out.view.to_string(), " overlaps ", name, " ", other.view.to_string());
}

}  // namespace

void sparse_mla_decode(Device& device, const SparseMlaArgs& a) {
  sparse_mla_decode_seeded(device, a, SparseMlaBug::kNone);
}

void sparse_mla_decode_seeded(Device& device, const SparseMlaArgs& a, SparseMlaBug bug) {
  const View& q = a.q.view;
  MLA_REQUIRE(q.dtype() == DType::kBF16 && q.rank() == 4 && q.size(3) == kSparseMlaHeadDim && q.is_contiguous(), kOp,
              ": q must be contiguous bf16 [b, s_q, h, 576], got ", q.to_string());
  const int64_t B = q.size(0), S = q.size(1), H = q.size(2);
  MLA_REQUIRE(B <= kMaxGridYZ && S <= kMaxGridYZ && H <= kInt32Max, kOp, ": q ", q.to_string(),
              " needs b and s_q <= ", kMaxGridYZ);

  const View& kv = a.kv_cache.view;
  MLA_REQUIRE(kv.dtype() == DType::kU8 && kv.rank() == 3 && kv.size(2) == kSparseMlaTokenBytes && kv.stride(2) == 1,
              kOp, ": kv_cache must be u8 [num_blocks, page, 656] with unit byte stride, got ", kv.to_string());
  const int64_t num_blocks = kv.size(0), page = kv.size(1);
  MLA_REQUIRE(page >= 1 && page <= kInt32Max && num_blocks <= kInt32Max, kOp, ": kv_cache ", kv.to_string(),
              " needs a page of at least one token and at most ", kInt32Max, " blocks");
  // The kernel reads each token with 16-byte loads from kv + block * stride0 + offset * stride1.
  MLA_REQUIRE(kv.stride(1) % 16 == 0 && kv.stride(1) >= kSparseMlaTokenBytes && kv.stride(0) % 16 == 0 &&
                  (num_blocks <= 1 || kv.stride(0) >= page * kv.stride(1)),
              kOp, ": kv_cache ", kv.to_string(),
              " needs a token stride >= 656 and a block stride >= page * token stride, both multiples of 16");
  MLA_REQUIRE(reinterpret_cast<std::uintptr_t>(a.kv_cache.data<uint8_t>()) % 16 == 0, kOp, ": kv_cache ",
              kv.to_string(), " must start 16-byte aligned");

  const View& idx = a.indices.view;
  MLA_REQUIRE(idx.dtype() == DType::kI32 && idx.rank() == 3 && idx.size(0) == B && idx.size(1) == S &&
                  idx.is_contiguous() && idx.size(2) <= kInt32Max,
              kOp, ": indices must be contiguous int32 [b = ", B, ", s_q = ", S, ", topk], got ", idx.to_string());
  const int64_t topk = idx.size(2);

  if (a.topk_length.base != nullptr) {
    const View& len = a.topk_length.view;
    MLA_REQUIRE(len.dtype() == DType::kI32 && len.rank() == 1 && len.size(0) == B && len.is_contiguous(), kOp,
                ": topk_length must be contiguous int32 [b = ", B, "], got ", len.to_string());
  }
  if (a.attn_sink.base != nullptr) {
    const View& sink = a.attn_sink.view;
    MLA_REQUIRE(sink.dtype() == DType::kF32 && sink.rank() == 1 && sink.size(0) == H && sink.is_contiguous(), kOp,
                ": attn_sink must be contiguous fp32 [h = ", H, "], got ", sink.to_string());
  }
  MLA_REQUIRE(std::isfinite(static_cast<float>(a.softmax_scale)), kOp, ": softmax_scale ", a.softmax_scale,
              " is not a finite fp32 value");

  const View& out = a.out.view;
  MLA_REQUIRE(out.dtype() == DType::kBF16 && out.rank() == 4 && out.size(0) == B && out.size(1) == S &&
                  out.size(2) == H && out.size(3) == kSparseMlaLatent && out.is_contiguous(),
              kOp, ": out must be contiguous bf16 [b = ", B, ", s_q = ", S, ", h = ", H, ", 512], got ",
              out.to_string());
  const View& lse = a.lse.view;
  MLA_REQUIRE(lse.dtype() == DType::kF32 && lse.rank() == 3 && lse.size(0) == B && lse.size(1) == H &&
                  lse.size(2) == S && lse.is_contiguous(),
              kOp, ": lse must be contiguous fp32 [b = ", B, ", h = ", H, ", s_q = ", S, "] (heads before s_q), got ",
              lse.to_string());
  for (const auto& [o, o_name] : {std::pair{&a.out, "out"}, {&a.lse, "lse"}}) {
    for (const auto& [in, name] : {std::pair{&a.q, "q"},
                                   {&a.kv_cache, "kv_cache"},
                                   {&a.indices, "indices"},
                                   {&a.topk_length, "topk_length"},
                                   {&a.attn_sink, "attn_sink"}}) {
      require_disjoint(*o, o_name, *in, name);
    }
  }
  require_disjoint(a.out, "out", a.lse, "lse");

  SparseMlaParams p;
  p.q = a.q.data<uint16_t>();
  p.kv = a.kv_cache.data<uint8_t>();
  p.kv_block_stride = kv.stride(0);
  p.kv_token_stride = kv.stride(1);
  p.num_blocks = static_cast<int32_t>(num_blocks);
  p.page = static_cast<int32_t>(page);
  p.indices = a.indices.data<int32_t>();
  p.topk_length = a.topk_length.base != nullptr ? a.topk_length.data<int32_t>() : nullptr;
  p.attn_sink = a.attn_sink.base != nullptr ? a.attn_sink.data<float>() : nullptr;
  p.softmax_scale = static_cast<float>(a.softmax_scale);
  p.batch = static_cast<int32_t>(B);
  p.s_q = static_cast<int32_t>(S);
  p.heads = static_cast<int32_t>(H);
  p.topk = static_cast<int32_t>(topk);
  p.out = a.out.data<uint16_t>();
  p.lse = a.lse.data<float>();
  MLA_DISPATCH(device, launch_sparse_mla_decode_seeded, p, bug);
}

}  // namespace mlacheck::kernels
