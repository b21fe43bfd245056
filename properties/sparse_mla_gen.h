// Cases of sparse MLA decode (docs/ops.md 4) over FlashMLA's fp8_ds_mla cache (padded token and block
// strides, offset views, spare pages, odd and production page sizes), top-k rows mixing valid
// slots, duplicates, -1 and other invalid entries, topk_length and attn_sink, rows with no valid
// entry, and the values in them (zero rows, huge and tiny latent magnitudes, fp32 and ue8m0 tile
// scales). The case is described once, by its schema (fields() below, harness/case_schema.h): the
// generator, the case-file reader (also the fuzz decoder) and the writer all follow from it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <vector>

#include <rapidcheck.h>

#include "kernels/sparse_mla.h"
#include "harness/case_schema.h"
#include "harness/case_text.h"
#include "oracle/mla_precision.h"
#include "harness/schedule.h"

namespace mlacheck {

// How the 4 tile scales of a cache token are chosen: any fp32 value (amax / 448, as FlashMLA's
// quantizer writes it), or a power of two (DeepSeek-V3.2's ue8m0 scales, stored as fp32).
enum class SparseMlaScaleFormat { kFp32, kUe8m0 };

// One launch of sparse MLA decode: shapes, the layout of every view, the top-k rows and what fills
// the buffers (the seed; magnitudes and zero rows).
struct SparseMlaCase : CaseSchedule {
  int64_t B = 1, S = 1, H = 1, topk = 1, page = 64, num_blocks = 2;
  // Far slots (gen::SparseMlaShape::far_slots): the case's pages are blocks block_base ..
  // num_blocks - 1, every block below them unread, so the slots read lie past byte 2^31 or 2^32
  // of the cache; each index >= 0 is staged block_base x page higher (index()). 0 for every other
  // property.
  int64_t block_base = 0;
  int64_t token_stride = kernels::kSparseMlaTokenBytes;                      // bytes, a multiple of 16
  int64_t block_stride = 64 * kernels::kSparseMlaTokenBytes, kv_offset = 0;  // bytes, multiples of 16
  int64_t q_offset = 0, indices_offset = 0, out_offset = 0, lse_offset = 0, aux_offset = 0;  // elements
  std::vector<int32_t> indices;  // [B, S, topk], as the case holds them (index() is what is staged)
  bool has_length = false;
  std::vector<int32_t> lengths;  // [B] when has_length
  bool has_sink = false;
  std::vector<float> sink;  // [H] when has_sink
  double softmax_scale = 0.0722;
  uint8_t poison = 0xFF;  // every cache byte no counted valid entry names (0xFF: fp8 NaN, NaN scales and rope)
  int32_t trap = 0;       // the word around indices, as staged() (a slot of a spare page: reading it counts poison)
  SparseMlaScaleFormat scale_format = SparseMlaScaleFormat::kFp32;
  // Latent of every cache token x 2^magnitude_log2 (through its tile scales) and latent of q x
  // 2^-magnitude_log2: the scores stay put while out moves to huge or tiny magnitudes.
  int magnitude_log2 = 0;
  // Not a case key: the roundings the implementation under test declares (its contract's precision
  // clauses), which the oracle's slacks follow (oracle/sparse_mla.h).
  oracle::MlaPrecision precision;
  // Not a case key: the contract's `lse none` (the implementation returns no lse): lse is then checked
  // to be left unwritten (the output poison stays), not compared with the oracle's.
  bool lse_none = false;
  bool zero_rows = false;  // some q rows (a head of a token) and some cache tokens all zero
  // The invalid entries a case holds: mixed (-1, other negatives, slots past the cache) or only -1
  // (a caller whose top-k and slot conversion produce nothing else: contract term clean_indices).
  enum class Invalid { kMixed, kMinusOne } invalid = Invalid::kMixed;

