// The checked entry points of docs/ops.md 6's packing steps and of docs/ops.md 3's conversion to global
// slots: each validates its views (one-line mlacheck::Error before any launch) and launches on the
// device's backend.
#pragma once

#include <cstdint>

#include "kernels/device.h"
#include "kernels/pack_decode.h"

namespace mlacheck::kernels {

// Sources and destinations must not overlap (the copies run in parallel); each is refused with a
// one-line mlacheck::Error if they do.
//
// Token-ordered rows -> left-aligned slots. tokens is [T, ...] (each row's trailing dimensions
// contiguous, any row stride), packed is [B, next_n', ...] with the same trailing shape and dtype
// (slot rows evenly spaced). query_start_loc is int32 [B + 1] on the device and must end at T.
// Padding slots (j >= d_b) are zero-filled: zero weights make their logits harmless.
void pack_decode(Device& device, const DeviceTensor& query_start_loc, const DeviceTensor& tokens,
                 const DeviceTensor& packed);

// Slots -> token rows: the inverse of pack_decode. Writes exactly the T rows of tokens (the top-k
// rows of the shared buffer that belong to decode tokens) and reads no padding slot.
void unpack_decode(Device& device, const DeviceTensor& query_start_loc, const DeviceTensor& packed,
                   const DeviceTensor& tokens);

// The first dst.size(0) rows of src -> dst: the token rows of a result computed over graph-padded
// rows. src [>= n, ...] and dst [n, ...] share dtype and row shape; each row's trailing dimensions
// are contiguous (any row stride). Writes exactly the n rows of dst.
void copy_rows(Device& device, const DeviceTensor& src, const DeviceTensor& dst);

// Request-local top-k indices int32 [T, k] -> global KV slots int32 [T, k] through block_table
// int32 [B, W] (unit column stride) with pages of `page` tokens. global may be local itself.
void topk_to_global(Device& device, const DeviceTensor& query_start_loc, const DeviceTensor& local,
                    const DeviceTensor& block_table, int64_t page, const DeviceTensor& global);
// The same with a seeded variant's decision (kernels/mutants/); topk_to_global is kNone.
void topk_to_global_seeded(Device& device, const DeviceTensor& query_start_loc, const DeviceTensor& local,
                           const DeviceTensor& block_table, int64_t page, const DeviceTensor& global,
                           TopkToGlobalBug bug);

}  // namespace mlacheck::kernels
