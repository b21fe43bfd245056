// Properties of the indexer logits (docs/ops.md 2) as verdict functions of (implementation, case), shared
// by the RapidCheck suite, the fuzzers and `mlacheck repro`. Each stages its case in guarded buffers
// (every byte an implementation must not read poisoned: NaN past the keys a request reads, in the
// table's spare pages and in the row and block padding), runs the implementation on the case's
// backend and host schedule, and returns std::nullopt or one line saying how it failed.
#pragma once

#include <functional>
#include <vector>

#include "kernels/device.h"
#include "kernels/mqa_logits_glue.h"
#include "oracle/mqa_logits.h"
#include "properties/mqa_logits_gen.h"
#include "harness/property.h"
#include "harness/testbed.h"
#include "properties/view_properties.h"

namespace mlacheck {

// The registry's entry points (kernels/registry_builtin.cpp): a property takes a pointer to one, so
// a test can hand it a wrong implementation.
using PagedMqaLogitsFn = decltype(kernels::paged_mqa_logits);
using MqaLogitsFn = decltype(kernels::mqa_logits);

// How run_paged_logits runs a case.
struct PagedRunOptions {
  float weight_scale = 1.0f;         // every index weight times this (oracle and implementation)
  bool compare_with_oracle = true;   // false: the guards only (metamorphic properties)
  // Changes the lengths or the table the implementation sees after the oracle has read them (for
  // behaviour outside the contract; the host copy of the lengths is not passed then).
  std::function<void(Buffer& lens, Buffer& table)> tamper;
};

// What one paged run gave.
struct PagedLogitsOutcome {
  Verdict failure;            // a guard's report, else the oracle comparison's
  oracle::LogitsResult want;  // the oracle's answer (when compared)
  std::vector<float> got;     // the implementation's logits, [rows, max_context_len] dense
};
PagedLogitsOutcome run_paged_logits(kernels::Device& device, PagedMqaLogitsFn* impl, const PagedLogitsCase& c,
                                    const PagedRunOptions& options = {});

// Oracle equivalence (docs/ops.md 2.1, compared under the tolerance table's paged_mqa_logits entry on
// the logits divided by 2^key_exponent, so huge and tiny caches meet the table's magnitudes), and
// writes only inside the logits view: every row's columns [0, ctx) (every column in clean mode,
// -inf past ctx); no byte of any buffer outside the view changes.
Verdict paged_logits_equal_oracle(kernels::Device& device, PagedMqaLogitsFn* impl, const PagedLogitsCase& c);

// Path equivalence: the case as given (on the reference kernel, the block-64 fast path when
// c.fast_path_shape()) and the same cache 4 bytes off 16-byte alignment (the general path, which
// any block size takes) give the same logits, bit for bit, on every specified column.
// c with the unit roundoff impl's contract declares for q . k ("precision qk fp22": 2^-13; else 0).
PagedLogitsCase paged_logits_declared(PagedLogitsCase c, const std::string& impl);

Verdict paged_logits_fast_path_equals_general_path(kernels::Device& device, PagedMqaLogitsFn* impl,
                                                  const PagedLogitsCase& c);

// Path equivalence: clean and unclean mode give the same logits, bit for bit, on each row's columns
// [0, ctx).
Verdict paged_logits_clean_equals_unclean(kernels::Device& device, PagedMqaLogitsFn* impl, const PagedLogitsCase& c);

// Metamorphic: every index weight x 2 gives every specified logit exactly x 2 (a power of two
// commutes with every rounding of the sum; -inf stays -inf).
Verdict paged_logits_weights_scale_exactly(kernels::Device& device, PagedMqaLogitsFn* impl, const PagedLogitsCase& c);

// Metamorphic: each request's paged logits equal the prefill logits (docs/ops.md 2.2, run by prefill)
// of its q rows over its keys gathered contiguously out of the pages (request b's keys at
// [offset_b, offset_b + longest_b) of one [N, D] key tensor, row r over [offset_b, offset_b + ctx_r)).
// Both compute docs/ops.md 2's formula but may sum in different orders, so they are compared under the
// tolerance table's mqa_logits logits entry (the bound each is held to against the oracle), the
// prefill result as the reference, on logits divided by 2^key_exponent.
// Batch invariance: one request of the case (drawn from its seed) launched alone on the batch's
// buffers, each input viewed at that request's rows, gives the batch's logits rows bit for bit.
Verdict paged_logits_rows_independent_of_batch(kernels::Device& device, PagedMqaLogitsFn* impl,
                                               const PagedLogitsCase& c);
Verdict paged_logits_equal_prefill_over_gathered_keys(kernels::Device& device, PagedMqaLogitsFn* impl,
                                                      MqaLogitsFn* prefill, const PagedLogitsCase& c);

// How run_prefill_logits runs a case.
struct PrefillRunOptions {
  float weight_scale = 1.0f;
  bool compare_with_oracle = true;
};
// What one prefill run gave: as PagedLogitsOutcome, got [M, N] dense.
struct PrefillLogitsOutcome {
  Verdict failure;
  std::vector<float> got;
};
PrefillLogitsOutcome run_prefill_logits(kernels::Device& device, MqaLogitsFn* impl, const PrefillLogitsCase& c,
                                        const PrefillRunOptions& options = {});

// Oracle equivalence (docs/ops.md 2.2, the tolerance table's mqa_logits entry on logits divided by
// 2^key_exponent) and writes only inside the logits view; keys outside every row's range are poison.
Verdict prefill_logits_equal_oracle(kernels::Device& device, MqaLogitsFn* impl, const PrefillLogitsCase& c);
// Clean and unclean mode give the same logits, bit for bit, on each row's [ks, ke).
Verdict prefill_logits_clean_equals_unclean(kernels::Device& device, MqaLogitsFn* impl, const PrefillLogitsCase& c);
// Index weights x 2 give every specified logit exactly x 2.
Verdict prefill_logits_weights_scale_exactly(kernels::Device& device, MqaLogitsFn* impl, const PrefillLogitsCase& c);

// Registers paged_mqa_logits.{equals_oracle, fast_path_equals_general_path, clean_equals_unclean,
// weights_scale_exactly, equals_prefill_over_gathered_keys} (the last with mqa_logits@ref as the
// prefill) and mqa_logits.{equals_oracle, clean_equals_unclean, weights_scale_exactly}.
void register_mqa_logits_properties(PropertyRegistry& r);

}  // namespace mlacheck
