// StorageWatch (core/storage_watch.h): a watch over memory it does not own reports the bytes a call
// changed outside the views it may write, exactly near the views and by block far from them.
#include "core/storage_watch.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "core/error.h"

namespace mlacheck {
namespace {

// A storage of 16 rows of 8 fp32, the view its first 4 rows: a preallocated buffer and its slice.
struct Rows {
  std::vector<float> data = std::vector<float>(16 * 8);
  View out = View::contiguous(DType::kF32, {4, 8});
  Rows() { std::iota(data.begin(), data.end(), 1.0f); }
  uint8_t* base() { return reinterpret_cast<uint8_t*>(data.data()); }
  int64_t bytes() const { return static_cast<int64_t>(data.size() * sizeof(float)); }
};

TEST(StorageWatch, WritesInsideTheViewAreClean) {
  Rows r;
  StorageWatch w(r.base(), r.bytes());
  w.add_view("argument 'out'", r.out, true);
  w.arm();
  for (int i = 0; i < 32; ++i) r.data[i] = -1.0f;
  EXPECT_TRUE(w.check().ok()) << w.check().describe;
}

TEST(StorageWatch, AWriteOneRowPastTheViewIsAStrayWriteWithItsRowAndColumn) {
  Rows r;
  StorageWatch w(r.base(), r.bytes());
  w.add_view("argument 'out'", r.out, true);
  w.arm();
  r.data[4 * 8 + 2] = 0.0f;  // row 4, column 2: one row past the view
  const WatchReport rep = w.check();
  ASSERT_FALSE(rep.ok());
  EXPECT_EQ(rep.first, (4 * 8 + 2) * 4 + 2);  // 35.0f -> 0.0f changes bytes 2 and 3 of the float
  EXPECT_EQ(rep.changed_bytes, 2);
  EXPECT_TRUE(rep.first_exact);
  EXPECT_FALSE(rep.into_read_only);
  EXPECT_EQ(rep.view, 0);
  EXPECT_EQ(rep.coords, (std::vector<int64_t>{4, 2}));
  EXPECT_NE(rep.describe.find("stray write: 2 bytes outside the views it may write changed"), std::string::npos)
      << rep.describe;
  EXPECT_NE(rep.describe.find("nearest argument 'out': row 4, column 2 (past the view's 4 rows)"), std::string::npos)
      << rep.describe;
}

TEST(StorageWatch, AChangedReadOnlyViewIsAWriteToAnInput) {
  Rows r;
  StorageWatch w(r.base(), r.bytes());
  w.add_view("argument 'out'", r.out, true);
  w.add_view("argument 'logits'", View::contiguous(DType::kF32, {4, 8}, 4 * 8 * 4), false);
  w.arm();
  r.data[5 * 8 + 1] = 0.0f;  // logits' row 1, column 1
  const WatchReport rep = w.check();
  ASSERT_FALSE(rep.ok());
  EXPECT_TRUE(rep.into_read_only);
  EXPECT_EQ(rep.view, 1);
  EXPECT_NE(rep.describe.find("write to an input"), std::string::npos) << rep.describe;
  EXPECT_NE(rep.describe.find("in argument 'logits': row 1, column 1"), std::string::npos) << rep.describe;
}

TEST(StorageWatch, AStridedViewsGapsAreWatched) {
  Rows r;
  StorageWatch w(r.base(), r.bytes());
  // Every other column of the first 4 rows: the columns between are not the call's to write.
  w.add_view("argument 'out'", View(DType::kF32, {4, 4}, {8, 2}), true);
  w.arm();
  r.data[0] = 0.0f;  // column 0: in the view
  EXPECT_TRUE(w.check().ok());
  r.data[1] = 0.0f;  // column 1: a gap
  const WatchReport rep = w.check();
  ASSERT_FALSE(rep.ok());
  EXPECT_EQ(rep.first / 4, 1);
}

TEST(StorageWatch, ALargeStorageIsCheckedExactlyNearTheViewsAndByBlockBeyond) {
  // 8 MiB with an exact limit of 1 MiB: the window is the view's 4 KiB and a 256 KiB margin each side.
  std::vector<uint8_t> mem(8 << 20, 7);
  const View v = View::contiguous(DType::kU8, {4096}, 4 << 20);
  {
    StorageWatch w(mem.data(), static_cast<int64_t>(mem.size()), 1 << 20);
    w.add_view("argument 'out'", v, true);
    w.arm();
    mem[(4 << 20) + 4096 + 10] = 1;  // just past the view: exact
    const WatchReport rep = w.check();
    EXPECT_TRUE(rep.first_exact);
    EXPECT_EQ(rep.changed_bytes, 1);
    EXPECT_EQ(rep.first, (4 << 20) + 4096 + 10);
    mem[(4 << 20) + 4096 + 10] = 7;
  }
  StorageWatch w(mem.data(), static_cast<int64_t>(mem.size()), 1 << 20);
  w.add_view("argument 'out'", v, true);
  w.arm();
  EXPECT_TRUE(w.check().ok());
  mem[100] = 8;  // 4 MiB before the view: by block
  const WatchReport rep = w.check();
  ASSERT_FALSE(rep.ok());
  EXPECT_FALSE(rep.first_exact);
  EXPECT_EQ(rep.changed_blocks, 1);
  EXPECT_EQ(rep.first, 0);
  EXPECT_NE(rep.describe.find("its old bytes are not kept"), std::string::npos) << rep.describe;
}

TEST(StorageWatch, AViewPastTheStorageIsAnError) {
  Rows r;
  StorageWatch w(r.base(), r.bytes());
  EXPECT_THROW(w.add_view("argument 'out'", View::contiguous(DType::kF32, {17, 8}), true), Error);
}

}  // namespace
}  // namespace mlacheck
