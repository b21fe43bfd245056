// Checked entry points for top-k per row (kernels/topk_glue.h): validation, path choice, launch.
#include "kernels/topk_glue.h"

#include <cstdint>
#include <limits>
#include <string>

#include "core/error.h"

namespace mlacheck::kernels {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// A rank-1 int32 view with unit stride (the kernels index it as a plain array).
bool is_int32_vector(const View& v) {
  return v.dtype() == DType::kI32 && v.rank() == 1 && (v.size(0) <= 1 || v.stride(0) == 1);
}

bool overlaps(const DeviceTensor& a, const DeviceTensor& b) {
  if (a.base != b.base) return false;
  const ByteSpan x = a.view.byte_span(), y = b.view.byte_span();
  return !x.empty() && !y.empty() && x.begin < y.end && y.begin < x.end;
}

// The checks both variants share: k, logits, out and the workspace. Fills everything but the row
// lengths.
TopkParams common_params(const char* op, const DeviceTensor& logits, int64_t k, const DeviceTensor& out,
                         const DeviceTensor& workspace, const DeviceTensor& row_class_counts) {
  const View &l = logits.view, &o = out.view;
  MLA_REQUIRE(k >= 1 && k <= kInt32Max, op, ": k is ", k, "; it must be in [1, 2^31)");
  MLA_REQUIRE(l.dtype() == DType::kF32 && l.rank() == 2, op, ": logits must be fp32 [rows, cols], got ", l.to_string());
  const int64_t rows = l.size(0), cols = l.size(1);
  MLA_REQUIRE(rows <= kInt32Max && cols <= kInt32Max, op, ": logits ", l.to_string(),
              " has more than 2^31 - 1 rows or columns");
  MLA_REQUIRE(cols <= 1 || l.stride(1) >= 1, op, ": logits ", l.to_string(), " has column stride 0");
  MLA_REQUIRE(o.dtype() == DType::kI32 && o.rank() == 2, op, ": out must be int32 [rows, k], got ", o.to_string());
  MLA_REQUIRE(o.size(0) == rows && o.size(1) == k, op, ": out ", o.to_string(), " must be [", rows, ", ", k,
              "] (logits rows, k)");
  MLA_REQUIRE(k <= 1 || o.stride(1) == 1, op, ": out ", o.to_string(), " must have unit column stride");
  MLA_REQUIRE(rows <= 1 || o.stride(0) >= k, op, ": out ", o.to_string(), " has rows that overlap (row stride < k)");
  MLA_REQUIRE(!overlaps(out, logits), op, ": out ", o.to_string(), " overlaps logits ", l.to_string());

  TopkParams p;
  p.logits = logits.data<float>();
  p.logits_row_stride = l.stride(0);
  p.logits_col_stride = cols <= 1 ? 1 : l.stride(1);
  p.rows = static_cast<int32_t>(rows);
  p.cols = static_cast<int32_t>(cols);
  p.k = static_cast<int32_t>(k);
  p.out = out.data<int32_t>();
  p.out_row_stride = o.stride(0);

  const int64_t need = topk_workspace_bytes(rows, k, cols);
  if (need > 0) {
    const View& w = workspace.view;
    MLA_REQUIRE(
        workspace.base != nullptr && w.dtype() == DType::kU8 && w.rank() == 1 && w.is_contiguous() && w.size(0) >= need,
        op, ": rows up to ", cols, " columns long are split over blocks and need a uint8 workspace of at least ", need,
        " contiguous bytes (topk_workspace_bytes), got ",
        workspace.base == nullptr ? std::string("none") : w.to_string());
    MLA_REQUIRE(reinterpret_cast<uintptr_t>(workspace.data<uint8_t>()) % 4 == 0, op, ": workspace ", w.to_string(),
                " is not 4-byte aligned");
    MLA_REQUIRE(!overlaps(workspace, out) && !overlaps(workspace, logits), op, ": workspace ", w.to_string(),
                " overlaps logits or out");
    p.workspace_row_stride = topk_workspace_row_stride(cols, k);
    p.workspace_keys = reinterpret_cast<uint32_t*>(workspace.data<uint8_t>());
    p.workspace_indices = reinterpret_cast<int32_t*>(p.workspace_keys + rows * p.workspace_row_stride);
  }
  if (row_class_counts.base != nullptr) {
    const View& c = row_class_counts.view;
    MLA_REQUIRE(is_int32_vector(c) && c.size(0) == kTopkRowClassCount, op, ": row_class_counts must be int32 [",
                int(kTopkRowClassCount), "] with unit stride, got ", c.to_string());
    p.row_class_counts = row_class_counts.data<int32_t>();
  }
  return p;
}

// The launch itself; the path comes from topk_path_for or was checked by launch_topk.
void dispatch(Device& device, const TopkParams& p, TopkPath path, TopkBug bug = TopkBug::kNone) {
  if (bug == TopkBug::kD3TiesByArrival) {
    MLA_DISPATCH(device, topk_per_row_ties_by_arrival, p, path == TopkPath::kFastK2048);
  } else if (bug == TopkBug::kW5RowOffsetIn32Bits) {
    MLA_DISPATCH(device, topk_per_row_row_offset_in_32_bits, p, path == TopkPath::kFastK2048);
  } else if (bug == TopkBug::kN1NanDroppedOnPrefill) {
    MLA_DISPATCH(device, topk_per_row_nan_dropped_on_prefill, p, path == TopkPath::kFastK2048);
  } else if (path == TopkPath::kFastK2048) {
    MLA_DISPATCH(device, topk_per_row_k2048, p);
  } else {
    MLA_DISPATCH(device, topk_per_row, p);
  }
}

}  // namespace

