// Tests of core/contract.h: clauses compile to limits on case keys, and every malformed clause is
// one line naming it.
#include "core/contract.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace mlacheck {
namespace {

std::string error_of(const std::string& op, const std::string& text) {
  try {
    parse_contract(op, text);
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    return e.what();
  }
  return "";
}

TEST(Contract, ClausesBecomeLimitsOnCaseKeys) {
  const Contract c = parse_contract("topk_decode",
                                    "k <= 2048   # smem\nout contiguous; logits padded-rows\n"
                                    "seq_lens >= next_n\nseq_lens rank 1\nfinite\nnext_n in [1, 2]\n");
  EXPECT_EQ(c.describe(), "k <= 2048; out contiguous; logits padded-rows; seq_lens >= next_n; seq_lens rank 1; finite; "
                          "next_n in [1, 2]");
  ASSERT_EQ(c.limits_on("k").size(), 1u);
  EXPECT_EQ(*c.limits_on("k")[0]->hi.value, 2048);
  EXPECT_FALSE(c.limits_on("k")[0]->lo.set());
  ASSERT_EQ(c.limits_on("out_row_pad").size(), 1u);
  EXPECT_EQ(*c.limits_on("out_row_pad")[0]->hi.value, 0);
  EXPECT_EQ(c.limits_on("logits_col_stride").size(), 1u);
  EXPECT_TRUE(c.limits_on("logits_row_pad").empty());  // padded rows may be padded
  EXPECT_TRUE(c.limits_on("logits_row_stride").empty());  // and far apart
  // Contiguous logits take no far rows: a far case's row stride has no value within the contract.
  const Contract contiguous = parse_contract("topk_decode", "logits contiguous");
  ASSERT_EQ(contiguous.limits_on("logits_row_stride").size(), 1u);
  EXPECT_EQ(*contiguous.limits_on("logits_row_stride")[0]->hi.value, 0);
  ASSERT_EQ(c.limits_on("seq_lens").size(), 1u);
  EXPECT_EQ(c.limits_on("seq_lens")[0]->lo.key, "next_n");
  ASSERT_EQ(c.limits_on("lengths").size(), 1u);
  EXPECT_EQ(c.limits_on("lengths")[0]->words, std::vector<std::string>{"decode-1d"});
  EXPECT_TRUE(c.limits_on("values_3")[0]->finite);
  EXPECT_EQ(c.limits_on("patterns")[0]->words.size(), 9u);  // nan, neg-inf, extremes gone
  // Sub-case keys of stateful ops match too.
  EXPECT_EQ(c.limits_on("s0.k").size(), 1u);
  EXPECT_TRUE(c.limits_on("kk").empty());
  EXPECT_TRUE(parse_contract("topk_decode", "  # nothing\n").empty());
  EXPECT_EQ(parse_contract("mla_decode", "q dtype bf16; kv_cache dtype fp8").limits.size(), 2u);
}

TEST(Contract, AMalformedClauseIsOneLineNamingIt) {
  EXPECT_EQ(error_of("topk_decode", "k in [10, 5]"),
            "contract of topk_decode, clause 1 'k in [10, 5]': the range [10, 5] is empty");
  EXPECT_EQ(error_of("topk_decode", "k <= 8\nout diagonal"),
            "contract of topk_decode, clause 2 'out diagonal': unknown layout 'diagonal' (layouts: contiguous, "
            "padded-rows, strided)");
  EXPECT_NE(error_of("topk_decode", "weights contiguous").find("'weights' has no layout terms"), std::string::npos);
  EXPECT_NE(error_of("topk_decode", "seq_lens rank 3").find("seq_lens has rank 1 or 2"), std::string::npos);
  EXPECT_NE(error_of("mla_decode", "q dtype fp16").find("unknown dtype 'fp16' (q takes bf16, fp8)"), std::string::npos);
  EXPECT_NE(error_of("topk_decode", "k <=").find("one value after <="), std::string::npos);
  EXPECT_NE(error_of("topk_decode", "k in 1, 2").find("a range is written [A, B]"), std::string::npos);
  EXPECT_NE(error_of("topk_decode", "out <= 3").find("'out' is a layout term, not a quantity"), std::string::npos);
  EXPECT_NE(error_of("topk_decode", "K <= 3").find("'K' is not a name"), std::string::npos);
  EXPECT_NE(error_of("no_op", "k <= 3").find("unknown op 'no_op'"), std::string::npos);
  EXPECT_NE(error_of("topk_decode", "fast").find("not a clause"), std::string::npos);
}

// "precision OPERAND FORMAT" declares how the implementation computes: no limit on cases, the
// operand's format kept for the oracle's slack (properties/mla_decode_properties.h).
TEST(Contract, PrecisionClausesAreDeclarationsNotLimits) {
  const Contract c = parse_contract("mla_decode", "precision p bf16; precision kv tf32\nheads >= 2");
  EXPECT_EQ(c.precision.size(), 2u);
  EXPECT_EQ(c.precision.at("p"), "bf16");
  EXPECT_EQ(c.precision.at("kv"), "tf32");
  EXPECT_EQ(c.limits.size(), 1u);  // heads only
  EXPECT_EQ(c.describe(), "precision p bf16; precision kv tf32; heads >= 2");
  const std::vector<std::string> terms = contract_terms("mla_decode");
  EXPECT_NE(std::find(terms.begin(), terms.end(), "precision p fp32|tf32|bf16|fp8"), terms.end());
  EXPECT_NE(std::find(terms.begin(), terms.end(), "precision q fp32|tf32|bf16"), terms.end());
  EXPECT_NE(error_of("mla_decode", "precision p fp16").find("unknown format 'fp16' (fp32, tf32, bf16, fp8)"), std::string::npos);
  // fp8 is P's alone (an fp8 P.V product); q and K reach Q.K as they are stored or in a wider format.
  EXPECT_NE(error_of("mla_decode", "precision q fp8").find("unknown format 'fp8' (fp32, tf32, bf16)"), std::string::npos);
  EXPECT_EQ(parse_contract("mla_decode", "precision p fp8").precision.at("p"), "fp8");
  EXPECT_NE(error_of("mla_decode", "precision v bf16").find("'v' is no precision operand of mla_decode (q, kv, p, qk)"),
            std::string::npos);
  EXPECT_NE(error_of("mla_decode", "precision p").find("a precision clause is 'precision OPERAND FORMAT'"), std::string::npos);
  EXPECT_NE(error_of("mla_decode", "precision p bf16; precision p tf32").find("declared twice"), std::string::npos);
  EXPECT_NE(error_of("topk_decode", "precision p bf16").find("topk_decode has no precision terms"), std::string::npos);
  // Sparse MLA decode takes the same three operands (FlashMLA-style kernels take P.V in bf16).
  const Contract sparse = parse_contract("sparse_mla_decode", "precision p bf16; precision kv bf16");
  EXPECT_EQ(sparse.precision.at("p"), "bf16");
  EXPECT_TRUE(sparse.limits.empty());
  EXPECT_NE(error_of("sparse_mla_decode", "precision v bf16").find("(q, kv, p)"), std::string::npos);
  EXPECT_EQ(parse_contract("mla_decode_impl", "precision p bf16").precision.at("p"), "bf16");
}

// Each format's unit roundoff, which the oracles' slacks are derived from (docs/ops.md 2.1 and 7).
TEST(Contract, EachPrecisionFormatHasItsUnitRoundoff) {
  EXPECT_EQ(precision_unit("fp32"), 0.0);  // every slack allows fp32's rounding already
  EXPECT_EQ(precision_unit("tf32"), 0x1p-11);
  EXPECT_EQ(precision_unit("bf16"), 0x1p-8);
  EXPECT_EQ(precision_unit("fp8"), 0x1p-4);
  EXPECT_EQ(precision_unit("fp22"), 0x1p-13);
  EXPECT_THROW(precision_unit("fp16"), Error);
}

TEST(Contract, DeclarationsRelaxACheckAndLimitNoCase) {
  const Contract c = parse_contract("pack_decode", "padding any; next_n <= 4");
  EXPECT_EQ(c.declared.at("padding"), "any");
  EXPECT_EQ(c.limits.size(), 1u);  // next_n only
  EXPECT_EQ(c.describe(), "padding any; next_n <= 4");
  const std::vector<std::string> terms = contract_terms("pack_decode");
  EXPECT_NE(std::find(terms.begin(), terms.end(), "padding zero|any"), terms.end());
  EXPECT_NE(error_of("pack_decode", "padding maybe").find("a padding clause is 'padding zero|any'"), std::string::npos);
  EXPECT_NE(error_of("pack_decode", "padding any; padding zero").find("declared twice"), std::string::npos);
  EXPECT_EQ(error_of("unpack_decode", "padding any").find("a padding clause"), std::string::npos)
      << "unpack_decode has no padding term";
  EXPECT_FALSE(error_of("unpack_decode", "padding any").empty());
}

TEST(Contract, TopkDeclaresShortRowOrderAndTies) {
  for (const char* op : {"topk_decode", "topk_prefill"}) {
    const Contract c = parse_contract(op, "short_rows any-order; ties any; k <= 2048");
    EXPECT_EQ(c.declared.at("short_rows"), "any-order");
    EXPECT_EQ(c.declared.at("ties"), "any");
    EXPECT_EQ(c.limits.size(), 1u);  // k only: declarations limit no case
    EXPECT_NE(error_of(op, "ties sometimes").find("a ties clause is 'ties fixed|any'"), std::string::npos);
    EXPECT_NE(error_of(op, "short_rows sorted").find("'short_rows ordered|any-order'"), std::string::npos);
  }
  EXPECT_FALSE(error_of("topk_to_global", "ties any").empty()) << "only the top-k ops choose among ties";
}

TEST(Contract, EveryOpWithTermsListsThem) {
  EXPECT_FALSE(contract_terms("topk_decode").empty());
  EXPECT_FALSE(contract_terms("paged_mqa_logits").empty());
  EXPECT_FALSE(contract_terms("sparse_mla_decode").empty());
  EXPECT_NE(std::find(contract_term_keys("topk_decode").begin(), contract_term_keys("topk_decode").end(), "out_row_pad"),
            contract_term_keys("topk_decode").end());
}

}  // namespace
}  // namespace mlacheck
