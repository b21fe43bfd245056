// RapidCheck generators for sparse MLA decode (docs/ops.md 4): cases over FlashMLA's fp8_ds_mla cache
// (padded token and block strides, offset views, spare pages, odd and production page sizes), top-k
// rows mixing valid slots, duplicates, -1 and other invalid entries, topk_length and attn_sink,
// rows with no valid entry, and the values in them (zero rows, huge and tiny latent magnitudes,
// fp32 and ue8m0 tile scales); and their text form (harness/case_text.h).
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include <rapidcheck.h>

#include "kernels/sparse_mla.h"
#include "harness/case_text.h"
#include "harness/schedule.h"

namespace mlacheck {

// How the 4 tile scales of a cache token are chosen: any fp32 value (amax / 448, as FlashMLA's
// quantizer writes it), or a power of two (DeepSeek-V3.2's ue8m0 scales, stored as fp32).
enum class SparseMlaScaleFormat { kFp32, kUe8m0 };

// One launch of sparse MLA decode: shapes, the layout of every view, the top-k rows and what fills
// the buffers (the seed; magnitudes and zero rows).
struct SparseMlaCase : CaseSchedule {
  int64_t B = 1, S = 1, H = 1, topk = 1, page = 64, num_blocks = 2;
  int64_t token_stride = kernels::kSparseMlaTokenBytes;                      // bytes, a multiple of 16
  int64_t block_stride = 64 * kernels::kSparseMlaTokenBytes, kv_offset = 0;  // bytes, multiples of 16
  int64_t q_offset = 0, indices_offset = 0, out_offset = 0, lse_offset = 0, aux_offset = 0;  // elements
  std::vector<int32_t> indices;  // [B, S, topk]
  bool has_length = false;
  std::vector<int32_t> lengths;  // [B] when has_length
  bool has_sink = false;
  std::vector<float> sink;  // [H] when has_sink
  double softmax_scale = 0.0722;
  uint8_t poison = 0xFF;  // every cache byte no counted valid entry names (0xFF: fp8 NaN, NaN scales and rope)
  int32_t trap = 0;       // the word around indices (a slot of a spare page: reading it counts poison)
  SparseMlaScaleFormat scale_format = SparseMlaScaleFormat::kFp32;
  // Latent of every cache token x 2^magnitude_log2 (through its tile scales) and latent of q x
  // 2^-magnitude_log2: the scores stay put while out moves to huge or tiny magnitudes.
  int magnitude_log2 = 0;
  bool zero_rows = false;  // some q rows (a head of a token) and some cache tokens all zero

  int64_t num_slots() const { return num_blocks * page; }
  int64_t row_length(int64_t b) const { return has_length ? lengths[static_cast<size_t>(b)] : topk; }
  int32_t index(int64_t b, int64_t s, int64_t i) const { return indices[static_cast<size_t>((b * S + s) * topk + i)]; }
  // Whether entry i of row (b, s) names a slot the kernel must read.
  bool counted_valid(int64_t b, int64_t s, int64_t i) const;

  friend void showValue(const SparseMlaCase& c, std::ostream& os);
};

// The case as case-text keys, appended to out (after its property / impl / backend).
void sparse_mla_to_text(const SparseMlaCase& c, CaseText& out);
// The inverse. Every value is checked against the limits staging needs (shapes, strides multiples
// of 16 and wide enough, one index per (b, s, k), topk_length in [0, topk], |softmax_scale| <= 0.25,
// a cache of at most 256 MiB, ...): a hand-edited case that breaks one throws mlacheck::Error
// naming the key. It reads constructively (harness/case_text.h, "Fuzz inputs"): each value's
// range follows from the values read before it, so almost any fuzz input bytes decode to a case.
SparseMlaCase sparse_mla_from_text(const CaseText& t);

// Fills c.indices, c.trap and (when c.has_length / c.has_sink) c.lengths and c.sink from c.seed:
// the first `live` pages of a shuffled order hold the slots counted entries name, the rest are
// spare; rows mix valid slots, duplicates, -1, other negatives and slots >= num_slots in
// proportions set by invalid_mix (0: all valid .. 3: mostly invalid), and (empty_rows) now and then
// have no valid entry at all; entries past topk_length name spare or live slots that must not be read.
void fill_sparse_mla_entries(SparseMlaCase& c, int64_t live, int invalid_mix, bool empty_rows);

namespace gen {

// Small cases for the host backend: b 1..3, s_q 1..2, h 1..8, 16 or 17..20 (a second, partial head
// group), topk 1..64 (tile boundaries 31/32/33 and 63/64), pages 1, 2, 3, 16, 53, 61, 64, 69, spare
// pages, padded strides, offset views, topk_length and attn_sink (+-inf sinks too) present or not,
// both scale formats, magnitudes 2^+-40 and 2^+-100 now and then, zero rows, 32/64-lane warps and
// shuffled schedules.
rc::Gen<SparseMlaCase> sparse_mla_case();

}  // namespace gen
}  // namespace mlacheck
