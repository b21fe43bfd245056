// Dense MLA decode seeded bugs (kernels/mutants/mutants.h): the production entry point
// (kernels/mla_decode_glue.h) with its split or merge kernel compiled with one decision switched
// (MlaDecodeBug, kernels/mla_decode.h).
#include "kernels/mla_decode_glue.h"
#include "kernels/mutants/mutants.h"

namespace mlacheck::kernels {

namespace {

// T5 (vLLM #51065): the merge divides 0 by 0 for rows without keys (seq_len 0, padding rows).
void mla_decode_t5(Device& device, const MlaDecodeArgs& args) {
  const MlaDecodeParams p = mla_decode_params(args);
  MLA_DISPATCH(device, launch_mla_decode_split, p);
  MLA_DISPATCH(device, launch_mla_decode_merge_seeded, p, MlaDecodeBug::kT5MergeNoEmptyRow);
}

// O2: the split kernel loads page ids for the whole 64-key tile past the row's last key.
void mla_decode_o2(Device& device, const MlaDecodeArgs& args) {
  const MlaDecodeParams p = mla_decode_params(args);
  MLA_DISPATCH(device, launch_mla_decode_split_seeded, p, MlaDecodeBug::kO2TablePastTile);
  MLA_DISPATCH(device, launch_mla_decode_merge, p);
}

// W3: the split kernel computes a key's element offset in int32; it wraps past 2^31 elements.
void mla_decode_w3(Device& device, const MlaDecodeArgs& args) {
  const MlaDecodeParams p = mla_decode_params(args);
  MLA_DISPATCH(device, launch_mla_decode_split_seeded, p, MlaDecodeBug::kW3KeyOffsetIn32Bits);
  MLA_DISPATCH(device, launch_mla_decode_merge, p);
}

// D4: the merge adds the splits into shared sums with float atomics, in arrival order.
void mla_decode_d4(Device& device, const MlaDecodeArgs& args) {
  const MlaDecodeParams p = mla_decode_params(args);
  MLA_DISPATCH(device, launch_mla_decode_split, p);
  MLA_DISPATCH(device, launch_mla_decode_merge_seeded, p, MlaDecodeBug::kD4MergeInArrivalOrder);
}

}  // namespace

void register_mla_decode_mutants(Registry& reg) {
  reg.add({"mla_decode", "T5", "seeded bug T5 (vLLM #51065): seq_len 0 rows merged as 0/0 = NaN"}, &mla_decode_t5);
  reg.add({"mla_decode", "O2", "seeded bug O2: page ids loaded for a whole 64-key tile, past the row's last key (a read past block_table's row)"},
          &mla_decode_o2);
  reg.add({"mla_decode", "W3",
           "seeded bug W3 (32-bit offsets): a key's element offset, page x block stride + slot x token stride, computed in int32: wraps past 2^31 elements"},
          &mla_decode_w3);
  reg.add({"mla_decode", "D4",
           "seeded bug D4: the merge adds the splits' weights and values into shared sums with float atomics, in "
           "arrival order: the bits depend on the schedule"},
          &mla_decode_d4);
}

}  // namespace mlacheck::kernels
