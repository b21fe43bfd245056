// Properties of dense split-KV MLA decode (docs/ops.md 5) as verdict functions of (implementation,
// case), shared by the RapidCheck suite, the fuzzers and `mlacheck repro`. Each stages the case in
// guarded buffers (every cache byte no request reads poisoned, garbage past each table row's pages,
// o, lse and the used workspace the only bytes that may change), runs the implementation on the
// case's host schedule and returns std::nullopt or one line saying how it failed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/device.h"
#include "kernels/mla_decode_glue.h"
#include "oracle/mla_decode.h"
#include "properties/mla_decode_gen.h"
#include "harness/property.h"
#include "harness/testbed.h"
#include "properties/view_properties.h"

namespace mlacheck {

// The entry point's type (kernels/mla_decode_glue.h); a test passes a wrong one of the same type.
using MlaDecodeFn = decltype(kernels::mla_decode);

// A case's buffers: inputs filled from the case's seed (poison wherever the kernel must not read),
// outputs poisoned by their guards when armed.
struct MlaDecodeBuffers {
  Buffer q, kv, table, lens, workspace, o, lse;
  View workspace_used;  // the part the kernel may write

  explicit MlaDecodeBuffers(const MlaDecodeCase& c);
  // The oracle's inputs over the host bytes, with c's scales (magnitude moved in for fp8 tensors).
  oracle::MlaDecodeInputs oracle_inputs(const MlaDecodeCase& c);
  // The launch's arguments over the uploaded buffers; host_seq_lens points into c when it passes them.
  kernels::MlaDecodeArgs args(const MlaDecodeCase& c) const;
  // Runs launch in the testbed (harness/testbed.h) under c's schedule: uploads everything,
  // declares the outputs, arms, launches and checks every guard; o, lse and workspace then hold
  // the device's bytes.
  Verdict run_guarded(kernels::Device& device, const MlaDecodeCase& c, const std::function<void()>& launch);
};

// What one run gave.
struct MlaDecodeOutcome {
  Verdict failure;            // a guard failure or an oracle mismatch
  oracle::MlaDecodeResult want;
  std::vector<uint16_t> o;    // bf16 bits, dense [B, q_len, H, 512] (empty after a guard failure)
  std::vector<float> lse;     // dense [B, q_len, H]
};

// Builds the case, runs the oracle and fn on the device (with the case's host schedule) and
// compares. tamper, when given, changes the inputs the device sees after the oracle has run.
MlaDecodeOutcome run_mla_decode(kernels::Device& device, MlaDecodeFn* fn, const MlaDecodeCase& c,
                                const std::function<void(MlaDecodeBuffers&)>& tamper = {});

// o and lse against the oracle's (core/tolerances.h), each element first moved toward the oracle by
// its fp32 rounding slack (oracle::MlaDecodeResult::o_slack, lse_slack). o is then compared
// x 2^-magnitude_log2 (the case's, exact): the table's atol is meant for outputs of magnitude ~1, so
// a case that moved o to 2^+-100 is compared where the table holds.
Verdict compare_mla_decode(const HostTensor& o, const HostTensor& lse, const oracle::MlaDecodeResult& want,
                           int magnitude_log2 = 0);

// Oracle equivalence: o and lse equal the oracle's (len 0: o = +0 and lse = -inf, the other rows
// undisturbed), and nothing but o, lse and the used workspace is written.
Verdict mla_decode_equals_oracle(kernels::Device& device, MlaDecodeFn* fn, const MlaDecodeCase& c);

// The roundings implementation impl declares in its contract's precision clauses ("precision p
// bf16": 2^-8; tf32: 2^-11; fp32 or none: 0), for the oracle's slack (oracle/mla_decode.h). The
// properties run every case with them; an unknown implementation declares none.
oracle::MlaPrecision mla_decode_precision(const std::string& impl);

// The split counts the path equivalence runs: 1, and one of the heuristic's (mla_decode_num_splits
// on the device's multiprocessors), the case's own and the maximum, picked by the case's seed.
std::vector<int64_t> mla_decode_split_counts(kernels::Device& device, const MlaDecodeCase& c);

// Path equivalence: the case run with each of mla_decode_split_counts gives o within one bf16 ulp
// (plus the table's atol) and lse within tolerance of the 1-split run, and each equals the oracle.
Verdict mla_decode_split_count_invariant(kernels::Device& device, MlaDecodeFn* fn, const MlaDecodeCase& c);

// c with its requests reordered: request i of the result is request perm[i] of c (its length,
// table row and, when staged by mla_decode_batch_permutation_commutes, its q rows).
MlaDecodeCase permute_mla_decode_batch(const MlaDecodeCase& c, const std::vector<int>& perm);

// Metamorphic, without the oracle: the batch with its requests reordered by perm (same cache, each
// request's q rows and table row moved with it) gives each request's o within one bf16 ulp (plus
// atol) and lse within tolerance of what it got in the original order. Throws mlacheck::Error when
// perm is not a permutation of the requests.
Verdict mla_decode_batch_permutation_commutes(kernels::Device& device, MlaDecodeFn* fn, const MlaDecodeCase& c,
                                              const std::vector<int>& perm);

// Registers mla_decode.equals_oracle, mla_decode.split_count_invariant and
// mla_decode.batch_permutation_commutes.
void register_mla_decode_properties(PropertyRegistry& r);

}  // namespace mlacheck
