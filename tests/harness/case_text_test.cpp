// Tests of harness/case_text.h: printed cases read back to themselves, readers check ranges and
// counts, and malformed text is refused with one line naming the line or key.
#include "harness/case_text.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/contract.h"
#include "core/error.h"

namespace mlacheck {
namespace {

// The one-line message of the Error f throws, or "" when it throws none.
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

rc::Gen<std::string> gen_key() {
  return rc::gen::nonEmpty(rc::gen::container<std::string>(rc::gen::elementOf(std::string("abcxyz019_.-"))));
}
rc::Gen<std::string> gen_word() {
  return rc::gen::nonEmpty(rc::gen::container<std::string>(rc::gen::inRange<char>('!', '~' + 1)));
}

RC_GTEST_PROP(CaseText, APrintedCaseParsesBackToItself, ()) {
  CaseText c;
  const auto keys = *rc::gen::unique<std::vector<std::string>>(gen_key());
  for (const std::string& key : keys) {
    if (key.size() > 64) continue;
    switch (*rc::gen::inRange(0, 5)) {
      case 0: c.set(key, *rc::gen::arbitrary<int64_t>()); break;
      case 1: c.set(key, *rc::gen::arbitrary<uint64_t>()); break;
      case 2: c.set_real(key, *rc::gen::arbitrary<double>()); break;
      case 3: c.set_list(key, *rc::gen::arbitrary<std::vector<int32_t>>()); break;
      default: {
        std::string w = *gen_word();
        for (char& ch : w) ch = ch == '#' ? '+' : ch;
        c.set(key, w.substr(0, 200));
      }
    }
  }
  const CaseText back = CaseText::parse(c.format());
  RC_ASSERT(back == c);
  RC_ASSERT(back.format() == c.format());
}

TEST(CaseText, ReadersReturnWhatWasSetAndMarkItRead) {
  CaseText c;
  c.set("property", "topk_decode.rows_admissible").set("k", int64_t{-7}).set("seed", uint64_t{0xdeadbeefcafef00d});
  c.set_real("scale", 0.1).set_list("seq_lens", std::vector<int32_t>{3, 0, 12}).set_list("empty", std::vector<int>{});
  c.set("on", true);
  const CaseText t = CaseText::parse(c.format());
  EXPECT_EQ(t.word("property"), "topk_decode.rows_admissible");
  EXPECT_EQ(t.integer("k", -10, 10), -7);
  EXPECT_EQ(t.unsigned_integer("seed"), 0xdeadbeefcafef00dull);
  EXPECT_EQ(t.real("scale"), 0.1);  // printed with enough digits to round-trip the double
  EXPECT_EQ(t.list<int32_t>("seq_lens", 0, 12, 3), (std::vector<int32_t>{3, 0, 12}));
  EXPECT_TRUE(t.integers("empty", 0, 0, 0).empty());
  EXPECT_TRUE(t.flag("on"));
  EXPECT_NO_THROW(t.expect_all_read());
  EXPECT_EQ(t.choice("property", {"x", "topk_decode.rows_admissible"}), 1);
}

TEST(CaseText, CommentsBlankLinesTabsAndCrlfAreAccepted) {
  const CaseText t = CaseText::parse("# a case\n\n  k\t 3 # three\r\nseq_lens 1 2\r\n   \n# end");
  EXPECT_EQ(t.integer("k", 0, 9), 3);
  EXPECT_EQ(t.integers("seq_lens", 0, 9, 2), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(t.format(), "# mlacheck case: run it with `mlacheck repro FILE`\nk 3\nseq_lens 1 2\n");
}

TEST(CaseText, MalformedTextIsRefusedWithOneLineNamingTheLine) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"k 1\nK 2\n", "case line 2: 'K' is not a key"},
      {"k 1\nk 2\n", "case line 2: key 'k' appears twice"},
      {"k 1\n\nk\xff 2\n", "case line 3: byte 0xff is not printable ASCII"},
      {"k \x01\n", "case line 1: byte 0x1 in a value of 'k' is not printable ASCII"},
      {"# header\nk 1\n\nseq_lens 1 \xc3\xa9\n", "case line 4: byte 0xc3 in a value of 'seq_lens' is not printable ASCII"},
      {"k 1\nj 2\n# note\nk 3\n", "case line 4: key 'k' appears twice (first on line 1)"},
      {"k " + std::string(201, 'x') + "\n", "case line 1: a value of 'k' is over 200 characters"},
      {std::string(65, 'k') + " 1\n", "case line 1"},
  };
  for (const auto& [bad_text, want] : bad) {
    const std::string& text = bad_text;  // a lambda may not capture a structured binding in C++17
    const std::string e = error_of([&] { CaseText::parse(text); });
    EXPECT_EQ(e.rfind(want, 0), 0u) << "got: " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  EXPECT_EQ(error_of([] { CaseText::parse(std::string(5u << 20, ' ')); }).rfind("case: ", 0), 0u);
}

TEST(CaseText, ReadersRefuseMissingKeysWrongTypesRangesAndCounts) {
  const CaseText t = CaseText::parse(
      "k 7\nhex 0x10\noctal 010\nhuge 99999999999999999999\nword abc\nlist 1 2 3\nneg -1\nreal 1e999\n");
  EXPECT_EQ(t.integer("hex", 0, 100), 16);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {error_of([&] { t.integer("missing", 0, 1); }), "case: key 'missing' is missing"},
      {error_of([&] { t.integer("k", 0, 6); }), "case: 'k' is 7, outside [0, 6]"},
      {error_of([&] { t.integer("word", 0, 6); }), "case: 'word' is 'abc', not an integer"},
      {error_of([&] { t.integer("octal", 0, 100); }), "case: 'octal' is '010', not an integer"},
      {error_of([&] { t.integer("huge", 0, 100); }), "case: 'huge' is '99999999999999999999', not an integer"},
      {error_of([&] { t.integer("list", 0, 100); }), "case: 'list' needs one value, has 3"},
      {error_of([&] { t.integers("list", 0, 100, 2); }), "case: 'list' has 3 values, at most 2 allowed"},
      {error_of([&] { t.integers("list", 2, 100, 3); }), "case: 'list' value 0 is 1, outside [2, 100]"},
      {error_of([&] { t.unsigned_integer("neg"); }), "case: 'neg' is '-1', not an unsigned 64-bit integer"},
      {error_of([&] { t.real("real"); }), "case: 'real' is '1e999', not a real number"},
      {error_of([&] { t.choice("word", {"x", "y"}); }), "case: 'word' is 'abc', not one of x, y"},
  };
  for (const auto& [got, want] : bad) EXPECT_EQ(got, want);
}

