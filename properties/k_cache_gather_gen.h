// Cases of the indexer's K-cache gather (docs/ops.md 2.4): requests of non-uniform lengths (0
// among them) whose blocks are a permutation of the cache's, the cache's block size, block stride
// and offset, a block table that is a view into a wider one (its row padding and the columns past
// each request's blocks holding -1, ids past the cache or anything), the key rows' row padding and
// offset, spare rows past the last request's, and (for the round trip through the insert) the keys'
// scale format and magnitude. The case is described once, by its schema (fields() below,
// harness/case_schema.h): the generator, the case-file reader (also the fuzz decoder) and the
// writer all follow from it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <vector>

#include <rapidcheck.h>

#include "harness/case_schema.h"
#include "harness/schedule.h"

namespace mlacheck {

// What a block table holds where no request reads: its columns past a request's blocks, its row
// padding and the entries before it.
enum class UnusedEntries {
  kMinusOne,     // -1, what engines leave
  kPastTheCache, // block ids from num_blocks up: a read of one lands outside the cache
  kAny,          // any int32, drawn from the seed
};

// The seed (CaseSchedule) draws the cache's bytes, the "any" table entries, the bytes the outputs
// held before the launch and the keys of the round trip.
struct KCacheGatherCase : CaseSchedule {
  int64_t D = 128;                 // head_dim
  int64_t block_size = 64;
  std::vector<int32_t> seq_lens;   // [B]: request b's tokens (0 allowed)
  int64_t spare_blocks = 0;        // blocks of the cache no request uses
  int64_t block_pad = 0;           // 4-byte words past a block's used bytes (rounded up to 4)
  int64_t cache_lead = 0;          // 4-byte words before block 0 in the cache's buffer
  std::vector<int> block_order;    // a permutation of the cache's blocks: request b's column j holds
                                   // block_order[first_block(b) + j]
  int64_t table_cols = 1;          // W, at least the most blocks a request uses
  int64_t table_row_pad = 0;       // entries past W in each table row: the row stride is W + this
  int64_t table_lead = 0;          // entries before the table's first
  UnusedEntries unused = UnusedEntries::kMinusOne;
  int64_t dst_row_pad = 0;         // bytes past D in each row of dst_k
  int64_t dst_lead = 0;            // rows of dst_k's buffer before row 0
  int64_t scale_lead = 0;          // elements of dst_scale's buffer before element 0
  int64_t spare_rows = 0;          // T - cu_seq_lens[B]: rows the gather must leave as they are
  bool ue8m0 = false;              // the round trip's insert: power-of-two scales
  int magnitude_log2 = 0;          // the round trip's keys x 2^magnitude_log2

  int64_t B() const { return static_cast<int64_t>(seq_lens.size()); }
  int64_t blocks_of(int64_t b) const { return (seq_lens[static_cast<size_t>(b)] + block_size - 1) / block_size; }
  int64_t first_block(int64_t b) const;  // the index into block_order of request b's first block
  int64_t used_blocks() const { return first_block(B()); }
  int64_t most_blocks() const;          // the most blocks one request uses
  int64_t num_blocks() const { return used_blocks() + spare_blocks; }
  int64_t block_stride() const { return (block_size * (D + 4) + 3) / 4 * 4 + 4 * block_pad; }
  int64_t table_row_stride() const { return table_cols + table_row_pad; }
  std::vector<int32_t> cu_seq_lens() const;  // [B + 1]
  int64_t total() const;                     // cu_seq_lens[B]
  int64_t rows() const { return total() + spare_rows; }  // T
  int64_t dst_row_stride() const { return D + dst_row_pad; }
  // The table's entries from its buffer's first, table_lead + B x row stride of them: request b's
  // used columns hold its blocks, every other entry what `unused` says (any: drawn from the seed).
  std::vector<int32_t> table_entries() const;
  friend void showValue(const KCacheGatherCase& c, std::ostream& os) { show_case(c, os); }
};

// A request's most tokens: four blocks of 64 (more blocks add table columns, not cases; a fuzzed
// batch of 16 stays a few thousand rows, which the round trip's insert runs through fast enough).
constexpr int64_t kMaxGatherLength = 256;

// Request lengths that break gathers: 0, one token, a block less one, a block, a block and one,
// a few blocks; a batch of 1 to 16.
std::vector<int32_t> draw_gather_lengths(int64_t block_size);

// The schema: every field's key, range and draw, in reading order.
template <class V>
void fields(V& v, KCacheGatherCase& c) {
  v.integer("head_dim", c.D, 1, 576, Favor{128, 128, 128, 1, 4, 64, 132});
  v.integer("block_size", c.block_size, 1, 128, Favor{64, 1, 2, 16, 3, 5, 17});
  v.list("seq_lens", c.seq_lens, Length{1, 16}, 0, kMaxGatherLength, [&c] { return draw_gather_lengths(c.block_size); });
  v.integer("spare_blocks", c.spare_blocks, 0, 4);
  v.integer("block_pad", c.block_pad, 0, 4, Favor{0});
  v.integer("cache_lead", c.cache_lead, 0, 4, Favor{0});
  v.permutation("block_order", c.block_order, c.num_blocks());
  const int64_t most = std::max<int64_t>(1, c.most_blocks());
  v.integer("table_cols", c.table_cols, most, most + 8, [most] { return most + *rc::gen::element(0, 0, 1, 2, 5); });
  v.integer("table_row_pad", c.table_row_pad, 0, 8, Favor{0});
  v.integer("table_lead", c.table_lead, 0, 4, Favor{0});
  v.choice("unused_entries", c.unused, {"minus-one", "past-the-cache", "any"});
  v.integer("dst_row_pad", c.dst_row_pad, 0, 16, Favor{0});
  v.integer("dst_lead", c.dst_lead, 0, 3, Favor{0});
  v.integer("scale_lead", c.scale_lead, 0, 4, Favor{0});
  v.integer("spare_rows", c.spare_rows, 0, 8, Favor{0});
  v.flag("ue8m0", c.ue8m0);
  v.integer("magnitude_log2", c.magnitude_log2, -60, 60, Favor{0, 0, 0, -60, 60});
  v.schedule(c);
}

KCacheGatherCase k_cache_gather_from_text(const CaseText& t);

namespace gen {
rc::Gen<KCacheGatherCase> k_cache_gather_case();
}  // namespace gen

}  // namespace mlacheck
