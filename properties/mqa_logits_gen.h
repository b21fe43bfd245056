// RapidCheck generators for the indexer logits (docs/ops.md 2): paged decode cases (2.1: 1-D and 2-D
// lengths, padding rows, lengths straddling block and tile boundaries, shuffled and shared pages of
// 1 to 69 tokens, offset and padded views) and ragged prefill cases (2.2), KV caches with special
// values, and both cases' text form (harness/case_text.h).
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include <rapidcheck.h>

#include "kernels/mqa_logits.h"
#include "harness/case_text.h"
#include "harness/schedule.h"

namespace mlacheck {

// How a case's keys are made: production-quantized random keys in [-1, 1], with special rows mixed
// in per token (about a third of them).
enum class KeyPattern {
  kRandom,       // every key random
  kZeroRows,     // all-zero keys (codes 0, the scale at its 1e-4 / 448 floor): logits exactly 0
  kSharedScale,  // keys whose amax is the same (one scale for all; equal keys give tied logits)
  kBelowFloor,   // tiny keys (amax 1e-6 .. 1e-5, under the scale floor): small and subnormal fp8 codes
  kMixed,        // each special kind above, token by token
};
const char* key_pattern_name(KeyPattern p);

// The largest |key_exponent|: every scale times 2^e stays a finite normal fp32 (and a ue8m0 value),
// and so does every logit the generators' data can give.
constexpr int kMaxKeyExponent = 100;

// One paged decode logits call (docs/ops.md 2.1) and where it runs.
struct PagedLogitsCase : CaseSchedule {
  int64_t B = 1, next_n = 1, H = 1, D = 16, block_size = 64;
  bool lens_2d = false;
  int64_t lens_stride = 1;    // 1-D only
  std::vector<int32_t> lens;  // [B] total lengths L_b, or [B * next_n] row lengths
  int64_t max_context_len = 0;
  int64_t W = 0, table_row_pad = 0;
  std::vector<int32_t> table;  // [B, W]: pages, then garbage past each request's needed columns
  int64_t num_blocks = 1, block_stride = 0, kv_offset = 0;  // bytes
  int64_t logits_stride = 1, logits_offset = 0;             // elements
  kernels::LogitsMode mode = kernels::LogitsMode::kUnclean;
  bool pass_host_lens = false, ue8m0 = false;
  KeyPattern keys = KeyPattern::kRandom;
  int key_exponent = 0;   // every key scale times 2^key_exponent: huge (> 0) and tiny (< 0) logits
  uint8_t poison = 0x7F;  // unread bytes: 0x7F fp8 NaN keys; 0x7E 448 with a huge scale

  int64_t rows() const { return B * next_n; }
  // Row (b, j)'s length (docs/ops.md 2.1).
  int64_t row_len(int64_t b, int64_t j) const;
  int64_t longest(int64_t b) const;
  // Table columns request b reads.
  int64_t needed(int64_t b) const { return (longest(b) + block_size - 1) / block_size; }
  // Whether the reference kernel takes its block-64 fast path (16-byte key loads) on this case.
  bool fast_path_shape() const;
  friend void showValue(const PagedLogitsCase& c, std::ostream& os);
};

// One ragged prefill logits call (docs/ops.md 2.2) and where it runs.
struct PrefillLogitsCase : CaseSchedule {
  int64_t M = 1, N = 0, H = 1, D = 16;
  std::vector<int32_t> ks, ke;  // [M] each, 0 <= ks <= ke <= N
  int64_t k_stride = 16, k_offset = 0, scale_stride = 1, range_stride = 1;  // elements / bytes for k
  int64_t logits_stride = 1, logits_offset = 0;                            // elements
  kernels::LogitsMode mode = kernels::LogitsMode::kUnclean;
  bool pass_host_ranges = false, ue8m0 = false;
  KeyPattern keys = KeyPattern::kRandom;
  int key_exponent = 0;
  uint8_t poison = 0x7F;
  friend void showValue(const PrefillLogitsCase& c, std::ostream& os);
};

// The cases as case-text keys, appended to out (after its property / impl / backend).
void paged_logits_to_text(const PagedLogitsCase& c, CaseText& out);
void prefill_logits_to_text(const PrefillLogitsCase& c, CaseText& out);
// The inverses. Every value is range-checked (sizes the host backend runs in seconds: B <= 256,
// H <= 128, D <= 576 and H x D within one block's shared memory, lengths <= 65536, pages of 1..1024
// tokens, strides and offsets within 4096 of the tightest, a block table of at most 65535 entries)
// and checked against the others (one length per request or row, every length within
// max_context_len and the table, the table's needed columns inside the cache, strides that hold a
// row): a hand-edited case that breaks one throws mlacheck::Error naming the key. They read
// constructively (harness/case_text.h, "Fuzz inputs"): each value's range follows from the values
// read before it, so almost any fuzz input bytes decode to a case.
PagedLogitsCase paged_logits_from_text(const CaseText& t);
PrefillLogitsCase prefill_logits_from_text(const CaseText& t);

namespace gen {

// What paged_logits_case draws from.
struct PagedCaseShape {
  bool block64_fast_path = false;  // only cases the reference kernel runs on its block-64 fast path
  bool short_rows = false;         // next_n <= 4 and lengths <= 200 (+1): for properties that run a case twice
};
// Small paged cases: 1-D and 2-D lengths (zeros, and lengths at block size, 64, 128 and 256 +- 1),
// page sizes 1, 2, 3, 53, 61, 64, 69, shuffled, shared and garbage pages (properties/block_table_gen.h),
// aligned and unaligned block strides and cache offsets, padded and offset logits rows, up to 20
// rows per request (more than one row group), every KeyPattern, key exponents 0 and +-90.
rc::Gen<PagedLogitsCase> paged_logits_case(PagedCaseShape shape = {});
// Small prefill cases: empty and full ranges, ends at 64-key tile boundaries +- 1, strided k and
// scales, strided ks / ke, padded and offset logits rows, every KeyPattern and key exponent.
rc::Gen<PrefillLogitsCase> prefill_logits_case();

}  // namespace gen
}  // namespace mlacheck