// Regression files open with comment headers: the property line may come anywhere, and a reader's
// refusal names the line of its key, so a hand-edited file says where it is wrong.
TEST(CaseText, ACaseIsRecognisedByItsPropertyLineAndErrorsNameTheLineAndKey) {
  EXPECT_TRUE(CaseText::names_a_property("property p.q\n"));
  EXPECT_TRUE(CaseText::names_a_property("# R1 - a bug\n#   more words\n\n  property\tp.q # why\r\nk 1\n"));
  EXPECT_TRUE(CaseText::names_a_property("k 1\nproperty"));
  EXPECT_FALSE(CaseText::names_a_property(""));
  EXPECT_FALSE(CaseText::names_a_property("# property p.q\nk 1\n"));
  EXPECT_FALSE(CaseText::names_a_property("properties p.q\nproperty_x 1\n"));
  EXPECT_FALSE(CaseText::names_a_property(std::string("\x00\x01property p\xff", 13)));

  const CaseText t = CaseText::parse("# header\n# more\nproperty p.q\nk 9\nlist 1 2 3\n\nsede 4\nwords a b\n");
  EXPECT_EQ(t.line_of("k"), 4u);
  EXPECT_EQ(t.line_of("sede"), 7u);
  EXPECT_EQ(t.line_of("nope"), 0u);
  const auto located = [&](auto read) { return t.locate(error_of(read)); };
  EXPECT_EQ(located([&] { t.integer("k", 0, 6); }), "case line 4: 'k' is 9, outside [0, 6]");
  EXPECT_EQ(located([&] { t.integers_exactly("list", 0, 9, 4); }), "case line 5: 'list' has 3 values, needs 4");
  EXPECT_EQ(located([&] { t.integer("words", 0, 6); }), "case line 8: 'words' needs one value, has 2");
  EXPECT_EQ(located([&] { t.integer("seed", 0, 6); }), "case: key 'seed' is missing (line 7 has 'sede': misspelt?)");
  EXPECT_EQ(located([&] { t.integer("other", 0, 6); }), "case: key 'other' is missing");
  EXPECT_EQ(t.locate("case: unknown key 'sede' (misspelt, or for another property?)"),
            "case line 7: unknown key 'sede' (misspelt, or for another property?)");
  EXPECT_EQ(t.locate("topk case: row 3 is wrong"), "topk case: row 3 is wrong");  // not a reader's: unchanged
  // A key set in code, not parsed from text, has no line.
  CaseText set;
  set.set("k", int64_t{9});
  EXPECT_EQ(set.locate(error_of([&] { set.integer("k", 0, 6); })), "case: 'k' is 9, outside [0, 6]");
}

TEST(CaseText, AKeyNoReaderAskedForIsReported) {
  const CaseText t = CaseText::parse("k 1\nsede 2\n");
  t.integer("k", 0, 1);
  EXPECT_EQ(error_of([&] { t.expect_all_read(); }), "case: unknown key 'sede' (misspelt, or for another property?)");
}

TEST(CaseText, SettersRefuseWhatCouldNotBeReadBack) {
  CaseText c;
  EXPECT_NE(error_of([&] { c.set("Bad Key", int64_t{1}); }), "");
  EXPECT_NE(error_of([&] { c.set("k", "two words"); }), "");
  EXPECT_NE(error_of([&] { c.set("k", "a#comment"); }), "");
  c.set("k", int64_t{1}).set("k", int64_t{2});  // setting again replaces, in place
  EXPECT_EQ(c.format(), "# mlacheck case: run it with `mlacheck repro FILE`\nk 2\n");
}

