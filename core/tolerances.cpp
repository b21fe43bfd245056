// The tolerance table.
#include "core/tolerances.h"

#include <sstream>

#include "core/error.h"

namespace mlacheck {
namespace {

// Reasons, shared by the entries they justify.
constexpr const char* kIndexerLogits =
    "fp8 x fp8 products are exact in fp32; the error is fp32 accumulation over D = 128 dims and "
    "H = 64 heads, at most 2^-24 of the running sum per add: typically sqrt(8192) * 2^-24 = 5e-6 "
    "of the terms' magnitude, so rtol 1e-4 leaves 20x margin; atol 1e-3 covers rows whose heads "
    "cancel to near zero (terms of magnitude <= 10)";
constexpr const char* kBf16Out =
    "the output is rounded to bf16 (half an ulp = 2^-9 relative); fp32 softmax and accumulation "
    "add far less than that, so one bf16 ulp (2^-8) bounds it; atol 2^-10 covers outputs near zero "
    "whose inputs cancel (bf16 values of V of magnitude <= 1)";
constexpr const char* kLse =
    "fp32 log-sum-exp: the max-subtracted sum of n exponentials carries a relative error of about "
    "2^-24 * sqrt(n) when its roundings are independent and log adds one more rounding, so 1e-5 "
    "absolute on values of magnitude <= 100 leaves margin for the <= 2048 entries of a sparse row; "
    "both MLA decodes first allow each row the fp32 rounding of its own scores "
    "(oracle::MlaDecodeResult::lse_slack, oracle::SparseMlaResult::lse_slack), which dominates at "
    "large softmax scales and where scores cancel, and dense decode, whose rows reach 163840 keys, "
    "also the worst-case bound of the sum itself, gamma_(len + 2): a plain loop over 60000 "
    "near-equal exponentials erred by 1.4x the 1e-5 (a plugin found it; split kernels sum less)";

const std::vector<ToleranceEntry> kTable = {
    {"paged_mqa_logits", "logits", {1e-3, 1e-4, 1e-6, kIndexerLogits}},
    {"mqa_logits", "logits", {1e-3, 1e-4, 1e-6, kIndexerLogits}},
    {"sparse_mla_decode", "out", {0x1p-10, 0x1p-8, 1e-5, kBf16Out}},
    {"sparse_mla_decode", "lse", {1e-5, 1e-6, 1e-9, kLse}},
    {"mla_decode", "o", {0x1p-10, 0x1p-8, 1e-5, kBf16Out}},
    {"mla_decode", "lse", {1e-5, 1e-6, 1e-9, kLse}},
};

}  // namespace

const std::vector<ToleranceEntry>& tolerance_table() { return kTable; }

const Tolerance& tolerance_for(std::string_view op, std::string_view output) {
  for (const ToleranceEntry& e : kTable) {
    if (e.op == op && e.output == output) return e.tolerance;
  }
  std::ostringstream known;
  for (const ToleranceEntry& e : kTable) known << ' ' << e.op << '.' << e.output;
  throw Error("no tolerance for " + std::string(op) + "." + std::string(output) + "; known:" + known.str());
}

}  // namespace mlacheck
