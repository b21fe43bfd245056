// Tests of properties/fuzz_input.h: every target's inputs decode deterministically, a decoded case
// encodes back to bytes that decode to the same case, and the case rules refuse few inputs.
#include "properties/fuzz_input.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>

#include "core/error.h"

namespace mlacheck {
namespace {

// Random inputs: short ones mostly, as libFuzzer's are; bytes skewed small, as the codec reads.
std::string random_input(std::mt19937_64& rng) {
  const size_t n = std::uniform_int_distribution<size_t>(0, 200)(rng);
  std::string s(n, '\0');
  for (char& ch : s) ch = static_cast<char>(rng() % 4 == 0 ? rng() % 256 : rng() % 16);
  return s;
}

constexpr int kInputs = 300;

// What each target's rules refuse: printed for the README, bounded so a parse function that stops
// drawing constructively (a count not exact, a range not dependent) is noticed.
TEST(FuzzInput, EveryTargetDecodesRoundTripsAndRefusesFew) {
  for (const FuzzTarget& target : fuzz_targets()) {
    std::mt19937_64 rng(20261121);
    int refused = 0;
    std::string first_refusal;
    for (int i = 0; i < kInputs; ++i) {
      const std::string input = random_input(rng);
      FuzzCase fc;
      try {
        fc = decode_fuzz_input(target, input, "", "");
      } catch (const Error& e) {
        ++refused;
        if (first_refusal.empty()) first_refusal = e.what();
        EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
        continue;
      }
      const std::string text = fc.text.format();
      // Deterministic: the same bytes decode to the same case.
      EXPECT_EQ(decode_fuzz_input(target, input, "", "").text.format(), text) << target.name;
      // Round trip: the case encodes to bytes that decode to it.
      const std::string bytes = encode_fuzz_input(text);
      const FuzzCase back = decode_fuzz_input(target, bytes, "", "");
      ASSERT_FALSE(back.from_text);
      EXPECT_EQ(back.text.format(), text) << target.name << ": input " << i;
      // The text itself is an input too (a case file in the corpus), read as text.
      const FuzzCase as_text = decode_fuzz_input(target, text, "", "");
      EXPECT_TRUE(as_text.from_text);
      EXPECT_EQ(as_text.property, fc.property);
    }
    std::printf("%-22s %3d of %d random inputs refused%s%s\n", target.name.c_str(), refused, kInputs,
                first_refusal.empty() ? "" : "; first: ", first_refusal.c_str());
    EXPECT_LE(refused, kInputs / 2) << target.name << ": first refusal: " << first_refusal;
  }
}

}  // namespace
}  // namespace mlacheck
