// Kernel side of docs/ops.md 1 (decode metadata): launch parameters and launchers of the flattened
// expansion (uniform fast path and general path), the flat tail reset and the native 2-D context_lens.
// Parameters are plain structs of device pointers and strides; the checked entry point is
// kernels/metadata_builder.h, which owns the output buffers.
#pragma once

#include <cstdint>

namespace mlacheck::kernels {

// The flattened outputs: one row per decode token, in buffers of a fixed width. Every launch that
// touches a row writes the whole row: `width` block-table columns (columns past the source width
// are zero), so nothing from an earlier step survives in a row it rewrites.
struct FlatMetadataOutputs {
  int32_t* seq_lens = nullptr;       // [rows]: ctx of the row's token
  int32_t* decode_lens = nullptr;    // [rows]: 1 for a live row
  int32_t* block_table = nullptr;    // [rows, width], row stride block_table_row_stride
  int64_t block_table_row_stride = 0;  // elements; at least width
  int32_t width = 0;                 // columns written per row (the configured block-table width)
};

// Expansion of B decode requests into their tokens' rows. Token t of request b goes to row
// query_start_loc[b] + t (general path) or b * uniform_decode_len + t (uniform path) and gets
// seq_lens = max(0, L_b - d_b + t + 1), the request's block-table row and decode_lens = 1.
struct ExpandMetadataParams {
  const int32_t* seq_lens = nullptr;         // [B], L_b
  const int32_t* decode_lens = nullptr;      // [B], d_b (general path only)
  const int32_t* query_start_loc = nullptr;  // [B + 1], prefix sums of d_b (general path only)
  const int32_t* block_table = nullptr;      // [B, block_table_width], unit column stride
  int64_t block_table_row_stride = 0;        // elements
  int32_t block_table_width = 0;             // W: source columns read (and copied) per row
  int32_t num_requests = 0;                  // B
  int32_t num_tokens = 0;                    // rows written: sum of d_b
  int32_t uniform_decode_len = 0;            // d of every request (uniform path only; >= 1)
  FlatMetadataOutputs out;
};

// Zeroes rows [begin, end) of the flat outputs (all `width` columns of the block table).
struct ResetFlatTailParams {
  FlatMetadataOutputs out;
  int32_t begin = 0;
  int32_t end = 0;
};

// The native layout: element i of the context_lens buffer, for i in [0, reset_end), is
// (b, j) = (i / row_stride, i % row_stride) and gets ctx(b, j) when b < B and j < d_b, else 0.
// So one launch writes the [B, next_n'] live block (padding slots 0) and zeroes the tail after it.
struct NativeContextLensParams {
  const int32_t* seq_lens = nullptr;     // [B]
  const int32_t* decode_lens = nullptr;  // [B]
  int32_t num_requests = 0;              // B
  int32_t row_stride = 0;                // elements per request row: next_n' (C-contiguous rows)
  int32_t* context_lens = nullptr;
  int64_t reset_end = 0;                 // elements written: at least B * row_stride
};

// The seeded-bug variants' decisions inside the production kernels (docs/bugs.md), switched at
// compile time: kNone is production, and a variant's launch compiles the same kernel source with
// one decision changed.
enum class MetadataBug {
  kNone,
#define MLACHECK_BUG(variant, check, needs, enumerator) enumerator,
#include "kernels/decode_metadata_bugs.def"
#undef MLACHECK_BUG
#undef MLACHECK_HOOK_BUG
};

#define MLA_DECODE_METADATA_LAUNCHERS                                           \
  void expand_metadata_uniform(const ExpandMetadataParams& p, void* stream);   \
  void expand_metadata_general(const ExpandMetadataParams& p, void* stream);   \
  void expand_metadata_seeded(bool uniform, const ExpandMetadataParams& p, MetadataBug bug, void* stream); \
  void reset_flat_metadata_tail(const ResetFlatTailParams& p, void* stream);   \
  void native_context_lens(const NativeContextLensParams& p, void* stream);
namespace host { MLA_DECODE_METADATA_LAUNCHERS }
namespace cuda { MLA_DECODE_METADATA_LAUNCHERS }
namespace hip { MLA_DECODE_METADATA_LAUNCHERS }
#undef MLA_DECODE_METADATA_LAUNCHERS

}  // namespace mlacheck::kernels
