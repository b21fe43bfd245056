// The cases of a suite run (tools/suite_cases.h): the corpus's case files of a property, the random
// cases' bytes (the same again for the same seed, each picking its property, a quarter mutated
// seeds), and the shrinking walk (chunks removed or zeroed, then bytes lowered, until stop()).
#include "tools/suite_cases.h"

#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

namespace mlacheck {
namespace {

namespace fs = std::filesystem;

const fs::path kCorpus = fs::path(MLACHECK_SOURCE_DIR) / "corpus";

// The smallest bytes holding a byte of at least 41 are one byte, 41: removals and zeroings take
// the rest away, and lowering (kept at the same size) walks 216 down by halves.
TEST(ShrinkBytes, RemovesZeroesThenLowersToTheSmallestThatStillFails) {
  int calls = 0;
  std::set<bool> sizes_asked;
  const auto fails = [&](const std::string& b, bool same_size) {
    ++calls;
    sizes_asked.insert(same_size);
    for (char c : b) {
      if (static_cast<uint8_t>(c) >= 41) return true;
    }
    return false;
  };
  const std::string found("\x10\x07\xd8\x05\x00\x33", 6);
  EXPECT_EQ(shrink_bytes(found, fails, [] { return false; }), std::string("\x29", 1));
  EXPECT_EQ(sizes_asked, (std::set<bool>{false, true}));  // removals must shrink the case; lowering need not
  // A stop() that says so at once leaves the bytes as found, and asks nothing.
  calls = 0;
  EXPECT_EQ(shrink_bytes(found, fails, [] { return true; }), found);
  EXPECT_EQ(calls, 0);
  // Ten tries at most: stopped part way, what was kept so far.
  int tries = 0;
  const auto counted = [&](const std::string& b, bool same_size) { return ++tries, fails(b, same_size); };
  const std::string part = shrink_bytes(found, counted, [&] { return tries >= 10; });
  EXPECT_EQ(tries, 10);
  EXPECT_LT(part.size(), found.size());
  EXPECT_TRUE(fails(part, false));
}

TEST(RandomCases, TheSameSeedDrawsTheSameBytesAndEachPicksItsProperty) {
  const FuzzTarget& t = find_fuzz_target("topk_decode");
  const std::vector<const PropertyEntry*> props = fuzz_target_properties(t);
  ASSERT_GE(props.size(), 2u);
  const RandomCases a(1, "topk_decode@ref", t, kCorpus / "topk_decode", false);
  const RandomCases again(1, "topk_decode@ref", t, kCorpus / "topk_decode", false);
  const RandomCases other(2, "topk_decode@ref", t, kCorpus / "topk_decode", false);
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(a.bytes(props[1], r, "fuzz"), again.bytes(props[1], r, "fuzz"));
    EXPECT_NE(a.bytes(props[1], r, "fuzz"), other.bytes(props[1], r, "fuzz"));
    const std::string bytes = a.bytes(props[1], r, "fuzz");
    EXPECT_EQ(bytes.rfind(a.property_prefix(props[1]), 0), 0u);
    EXPECT_LE(bytes.size(), a.property_prefix(props[1]).size() + 255);
    try {
      EXPECT_EQ(decode_fuzz_input(t, bytes, "topk_decode@ref", "host").property, props[1]);
    } catch (const Error&) {
      // a draw the case rules refuse: the suite runs nothing for it
    }
  }
  EXPECT_NE(a.bytes(props[1], 0, "fuzz"), a.bytes(props[1], 1, "fuzz"));
  // Without a property (any of the target's), the salt seeds the draw.
  EXPECT_NE(a.bytes(nullptr, 0, "fuzz"), a.bytes(nullptr, 0, "probe"));
}

// Every fourth case of a C++ implementation is a seed case's bytes with one to four bytes changed
// (its property's bytes left alone); a Python implementation's stay small random ones.
TEST(RandomCases, AQuarterAreMutatedSeedsWhereSeedsAreAsked) {
  const FuzzTarget& t = find_fuzz_target("topk_decode");
  const PropertyEntry* p = fuzz_target_properties(t).front();
  const std::vector<std::pair<fs::path, CaseText>> seeds =
      case_files(kCorpus / "topk_decode", [&](const PropertyEntry& e) { return &e == p; });
  ASSERT_FALSE(seeds.empty());
  const std::string seed = encode_fuzz_input(seeds.front().second.format());
  const RandomCases mutating(1, "topk_decode@ref", t, kCorpus / "topk_decode", true);
  const std::string drawn = mutating.bytes(p, 3, "fuzz");  // r = 3: the first seed's neighbour
  ASSERT_EQ(drawn.size(), seed.size());
  int changed = 0;
  for (size_t i = 0; i < seed.size(); ++i) changed += drawn[i] != seed[i];
  EXPECT_LE(changed, 4);
  EXPECT_EQ(drawn.rfind(mutating.property_prefix(p), 0), 0u);
  const RandomCases small(1, "topk_decode@ref", t, kCorpus / "topk_decode", false);
  EXPECT_NE(small.bytes(p, 3, "fuzz"), drawn);
}

TEST(CaseFiles, TheFilesOfAPropertyInNameOrderAndNothingMalformed) {
  const fs::path dir = fs::path(::testing::TempDir()) / "suite_cases_files";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::vector<std::pair<fs::path, CaseText>> corpus =
      case_files(kCorpus / "topk_decode", [](const PropertyEntry& e) { return e.op == "topk_decode"; });
  ASSERT_GE(corpus.size(), 2u);
  fs::copy_file(corpus[1].first, dir / "b.case");
  fs::copy_file(corpus[0].first, dir / "a.case");
  std::ofstream(dir / "c.case") << "property no_such_op.nothing\n";
  std::ofstream(dir / "d.case") << "not a case\n";
  std::ofstream(dir / "e.txt") << corpus[0].second.format();
  const auto read = case_files(dir, [](const PropertyEntry&) { return true; });
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[0].first.filename(), "a.case");
  EXPECT_EQ(read[1].first.filename(), "b.case");
  EXPECT_TRUE(case_files(dir, [](const PropertyEntry&) { return false; }).empty());
  EXPECT_TRUE(case_files(dir / "nosuch", [](const PropertyEntry&) { return true; }).empty());
}

}  // namespace
}  // namespace mlacheck
