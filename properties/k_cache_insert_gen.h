// Cases of the indexer's K-cache insert (docs/ops.md 2.3): tokens and their keys, the slots they go
// to (padding tokens among them), the cache's block size, block stride and offset, the keys' row
// stride and magnitude, the scale format. The case is described once, by its schema (fields()
// below, harness/case_schema.h): the generator, the case-file reader (also the fuzz decoder) and
// the writer all follow from it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <ostream>
#include <vector>

#include <rapidcheck.h>

#include "core/view.h"
#include "harness/case_schema.h"
#include "harness/schedule.h"

namespace mlacheck {

// The seed (CaseSchedule) draws the keys' values.
struct KCacheInsertCase : CaseSchedule {
  int64_t T = 1;               // tokens
  int64_t D = 128;             // head_dim
  int64_t block_size = 64;
  int64_t spare_blocks = 0;    // blocks past the fewest that hold T tokens
  int64_t block_pad = 0;       // 4-byte words past a block's used bytes (rounded up to 4)
  int64_t cache_lead = 0;      // 4-byte words before block 0 in the cache's buffer
  int64_t k_row_pad = 0;       // elements past D in each row of k
  int64_t k_lead = 0;          // rows of k's buffer before token 0
  bool ue8m0 = false;
  int magnitude_log2 = 0;      // keys x 2^magnitude_log2
  bool zero_keys = false;      // some tokens' keys all zero (amax 0: the scale's 1e-4 floor)
  std::vector<int> slot_order;   // a permutation of the cache's slots: token i goes to slot_order[i]
  std::vector<int32_t> padding;  // [T]: 1 for a padding token (slot -1)
  // Far slots (gen::KCacheInsertShape::far_slots): the case's blocks are block_base ..
  // block_base + num_blocks() - 1 of a cache that many blocks larger, so the slots written lie past
  // byte 2^31 or 2^32 of it; slot_mapping() counts from block_base's first slot. 0 for the other
  // properties.
  int64_t block_base = 0;

  static constexpr int64_t kMaxReservedBytes = int64_t{1} << 33;  // a far cache: up to 8 GiB, reserved

  // The case's own blocks (block_base more in the cache), and the bytes of the cache they take.
  int64_t num_blocks() const { return (T + block_size - 1) / block_size + spare_blocks; }
  int64_t cache_blocks() const { return block_base + num_blocks(); }
  ByteSpan own_bytes() const {
    const int64_t begin = 4 * cache_lead + block_base * block_stride();
    return {begin, begin + num_blocks() * block_stride()};
  }
  // The largest block_base: the cache within 8 GiB, every slot an int32.
  int64_t max_block_base() const {
    return std::min((kMaxReservedBytes - 4 * cache_lead) / block_stride(),
                    std::numeric_limits<int32_t>::max() / block_size) - num_blocks();
  }
  int64_t capacity() const { return num_blocks() * block_size; }
  int64_t block_stride() const { return (block_size * (D + 4) + 3) / 4 * 4 + 4 * block_pad; }
  // slot_mapping[i]: -1 for a padding token, else slot_order[i] (+ block_base x block_size).
  std::vector<int32_t> slot_mapping() const;
  friend void showValue(const KCacheInsertCase& c, std::ostream& os) { show_case(c, os); }
};

// The schema: every field's key, range and draw, in reading order.
namespace gen {
struct KCacheInsertShape {
  bool far_slots = false;  // the slots written lie past byte 2^31 or 2^32 of the cache (reserved memory)
};
}  // namespace gen

template <class V>
void fields(V& v, KCacheInsertCase& c, const gen::KCacheInsertShape& shape = {}) {
  v.integer("tokens", c.T, 1, 64, Favor{1, 2, 3, 16, 64});
  v.integer("head_dim", c.D, 1, 576, Favor{128, 1, 4, 7, 64, 129, 576});
  v.integer("block_size", c.block_size, 1, 128, Favor{64, 1, 2, 3, 16});
  v.integer("spare_blocks", c.spare_blocks, 0, 4);
  v.integer("block_pad", c.block_pad, 0, 4, Favor{0});
  v.integer("cache_lead", c.cache_lead, 0, 4, Favor{0});
  v.integer("k_row_pad", c.k_row_pad, 0, 8, Favor{0});
  v.integer("k_lead", c.k_lead, 0, 3, Favor{0});
  // Far slots: the case's blocks start block_base blocks into the cache, across byte 2^31 or 2^32
  // (a block id times the block stride computed in 32 bits wraps there). The range starts that far
  // less the case's blocks, so that fuzz bytes (small offsets in a range) reach past it too.
  if (shape.far_slots || c.block_base != 0) {
    const auto edge_block = [&c](int64_t edge) { return (edge - 4 * c.cache_lead) / c.block_stride(); };
    const int64_t lo = std::max<int64_t>(1, edge_block(int64_t{1} << 31) - c.num_blocks());
    v.integer("block_base", c.block_base, lo, c.max_block_base(), [&c, edge_block, lo] {
      const int64_t edge = *rc::gen::element<int64_t>(int64_t{1} << 31, int64_t{1} << 32);
      return std::max<int64_t>(lo, edge_block(edge) - *rc::gen::inRange<int64_t>(0, c.num_blocks()));
    });
  }
  v.flag("ue8m0", c.ue8m0);
  v.integer("magnitude_log2", c.magnitude_log2, -60, 60, Favor{0, 0, 0, -60, 60});
  v.flag("zero_keys", c.zero_keys);
  v.permutation("slot_order", c.slot_order, c.capacity());
  v.list("padding", c.padding, c.T, 0, 1);
  v.schedule(c);
}

// The case as read from text; the far one also reads block_base (KCacheInsertShape::far_slots).
KCacheInsertCase k_cache_insert_from_text(const CaseText& t);
KCacheInsertCase k_cache_insert_far_from_text(const CaseText& t);

namespace gen {
rc::Gen<KCacheInsertCase> k_cache_insert_case(KCacheInsertShape shape = {});
}  // namespace gen

}  // namespace mlacheck
