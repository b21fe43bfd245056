// RapidCheck generators for dense split-KV MLA decode (docs/ops.md 5): batches with non-uniform lengths
// (0, shorter than q_len, straddling the 32-key tile and the 256-key split threshold), block tables
// with shuffled, shared and garbage pages of 1 to 69 tokens, padded and offset cache and output
// views, bf16 and fp8 q and cache, per-tensor scales (any fp32 value or a power of two), split
// counts from 1 to 64, and the values in them (zero rows, huge and tiny magnitudes); and their text
// form (harness/case_text.h).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "kernels/mla_decode.h"
#include "harness/case_text.h"
#include "harness/schedule.h"

namespace mlacheck {

// The most keys one request of a case may have: the oracle holds a request's keys in double, so
// 2^16 of them take 288 MiB (2^20, the earlier limit, took 4.8 GB and ran fuzzers out of memory).
// Every split path, tile and page boundary is reached far below it.
constexpr int64_t kMlaMaxCaseKeys = int64_t{1} << 16;

// One launch of dense MLA decode: shapes, the layout of every view, the block table and lengths,
// the scales, the split count and what fills the buffers (the seed; magnitudes and zero rows).
// The schedule fields (seed: the values of q and the keys) come from CaseSchedule.
struct MlaDecodeCase : CaseSchedule {
  int64_t B = 1, q_len = 1, H = 1, page = 64;
  std::vector<int32_t> lens;  // seq_lens [B]
  int64_t W = 0, table_row_pad = 0, num_blocks = 0;
  std::vector<int32_t> table;  // [B, W]: pages, then garbage past each request's needed columns
  bool q_fp8 = false, kv_fp8 = false;
  int64_t token_stride = kernels::kMlaHeadDim, block_pad = 0;  // elements
  int64_t kv_offset = 0, q_offset = 0, out_offset = 0;          // bytes
  double base_scale = 1.0, q_scale = 1.0, k_scale = 1.0;
  int64_t num_splits = 1, workspace_extra = 0;  // workspace_extra: floats past what the splits need
  bool pass_host_lens = false;
  uint8_t poison = 0xFF;  // 0xFF: NaN in fp8 and bf16; 0x7F: fp8 NaN, bf16 3.4e38
  int64_t kv_tail = 64;   // bytes of the cache's allocation past its view (poison)
  // Keys x 2^magnitude_log2 and q x 2^-magnitude_log2 (in the values when bf16, in k_scale / q_scale
  // when fp8), so the scores stay put while o moves to huge or tiny magnitudes.
  int magnitude_log2 = 0;
  bool zero_rows = false;  // some q rows (a head of a token) and some keys all zero

  int64_t needed(int64_t b) const { return (lens[static_cast<size_t>(b)] + page - 1) / page; }
  int64_t block_stride() const { return page * token_stride + block_pad; }
  int64_t max_len() const;
  // The scales a launch is given: the case's, with the magnitude moved into them for fp8 tensors.
  double launch_q_scale() const;
  double launch_k_scale() const;

  friend void showValue(const MlaDecodeCase& c, std::ostream& os);
};

// The case as case-text keys, appended to out (after its property / impl / backend).
void mla_decode_to_text(const MlaDecodeCase& c, CaseText& out);

// What a case read from text must fit besides its own rules: an impl's call has the impl's heads
// and a batch and q_len inside its configuration.
struct MlaDecodeTextLimits {
  int64_t max_batch = 1024;
  int64_t max_q_len = kernels::kMlaMaxQueryLen;
  int64_t heads = 0;  // 0: any of 1..128; otherwise exactly this
};
// The inverse, reading every key as prefix + its name ("c0.batch"). Every value is checked against
// what staging and the oracle need (one seq_len per request, B x W table entries and at most 65535
// of them (one line of a case file holds no more), every page a request reads inside the cache, strides and offsets in range, finite positive scales with a
// softmax scale inside fp32, 1..64 splits, a cache of at most 256 MiB, ...): a hand-edited case that
// breaks one throws mlacheck::Error naming the key. Each rule is the range of a value read after
// the values it depends on (num_blocks after block_table, say), so fuzz input bytes (drawing every
// value inside its range) nearly always decode to a valid case.
MlaDecodeCase mla_decode_from_text(const CaseText& t, const std::string& prefix = "",
                                   const MlaDecodeTextLimits& limits = {});
// base_scale, q_scale and k_scale (keys prefixed prefix), each in [2^-120, 2^120] and so is their
// product: k_scale's range follows the other two.
void mla_decode_scales_from_text(const CaseText& t, const std::string& prefix, double& base_scale, double& q_scale,
                                 double& k_scale);

// Replaces c.table and c.num_blocks with a table from properties/block_table_gen.h for c.lens and
// c.W: shuffled, shared and garbage pages.
void fill_mla_decode_block_table(MlaDecodeCase& c);

namespace gen {

// How much work a case may be on the host backend.
enum class MlaDecodeSize {
  kFull,   // lengths up to 300 (and 520..640, past the split threshold, for 1-2 programs)
  kLight,  // lengths up to 130 (and 520..640 for 1-2 programs): for properties that run a case twice
  kSplits, // kLight with at most 2 programs: for the split-count property, whose 64-split run pays
           // each program's setup 64 times (split bounds are per (request, token): few programs do)
};

// Small cases: B 1..4, q_len 1..4 and 8, H 1..8 and 16 (at most 16 (request, token, head quad)
// programs per split, 4 for the longest lengths, so a case stays a few ms on the host backend),
// lengths 0..max (zeros and lengths below q_len included), pages 1, 2, 3, 16, 53, 61, 64, 69,
// shuffled and shared pages, padded tokens and blocks (16-byte aligned or not), offset views, bf16
// and fp8 q and cache, scales, 1..8 splits (and 64 for small batches), a larger workspace, special
// values now and then.
rc::Gen<MlaDecodeCase> mla_decode_case(MlaDecodeSize size = MlaDecodeSize::kFull);

}  // namespace gen
}  // namespace mlacheck
