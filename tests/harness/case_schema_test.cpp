// Tests of the case schema (harness/case_schema.h) on a toy case: the reader, the writer and the
// generator that follow from one fields() function, ranges that depend on earlier fields, rules,
// favourites, and fuzz bytes decoding through the reader.
#include "harness/case_schema.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <string>

namespace mlacheck {
namespace {

enum class Shape { kRound, kSquare };

struct ToyCase : CaseSchedule {
  int64_t rows = 1, cols = 1, k = 1;
  bool padded = false;
  Shape shape = Shape::kRound;
  std::vector<int32_t> lengths;
  std::vector<int> order;
};

template <class V>
void fields(V& v, ToyCase& c) {
  v.integer("rows", c.rows, 1, 8, Favor{8, 100});  // 100 lies outside the range: never drawn
  v.integer("cols", c.cols, 1, 16);
  v.integer("k", c.k, 1, c.cols);  // a range that depends on a field read before it
  v.flag("padded", c.padded);
  v.choice("shape", c.shape, {"round", "square"});
  v.list("lengths", c.lengths, c.rows, 0, c.cols);
  v.permutation("order", c.order, c.rows);
  v.rule(c.shape != Shape::kSquare || c.rows == c.cols, "shape: a square case has rows == cols");
  v.schedule(c);
}

std::string text_of(const ToyCase& c) {
  CaseText t;
  write_case(c, t);
  return t.format();
}

TEST(CaseSchema, WritesEveryFieldInOrderAndReadsItBack) {
  ToyCase c;
  c.rows = 2, c.cols = 5, c.k = 3, c.padded = true, c.lengths = {5, 0}, c.order = {1, 0}, c.seed = 9, c.warp_size = 64;
  const std::string text = text_of(c);
  EXPECT_NE(text.find("rows 2\ncols 5\nk 3\npadded 1\nshape round\nlengths 5 0\norder 1 0\nseed 0x9\nwarp 64\nshuffled 0\n"),
            std::string::npos)
      << text;
  const ToyCase back = read_case<ToyCase>(CaseText::parse(text));
  EXPECT_EQ(text_of(back), text);
}

TEST(CaseSchema, TheReaderNamesTheKeyOutsideItsRange) {
  ToyCase c;
  c.rows = 2, c.cols = 5, c.k = 3, c.lengths = {1, 2}, c.order = {0, 1};
  std::string text = text_of(c);
  text.replace(text.find("k 3"), 3, "k 6");  // k's range is [1, cols] = [1, 5]
  try {
    read_case<ToyCase>(CaseText::parse(text));
    FAIL() << "k 6 with cols 5 was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'k'"), std::string::npos) << e.what();
  }
}

TEST(CaseSchema, TheReaderChecksTheRules) {
  ToyCase c;
  c.rows = 2, c.cols = 5, c.k = 3, c.shape = Shape::kSquare, c.lengths = {1, 2}, c.order = {0, 1};
  try {
    read_case<ToyCase>(CaseText::parse(text_of(c)));
    FAIL() << "a square case with rows 2 and cols 5 was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a square case has rows == cols"), std::string::npos) << e.what();
  }
}

RC_GTEST_PROP(CaseSchema, DrawnCasesLieInTheirRangesAndReadBack, ()) {
  CaseDrawer d;
  ToyCase c;
  try {
    fields(d, c);
  } catch (const Error&) {
    RC_DISCARD("the toy schema's draws may break its rule (a square case is drawn at random)");
  }
  RC_ASSERT(c.rows >= 1 && c.rows <= 8 && c.k >= 1 && c.k <= c.cols);
  RC_ASSERT(static_cast<int64_t>(c.lengths.size()) == c.rows);
  RC_ASSERT(std::all_of(c.lengths.begin(), c.lengths.end(), [&](int32_t x) { return x >= 0 && x <= c.cols; }));
  std::vector<int> sorted = c.order;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) RC_ASSERT(sorted[i] == static_cast<int>(i));
  RC_ASSERT(text_of(read_case<ToyCase>(CaseText::parse(text_of(c)))) == text_of(c));
}

TEST(CaseSchema, TheDrawerFavoursItsValuesInsideTheRange) {
  int draws = 0, eights = 0, outside = 0;
  rc::check([&] {
    ToyCase t;
    CaseDrawer d;
    d.integer("rows", t.rows, 1, 8, Favor{8, 100});
    ++draws;
    eights += t.rows == 8;
    outside += t.rows < 1 || t.rows > 8;
  });
  EXPECT_EQ(outside, 0);
  EXPECT_GT(eights, draws * 3 / 10) << "8 is a favourite: about half the draws, plus its uniform share";
}

// The other kinds of field on a second toy: a nested step under a prefix, multiples, one_of, a real,
// named lists, floats, an optional group, a bespoke field and a family passed as an extra argument.
enum class Mark { kDot, kDash, kStar };
struct ToyStep : CaseSchedule {
  int64_t width = 16;
  std::vector<Mark> marks;
  Mark first = Mark::kDot;
  uint64_t salt = 0;
};
struct ToyFamily {
  int64_t max_marks;
};
struct RichCase : CaseSchedule {
  int64_t lanes = 32;
  double scale = 0.5;
  std::vector<float> sink;
  bool has_extra = false;
  std::vector<float> extra;
  int64_t odd = 1;  // bespoke: written as "odd_twice 2 x odd"
  ToyStep step;
};

