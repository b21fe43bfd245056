// Cases of dense split-KV MLA decode (docs/ops.md 5): batches with non-uniform lengths (0, shorter
// than q_len, straddling the 32-key tile and the 256-key split threshold), block tables with
// shuffled, shared and garbage pages of 1 to 69 tokens, padded and offset cache and output views,
// bf16 and fp8 q and cache, per-tensor scales (any fp32 value or a power of two), split counts from
// 1 to 64, and the values in them (zero rows, huge and tiny magnitudes). The case is described
// once, by its schema (fields() below, harness/case_schema.h): the generator, the case-file reader
// (also the fuzz decoder) and the writer all follow from it.
#pragma once

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <rapidcheck.h>

#include "kernels/mla_decode.h"
#include "oracle/mla_decode.h"
#include "harness/case_schema.h"
#include "harness/case_text.h"
#include "harness/schedule.h"

namespace mlacheck {

// The most keys one request of a case may have: the oracle holds a request's keys in double, so
// 2^16 of them take 288 MiB (2^20, the earlier limit, took 4.8 GB and ran fuzzers out of memory).
// Every split path, tile and page boundary is reached far below it.
constexpr int64_t kMlaMaxCaseKeys = int64_t{1} << 16;
constexpr int64_t kMlaMaxRows = 65536;                   // query rows: batch x q_len x heads
constexpr int64_t kMlaMaxTable = 65535;                  // values of one key in a case file: batch x table_width
constexpr int64_t kMlaMaxCacheBytes = int64_t{1} << 28;  // what a case may stage for its cache
// A far-pages cache (MlaDecodeFamily::far_pages): up to 8 GiB of reserved memory, only the pages
// read backed.
constexpr int64_t kMlaMaxReservedBytes = int64_t{1} << 33;
// Each scale a case holds, and their product (the softmax scale), in [2^-20, 2^20], so that scores
// (up to 576 x 448^2 ~ 2^27 times it) stay finite in fp32 and the values behind an output scale of
// 2^40 do not underflow in its products. Wider ranges (2^+-120, then 2^+-40) made the fuzzers
// report fp32 overflows and underflows of a correct kernel as violations.
constexpr double kMlaScaleLo = 1.0 / (1 << 20), kMlaScaleHi = 1 << 20;

namespace gen {
// How much work a case may be on the host backend.
enum class MlaDecodeSize {
  kFull,   // lengths up to 300 (and 520..640, past the split threshold, for 1-2 programs)
  kLight,  // lengths up to 130 (and 520..640 for 1-2 programs): for properties that run a case twice
  kSplits, // kLight with at most 2 programs: for the split-count property, whose 64-split run pays
           // each program's setup 64 times (split bounds are per (request, token): few programs do)
};
}  // namespace gen

// What a case must fit besides its own rules (an impl's call has the impl's heads and a batch and
// q_len inside its configuration), and how much work the generator makes of it.
struct MlaDecodeFamily {
  int64_t max_batch = 1024;
  int64_t max_q_len = kernels::kMlaMaxQueryLen;
  int64_t heads = 0;  // 0: any of 1..128; otherwise exactly this
  gen::MlaDecodeSize size = gen::MlaDecodeSize::kFull;
  bool far_pages = false;  // the pages read lie across byte 2^31 or 2^32 of the cache (reserved memory)
};

// One launch of dense MLA decode: shapes, the layout of every view, the block table and lengths,
// the scales, the split count and what fills the buffers (the seed; magnitudes and zero rows).
// The schedule fields (seed: the values of q and the keys) come from CaseSchedule.
struct MlaDecodeCase : CaseSchedule {
  int64_t B = 1, q_len = 1, H = 1, page = 64;
  std::vector<int32_t> lens;  // seq_lens [B]
  int64_t W = 0, table_row_pad = 0, num_blocks = 0;
  std::vector<int32_t> table;  // [B, W]: pages, then garbage past each request's needed columns
  int64_t page_base = 0;       // far pages: a read column's page is page_base + its table value
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
  // Not a case key: the roundings the implementation under test declares (its contract's precision
  // clauses), which the oracle's slack follows; set by the properties from the implementation.
  oracle::MlaPrecision precision;

