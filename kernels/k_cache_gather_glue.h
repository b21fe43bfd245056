// The checked entry point of the indexer's K-cache gather (docs/ops.md 2.4): validates its views
// (one-line mlacheck::Error before any launch) and launches on the device's backend.
#pragma once

#include <cstdint>

#include "kernels/device.h"
#include "kernels/k_cache_gather.h"

namespace mlacheck::kernels {

// Copies token p of request b (b < B, p < cu_seq_lens[b + 1] - cu_seq_lens[b]) from slot
// p % block_size of block block_table[b, p / block_size] of kv_cache (u8 [num_blocks,
// block_stride], unit column stride: the block-flat layout of docs/ops.md 2.1, block_stride >=
// block_size * (D + 4) and a multiple of 4) into row t = cu_seq_lens[b] + p: its D code bytes into
// dst_k (u8 [T, D], unit column stride, any row stride) and its scale's 4 bytes into dst_scale
// (fp32 [T], contiguous). block_table: int32 [B, W], unit column stride, any row stride >= W;
// cu_seq_lens: contiguous int32 [B + 1]. Rows from cu_seq_lens[B] to T are not written. The
// lengths and the table's used entries are the caller's to keep consistent (the kernel reads them
// on the device).
void indexer_k_cache_gather(Device& device, const DeviceTensor& kv_cache, const DeviceTensor& block_table,
                            const DeviceTensor& cu_seq_lens, const DeviceTensor& dst_k, const DeviceTensor& dst_scale,
                            int64_t block_size);

// The launch parameters of a checked call (for the seeded variants, which launch them with one
// decision switched).
KCacheGatherParams k_cache_gather_params(const DeviceTensor& kv_cache, const DeviceTensor& block_table,
                                         const DeviceTensor& cu_seq_lens, const DeviceTensor& dst_k,
                                         const DeviceTensor& dst_scale, int64_t block_size);

}  // namespace mlacheck::kernels
