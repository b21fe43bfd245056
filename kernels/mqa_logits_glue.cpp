// Checked entry points of the indexer logits kernels (kernels/mqa_logits_glue.h).
#include "kernels/mqa_logits_glue.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "core/error.h"

namespace mlacheck::kernels {
namespace {

constexpr int64_t kMaxGridYZ = 65535;  // CUDA's limit on gridDim.y and gridDim.z
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

bool unit_column_stride(const View& v) { return v.size(v.rank() - 1) <= 1 || v.stride(v.rank() - 1) == 1; }

// The output must be fp32 [rows, cols] with unit column stride and rows that do not overlap.
void require_logits_view(const View& v, int64_t rows, int64_t cols, const char* op) {
  MLA_REQUIRE(v.dtype() == DType::kF32 && v.rank() == 2 && v.size(0) == rows && v.size(1) == cols, op,
              ": logits must be fp32 [", rows, ", ", cols, "], got ", v.to_string());
  MLA_REQUIRE(unit_column_stride(v) && (rows <= 1 || v.stride(0) >= cols), op, ": logits ", v.to_string(),
              " needs unit column stride and a row stride of at least ", cols);
}

// An output that shares bytes with an input would be read after it is written.
void require_disjoint(const DeviceTensor& out, const DeviceTensor& in, const char* in_name, const char* op) {
  if (out.base != in.base) return;
  const ByteSpan a = out.view.byte_span(), b = in.view.byte_span();
  MLA_REQUIRE(a.empty() || b.empty() || a.end <= b.begin || b.end <= a.begin, op, ": logits ", out.view.to_string(),
              " overlaps ", in_name, " ", in.view.to_string());
}

void require_int32_vector(const View& v, int64_t n, const char* what, const char* op) {
  MLA_REQUIRE(v.dtype() == DType::kI32 && v.rank() == 1 && v.size(0) == n, op, ": ", what, " must be int32 [", n,
              "], got ", v.to_string());
}

int64_t rows_per_block(int64_t rows, int64_t H, int64_t D, const char* op) {
  const int64_t n = logits_rows_per_block(rows, H, D);
  MLA_REQUIRE(rows == 0 || n >= 1, op, ": one query row of H = ", H, " heads x D = ", D, " needs ",
              logits_shared_bytes(1, H, D), " bytes of shared memory, more than the ", kLogitsSharedBudget,
              " a block may use");
  return n;
}

}  // namespace

void require_paged_indexer_cache(const DeviceTensor& kv_blocks, int64_t block_size, int64_t head_dim, const char* op) {
  const View& kv = kv_blocks.view;
  MLA_REQUIRE(block_size >= 1 && block_size <= kInt32Max, op, ": block_size ", block_size, " must be positive");
  MLA_REQUIRE(kv.dtype() == DType::kU8 && kv.rank() == 2 && unit_column_stride(kv), op,
              ": kv_blocks must be u8 [num_blocks, block_stride] with unit column stride, got ", kv.to_string());
  const int64_t num_blocks = kv.size(0), block_bytes = block_size * (head_dim + 4);
  MLA_REQUIRE(kv.size(1) >= block_bytes && (num_blocks <= 1 || (kv.stride(0) % 4 == 0 && kv.stride(0) >= kv.size(1))),
              op, ": kv_blocks ", kv.to_string(), " cannot hold blocks of ", block_size, " tokens x (D = ", head_dim,
              " key bytes + a 4-byte scale) = ", block_bytes, " bytes with a block stride that is a multiple of 4");
}

void paged_mqa_logits(Device& device, const PagedMqaLogitsArgs& a) {
  paged_mqa_logits_seeded(device, a, PagedLogitsBug::kNone);
}

void paged_mqa_logits_seeded(Device& device, const PagedMqaLogitsArgs& a, PagedLogitsBug bug) {
  const char* op = "paged_mqa_logits";
  const View& q = a.q.view;
  MLA_REQUIRE(q.dtype() == DType::kFP8E4M3 && q.rank() == 4 && q.is_contiguous(), op,
              ": q must be contiguous fp8 [B, next_n, H, D], got ", q.to_string());
  const int64_t B = q.size(0), next_n = q.size(1), H = q.size(2), D = q.size(3), rows = B * next_n;
  MLA_REQUIRE(next_n >= 1 && H >= 1 && D >= 1 && H <= kInt32Max && D <= kInt32Max && B <= kMaxGridYZ, op, ": q ",
              q.to_string(), " needs next_n, H, D >= 1 and B <= ", kMaxGridYZ);

  require_paged_indexer_cache(a.kv_blocks, a.block_size, D, op);
  const View& kv = a.kv_blocks.view;
  const int64_t num_blocks = kv.size(0);

  const View& w = a.weights.view;
  MLA_REQUIRE(w.dtype() == DType::kF32 && w.rank() == 2 && w.size(0) == rows && w.size(1) == H && w.is_contiguous(), op,
              ": weights must be contiguous fp32 [B * next_n = ", rows, ", H = ", H, "], got ", w.to_string());

  const View& c = a.context_lens.view;
  MLA_REQUIRE(c.dtype() == DType::kI32 && c.rank() >= 1 && c.rank() <= 2 && c.size(0) == B &&
                  (c.rank() == 1 || c.size(1) == next_n),
              op, ": context_lens must be int32 [B = ", B, "] or [B, next_n = ", next_n, "], got ", c.to_string());
  // The kernel reads a 2-D context_lens as context_lens[b * next_n + j] (vLLM #42135 sliced it).
  MLA_REQUIRE(c.rank() == 1 || c.is_contiguous(), op, ": 2-D context_lens ", c.to_string(),
              " is not C-contiguous (strides must be (", next_n, ", 1))");

  const View& t = a.block_table.view;
  MLA_REQUIRE(
      t.dtype() == DType::kI32 && t.rank() == 2 && t.size(0) == B && unit_column_stride(t) && t.size(1) <= kInt32Max,
      op, ": block_table must be int32 [B = ", B, ", W] with unit column stride, got ", t.to_string());

  MLA_REQUIRE(a.max_context_len >= 0 && a.max_context_len <= kInt32Max - kLogitsTileTokens, op, ": max_context_len ",
              a.max_context_len, " is out of range");
  require_logits_view(a.logits.view, rows, a.max_context_len, op);
  for (const auto& [in, name] : {std::pair{&a.q, "q"},
                                 {&a.kv_blocks, "kv_blocks"},
                                 {&a.weights, "weights"},
                                 {&a.context_lens, "context_lens"},
                                 {&a.block_table, "block_table"}}) {
    require_disjoint(a.logits, *in, name, op);
  }

  if (a.host_context_lens != nullptr) {
    const std::vector<int32_t>& lens = *a.host_context_lens;
    MLA_REQUIRE(static_cast<int64_t>(lens.size()) == c.numel(), op, ": the host copy of context_lens has ", lens.size(),
                " values for ", c.to_string());
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t b = r / next_n, j = r % next_n;
      const int64_t n = c.rank() == 2 ? lens[static_cast<size_t>(r)]
                                      : std::max<int64_t>(0, lens[static_cast<size_t>(b)] - next_n + j + 1);
      MLA_REQUIRE(n >= 0 && n <= a.max_context_len, op, ": row ", r, " has context length ", n,
                  ", outside [0, max_context_len = ", a.max_context_len, "]");
      MLA_REQUIRE((n + a.block_size - 1) / a.block_size <= t.size(1), op, ": row ", r, " needs ",
                  (n + a.block_size - 1) / a.block_size, " blocks of ", a.block_size, " tokens for ", n,
                  " tokens but block_table ", t.to_string(), " has ", t.size(1), " columns");
    }
  }