  int64_t num_slots() const { return num_blocks * page; }
  int64_t row_length(int64_t b) const { return has_length ? lengths[static_cast<size_t>(b)] : topk; }
  // An entry as staged: a negative one as it is, any other block_base x page higher (at most
  // int32's largest, which no cache reaches: still invalid).
  int32_t staged(int32_t entry) const {
    if (entry < 0 || block_base == 0) return entry;
    return static_cast<int32_t>(std::min<int64_t>(entry + block_base * page, std::numeric_limits<int32_t>::max()));
  }
  // Entry i of row (b, s) as staged: the slot the kernel is given.
  int32_t index(int64_t b, int64_t s, int64_t i) const { return staged(indices[static_cast<size_t>((b * S + s) * topk + i)]); }
  // Whether entry i of row (b, s) names a slot the kernel must read.
  bool counted_valid(int64_t b, int64_t s, int64_t i) const;

  friend void showValue(const SparseMlaCase& c, std::ostream& os) { show_case(c, os); }

  static constexpr int64_t kMaxRows = 65536;                    // query rows (batch x s_q x heads)
  static constexpr int64_t kMaxCacheBytes = int64_t{1} << 28;  // what a case may stage
  // A far-slots cache: up to 8 GiB of reserved memory, only the tokens read (and the trap) backed.
  static constexpr int64_t kMaxReservedBytes = int64_t{1} << 33;
  // The most blocks the cache may have: dense, within kMaxCacheBytes (and 65536); far, within
  // kMaxReservedBytes, with every slot id an int32.
  int64_t max_blocks(bool far) const {
    return far ? std::min((kMaxReservedBytes - kv_offset) / block_stride, std::numeric_limits<int32_t>::max() / page)
               : std::min<int64_t>(65536, kMaxCacheBytes / block_stride);
  }
  // Whether the cache is staged as reserved memory (only the tokens read backed; core/reserved_buffer.h).
  bool reserved_cache() const { return kv_offset + num_blocks * block_stride > kMaxCacheBytes; }
  // The most values a case file's line holds (CaseText::parse: a key and at most 2^16 - 1 values).
  static constexpr int64_t kMaxListValues = (int64_t{1} << 16) - 1;
  // The largest |softmax_scale|: lse's tolerance (core/tolerances.cpp) bounds fp32 log-sum-exp
  // rounding only, not the scores' own fp32 rounding, which grows with the scale: on random cases
  // sparse_mla_decode@ref exceeds it at |scale| 0.5 (1.5x) and far past it at 2 and more. The
  // generator's largest scale is 0.25; production's is 1 / sqrt(192) = 0.072 (x 1.87 with YaRN).
  static constexpr double kMaxSoftmaxScale = 0.25;
};

// Fills c.indices, c.trap and (when c.has_length / c.has_sink) c.lengths and c.sink from c.seed:
// of the case's pages (blocks c.block_base .. c.num_blocks - 1, entries counted from the first),
// the first `live` of a shuffled order hold the slots counted entries name, the rest are spare; rows mix valid slots, duplicates, -1, other negatives and slots >= num_slots in
// proportions set by invalid_mix (0: all valid .. 3: mostly invalid), and (empty_rows) now and then
// have no valid entry at all; entries past topk_length name spare or live slots that must not be read.
void fill_sparse_mla_entries(SparseMlaCase& c, int64_t live, int invalid_mix, bool empty_rows);

// The schema of a sparse MLA case (harness/case_schema.h): keys, ranges and draws, in reading
// order. Each range follows from the fields before it, so almost any fuzz input bytes decode to a
// case: heads and topk from the query rows and entries batch x s_q leave, the strides before
// num_blocks (the cache is at most 256 MiB), the lists' lengths from the shapes and flags. The
// scalars come first and the lists last: the bytes a fuzzer mutates first steer the case, the
// indices take the rest. A NaN sink is the one rule (+-inf sinks are allowed). The generator draws
// 1 to 4 live pages and 1 to 3 spare ones with num_blocks; `invalid minus-one` (one case in four)
// keeps -1 the only invalid entry (indices then lie in [-1, slots)); after the seed, trap's draw calls
// fill_sparse_mla_entries once and topk_length, attn_sink and indices take what it filled.
namespace gen {
struct SparseMlaShape {
  bool far_slots = false;  // the slots read lie past byte 2^31 or 2^32 of the cache (reserved memory)
};
}  // namespace gen

template <class V>
void fields(V& v, SparseMlaCase& c, const gen::SparseMlaShape& shape = {}) {
  using C = SparseMlaCase;
  constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min(), kI32Max = std::numeric_limits<int32_t>::max();
  int64_t live = 1;  // the generator's live pages, set with num_blocks (not a case field)
  v.integer("batch", c.B, 1, 1024, UpTo{3});
  v.integer("s_q", c.S, 1, 16, UpTo{2});
  // batch x s_q x heads <= 65536 query rows; batch x s_q x topk entries fit one case file line.
  v.integer("heads", c.H, 1, std::min<int64_t>(128, C::kMaxRows / (c.B * c.S)), [] {
    return *rc::gen::weightedOneOf<int64_t>({{6, rc::gen::inRange<int64_t>(1, 9)},
                                             {2, rc::gen::just<int64_t>(16)},
                                             {1, rc::gen::inRange<int64_t>(17, 21)}});
  });
  v.integer("topk", c.topk, 1, std::min<int64_t>(8192, C::kMaxListValues / (c.B * c.S)), [] {
    return *rc::gen::weightedOneOf<int64_t>(
        {{6, rc::gen::inRange<int64_t>(1, 65)}, {1, rc::gen::element<int64_t>(1, 31, 32, 33, 63, 64)}});
  });
  v.integer("page", c.page, 1, 1024, [] { return *rc::gen::element<int64_t>(1, 2, 3, 16, 53, 61, 64, 69); });
  v.multiple("token_stride", c.token_stride, 16, kernels::kSparseMlaTokenBytes, 4096,
             [] { return kernels::kSparseMlaTokenBytes + 16 * *rc::gen::inRange<int64_t>(0, 3); });
  v.multiple("block_stride", c.block_stride, 16, c.page * c.token_stride, C::kMaxCacheBytes,
             [&c] { return c.page * c.token_stride + 16 * *rc::gen::inRange<int64_t>(0, 3); });
  v.multiple("kv_offset", c.kv_offset, 16, 0, 4096, UpTo{3});
  // Far slots: the case's pages start at block_base, so that the slots read straddle byte 2^31 or
  // 2^32 of the cache (block x block_stride, or slot x 656, computed in 32 bits wraps there). Its
  // range starts 8 blocks short of 2^31, and the entries are counted from its first slot, so that
  // fuzz bytes (small offsets in a range) reach past it too. The generator puts the edge at most
  // two blocks past block_base (the case has 2 to 7 pages), so that its pages straddle the edge
  // or lie just past it.
  if (shape.far_slots || c.block_base != 0) {
    const auto edge_block = [&c](int64_t edge) { return (edge - c.kv_offset) / c.block_stride; };
    const int64_t lo = std::max<int64_t>(1, edge_block(int64_t{1} << 31) - 8);
    v.integer("block_base", c.block_base, lo, c.max_blocks(true) - 1, [edge_block, lo] {
      const int64_t edge = *rc::gen::element<int64_t>(int64_t{1} << 31, int64_t{1} << 32);
      return std::max<int64_t>(lo, edge_block(edge) - *rc::gen::inRange<int64_t>(0, 2));
    });
  }
  // num_blocks x block_stride within the 256 MiB a case may stage (num_blocks x page <= 2^26
  // slots); far, within 8 GiB of reserved memory.
  v.integer("num_blocks", c.num_blocks, c.block_base + 1, c.max_blocks(shape.far_slots), [&live, &c] {
    live = *rc::gen::inRange<int64_t>(1, 5);
    return c.block_base + live + *rc::gen::inRange<int64_t>(1, 4);
  });
  v.integer("q_offset", c.q_offset, 0, 64, UpTo{8});
  v.integer("indices_offset", c.indices_offset, 0, 64, UpTo{4});
  v.integer("out_offset", c.out_offset, 0, 64, UpTo{8});
  v.integer("lse_offset", c.lse_offset, 0, 64, UpTo{4});
  v.integer("aux_offset", c.aux_offset, 0, 64, UpTo{4});
  v.real("softmax_scale", c.softmax_scale, -C::kMaxSoftmaxScale, C::kMaxSoftmaxScale,
         Among{0.0722, 0.0417, 0.25});  // 192^-0.5, 576^-0.5, larger
  v.integer("poison", c.poison, 0, 255, [] { return *rc::gen::element<int64_t>(0x7F, 0xFF); });
  v.choice("scale_format", c.scale_format, {"fp32", "ue8m0"});
  v.integer("magnitude_log2", c.magnitude_log2, -100, 100, [] {
    return *rc::gen::weightedOneOf<int>({{6, rc::gen::just(0)}, {1, rc::gen::element(-100, -40, 40, 100)}});
  });
  v.integer("zero_rows", c.zero_rows, 0, 1, [] { return *rc::gen::inRange(0, 4) == 0; });  // a flag, 1 drawn 1 in 4
  v.flag("has_topk_length", c.has_length);
  v.flag("has_attn_sink", c.has_sink);
  v.choice("invalid", c.invalid, {"mixed", "minus-one"}, [] {
    return *rc::gen::weightedElement<C::Invalid>({{3, C::Invalid::kMixed}, {1, C::Invalid::kMinusOne}});
  });
  v.schedule(c);
  v.integer("trap", c.trap, kI32Min, kI32Max, [&] {
    fill_sparse_mla_entries(c, live, *rc::gen::inRange(0, 4), true);
    return c.trap;
  });
  // topk_length: one per request when has_topk_length, else none (the key stays, empty); so too
  // attn_sink, one per head.
  v.list("topk_length", c.lengths, c.has_length ? c.B : 0, 0, c.topk, [&c] { return c.lengths; });
  v.floats("attn_sink", c.sink, c.has_sink ? c.H : 0, [&c] { return c.sink; });
  v.rule(std::none_of(c.sink.begin(), c.sink.end(), [](float x) { return std::isnan(x); }),
         "attn_sink holds nan (+-inf allowed, NaN not)");
  // invalid minus-one: every entry -1 or a slot of the case's pages (counted from block_base's first).
  const bool clean = c.invalid == C::Invalid::kMinusOne;
  v.list("indices", c.indices, c.B * c.S * c.topk, clean ? -1 : kI32Min,
         clean ? (c.num_blocks - c.block_base) * c.page - 1 : kI32Max, [&c] { return c.indices; });
}

// The case as case-text keys, appended to out (after its property / impl / backend), and the
// inverse: a hand-edited case that breaks a range or the rule throws mlacheck::Error naming the key.
void sparse_mla_to_text(const SparseMlaCase& c, CaseText& out);
SparseMlaCase sparse_mla_from_text(const CaseText& t);
// The same keys and block_base; drawn, the slots read lie past byte 2^31 or 2^32 (SparseMlaShape::far_slots).
SparseMlaCase sparse_mla_far_from_text(const CaseText& t);

namespace gen {

// Small cases for the host backend: b 1..3, s_q 1..2, h 1..8, 16 or 17..20 (a second, partial head
// group), topk 1..64 (tile boundaries 31/32/33 and 63/64), pages 1, 2, 3, 16, 53, 61, 64, 69, spare
// pages, padded strides, offset views, topk_length and attn_sink (+-inf sinks too) present or not,
// both scale formats, magnitudes 2^+-40 and 2^+-100 now and then, zero rows, 32/64-lane warps and
// shuffled schedules.
rc::Gen<SparseMlaCase> sparse_mla_case(SparseMlaShape shape = {});

}  // namespace gen
}  // namespace mlacheck
