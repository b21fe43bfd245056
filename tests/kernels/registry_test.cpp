// Tests of kernels/registry.h: registering, typed lookup, clear errors, and the built-in entries.
#include "kernels/registry.h"

#include <gtest/gtest.h>

#include "kernels/pack_decode_glue.h"

namespace mlacheck::kernels {
namespace {

int twice(int x) { return 2 * x; }
int thrice(int x) { return 3 * x; }

TEST(Registry, FindsByQualifiedNameWithItsType) {
  Registry r;
  r.add({"topk_decode", "ref", "correct"}, &twice);
  r.add({"topk_decode", "R4", "a variant"}, &thrice);
  EXPECT_EQ(r.find<int(int)>("topk_decode@ref")(4), 8);
  EXPECT_EQ(r.find<int(int)>("topk_decode")(4), 8) << "an op alone means op@ref";
  EXPECT_EQ(r.find<int(int)>("topk_decode@R4")(4), 12);
  EXPECT_TRUE(r.contains("topk_decode@R4"));
  EXPECT_FALSE(r.contains("topk_decode@R1"));
  ASSERT_EQ(r.list().size(), 2u);
  EXPECT_EQ(r.list()[0].qualified(), "topk_decode@R4");  // by op, then name
}

TEST(Registry, RefusesWithOneClearLine) {
  Registry r;
  r.add({"topk_decode", "ref", ""}, &twice);
  try {
    r.find<int(int)>("topk_decode@R9");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "no implementation topk_decode@R9; registered: topk_decode@ref");
  }
  EXPECT_THROW(r.find<int(double)>("topk_decode"), Error);       // wrong entry-point type
  EXPECT_THROW(r.add({"topk_decode", "ref", ""}, &thrice), Error);  // taken
  EXPECT_THROW(r.add({"no_such_op", "ref", ""}, &thrice), Error);
  EXPECT_THROW(r.add({"topk_decode", "a@b", ""}, &thrice), Error);
}

// The oracles' slack follows the precision an implementation's contract declares; an implementation
// without a contract, or one not registered, declares none (fp32's rounding only).
TEST(Registry, DeclaredPrecisionIsTheContractsOrNone) {
  Registry r;
  r.add({"mla_decode", "ref", ""}, &twice);
  r.add({"mla_decode", "fp8", ""}, &thrice);
  r.set_contract("mla_decode@fp8", parse_contract("mla_decode", "precision p fp8; precision qk fp22; heads >= 2"));
  const std::map<std::string, std::string> declared = r.declared_precision("mla_decode@fp8");
  EXPECT_EQ(declared, (std::map<std::string, std::string>{{"p", "fp8"}, {"qk", "fp22"}}));
  EXPECT_TRUE(r.declared_precision("mla_decode@ref").empty());
  EXPECT_TRUE(r.declared_precision("mla_decode@nosuch").empty());
}

TEST(Registry, BuiltInEntriesAreTheGlueFunctions) {
  EXPECT_EQ(registry().find<decltype(pack_decode)>("pack_decode@ref"), &pack_decode);
  EXPECT_EQ(registry().find<decltype(topk_to_global)>("topk_to_global"), &topk_to_global);
  for (const ImplementationInfo& i : registry().list()) EXPECT_FALSE(i.summary.empty()) << i.qualified();
}

}  // namespace
}  // namespace mlacheck::kernels