template <class V>
void fields(V& v, ToyStep& s, const ToyFamily& f) {
  v.multiple("width", s.width, 16, 16, 256, Favor{1, 16});
  v.choices("marks", s.marks, f.max_marks, {"dot", "dash", "star"});
  v.choice("first", s.first, {"dot", "dash", "star"}, [] { return Mark::kStar; });  // a draw of its own
  v.unsigned_integer("salt", s.salt);
  v.schedule(s);
}

template <class V>
void fields(V& v, RichCase& c, const ToyFamily& f) {
  v.one_of("lanes", c.lanes, {32, 64});
  v.real("scale", c.scale, -0.25, 1.0, Among{0.5, -0.25});
  v.floats("sink", c.sink, 2);
  if (v.present("extra", c.has_extra)) {
    c.has_extra = true;
    v.floats("extra", c.extra, 3);
  }
  v.bespoke(
      "odd_twice",
      [&](const CaseText& t, const std::string& k) { c.odd = t.integer(k, 2, 20) / 2; },
      [&](CaseText& out, const std::string& k) { out.set(k, 2 * c.odd); },
      [&] { c.odd = *rc::gen::inRange<int64_t>(1, 11); });
  v.prefixed("s0.", [&] { fields(v, c.step, f); });
  v.schedule(c);
}

std::string rich_text(const RichCase& c, const ToyFamily& f) {
  CaseText t;
  write_case(c, t, f);
  return t.format();
}

TEST(CaseSchema, TheOtherKindsOfFieldRoundTrip) {
  const ToyFamily f{2};
  RichCase c;
  c.lanes = 64, c.scale = -0.25, c.sink = {1.5f, -2.0f}, c.has_extra = true, c.extra = {0.0f, 1.0f, 2.0f}, c.odd = 3;
  c.step.width = 48, c.step.marks = {Mark::kStar, Mark::kDot}, c.step.first = Mark::kDash, c.step.salt = 0xabc,
  c.step.seed = 5;
  const std::string text = rich_text(c, f);
  EXPECT_NE(text.find("lanes 64\nscale -0.25\nsink 1.5 -2\nextra 0 1 2\nodd_twice 6\ns0.width 48\ns0.marks star dot\n"
                      "s0.first dash\ns0.salt 0xabc\ns0.seed 0x5\n"),
            std::string::npos)
      << text;
  const RichCase back = read_case<RichCase>(CaseText::parse(text), f);
  EXPECT_EQ(back.odd, 3);
  EXPECT_EQ(back.step.width, 48);
  EXPECT_EQ(rich_text(back, f), text);
  // Without the optional group the reader leaves it out.
  std::string without = text;
  without.erase(without.find("extra 0 1 2\n"), 12);
  EXPECT_FALSE(read_case<RichCase>(CaseText::parse(without), f).has_extra);
}

TEST(CaseSchema, ThePrefixAndTheFamilyReachTheReader) {
  RichCase c;
  c.sink = {0, 0}, c.step.marks = {Mark::kDot, Mark::kDot};
  std::string text = rich_text(c, ToyFamily{2});
  try {
    read_case<RichCase>(CaseText::parse(text), ToyFamily{3});  // the family wants three marks
    FAIL() << "two marks read for a family of three";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("s0.marks"), std::string::npos) << e.what();
  }
  text.replace(text.find("s0.width 16"), 11, "s0.width 17");
  try {
    read_case<RichCase>(CaseText::parse(text), ToyFamily{2});
    FAIL() << "a width of 17 was read as a multiple of 16";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("s0.width"), std::string::npos) << e.what();
  }
}

RC_GTEST_PROP(CaseSchema, DrawnRichCasesReadBack, ()) {
  const ToyFamily f{*rc::gen::inRange<int64_t>(0, 5)};
  const RichCase c = *draw_case<RichCase>(2, f);
  RC_ASSERT(c.lanes == 32 || c.lanes == 64);
  RC_ASSERT(c.scale == 0.5 || c.scale == -0.25);
  RC_ASSERT(c.step.width % 16 == 0 && c.step.width >= 16 && c.step.width <= 256);
  RC_ASSERT(static_cast<int64_t>(c.step.marks.size()) == f.max_marks);
  RC_ASSERT(c.odd >= 1 && c.odd <= 10);
  RC_ASSERT(c.step.first == Mark::kStar);
  RC_ASSERT(rich_text(read_case<RichCase>(CaseText::parse(rich_text(c, f)), f), f) == rich_text(c, f));
}

TEST(CaseSchema, AnyFuzzBytesDecodeThroughTheReader) {
  for (int i = 0; i < 200; ++i) {
    std::string bytes;
    for (int j = 0; j < 64; ++j) bytes.push_back(static_cast<char>((i * 131 + j * 17) & 0xFF));
    const CaseText t = CaseText::decoding(bytes);
    try {
      const ToyCase c = read_case<ToyCase>(t);
      EXPECT_TRUE(c.k >= 1 && c.k <= c.cols);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("a square case"), std::string::npos) << "only the rule may refuse: " << e.what();
    }
  }
}

}  // namespace
}  // namespace mlacheck