const char* topk_path_name(TopkPath path) {
  switch (path) {
    case TopkPath::kFastK2048: return "fast k=2048";
    case TopkPath::kGeneral: return "general";
    case TopkPath::kUnstated: return "its own";
  }
  return "?";
}

TopkPath topk_path_for(int64_t k, TopkBug bug) {
  const bool fast = bug == TopkBug::kR4FastPathForAnyLargeK ? k >= kTopkFastK : k == kTopkFastK;
  return fast ? TopkPath::kFastK2048 : TopkPath::kGeneral;
}

int64_t topk_workspace_bytes(int64_t rows, int64_t k, int64_t cols) {
  if (cols <= kTopkSplitRowMinLen || cols <= k || rows <= 0) return 0;
  return rows * topk_workspace_row_stride(cols, k) * int64_t(sizeof(uint32_t) + sizeof(int32_t));
}

TopkParams topk_decode_params(const DeviceTensor& logits, int64_t next_n, const DeviceTensor& seq_lens, int64_t k,
                              const DeviceTensor& out, const DeviceTensor& workspace,
                              const DeviceTensor& row_class_counts) {
  const char* op = "topk_decode";
  TopkParams p = common_params(op, logits, k, out, workspace, row_class_counts);
  const View& s = seq_lens.view;
  MLA_REQUIRE(next_n >= 1 && next_n <= kInt32Max, op, ": next_n is ", next_n, "; it must be at least 1");
  MLA_REQUIRE(s.dtype() == DType::kI32 && (s.rank() == 1 || s.rank() == 2), op,
              ": seq_lens must be int32 [B] or [B, next_n], got ", s.to_string());
  MLA_REQUIRE(s.size(0) * next_n == p.rows, op, ": seq_lens ", s.to_string(), " with next_n ", next_n, " gives ",
              s.size(0) * next_n, " rows, logits have ", p.rows);
  if (s.rank() == 2) {
    MLA_REQUIRE(s.size(1) == next_n, op, ": 2-D seq_lens ", s.to_string(), " has ", s.size(1), " columns, next_n is ",
                next_n);
    // The kernel reads seq_lens[b * next_n + j]: any other layout hands rows the wrong lengths.
    MLA_REQUIRE(s.is_contiguous(), op, ": 2-D seq_lens ", s.to_string(), " is not C-contiguous (strides must be (",
                next_n, ", 1))");
    p.lengths = TopkRowLengths::kDecode2D;
  } else {
    MLA_REQUIRE(is_int32_vector(s), op, ": seq_lens ", s.to_string(), " must have unit stride");
    p.lengths = TopkRowLengths::kDecode1D;
  }
  p.seq_lens = seq_lens.data<int32_t>();
  p.next_n = static_cast<int32_t>(next_n);
  return p;
}

