// The checked entry point of the indexer's K-cache insert (docs/ops.md 2.3): validates its views
// (one-line mlacheck::Error before any launch) and launches on the device's backend.
#pragma once

#include <cstdint>

#include "kernels/device.h"
#include "kernels/k_cache_insert.h"

namespace mlacheck::kernels {

// Quantizes each token of k (bf16 [T, D], unit column stride, any row stride) with a slot in
// slot_mapping (int32 [T], contiguous; -1 for a padding token) into kv_cache (u8 [num_blocks,
// block_stride], unit column stride: the block-flat layout of docs/ops.md 2.1 with block_size tokens
// a block, block_stride >= block_size * (D + 4) and a multiple of 4). ue8m0 picks power-of-two
// scales. Slot values are the caller's to keep distinct and in range (the kernel reads them on
// the device).
void indexer_k_cache_insert(Device& device, const DeviceTensor& k, const DeviceTensor& slot_mapping,
                            const DeviceTensor& kv_cache, int64_t block_size, bool ue8m0);

// The launch parameters of a checked call (for the seeded variants, which launch them with one
// decision switched).
KCacheInsertParams k_cache_insert_params(const DeviceTensor& k, const DeviceTensor& slot_mapping,
                                         const DeviceTensor& kv_cache, int64_t block_size, bool ue8m0);

}  // namespace mlacheck::kernels
