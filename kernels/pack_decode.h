// Kernel side of docs/ops.md 6 steps 2, 4 and 6: packing non-uniform decode rows left-aligned into
// [B, next_n'] slots and back, copying the token rows out of graph-padded rows, and converting
// request-local top-k indices to global KV slots.
// Launch parameters are plain structs of device pointers and strides; the checked entry points are
// in kernels/pack_decode_glue.h.
#pragma once

#include <cstdint>

namespace mlacheck::kernels {

// Rows of row_bytes bytes. Token t of request b is row query_start_loc[b] + j of the token-ordered
// tensor and slot j of request b in the packed one (row b * next_n + j).
struct PackRowsParams {
  const int32_t* query_start_loc = nullptr;  // [B + 1], prefix sums of the decode lengths
  int32_t num_requests = 0;                  // B
  int32_t next_n = 1;                        // next_n': slots per request
  int64_t row_bytes = 0;
  // pack: tokens -> slots, padding slots (j >= d_b) filled with zero bytes.
  // unpack: slots -> tokens; padding slots are not read and no row past the last token is written.
  const uint8_t* src = nullptr;
  int64_t src_row_stride = 0;  // bytes
  uint8_t* dst = nullptr;
  int64_t dst_row_stride = 0;  // bytes
};

// dst row r = src row r for r < rows: the token rows of a graph-padded result.
struct CopyRowsParams {
  int64_t rows = 0;
  int64_t row_bytes = 0;
  const uint8_t* src = nullptr;
  int64_t src_row_stride = 0;  // bytes
  uint8_t* dst = nullptr;
  int64_t dst_row_stride = 0;  // bytes
};

// global[t, i] = block_table[req(t), local / page] * page + local % page; -1 (any negative) stays
// -1, and a block column past the table's width becomes -1. req(t) is found from query_start_loc.
struct TopkToGlobalParams {
  const int32_t* query_start_loc = nullptr;  // [B + 1]
  int32_t num_requests = 0;
  int32_t num_tokens = 0;
  int32_t k = 0;
  const int32_t* local = nullptr;
  int64_t local_row_stride = 0;  // elements
  int32_t* global = nullptr;     // may alias local (same strides): each element is read before written
  int64_t global_row_stride = 0;
  const int32_t* block_table = nullptr;
  int64_t block_table_row_stride = 0;
  int32_t block_table_width = 0;
  int32_t page = 1;
};

// The seeded-bug variants' decisions inside the production kernel (docs/bugs.md), switched at
// compile time: kNone is production.
enum class TopkToGlobalBug {
  kNone,
#define MLACHECK_BUG(variant, check, needs, enumerator) enumerator,
#include "kernels/pack_decode_bugs.def"
#undef MLACHECK_BUG
#undef MLACHECK_HOOK_BUG
};

#define MLA_PACK_DECODE_LAUNCHERS                                  \
  void pack_rows(const PackRowsParams& p, void* stream);           \
  void unpack_rows(const PackRowsParams& p, void* stream);         \
  void copy_rows(const CopyRowsParams& p, void* stream);           \
  void topk_to_global(const TopkToGlobalParams& p, void* stream);  \
  void topk_to_global_seeded(const TopkToGlobalParams& p, TopkToGlobalBug bug, void* stream);
namespace host { MLA_PACK_DECODE_LAUNCHERS }
namespace cuda { MLA_PACK_DECODE_LAUNCHERS }
namespace hip { MLA_PACK_DECODE_LAUNCHERS }
#undef MLA_PACK_DECODE_LAUNCHERS

}  // namespace mlacheck::kernels