TopkParams topk_prefill_params(const DeviceTensor& logits, const DeviceTensor& ks, const DeviceTensor& ke, int64_t k,
                               const DeviceTensor& out, const DeviceTensor& workspace,
                               const DeviceTensor& row_class_counts) {
  const char* op = "topk_prefill";
  TopkParams p = common_params(op, logits, k, out, workspace, row_class_counts);
  for (const DeviceTensor* t : {&ks, &ke}) {
    MLA_REQUIRE(is_int32_vector(t->view) && t->view.size(0) == p.rows, op, ": ", t == &ks ? "ks" : "ke",
                " must be int32 [rows = ", p.rows, "] with unit stride, got ", t->view.to_string());
  }
  p.lengths = TopkRowLengths::kPrefill;
  p.ks = ks.data<int32_t>();
  p.ke = ke.data<int32_t>();
  return p;
}

void launch_topk(Device& device, const TopkParams& p, TopkPath path) {
  MLA_REQUIRE(path != TopkPath::kFastK2048 || p.k == kTopkFastK, "topk: the fast path is compiled for k = ", kTopkFastK,
              ", not k = ", p.k);
  dispatch(device, p, path);
}

TopkPath topk_per_row_decode(Device& device, const DeviceTensor& logits, int64_t next_n, const DeviceTensor& seq_lens,
                             int64_t k, const DeviceTensor& out, const DeviceTensor& workspace,
                             const DeviceTensor& row_class_counts) {
  return topk_per_row_decode_seeded(device, logits, next_n, seq_lens, k, out, workspace, row_class_counts,
                                    TopkBug::kNone);
}

TopkPath topk_per_row_decode_seeded(Device& device, const DeviceTensor& logits, int64_t next_n,
                                    const DeviceTensor& seq_lens, int64_t k, const DeviceTensor& out,
                                    const DeviceTensor& workspace, const DeviceTensor& row_class_counts, TopkBug bug) {
  const TopkParams p = topk_decode_params(logits, next_n, seq_lens, k, out, workspace, row_class_counts);
  const TopkPath path = topk_path_for(k, bug);
  dispatch(device, p, path, bug);
  return path;
}

TopkPath topk_per_row_prefill(Device& device, const DeviceTensor& logits, const DeviceTensor& ks,
                              const DeviceTensor& ke, int64_t k, const DeviceTensor& out, const DeviceTensor& workspace,
                              const DeviceTensor& row_class_counts) {
  return topk_per_row_prefill_seeded(device, logits, ks, ke, k, out, workspace, row_class_counts, TopkBug::kNone);
}

TopkPath topk_per_row_prefill_seeded(Device& device, const DeviceTensor& logits, const DeviceTensor& ks,
                                     const DeviceTensor& ke, int64_t k, const DeviceTensor& out,
                                     const DeviceTensor& workspace, const DeviceTensor& row_class_counts, TopkBug bug) {
  const TopkParams p = topk_prefill_params(logits, ks, ke, k, out, workspace, row_class_counts);
  const TopkPath path = topk_path_for(k, bug);
  dispatch(device, p, path, bug);
  return path;
}

}  // namespace mlacheck::kernels