  PagedMqaLogitsParams p;
  p.rows_per_block = static_cast<int32_t>(rows_per_block(next_n, H, D, op));
  MLA_REQUIRE((next_n + p.rows_per_block - 1) / p.rows_per_block <= kMaxGridYZ, op, ": next_n ", next_n, " too large");
  p.q = a.q.data<uint8_t>();
  p.kv = a.kv_blocks.data<uint8_t>();
  p.block_stride = kv.stride(0);
  p.num_blocks = num_blocks;
  p.block_size = static_cast<int32_t>(a.block_size);
  p.weights = a.weights.data<float>();
  p.context_lens = a.context_lens.data<int32_t>();
  p.context_lens_2d = c.rank() == 2;
  p.context_lens_stride = c.rank() == 1 ? c.stride(0) : next_n;
  p.block_table = a.block_table.data<int32_t>();
  p.block_table_stride = t.stride(0);
  p.block_table_width = static_cast<int32_t>(t.size(1));
  p.logits = a.logits.data<float>();
  p.logits_stride = a.logits.view.stride(0);
  p.max_context_len = static_cast<int32_t>(a.max_context_len);
  p.batch = static_cast<int32_t>(B);
  p.next_n = static_cast<int32_t>(next_n);
  p.heads = static_cast<int32_t>(H);
  p.head_dim = static_cast<int32_t>(D);
  p.mode = a.mode;
  MLA_DISPATCH(device, launch_paged_mqa_logits_seeded, p, bug);
}