// A contract's `KEY one-of N ...` on an integer key and a bound on a real key are applied (they were
// once accepted and ignored): drawn values lie inside, a case file outside is refused, and a drawn
// case encodes back to bytes that decode to it.
TEST(CaseText, OneOfOnAnIntegerAndABoundOnARealAreDrawnInsideAndCheckedOnRead) {
  const auto contract = std::make_shared<const Contract>(parse_contract("topk_decode", "k one-of 128 256 9999"));
  for (int seed = 0; seed < 64; ++seed) {
    std::string bytes;
    for (int i = 0; i < 16; ++i) bytes += static_cast<char>((seed * 37 + i * 11) & 0xFF);
    CaseText d = CaseText::decoding(bytes);
    d.within(contract);
    const int64_t k = d.integer("k", 1, 4096);
    EXPECT_TRUE(k == 128 || k == 256) << k;  // 9999 is outside [1, 4096]
    const int64_t m = d.multiple("k2", 64, 0, 4096);  // no limit on k2: any multiple
    EXPECT_EQ(m % 64, 0);
    CaseText back = CaseText::encoding(d.format());
    back.within(contract);
    EXPECT_EQ(back.integer("k", 1, 4096), k);
  }
  CaseText outside = CaseText::parse("property p\nk 7\n");
  outside.within(contract);
  EXPECT_THROW(outside.integer("k", 1, 4096), OutsideContract);
  CaseText none = CaseText::parse("property p\nk 7\n");
  none.within(std::make_shared<const Contract>(parse_contract("topk_decode", "k one-of 5000")));
  EXPECT_THROW(none.integer("k", 1, 4096), OutsideContract);  // no value of [1, 4096] is listed
  CaseText listed = CaseText::parse("property p\nk 256\nlens 128 256 128\n");
  listed.within(contract);
  EXPECT_EQ(listed.integer("k", 1, 4096), 256);
  // A word that is no integer, on an integer key, is said in one line.
  CaseText words = CaseText::parse("property p\nk 256\n");
  words.within(std::make_shared<const Contract>(parse_contract("topk_decode", "k one-of big")));
  EXPECT_THROW(words.integer("k", 1, 4096), Error);

  const auto unit = std::make_shared<const Contract>(parse_contract("mla_decode", "k_scale = 1"));
  for (int seed = 0; seed < 32; ++seed) {
    std::string bytes(12, static_cast<char>(seed * 29 + 3));
    CaseText d = CaseText::decoding(bytes);
    d.within(unit);
    EXPECT_EQ(d.real("k_scale", 0x1p-20, 0x1p20), 1.0);
  }
  CaseText scaled = CaseText::parse("property p\nk_scale 1.5\n");
  scaled.within(unit);
  EXPECT_THROW(scaled.real("k_scale", 0x1p-20, 0x1p20), OutsideContract);
  CaseText tiny = CaseText::parse("property p\nk_scale 1\n");
  tiny.within(std::make_shared<const Contract>(parse_contract("mla_decode", "k_scale >= 2")));
  EXPECT_THROW(tiny.real("k_scale", 0x1p-20, 1.0), OutsideContract);  // [2, 1]: no value
}

// A bound that is no integer, on a real key ("softmax_scale >= 0.07": a caller's scale is positive):
// drawn values lie inside, a case outside is refused saying the bound, and an integer key refuses it.
TEST(CaseText, ARealBoundOnARealKeyIsDrawnInsideAndCheckedOnRead) {
  const auto positive = std::make_shared<const Contract>(parse_contract("sparse_mla_decode", "softmax_scale >= 0.07"));
  for (int seed = 0; seed < 64; ++seed) {
    std::string bytes(12, static_cast<char>(seed * 29 + 3));
    CaseText d = CaseText::decoding(bytes);
    d.within(positive);
    const double v = d.real("softmax_scale", -0.25, 0.25);
    EXPECT_TRUE(v >= 0.07 && v <= 0.25) << v;
  }
  CaseText negative = CaseText::parse("property p\nsoftmax_scale -0.125\n");
  negative.within(positive);
  try {
    negative.real("softmax_scale", -0.25, 0.25);
    ADD_FAILURE() << "a scale of -0.125 accepted under softmax_scale >= 0.07";
  } catch (const OutsideContract& e) {
    EXPECT_NE(std::string(e.what()).find("softmax_scale >= 0.07"), std::string::npos) << e.what();
  }
  CaseText k = CaseText::parse("property p\nk 7\n");
  k.within(std::make_shared<const Contract>(parse_contract("topk_decode", "k >= 0.5")));
  EXPECT_THROW(k.integer("k", 1, 4096), Error);
  EXPECT_THROW(parse_contract("sparse_mla_decode", "softmax_scale in [0.5, 0.25]"), Error);
}

}  // namespace
}  // namespace mlacheck
