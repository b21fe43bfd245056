// Tests of the fields every case shares (harness/schedule.h).
#include "harness/schedule.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace mlacheck {
namespace {

TEST(Schedule, WritesAndReadsItsKeys) {
  CaseSchedule s;
  s.seed = 0x1234, s.warp_size = 64, s.shuffled = true;
  CaseText t;
  write_schedule(s, t, "step0.");
  EXPECT_NE(t.format().find("step0.seed 0x1234\nstep0.warp 64\nstep0.shuffled 1\n"), std::string::npos) << t.format();
  CaseSchedule back;
  read_schedule(back, CaseText::parse(t.format()), "step0.");
  EXPECT_EQ(back.seed, s.seed);
  EXPECT_EQ(back.warp_size, 64);
  EXPECT_TRUE(back.shuffled);
}

TEST(Schedule, ASeedKeptElsewhereIsNeitherWrittenNorRead) {
  CaseSchedule s;
  s.seed = 5;
  CaseText t;
  write_schedule(s, t, "", SeedKey::kElsewhere);
  EXPECT_FALSE(t.has("seed"));
  CaseSchedule back;
  back.seed = 9;
  read_schedule(back, t, "", SeedKey::kElsewhere);
  EXPECT_EQ(back.seed, 9u);
}

TEST(Schedule, AWarpOtherThan32Or64IsRefused) {
  const CaseText t = CaseText::parse("seed 1\nwarp 48\nshuffled 0\n");
  CaseSchedule s;
  EXPECT_THROW(read_schedule(s, t), Error);
  read_schedule(s, CaseText::parse("seed 1\nwarp 64\nshuffled 0\n"));  // the same text with a valid warp reads
  EXPECT_EQ(s.warp_size, 64);
}

TEST(Schedule, HostOptionsFollowTheFields) {
  CaseSchedule s;
  s.seed = 3, s.warp_size = 64, s.shuffled = true;
  const simt::host::Options o = s.host_options();
  EXPECT_EQ(o.warp_size, 64);
  EXPECT_EQ(o.schedule, simt::host::Schedule::kShuffled);
  EXPECT_EQ(o.seed, 3u);
  s.shuffled = false;
  EXPECT_EQ(s.host_options().schedule, simt::host::Schedule::kOrdered);
}

}  // namespace
}  // namespace mlacheck
