// Tests of harness/case_bytes.h: what the codec writes reads back as the same value, at every
// tier's edges and for every range shape; any bytes read as some value.
#include "harness/case_bytes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace mlacheck {
namespace {

TEST(CaseBytes, CompactRoundTripsAtEveryTierEdge) {
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{223}, uint64_t{224}, uint64_t{4319}, uint64_t{4320},
                     uint64_t{528607}, uint64_t{528608}, uint64_t{1} << 40, ~uint64_t{0}}) {
    ByteWriter w;
    w.compact(v);
    ByteReader r(w.bytes());
    EXPECT_EQ(r.compact(), v);
    EXPECT_TRUE(r.exhausted()) << v;
  }
  // Small values cost one byte; the tiers are 1, 2, 3 and 9 bytes.
  for (auto [v, n] : {std::pair<uint64_t, size_t>{7, 1}, {300, 2}, {100000, 3}, {uint64_t{1} << 33, 9}}) {
    ByteWriter w;
    w.compact(v);
    EXPECT_EQ(w.bytes().size(), n) << v;
  }
}

TEST(CaseBytes, RangesRoundTripAndSmallBytesGiveSmallValues) {
  const std::pair<int64_t, int64_t> ranges[] = {{0, 0}, {0, 9}, {5, 5000}, {-3, 3}, {-1000, 7}, {-7, 1000},
                                                {-(int64_t{1} << 30), 200}, {-50, -10}};
  for (auto [lo, hi] : ranges) {
    for (int64_t v = std::max<int64_t>(lo, -2000); v <= std::min<int64_t>(hi, 2000); ++v) {
      EXPECT_EQ(range_value(range_index(v, lo, hi), lo, hi), v) << lo << ".." << hi;
      ByteWriter w;
      w.in_range(v, lo, hi);
      ByteReader r(w.bytes());
      EXPECT_EQ(r.in_range(lo, hi), v);
    }
  }
  // Across 0: index 0, 1, 2 are 0, 1, -1.
  EXPECT_EQ(range_value(0, -(int64_t{1} << 30), 200), 0);
  EXPECT_EQ(range_value(1, -(int64_t{1} << 30), 200), 1);
  EXPECT_EQ(range_value(2, -(int64_t{1} << 30), 200), -1);
  EXPECT_EQ(range_value(401, -(int64_t{1} << 30), 200), -201);  // past the short side: the long side goes on
}

TEST(CaseBytes, AnyBytesReadInRange) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string s(rng() % 12, '\0');
    for (char& ch : s) ch = static_cast<char>(rng());
    ByteReader r(s);
    const int64_t lo = static_cast<int64_t>(rng() % 2000) - 1000, hi = lo + static_cast<int64_t>(rng() % 3000);
    const int64_t v = r.in_range(lo, hi);
    EXPECT_GE(v, lo);
    EXPECT_LE(v, hi);
  }
  ByteReader empty("");
  EXPECT_EQ(empty.compact(), 0u);  // past the end every byte is 0
  EXPECT_EQ(empty.real(), -31.0);
}

TEST(CaseBytes, RealsRoundTripBitForBit) {
  const double values[] = {0.0, -0.0, 1.0, -31.0, 30.75, 0.25, 0.0722, 1e300, -1e-310,
                           std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()};
  for (double v : values) {
    ByteWriter w;
    w.real(v);
    ByteReader r(w.bytes());
    const double back = r.real();
    EXPECT_EQ(std::memcmp(&back, &v, sizeof v), 0) << v;
  }
}

}  // namespace
}  // namespace mlacheck
