// Oracle of docs/ops.md section 2.4, "Reading the cache back for prefill": the indexer's K-cache
// gather. Token p of request b (row t = cu_seq_lens[b] + p) is slot p % block_size of block
// block_table[b, p / block_size] in the block-flat layout of 2.1; its D code bytes and its 4 scale
// bytes are copied, unchanged, into row t of the outputs:
//
//   dst_k[t, :] = codes of (blk, j);   dst_scale[t] = the 4 bytes at blk's block_size * D + 4j
//
// Nothing is decoded: the result is bytes, compared one for one.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "oracle/mqa_logits.h"

namespace mlacheck::oracle {

struct KCacheGatherInputs {
  PagedIndexerCache cache;  // u8 [num_blocks, block_stride]: block_size and head_dim D
  HostTensor block_table;   // int32 [B, W], unit column stride, any row stride
  HostTensor cu_seq_lens;   // int32 [B + 1]: 0, non-decreasing
};

// Row t of the gather (t < cu_seq_lens[B]): where it comes from and what it holds.
struct GatheredRow {
  int64_t request = 0, position = 0;  // b and p
  int64_t block = 0, slot = 0;        // block_table[b, p / block_size] and p % block_size
  std::vector<uint8_t> codes;         // D bytes
  uint8_t scale[4] = {0, 0, 0, 0};    // the fp32 scale's bytes, as stored
};

// Every row below cu_seq_lens[B], in row order. Throws mlacheck::Error for a malformed cu_seq_lens
// (not starting at 0, decreasing, B + 1 entries for a table of B rows), a request needing more
// table columns than W, or a used table entry outside [0, num_blocks).
std::vector<GatheredRow> indexer_k_cache_gather(const KCacheGatherInputs& in);

}  // namespace mlacheck::oracle