  int64_t needed(int64_t b) const { return (lens[static_cast<size_t>(b)] + page - 1) / page; }
  // The page request b reads at table column col (col < needed(b)), as the staged table holds it.
  int64_t read_page(int64_t b, int64_t col) const { return page_base + table[static_cast<size_t>(b * W + col)]; }
  int64_t most_pages() const;  // the pages the longest request needs (0 for none)
  std::string table_width_rule() const;  // which request needs them, for a refusal's message
  int64_t block_stride() const { return page * token_stride + block_pad; }
  int64_t max_len() const;
  // The scales a launch is given: the case's, with the magnitude moved into them for fp8 tensors.
  double launch_q_scale() const;
  double launch_k_scale() const;
  // The magnitudes whose launch scales (each, and their product) lie in [2^-120, 2^120] with an
  // output scale k_scale x 2^magnitude_log2 in [2^-110, 2^110] (o then stays finite in bf16).
  std::pair<int64_t, int64_t> magnitude_range() const;
  // The most splits whose workspace (rows x splits x 513 floats) stays within 256 MiB.
  int64_t most_splits() const;
  // The most pages a cache of this block stride holds in 256 MiB (and 65536), or for far pages in
  // 8 GiB of reserved memory (and int32's largest page id).
  int64_t most_blocks(bool far = false) const;
  // Whether the cache is staged as reserved memory (far pages only): only the pages read are backed
  // (core/reserved_buffer.h).
  bool reserved_cache() const;

