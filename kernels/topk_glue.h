// The checked entry points of docs/ops.md 3, top-k per row (prefill and decode): each validates its
// views (one-line mlacheck::Error before any launch), picks the k = 2048 fast path or the general
// path, and launches on the device's backend.
//
//   const int64_t bytes = topk_workspace_bytes(max_rows, k, max_cols);   // once, at its largest
//   auto ws = device.allocate("topk workspace", bytes);
//   const DeviceTensor workspace{ws->data(), View::contiguous(DType::kU8, {bytes})};
//   topk_per_row_decode(device, logits, next_n, seq_lens, k, out, workspace);  // every step
#pragma once

#include <cstdint>

#include "kernels/device.h"
#include "kernels/topk.h"

namespace mlacheck::kernels {

// kUnstated: the implementation does not say (a plugin's kernel: its paths are its own), so
// verdicts name no path.
enum class TopkPath { kGeneral, kFastK2048, kUnstated };
const char* topk_path_name(TopkPath path);

// The seeded-bug variants' decisions inside the production glue (docs/bugs.md); kNone is production.
enum class TopkBug {
  kNone,
#define MLACHECK_BUG(variant, check, needs, enumerator) enumerator,
#include "kernels/topk_bugs.def"
#undef MLACHECK_BUG
#undef MLACHECK_HOOK_BUG
};

// The path the glue takes for k: the fast path exactly when k == kTopkFastK.
TopkPath topk_path_for(int64_t k, TopkBug bug = TopkBug::kNone);

// Scratch bytes a call needs for very long rows: 0 unless cols > kTopkSplitRowMinLen (and cols > k).
// The caller allocates it once for its largest (rows, k, cols) and passes the same bytes to every
// call, so nothing is allocated per call and a captured graph keeps its addresses.
int64_t topk_workspace_bytes(int64_t rows, int64_t k, int64_t cols);

// Decode: logits fp32 [rows, cols] (any row stride, column stride >= 1), row r = b * next_n + j has
// length seq_lens[b, j] (int32 [B, next_n], C-contiguous) or max(0, seq_lens[b] - next_n + j + 1)
// (int32 [B], contiguous), with B * next_n == rows. out: int32 [rows, k], unit column stride, rows
// not overlapping (the row stride may be padded; the view may be a slice of a larger buffer, whose
// other rows are never touched). workspace: uint8 [>= topk_workspace_bytes(rows, k, cols)],
// contiguous, 4-byte aligned; may be empty when that is 0. row_class_counts, when given, is int32
// [kTopkRowClassCount] (contiguous) that the kernels increment per row class and selection kind
// (TopkRowClass): it shows which algorithms ran. Returns the path launched.
TopkPath topk_per_row_decode(Device& device, const DeviceTensor& logits, int64_t next_n, const DeviceTensor& seq_lens,
                             int64_t k, const DeviceTensor& out, const DeviceTensor& workspace,
                             const DeviceTensor& row_class_counts = {});
// The same with a seeded variant's decision (kernels/mutants/); topk_per_row_decode is kNone.
TopkPath topk_per_row_decode_seeded(Device& device, const DeviceTensor& logits, int64_t next_n,
                                    const DeviceTensor& seq_lens, int64_t k, const DeviceTensor& out,
                                    const DeviceTensor& workspace, const DeviceTensor& row_class_counts, TopkBug bug);

// Prefill: row r spans columns [ks[r], ke[r]) of logits; ks and ke are int32 [rows], contiguous;
// indices are relative to ks[r]. Otherwise as topk_per_row_decode.
TopkPath topk_per_row_prefill(Device& device, const DeviceTensor& logits, const DeviceTensor& ks,
                              const DeviceTensor& ke, int64_t k, const DeviceTensor& out, const DeviceTensor& workspace,
                              const DeviceTensor& row_class_counts = {});
// The same with a seeded variant's decision (kernels/mutants/); topk_per_row_prefill is kNone.
TopkPath topk_per_row_prefill_seeded(Device& device, const DeviceTensor& logits, const DeviceTensor& ks,
                                     const DeviceTensor& ke, int64_t k, const DeviceTensor& out,
                                     const DeviceTensor& workspace, const DeviceTensor& row_class_counts, TopkBug bug);

// The same validation, returning the launch parameters instead of launching (tests run one path
// against the other with them).
TopkParams topk_decode_params(const DeviceTensor& logits, int64_t next_n, const DeviceTensor& seq_lens, int64_t k,
                              const DeviceTensor& out, const DeviceTensor& workspace,
                              const DeviceTensor& row_class_counts = {});
TopkParams topk_prefill_params(const DeviceTensor& logits, const DeviceTensor& ks, const DeviceTensor& ke, int64_t k,
                               const DeviceTensor& out, const DeviceTensor& workspace,
                               const DeviceTensor& row_class_counts = {});

// Launches validated parameters on the given path; the fast path is refused unless p.k == kTopkFastK.
void launch_topk(Device& device, const TopkParams& p, TopkPath path);

}  // namespace mlacheck::kernels
