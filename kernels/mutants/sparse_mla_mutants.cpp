// Sparse MLA decode seeded bugs (kernels/mutants/mutants.h): the production entry point
// (kernels/sparse_mla_glue.h) with its kernel compiled with one decision switched (SparseMlaBug,
// kernels/sparse_mla.h).
#include "kernels/mutants/mutants.h"
#include "kernels/sparse_mla_glue.h"

namespace mlacheck::kernels {

namespace {

// O3: scales read at an unchecked slot's address (slot -1 reads before the cache).
void sparse_mla_o3(Device& device, const SparseMlaArgs& args) {
  sparse_mla_decode_seeded(device, args, SparseMlaBug::kO3ScalesBeforeSlotCheck);
}

// H1 (after vLLM #51035): an empty row's tile count wraps around; the kernel spins.
void sparse_mla_h1(Device& device, const SparseMlaArgs& args) {
  sparse_mla_decode_seeded(device, args, SparseMlaBug::kH1TilesOfAnEmptyRow);
}

// H2 (vLLM #51035 as it shipped, in 32 bits): an empty row walks 2^27 tiles of nothing, then ends.
void sparse_mla_h2(Device& device, const SparseMlaArgs& args) {
  sparse_mla_decode_seeded(device, args, SparseMlaBug::kH2TilesOfAnEmptyRow32);
}

// D2: no barrier between staging a tile's keys and reading them.
void sparse_mla_d2(Device& device, const SparseMlaArgs& args) {
  sparse_mla_decode_seeded(device, args, SparseMlaBug::kD2NoBarrierAfterStaging);
}

// W2: a slot's byte offset computed in 32 bits; it wraps past byte 2^31 of the cache.
void sparse_mla_w2(Device& device, const SparseMlaArgs& args) {
  sparse_mla_decode_seeded(device, args, SparseMlaBug::kW2SlotOffsetIn32Bits);
}

}  // namespace

void register_sparse_mla_mutants(Registry& reg) {
  reg.add({"sparse_mla_decode", "O3",
           "seeded bug O3: a key's scales read at its slot's address before the slot is checked (slot -1 reads before the cache)"},
          &sparse_mla_o3);
  reg.add({"sparse_mla_decode", "H1",
           "seeded bug H1 (after vLLM #51035): an empty row's tile count computed unsigned (64-bit) as (n - 1) / 32 + 1: 2^59 tiles, a hang"},
          &sparse_mla_h1);
  reg.add({"sparse_mla_decode", "H2",
           "seeded bug H2 (vLLM #51035 in 32 bits): an empty row's tile count computed unsigned (32-bit) as (n - 1) / 32 + 1: "
           "2^27 tiles of nothing, about 13 s on an H100, then a right result"},
          &sparse_mla_h2);
  reg.add({"sparse_mla_decode", "D2",
           "seeded bug D2 (a missing barrier): a tile's keys are read for the scores without a barrier after they are staged"},
          &sparse_mla_d2);
  reg.add({"sparse_mla_decode", "W2",
           "seeded bug W2 (32-bit offsets): a slot's byte offset, block x block_stride + offset x token_stride, computed in int32: wraps past byte 2^31"},
          &sparse_mla_w2);
}

}  // namespace mlacheck::kernels