  friend void showValue(const MlaDecodeCase& c, std::ostream& os) { show_case(c, os); }
};

// Each block table value's lowest: 0 for a column its request reads (a page), int32's least for the
// others (garbage the kernel must not read). lens: [B], the table [B, W].
std::vector<int64_t> mla_table_lows(const std::vector<int32_t>& lens, int64_t W, int64_t page);
// The highest page a request reads (-1: none), and where, for a refusal's message (prefix: the
// table's key prefix).
struct MlaPageRead {
  int64_t page = -1;
  std::string where;
};
void note_highest_page(MlaPageRead& top, const std::vector<int32_t>& lens, const std::vector<int32_t>& table,
                       int64_t W, int64_t page, const std::string& prefix);
// k_scale's range given base_scale x q_scale: the product of the three inside [2^-20, 2^20] as the
// checks compute it ((base x q) x k).
std::pair<double, double> mla_k_scale_range(double base_times_q);

// base_scale, q_scale and k_scale, each in [2^-20, 2^20] and so is their product: k_scale's range
// follows the other two. Drawn among the values given.
template <class V>
void mla_scale_fields(V& v, double& base, double& q, double& k, const Among& base_draw, const Among& q_draw,
                      const Among& k_draw) {
  const char* const each = "a scale is in [2^-20, 2^20]";
  with_reason(each, [&] { v.real("base_scale", base, kMlaScaleLo, kMlaScaleHi, base_draw); });
  with_reason(each, [&] { v.real("q_scale", q, kMlaScaleLo, kMlaScaleHi, q_draw); });
  const std::pair<double, double> k_range = mla_k_scale_range(base * q);
  with_reason("a scale, and base_scale x q_scale x k_scale, is in [2^-20, 2^20]",
              [&] { v.real("k_scale", k, k_range.first, k_range.second, k_draw); });
}

// The generator's draws (mla_decode_gen.cpp). A case's shape: B 1..4, q_len 1..4 and 8, H 1..8
// and 16, and the longest length its requests may have (3, 40, 130, 300 or 640), at most 16
// (request, token, head quad) programs per split (fewer for the longest lengths and lighter
// sizes), then fitted to the family.
struct MlaDecodeShape {
  int64_t B = 1, q_len = 1, H = 1;
  int max_len = 0;
};
MlaDecodeShape draw_mla_decode_shape(const MlaDecodeFamily& f);
// c.B lengths up to max_len: 0, 1..8 and the tile edges now and then (520..640 for 640).
std::vector<int32_t> draw_mla_decode_lens(const MlaDecodeCase& c, int max_len);
// Replaces c.table and c.num_blocks (c.page_base past the table's pages) with a table from
// properties/block_table_gen.h for c.lens and
// c.W: shuffled, shared and garbage pages.
void fill_mla_decode_block_table(MlaDecodeCase& c);

// The schema of a dense case (harness/case_schema.h), in reading order. Every value is checked
// against what staging and the oracle need (one seq_len per request, B x W table entries and at
// most 65535 of them (one line of a case file holds no more), every page a request reads inside
// the cache, strides and offsets in range, finite positive scales with a softmax scale inside fp32,
// 1..64 splits, a cache of at most 256 MiB, ...), each as the range of a value read after those it
// depends on (num_blocks after block_table, say), so fuzz input bytes nearly always decode to a
// case. The table and num_blocks come last: the cache's size takes the block stride, and a table
// drawn from fuzz bytes after the other keys takes fewer of them.
template <class V>
void fields(V& v, MlaDecodeCase& c, const MlaDecodeFamily& f = {}) {
  constexpr int64_t kDim = kernels::kMlaHeadDim;
  MlaDecodeShape s;  // the generator's, drawn whole with batch
  // batch x q_len x heads query rows at most: each range leaves room for the next.
  const int64_t min_heads = f.heads > 0 ? f.heads : 1;
  v.integer("batch", c.B, 1, std::min(f.max_batch, kMlaMaxRows / min_heads), [&] {
    s = draw_mla_decode_shape(f);
    return s.B;
  });
  v.integer("q_len", c.q_len, 1, std::min(f.max_q_len, kMlaMaxRows / (min_heads * c.B)), [&] { return s.q_len; });
  with_reason(f.heads > 0 ? "the configuration's heads" : "batch x q_len x heads is at most 65536 query rows", [&] {
    v.integer("heads", c.H, min_heads, f.heads > 0 ? f.heads : std::min<int64_t>(128, kMlaMaxRows / (c.B * c.q_len)),
              [&] { return s.H; });
  });
  v.integer("page", c.page, 1, 1024, [] { return *rc::gen::element<int64_t>(1, 2, 3, 16, 53, 61, 64, 69); });
  // Every request's pages fit the table, whose batch x table_width values fit one line of a case.
  const int64_t max_width = kMlaMaxTable / c.B;
  with_reason("at most 65536 keys, and at most the pages of a table of 65535 / batch columns", [&] {
    v.list("seq_lens", c.lens, c.B, 0, std::min(kMlaMaxCaseKeys, c.page * max_width),
           [&] { return draw_mla_decode_lens(c, s.max_len); });
  });
  with_reason(c.table_width_rule(), [&] {
    v.integer("table_width", c.W, c.most_pages(), max_width, [&] { return c.most_pages() + *rc::gen::inRange(0, 3); });
  });
  v.integer("table_row_pad", c.table_row_pad, 0, 64, UpTo{2});
  v.choice("q_dtype", c.q_fp8, {"bf16", "fp8"});
  v.choice("kv_dtype", c.kv_fp8, {"bf16", "fp8"});
  const int64_t es = c.kv_fp8 ? 1 : 2;
  bool aligned = false;  // the generator's: lets the kernel take its 16-byte key loads
  v.integer("token_stride", c.token_stride, kDim, 4096, [&] {
    aligned = *rc::gen::arbitrary<bool>();
    return kDim + (aligned ? 16 / es * *rc::gen::inRange(0, 3) : *rc::gen::inRange(0, 5));
  });
  v.integer("block_pad", c.block_pad, 0, 4096,
            [&] { return aligned ? 16 / es * *rc::gen::inRange(0, 2) : *rc::gen::inRange(0, 7); });
  // Offsets of whole elements.
  v.multiple("kv_offset", c.kv_offset, es, 0, 4096,
             [&] { return aligned ? 16 * *rc::gen::inRange(0, 3) : es * *rc::gen::inRange(0, 9); });
  v.multiple("q_offset", c.q_offset, c.q_fp8 ? 1 : 2, 0, 4096, UpTo{8});
  v.multiple("out_offset", c.out_offset, 4, 0, 4096, UpTo{4});
  // Any fp32 value, or a power of two (ue8m0-style per-tensor scales).
  mla_scale_fields(v, c.base_scale, c.q_scale, c.k_scale, Among{1.0 / std::sqrt(192.0), 1.0 / 24.0, 0.25},
                   Among{0.5, 1.0, 1.7, 0.8123, 0.125}, Among{0.25, 1.0, 1.3, 0.0625, 0.015625});
  // magnitude_log2 moves into the fp8 tensors' scales, so its range is where those stay inside (it
  // holds 0: the scales' own ranges saw to that).
  const std::pair<int64_t, int64_t> m = c.magnitude_range();
  with_reason("base_scale, q_scale, k_scale with magnitude_log2 must give launch scales in [2^-120, 2^120] "
              "and an output scale k_scale x 2^magnitude_log2 in [2^-110, 2^110]",
              [&] {
                v.integer("magnitude_log2", c.magnitude_log2, m.first, m.second, [] {
                  return *rc::gen::weightedOneOf<int>({{6, rc::gen::just(0)}, {1, rc::gen::element(-100, -40, 40, 100)}});
                });
              });
  with_reason("the split workspace, batch x q_len x heads x num_splits x 513 floats, is at most 256 MiB", [&] {
    v.integer("num_splits", c.num_splits, 1, c.most_splits(), [&] {
      return *rc::gen::weightedOneOf<int64_t>(
          {{8, rc::gen::inRange<int64_t>(1, 9)},
           {1, rc::gen::just<int64_t>(c.B * c.q_len * c.H <= 16 ? kernels::kMlaMaxSplits : 8)}});
    });
  });
  v.integer("workspace_extra", c.workspace_extra, 0, 1 << 20, [] { return *rc::gen::element<int64_t>(0, 0, 1, 600); });
  v.flag("host_seq_lens", c.pass_host_lens);
  v.integer("poison", c.poison, 0, 255, [] { return *rc::gen::element<int64_t>(0xFF, 0x7F); });
  v.integer("kv_tail", c.kv_tail, 0, 1 << 20, [] { return 64; });
  v.integer("zero_rows", c.zero_rows, 0, 1, [] { return *rc::gen::inRange(0, 4) == 0; });  // a flag, 1 drawn 1 in 4
  v.schedule(c);
  // Far pages: every page read moves up by page_base, so that they straddle byte 2^31 or 2^32 of
  // the cache (a page id times the block stride computed in 32 bits wraps there; for bf16 keys
  // counted in elements, at byte 2^32). Its range starts that far, less the pages a request reads,
  // so that fuzz bytes (small offsets in a range) reach past 2^31 too.
  if (f.far_pages || c.page_base != 0) {
    const int64_t block_bytes = es * c.block_stride();
    const auto edge_page = [&c, block_bytes](int64_t edge) { return (edge - c.kv_offset) / block_bytes; };
    const int64_t spread = std::max<int64_t>(1, c.most_pages());
    const int64_t lo = std::max<int64_t>(1, edge_page(int64_t{1} << 31) - spread);
    v.integer("page_base", c.page_base, lo, c.most_blocks(true) - 1, [edge_page, lo, spread] {
      const int64_t edge = *rc::gen::element<int64_t>(int64_t{1} << 31, int64_t{1} << 32);
      return std::max<int64_t>(lo, edge_page(edge) - *rc::gen::inRange<int64_t>(0, spread));
    });
  }
  // The columns a request reads hold pages (>= 0; num_blocks, read next, covers them), the rest any
  // int32. The generator draws the table and num_blocks together.
  v.list_from("block_table", c.table, mla_table_lows(c.lens, c.W, c.page), INT32_MAX, [&] {
    fill_mla_decode_block_table(c);
    return c.table;
  });
  MlaPageRead top;
  note_highest_page(top, c.lens, c.table, c.W, c.page, v.prefix());
  with_reason(top.where + "num_blocks x block stride is at most " + (f.far_pages ? "8 GiB" : "256 MiB") +
                  (c.page_base != 0 ? " (the page read is page_base + the table's value)" : ""),
              [&] {
                v.integer("num_blocks", c.num_blocks, std::max<int64_t>(1, c.page_base + top.page + 1),
                          c.most_blocks(f.far_pages), [&] { return c.num_blocks; });
              });
}

// The case as case-text keys, appended to out (after its property / impl / backend), and the
// inverse (a value out of its range throws mlacheck::Error naming the key).
void mla_decode_to_text(const MlaDecodeCase& c, CaseText& out);
MlaDecodeCase mla_decode_from_text(const CaseText& t);
// The same keys and page_base; drawn, the pages read lie across byte 2^31 or 2^32 (MlaDecodeFamily::far_pages).
MlaDecodeCase mla_decode_far_from_text(const CaseText& t);

namespace gen {

// Small cases: B 1..4, q_len 1..4 and 8, H 1..8 and 16 (at most 16 (request, token, head quad)
// programs per split, 4 for the longest lengths, so a case stays a few ms on the host backend),
// lengths 0..max (zeros and lengths below q_len included), pages 1, 2, 3, 16, 53, 61, 64, 69,
// shuffled and shared pages, padded tokens and blocks (16-byte aligned or not), offset views, bf16
// and fp8 q and cache, scales, 1..8 splits (and 64 for small batches), a larger workspace, special
// values now and then.
rc::Gen<MlaDecodeCase> mla_decode_case(MlaDecodeSize size = MlaDecodeSize::kFull, bool far_pages = false);

}  // namespace gen
}  // namespace mlacheck
