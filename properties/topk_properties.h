// Properties of top-k per row (docs/ops.md 3) as verdict functions of (implementation, case), shared by
// the RapidCheck suite, the fuzzers and `mlacheck repro`. Each stages the case in guarded device
// buffers (garbage that would win any selection around every row, the output a row-padded slice of
// a shared buffer whose other rows must survive), runs it on the case's host warp size and schedule
// and returns std::nullopt or one line saying how it failed.
#pragma once

#include <string>
#include <vector>

#include "core/topk_check.h"
#include "kernels/device.h"
#include "kernels/topk_glue.h"
#include "harness/property.h"
#include "properties/topk_gen.h"
#include "properties/view_properties.h"

namespace mlacheck {

// The registry entries' types (kernels/registry_builtin.cpp), and the ref kernel's path launcher.
using TopkDecodeFn = decltype(kernels::topk_per_row_decode);
using TopkPrefillFn = decltype(kernels::topk_per_row_prefill);
using TopkLaunchFn = decltype(kernels::launch_topk);

// One run of a case, checked.
struct TopkRun {
  std::string problem;                        // "" when every guard held and every row is admissible
  std::vector<std::vector<int32_t>> indices;  // per row, k each
  std::vector<std::vector<double>> values;    // the row's values [0, n), as the checker saw them
  std::vector<int64_t> lengths;
  std::vector<int32_t> counts;                // the kernels' TopkRowClass counters
  kernels::TopkPath path = kernels::TopkPath::kGeneral;  // what the implementation returned / was told
};

// What an implementation's contract declares beyond docs/ops.md 3 (docs/plugins.md, "Contracts"):
// rules.short_rows_any_order ("short_rows any-order"), rules.neg_inf_masked ("neg_inf masked": the
// case's logits carry -inf past each row's length instead of garbage, and -inf means no candidate),
// and ties_any ("ties any": among values equal to the k-th, a launch may choose differently from the
// last, so a repeated launch is held only to being an admissible top-k itself, not to the first
// launch's set).
struct TopkDeclared {
  TopkRules rules;
  bool ties_any = false;
};
// The declarations of impl's contract (none for an implementation without one).
TopkDeclared topk_declared(const std::string& impl);

// Runs a decode case through an implementation of topk_decode, a prefill case through one of
// topk_prefill, or any case through the ref kernel's launcher on a given path (validated by the
// glue's *_params); then checks every guard (nothing outside the output rows changed, no input
// written) and every row with core/topk_check.h. Host runs use the case's warp size and schedule.
TopkRun run_topk(kernels::Device& device, TopkDecodeFn* impl, const TopkCase& c, const TopkDeclared& declared = {});
TopkRun run_topk(kernels::Device& device, TopkPrefillFn* impl, const TopkCase& c, const TopkDeclared& declared = {});
TopkRun run_topk_path(kernels::Device& device, TopkLaunchFn* launch, kernels::TopkPath path, const TopkCase& c);

// "" when two runs of one case selected the same multiset of values in every row without NaN.
std::string topk_same_selected_values(const TopkRun& a, const TopkRun& b);

// Every row is an admissible top-k of its [0, n) (docs/ops.md 3), nothing outside the output view is
// written, no input changes. c must be a decode case / a prefill case.
Verdict topk_decode_rows_admissible(kernels::Device& device, TopkDecodeFn* impl, const TopkCase& c,
                                    const TopkDeclared& declared = {});
Verdict topk_prefill_rows_admissible(kernels::Device& device, TopkPrefillFn* impl, const TopkCase& c,
                                     const TopkDeclared& declared = {});

// Ref-only path equivalence at k = 2048: the fast path and the general path, each launched by
// `launch` (kernels::launch_topk) on the same case, are both admissible and select the same values.
Verdict topk_fast_path_equals_general(kernels::Device& device, TopkLaunchFn* launch, const TopkCase& c);

// Ref-only path equivalence for very long rows (n > kTopkSplitRowMinLen): the split path cannot be
// turned off (the switch is on the row length, in the kernel), so the unsplit general path is run
// on the same chunks the kernel splits the row into (topk_split_chunk_len), then on the
// concatenation of the chunks' selected values; the whole row's selection through the glue must
// take the same multiset of values. Needs k <= 4096 (the candidates then fit one unsplit row).
Verdict topk_split_rows_equal_chunked_general(kernels::Device& device, TopkDecodeFn* impl, TopkLaunchFn* launch,
                                              const TopkCase& c);

// Metamorphic, no oracle: moving request b of a decode batch to position i (perm[i] = b: its
// seq_lens entries and its next_n logits rows together) moves its rows' selections with it: every
// row selects the same multiset of values as before (rows with NaN excepted).
Verdict topk_decode_permutation_commutes(kernels::Device& device, TopkDecodeFn* impl, const TopkCase& c,
                                         const std::vector<int>& perm, const TopkDeclared& declared = {});

// The case with its requests reordered by perm, as topk_decode_permutation_commutes runs it: seq_lens
// and patterns permuted, every row's values (topk_row_values) carried along as explicit rows.
TopkCase topk_permuted_case(const TopkCase& c, const std::vector<int>& perm);

// Registers topk_decode.rows_admissible, topk_prefill.rows_admissible, their far-rows forms
// topk_decode.far_rows and topk_prefill.far_rows (the same verdicts on the far readers' cases),
// topk_decode.permutation_commutes (the permutation as the case's "permutation" key), and the
// ref-only topk_decode.fast_path_equals_general, topk_prefill.fast_path_equals_general and
// topk_decode.split_rows_equal_chunked_general.
void register_topk_properties(PropertyRegistry& r);

}  // namespace mlacheck
