// Tests of core/quarantine.h: memory freed while a hold lives is kept at its address, poisoned and
// watched; a write after the free is reported once, naming the buffer; without a hold, or once the
// last hold is gone, memory is freed as usual; the budget releases the oldest first.
#include "core/quarantine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>

#include "core/guarded_buffer.h"

namespace mlacheck {
namespace {

std::unique_ptr<GuardedMemory> retired(const std::shared_ptr<Quarantine>& q, const char* name, int64_t bytes) {
  auto m = std::make_unique<GuardedBuffer>(name, bytes);
  m->retire_to(q);
  return m;
}

TEST(Quarantine, WithoutAHoldFreedMemoryIsNotKept) {
  auto q = std::make_shared<Quarantine>();
  auto m = retired(q, "scratch", 256);
  m.reset();
  EXPECT_EQ(q->kept_count(), 0u);
  EXPECT_TRUE(q->writes_since_freed().empty());
}

TEST(Quarantine, MemoryFreedUnderAHoldKeepsItsAddressPoisonedAndAWriteIsReportedOnce) {
  auto q = std::make_shared<Quarantine>();
  auto m = retired(q, "capture scratch", 64);
  const float one = 1.0f;
  for (int64_t i = 0; i < 16; ++i) m->write(4 * i, &one, 4);
  float* p = reinterpret_cast<float*>(m->data());  // what a captured launch keeps
  const std::shared_ptr<void> hold = q->hold();
  m.reset();
  ASSERT_EQ(q->kept_count(), 1u);
  EXPECT_EQ(q->kept_bytes(), 64);
  // Poisoned: a replay that reads before writing computes NaN.
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(std::isnan(p[i])) << i;
  EXPECT_TRUE(q->writes_since_freed().empty());
  p[3] = 2.0f;  // a replay writes through the old address
  const std::vector<std::string> w = q->writes_since_freed();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("'capture scratch' (64 bytes)"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("written after it was freed: 4 bytes changed, from byte 12 to 15"), std::string::npos) << w[0];
  EXPECT_TRUE(q->writes_since_freed().empty()) << "re-armed after the report";
}

// Freed while a capture is open (per-call scratch of the captured call): kept untouched until the
// capture closes, then poisoned and watched like memory freed after it, as long as a graph holds.
TEST(Quarantine, MemoryFreedWhileACaptureIsOpenIsPoisonedWhenItClosesAndWatched) {
  auto q = std::make_shared<Quarantine>();
  auto m = retired(q, "per-call scratch", 16);
  const float one = 1.0f;
  for (int64_t i = 0; i < 4; ++i) m->write(4 * i, &one, 4);
  float* p = reinterpret_cast<float*>(m->data());
  std::shared_ptr<void> open = q->open_capture();
  EXPECT_TRUE(q->capture_open());
  m.reset();
  ASSERT_EQ(q->kept_count(), 1u);
  EXPECT_EQ(p[0], 1.0f) << "not touched while the capture is open";
  const std::shared_ptr<void> graph = q->hold();
  open.reset();
  EXPECT_FALSE(q->capture_open());
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(std::isnan(p[i])) << i;
  EXPECT_TRUE(q->writes_since_freed().empty());
  p[1] = 2.0f;  // the graph's first replay
  const std::vector<std::string> w = q->writes_since_freed();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("'per-call scratch' (16 bytes)"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("4 bytes changed, from byte 4 to 7"), std::string::npos) << w[0];
}

// A capture that fails (its body throws) leaves no graph: what it freed is released with its hold.
TEST(Quarantine, AClosedCaptureWithNoGraphReleasesWhatItFreed) {
  auto q = std::make_shared<Quarantine>();
  auto m = retired(q, "scratch", 16);
  std::shared_ptr<void> open = q->open_capture();
  m.reset();
  EXPECT_EQ(q->kept_count(), 1u);
  open.reset();
  EXPECT_EQ(q->kept_count(), 0u);
  EXPECT_FALSE(q->holding());
}

TEST(Quarantine, ALaunchWritingPastTheFreedBufferIsSeenToo) {
  auto q = std::make_shared<Quarantine>();
  auto m = retired(q, "scratch", 32);
  uint8_t* p = m->data();
  const auto hold = q->hold();
  m.reset();
  p[32] ^= 0xFF;  // the red zone after it
  const std::vector<std::string> w = q->writes_since_freed();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("from byte 32 to 32"), std::string::npos) << w[0];
}

TEST(Quarantine, DroppingTheLastHoldReleasesWhatIsKept) {
  auto q = std::make_shared<Quarantine>();
  auto a = retired(q, "a", 128), b = retired(q, "b", 128);
  auto first = q->hold();
  auto second = q->hold();
  a.reset();
  first.reset();
  EXPECT_EQ(q->kept_count(), 1u) << "one hold is left";
  b.reset();
  EXPECT_EQ(q->kept_count(), 2u);
  second.reset();
  EXPECT_FALSE(q->holding());
  EXPECT_EQ(q->kept_count(), 0u);
  EXPECT_EQ(q->kept_bytes(), 0);
}

TEST(Quarantine, PastItsBudgetTheOldestIsReleasedFirst) {
  auto q = std::make_shared<Quarantine>(1000);
  const auto hold = q->hold();
  for (const char* name : {"first", "second", "third"}) retired(q, name, 400).reset();
  EXPECT_EQ(q->kept_count(), 2u);
  EXPECT_EQ(q->kept_bytes(), 800);
}

TEST(Quarantine, MemoryOfAnOddSizeIsPoisonedBytewiseAndWatched) {
  auto q = std::make_shared<Quarantine>();
  auto m = retired(q, "odd", 7);
  uint8_t* p = m->data();
  const auto hold = q->hold();
  m.reset();
  ASSERT_EQ(q->kept_count(), 1u);
  p[6] ^= 1;
  EXPECT_EQ(q->writes_since_freed().size(), 1u);
}

TEST(Quarantine, ANegativeBudgetIsRefused) { EXPECT_ANY_THROW(Quarantine(-1)); }

}  // namespace
}  // namespace mlacheck
