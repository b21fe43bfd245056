// Oracle of docs/ops.md section 2.3, "Writing the cache": the indexer's K-cache insert. Each token
// with a slot is quantized to fp8 with a scale of its own (fp32 amax / 448, or its ue8m0 power of
// two) and stored in the block-flat layout of 2.1 (store_indexer_token, oracle/mqa_logits.h):
//
//   scale = max(amax, 1e-4) / 448  (or 2^ceil(log2(...)));  codes[d] = fp8_e4m3(k[i, d] / scale)
//
// The arithmetic is the fp32 the spec names (a division, an encode), so the result is exact bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "oracle/mqa_logits.h"
#include "oracle/quantize.h"

namespace mlacheck::oracle {

struct KCacheInsertInputs {
  HostTensor k;             // bf16 [T, D], unit column stride
  HostTensor slot_mapping;  // int32 [T]: -1 or a slot below num_blocks * block_size, distinct
  ScaleFormat format = ScaleFormat::kFp32;
};

// One token's codes and scale, as the insert computes them from its D bf16 values.
struct QuantizedKey {
  std::vector<uint8_t> codes;
  float scale = 0;
};
QuantizedKey quantize_indexer_key(const HostTensor& k, int64_t token, ScaleFormat format);

// Writes every token that has a slot into cache (in place); returns the slots written, in token
// order. Throws mlacheck::Error for a slot outside the cache, a repeated slot or a head_dim that is
// not k's.
std::vector<int64_t> indexer_k_cache_insert(const KCacheInsertInputs& in, const PagedIndexerCache& cache);

// The D values of the token in slot s as 2.1's reader decodes them: fp8(code) x scale, exactly.
std::vector<double> read_indexer_key(const PagedIndexerCache& cache, int64_t slot);

}  // namespace mlacheck::oracle
