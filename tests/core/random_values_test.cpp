// Tests of properties/random_values.h: the draws are libstdc++'s std::uniform_real_distribution
// values bit for bit (case data must not change with how it is computed), and the branchless
// conversions round as the compiler's own.
#include "properties/random_values.h"

#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace mlacheck {
namespace {

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
uint64_t bits_of(double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}

// Every edge of the two paths (2^63 and its neighbours, all ones, halfway patterns of floats and
// doubles around 2^63, small exact values) and a million draws: the same bits as static_cast.
TEST(RandomValues, BranchlessConversionsRoundAsStaticCast) {
  std::vector<uint64_t> xs = {0, 1, 2, 3, (1ull << 24) - 1, (1ull << 24) + 1, (1ull << 25) + 1, (1ull << 53) + 1,
                              (1ull << 62), (1ull << 63) - 1, 1ull << 63, (1ull << 63) + 1, ~0ull, ~0ull - 1};
  for (int shift : {0, 1, 38, 39, 40, 10, 11, 12}) {  // just above, at and below a float's and a double's halfway bit
    xs.push_back((1ull << 63) | (1ull << shift));
    xs.push_back((1ull << 63) | (1ull << shift) | 1);
    xs.push_back((1ull << 62) | (1ull << shift));
    xs.push_back(~0ull ^ (1ull << shift));
  }
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1000000; ++i) xs.push_back(rng());
  int wrong = 0;
  for (uint64_t x : xs) {
    if (bits_of(u64_to_float(x)) != bits_of(static_cast<float>(x))) ++wrong;
    if (bits_of(u64_to_double(x)) != bits_of(static_cast<double>(x))) ++wrong;
  }
  EXPECT_EQ(wrong, 0);
}

// uniform() and canonical_double() draw what std::uniform_real_distribution draws from the same
// engine, bit for bit.
TEST(RandomValues, DrawsAreTheStandardDistributionsBits) {
  std::mt19937_64 a(11), b(11);
  std::uniform_real_distribution<float> f(-2.0f, 2.0f);
  std::uniform_real_distribution<double> d(0.0, 1.0);
  int wrong = 0;
  for (int i = 0; i < 200000; ++i) {
    if (bits_of(uniform(a, -2.0f, 2.0f)) != bits_of(f(b))) ++wrong;
    if (bits_of(canonical_double(a)) != bits_of(d(b))) ++wrong;
  }
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace mlacheck
