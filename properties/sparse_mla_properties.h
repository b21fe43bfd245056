// Properties of sparse MLA decode (docs/ops.md 4) as verdict functions of (implementation, case), shared
// by the RapidCheck suite, the fuzzers and `mlacheck repro`. Each stages the case in guarded
// buffers (every cache byte no counted valid entry names poisoned, the words around the indices
// naming a poisoned slot, out and lse the only bytes that may change), runs the implementation on
// the case's host schedule and returns std::nullopt or one line saying how it failed.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/device.h"
#include "kernels/sparse_mla_glue.h"
#include "oracle/sparse_mla.h"
#include "harness/property.h"
#include "properties/sparse_mla_gen.h"
#include "properties/view_properties.h"

namespace mlacheck {

// The entry point's type (kernels/sparse_mla_glue.h); a test passes a wrong one of the same type.
using SparseMlaFn = decltype(kernels::sparse_mla_decode);

// What one guarded run gave.
struct SparseMlaOutcome {
  Verdict failure;            // a guard failure, or (when compared) the comparison with the oracle
  std::vector<uint16_t> out;  // out as written, dense [B, S, H, 512] bf16 bits (empty after a guard failure)
  std::vector<float> lse;     // lse as written, dense [B, H, S]
};

// Stages c, runs fn under guards and, when compare is set, compares out and lse with
// oracle::sparse_mla_decode (core/tolerances.h). With exact, the oracle's result is also kept there
// (computed even when compare is not set).
SparseMlaOutcome run_sparse_mla(kernels::Device& device, SparseMlaFn* fn, const SparseMlaCase& c, bool compare,
                                oracle::SparseMlaResult* exact = nullptr);

// out and lse against the oracle's: out by the table (on out x 2^-magnitude_log2), lse by the table
// after each element moved toward the oracle by its fp32 rounding slack (oracle::SparseMlaResult).
// Without lse_compared (the contract's `lse none`), out alone.
Verdict compare_sparse_mla(const HostTensor& out, const HostTensor& lse, const oracle::SparseMlaResult& want,
                           int magnitude_log2, bool lse_compared = true);

// Oracle equivalence: out and lse equal the oracle's within tolerance, and nothing but out and lse
// is written (rows with no valid entry included: out 0, lse +inf). With c.lse_none (the contract's
// `lse none`), out equals the oracle's and lse is left unwritten: every property checks that.
Verdict sparse_mla_equals_oracle(kernels::Device& device, SparseMlaFn* fn, const SparseMlaCase& c);

// c with the entries of every top-k row reordered by a shuffle seeded with permutation_seed: the
// first topk_length entries among themselves, the rest among themselves.
SparseMlaCase permute_sparse_mla_rows(const SparseMlaCase& c, uint64_t permutation_seed);

// Metamorphic: a top-k row is a multiset, so permute_sparse_mla_rows(c, seed) gives out within one
// bf16 ulp (plus the tolerance table's atol) of c's, and lse within twice what the oracle comparison
// allows each run (compare_runs: the oracle's slack and the table's rule, each doubled; the oracle
// is computed for the bound only, its values are not compared), with the same special values in
// the same places.
// Batch invariance: one request of the case (drawn from its seed) launched alone on the batch's
// buffers (q, indices and topk_length viewed at its rows, out and lse of its own) gives the batch's
// out and lse rows of that request bit for bit; with rounding (the contract's `batch_rows
// rounding`), within twice the declared slack as the permutation's check allows.
Verdict sparse_mla_rows_independent_of_batch(kernels::Device& device, SparseMlaFn* fn, const SparseMlaCase& c,
                                             bool rounding = false);
Verdict sparse_mla_permutation_invariant(kernels::Device& device, SparseMlaFn* fn, const SparseMlaCase& c,
                                         uint64_t permutation_seed);

// Registers sparse_mla_decode.equals_oracle and sparse_mla_decode.topk_permutation_invariant.
void register_sparse_mla_properties(PropertyRegistry& r);

}  // namespace mlacheck