void mqa_logits(Device& device, const MqaLogitsArgs& a) {
  const char* op = "mqa_logits";
  const View& q = a.q.view;
  MLA_REQUIRE(q.dtype() == DType::kFP8E4M3 && q.rank() == 3 && q.is_contiguous(), op,
              ": q must be contiguous fp8 [M, H, D], got ", q.to_string());
  const int64_t M = q.size(0), H = q.size(1), D = q.size(2);
  MLA_REQUIRE(H >= 1 && D >= 1 && M <= kInt32Max && H <= kInt32Max && D <= kInt32Max, op, ": q ", q.to_string(),
              " needs H, D >= 1");
  const View& k = a.k.view;
  MLA_REQUIRE(k.dtype() == DType::kFP8E4M3 && k.rank() == 2 && k.size(1) == D && unit_column_stride(k), op,
              ": k must be fp8 [N, D = ", D, "] with unit column stride, got ", k.to_string());
  const int64_t N = k.size(0);
  MLA_REQUIRE(N <= kMaxGridYZ * kLogitsTileTokens, op, ": N = ", N, " keys is more than ",
              kMaxGridYZ * kLogitsTileTokens);
  const View& s = a.k_scale.view;
  MLA_REQUIRE(s.dtype() == DType::kF32 && s.rank() == 1 && s.size(0) == N, op, ": k_scale must be fp32 [N = ", N,
              "], got ", s.to_string());
  const View& w = a.weights.view;
  MLA_REQUIRE(w.dtype() == DType::kF32 && w.rank() == 2 && w.size(0) == M && w.size(1) == H && w.is_contiguous(), op,
              ": weights must be contiguous fp32 [M = ", M, ", H = ", H, "], got ", w.to_string());
  require_int32_vector(a.ks.view, M, "ks", op);
  require_int32_vector(a.ke.view, M, "ke", op);
  require_logits_view(a.logits.view, M, N, op);
  for (const auto& [in, name] : {std::pair{&a.q, "q"},
                                 {&a.k, "k"},
                                 {&a.k_scale, "k_scale"},
                                 {&a.weights, "weights"},
                                 {&a.ks, "ks"},
                                 {&a.ke, "ke"}}) {
    require_disjoint(a.logits, *in, name, op);
  }
  MLA_REQUIRE((a.host_ks == nullptr) == (a.host_ke == nullptr), op, ": give host copies of both ks and ke, or neither");
  if (a.host_ks != nullptr) {
    MLA_REQUIRE(static_cast<int64_t>(a.host_ks->size()) == M && static_cast<int64_t>(a.host_ke->size()) == M, op,
                ": host copies of ks and ke must hold M = ", M, " values each");
    for (int64_t m = 0; m < M; ++m) {
      const int32_t b = (*a.host_ks)[static_cast<size_t>(m)], e = (*a.host_ke)[static_cast<size_t>(m)];
      MLA_REQUIRE(0 <= b && b <= e && e <= N, op, ": row ", m, " has ks ", b, " and ke ", e,
                  "; need 0 <= ks <= ke <= N = ", N);
    }
  }

  MqaLogitsParams p;
  p.rows_per_block = static_cast<int32_t>(rows_per_block(M, H, D, op));
  p.q = a.q.data<uint8_t>();
  p.k = a.k.data<uint8_t>();
  p.k_stride = N > 1 ? k.stride(0) : D;
  p.k_scale = a.k_scale.data<float>();
  p.k_scale_stride = s.stride(0);
  p.weights = a.weights.data<float>();
  p.ks = a.ks.data<int32_t>();
  p.ks_stride = a.ks.view.stride(0);
  p.ke = a.ke.data<int32_t>();
  p.ke_stride = a.ke.view.stride(0);
  p.logits = a.logits.data<float>();
  p.logits_stride = a.logits.view.stride(0);
  p.rows = static_cast<int32_t>(M);
  p.keys = static_cast<int32_t>(N);
  p.heads = static_cast<int32_t>(H);
  p.head_dim = static_cast<int32_t>(D);
  p.mode = a.mode;
  MLA_DISPATCH(device, launch_mqa_logits, p);
}

}  // namespace mlacheck::kernels
