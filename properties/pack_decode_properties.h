// Properties of the packing steps (docs/ops.md 6) and of the conversion to global slots (docs/ops.md 3) as
// verdict functions of (implementation, case), shared by the RapidCheck suite, the fuzzers and
// `mlacheck repro`. Each stages the case in guarded device buffers (views offset and row-padded in
// wider buffers whose other bytes must survive), runs it on the case's host warp size and schedule
// and returns std::nullopt or one line saying how it failed.
#pragma once

#include <vector>

#include "kernels/device.h"
#include "kernels/pack_decode_glue.h"
#include "properties/pack_decode_gen.h"
#include "harness/property.h"
#include "properties/view_properties.h"

namespace mlacheck {

// The registry entries' types (kernels/registry_builtin.cpp); copy_rows is not registered.
using PackDecodeFn = decltype(kernels::pack_decode);
using UnpackDecodeFn = decltype(kernels::unpack_decode);
using CopyRowsFn = decltype(kernels::copy_rows);
using TopkToGlobalFn = decltype(kernels::topk_to_global);

// pack writes slot j of request b as token row query_start_loc[b] + j for j < d_b and zeros for the
// padding slots j >= d_b; it writes only the [B, next_n] slots of its view, reads nothing past the
// token rows, and changes no input.
// padding_any (the implementation's contract declares "padding any"): the padding slots' values
// are not compared (only their tokens' slots are, and nothing is written past the slots).
Verdict pack_decode_slots_left_aligned(kernels::Device& device, PackDecodeFn* pack, const PackDecodeCase& c,
                                       bool padding_any = false);

// unpack(pack(x)) == x on the T token rows: pack runs first, then every padding slot is overwritten
// with a poison pattern (unpack must not read one), then unpack writes the first T rows of a shared
// buffer whose rows past T (prefill rows) and row padding must survive; no input changes.
Verdict unpack_decode_inverts_pack(kernels::Device& device, PackDecodeFn* pack, UnpackDecodeFn* unpack,
                                   const PackDecodeCase& c);

// Every global slot equals oracle::topk_to_global of its local index through the token's request's
// table row; only the [T, k] global view is written (in place: the local view itself).
Verdict topk_to_global_equals_oracle(kernels::Device& device, TopkToGlobalFn* to_global, const TopkToGlobalCase& c);

// copy_rows copies the first n source rows into the n destination rows, bytewise, and writes
// nothing else (no registry op: not registered, the tests use it directly).
Verdict copy_rows_copies_first_rows(kernels::Device& device, CopyRowsFn* copy, const CopyRowsCase& c);

// Registers pack_decode.slots_left_aligned, unpack_decode.inverts_pack (pack is pack_decode@ref)
// and topk_to_global.equals_oracle.
void register_pack_decode_properties(PropertyRegistry& r);

}  // namespace mlacheck
