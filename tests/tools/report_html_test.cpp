// Tests of --report html: the testbed fills the guard picture sink (harness/guard_picture.h) only
// when one is installed, the page (tools/report_html.h) is self-contained and says where the
// first stray is, and, drawn by a real browser (Debian's chromium, headless), the grid shows the
// stray elements in the highlight colour, the first one outlined, and the output view's elements.
#include "tools/report_html.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "harness/testbed.h"
#include "tests/support/cli.h"

#ifdef MLACHECK_HAVE_ZLIB
#include <zlib.h>
#endif

namespace mlacheck {
namespace {

namespace fs = std::filesystem;

// A shared buffer of 5 rows of 3 int32 whose output view is its first 3 rows; the launch writes
// all 5 rows, so rows 3 and 4 (24 bytes) are stray, the first at byte 36: row 3, column 0.
struct Picture : ::testing::Test {
  std::unique_ptr<kernels::Device> device = kernels::make_device(Backend::kHost);
  CaseSchedule schedule;
  Buffer buf{"topk_buffer", View::contiguous(DType::kI32, {5, 3}), 0, 0x58};
  View decode_rows = View::contiguous(DType::kI32, {3, 3});

  Verdict launch_writing_every_row() {
    Testbed bed(*device, schedule);
    bed.output(buf, "decode rows", decode_rows);
    return bed.launch([&] { std::memset(buf.memory->data(), 0xff, 5 * 3 * 4); });
  }
  GuardPicture picture() {
    GuardPictureSink sink;
    ScopedGuardPictureSink on(sink);
    const Verdict v = launch_writing_every_row();
    EXPECT_TRUE(v.has_value());
    const auto p = sink.picture_for(v.value_or(""));
    EXPECT_TRUE(p.has_value());
    return p.value_or(GuardPicture{});
  }
};

TEST_F(Picture, NoSinkIsInstalledByDefaultAndNothingIsRecordedWithoutOne) {
  EXPECT_EQ(guard_picture_sink(), nullptr);
  GuardPictureSink sink;
  { ScopedGuardPictureSink on(sink); }
  EXPECT_EQ(guard_picture_sink(), nullptr);
  ASSERT_TRUE(launch_writing_every_row().has_value());
  EXPECT_FALSE(sink.picture().has_value());
}

TEST_F(Picture, TheTestbedFillsTheSinkWithTheBufferItsViewsAndEveryStrayByte) {
  const GuardPicture p = picture();
  EXPECT_EQ(p.verdict.rfind("guard of topk_buffer: ", 0), 0u) << p.verdict;
  EXPECT_EQ(p.buffer, "topk_buffer");
  EXPECT_EQ(p.size, 60);
  EXPECT_EQ(p.element_size, 4);
  ASSERT_EQ(p.views.size(), 2u);
  EXPECT_TRUE(p.views[0].output);
  EXPECT_EQ(p.views[0].name, "decode rows");
  EXPECT_FALSE(p.views[1].output);  // the buffer's own view
  EXPECT_EQ(p.stray_count, 24);
  ASSERT_EQ(p.strays.size(), 24u);
  EXPECT_TRUE(p.strays_complete);
  EXPECT_EQ(p.strays.front().offset, 36);
  EXPECT_EQ(p.strays.front().expected, 0x58);
  EXPECT_EQ(p.strays.front().actual, 0xff);
  EXPECT_EQ(p.strays.back().offset, 59);
  EXPECT_EQ(p.first.coords, (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(picture_first_stray_place(p), "row 3, column 0, byte 0 of its 4");
}

TEST_F(Picture, StraysInTheRedZonesOfAnInputAreMarkedToo) {
  GuardPictureSink sink;
  ScopedGuardPictureSink on(sink);
  Testbed bed(*device, schedule);
  bed.input(buf);
  const Verdict v = bed.launch([&] {
    buf.memory->data()[-1] ^= 1;  // the leading red zone's last byte
    buf.memory->data()[60] ^= 1;  // the trailing red zone's first byte
  });
  ASSERT_TRUE(v.has_value());
  const auto p = sink.picture_for(*v);
  ASSERT_TRUE(p.has_value());
  ASSERT_EQ(p->views.size(), 1u);
  EXPECT_FALSE(p->views[0].output);
  EXPECT_EQ(p->stray_count, 2);
  ASSERT_EQ(p->strays.size(), 2u);
  EXPECT_EQ(p->strays[0].offset, -1);
  EXPECT_EQ(p->strays[1].offset, 60);
  EXPECT_TRUE(p->strays_complete);
  EXPECT_EQ(picture_first_stray_place(*p), "row -1, column 2, byte 3 of its 4");
  const std::string page = render_guard_picture_html(*p, "");
  size_t marked = 0;
  for (size_t at = page.find("<td class=\"s"); at != std::string::npos; at = page.find("<td class=\"s", at + 1)) ++marked;
  EXPECT_EQ(marked, 2u);
}

TEST_F(Picture, ThePictureOfAnotherFailureIsNotTheVerdicts) {
  GuardPictureSink sink;
  ScopedGuardPictureSink on(sink);
  ASSERT_TRUE(launch_writing_every_row().has_value());
  EXPECT_FALSE(sink.picture_for("element (1, 1) differs").has_value());
}

TEST_F(Picture, ThePageIsSelfContainedEscapedAndSaysWhereTheFirstStrayIs) {
  GuardPicture p = picture();
  p.buffer = "<b>buf";
  const std::string page = render_guard_picture_html(p, "repro x.case: a <property>");
  EXPECT_EQ(page.find("<b>buf"), std::string::npos);
  EXPECT_NE(page.find("&lt;b&gt;buf"), std::string::npos);
  EXPECT_NE(page.find("&lt;property&gt;"), std::string::npos);
  for (const char* external : {"http:", "https:", "src=", "<script", "@import", "url("}) {
    EXPECT_EQ(page.find(external), std::string::npos) << external;
  }
  EXPECT_NE(page.find("row 3, column 0, byte 0 of its 4"), std::string::npos);
  EXPECT_NE(page.find("bytes 36..59 (24)"), std::string::npos);
  const auto count = [&](const std::string& s) {
    size_t n = 0;
    for (size_t at = page.find(s); at != std::string::npos; at = page.find(s, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("<td class=\"s f\""), 1u);
  EXPECT_EQ(count("<td class=\"s"), 6u);  // rows 3 and 4, three elements each
  EXPECT_EQ(count("<td class=\"o\""), 9u);
}

TEST_F(Picture, AFolderThatCannotBeMadeIsOneLine) {
  const GuardPicture p = picture();
  try {
    write_guard_picture_html(p, "/dev/null/pictures", "x", "");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot make the folder '/dev/null/pictures'"), std::string::npos) << e.what();
  }
}

#ifdef MLACHECK_HAVE_ZLIB
struct Image {
  int w = 0, h = 0;
  std::vector<uint8_t> rgb;  // 3 bytes a pixel
  uint32_t at(int x, int y) const {
    const uint8_t* p = &rgb[(static_cast<size_t>(y) * w + x) * 3];
    return (uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | p[2];
  }
};

uint32_t be32(const uint8_t* p) { return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3]; }

// An 8-bit RGB or RGBA, non-interlaced PNG (what chromium's --screenshot writes); w = 0 otherwise.
Image read_png(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> f((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Image img;
  if (f.size() < 33) return img;
  const int w = static_cast<int>(be32(&f[16])), h = static_cast<int>(be32(&f[20]));
  const int depth = f[24], type = f[25], interlace = f[28];
  if (depth != 8 || (type != 2 && type != 6) || interlace != 0) return img;
  const int bpp = type == 6 ? 4 : 3;
  std::vector<uint8_t> idat;
  for (size_t at = 8; at + 12 <= f.size();) {
    const uint32_t len = be32(&f[at]);
    if (std::string(f.begin() + at + 4, f.begin() + at + 8) == "IDAT") idat.insert(idat.end(), &f[at + 8], &f[at + 8] + len);
    at += 12 + len;
  }
  const size_t stride = static_cast<size_t>(w) * bpp;
  std::vector<uint8_t> raw((stride + 1) * h);
  uLongf n = raw.size();
  if (uncompress(raw.data(), &n, idat.data(), idat.size()) != Z_OK || n != raw.size()) return img;
  std::vector<uint8_t> px(stride * h), zero(stride, 0);
  for (int y = 0; y < h; ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* src = &raw[y * (stride + 1) + 1];
    uint8_t* row = &px[y * stride];
    const uint8_t* up = y > 0 ? &px[(y - 1) * stride] : zero.data();
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= static_cast<size_t>(bpp) ? row[i - bpp] : 0, b = up[i];
      const int c = i >= static_cast<size_t>(bpp) ? up[i - bpp] : 0;
      int pred = 0;
      if (filter == 1) pred = a;
      if (filter == 2) pred = b;
      if (filter == 3) pred = (a + b) / 2;
      if (filter == 4) {
        const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
        pred = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      row[i] = static_cast<uint8_t>(src[i] + pred);
    }
  }
  img.w = w, img.h = h;
  img.rgb.resize(static_cast<size_t>(w) * h * 3);
  for (size_t p = 0; p < static_cast<size_t>(w) * h; ++p) std::copy_n(&px[p * bpp], 3, &img.rgb[p * 3]);
  return img;
}

struct Region {
  int x0, y0, x1, y1;
  long area;
};

// The 4-connected regions of exactly `colour` inside [x0, x1] x [y0, y1], in reading order.
std::vector<Region> regions(const Image& img, uint32_t colour, int x0, int y0, int x1, int y1) {
  std::vector<char> seen(static_cast<size_t>(img.w) * img.h, 0);
  std::vector<Region> out;
  for (int y = y0; y <= y1; ++y) {
    for (int x = x0; x <= x1; ++x) {
      if (seen[y * img.w + x] || img.at(x, y) != colour) continue;
      Region r{x, y, x, y, 0};
      std::vector<std::pair<int, int>> stack{{x, y}};
      seen[y * img.w + x] = 1;
      while (!stack.empty()) {
        const auto [cx, cy] = stack.back();
        stack.pop_back();
        ++r.area;
        r.x0 = std::min(r.x0, cx), r.x1 = std::max(r.x1, cx), r.y0 = std::min(r.y0, cy), r.y1 = std::max(r.y1, cy);
        for (const auto& [dx, dy] : {std::pair{1, 0}, {-1, 0}, {0, 1}, {0, -1}}) {
          const int nx = cx + dx, ny = cy + dy;
          if (nx < x0 || nx > x1 || ny < y0 || ny > y1 || seen[ny * img.w + nx] || img.at(nx, ny) != colour) continue;
          seen[ny * img.w + nx] = 1;
          stack.push_back({nx, ny});
        }
      }
      out.push_back(r);
    }
  }
  return out;
}
#endif

// The R1 regression (the top-k decode glue writing the graph-padding rows past its view) on its
// seeded variant: a rerun in a child writes the page of its stray write into topk_buffer; on the
// reference there is no stray write and no page.
TEST(PictureOfCase, TheR1RegressionOnItsSeededVariantGetsAPageAndOnTheReferenceNone) {
  std::ifstream in(std::string(MLACHECK_SOURCE_DIR) + "/corpus/regressions/R1-topk-decode-view-past-num-decode-tokens.case");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(text.empty());
  const fs::path dir = fs::temp_directory_path() / ("mlacheck-picture-of-case-" + std::to_string(getpid()));
  fs::remove_all(dir);
  const std::string path = picture_of_case(text, "host", "indexer_decode_step@R1", dir.string(), "R1", "R1 on its variant", 120);
  ASSERT_EQ(path, (dir / "R1.html").string());
  std::ifstream page(path);
  const std::string html((std::istreambuf_iterator<char>(page)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("Stray write in buffer 'topk_buffer'"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"s f\""), std::string::npos);
  EXPECT_EQ(picture_of_case(text, "host", "indexer_decode_step@ref", dir.string(), "ref", "", 120), "");
  EXPECT_FALSE(fs::exists(dir / "ref.html"));
  fs::remove_all(dir);
}

// The command line: repro --report html ends the FAIL line with the page's path and writes it;
// without --report nothing is written; a folder that cannot be made is one line, exit 2.
TEST(ReportHtmlCli, ReproWritesThePageAndTheFailLineSaysWhere) {
  const fs::path dir = fs::temp_directory_path() / ("mlacheck-report-cli-" + std::to_string(getpid()));
  fs::remove_all(dir);
  const std::string r1 = std::string(MLACHECK_SOURCE_DIR) + "/corpus/regressions/R1-topk-decode-view-past-num-decode-tokens.case";
  const std::string page = (dir / "R1-topk-decode-view-past-num-decode-tokens.html").string();
  const test::CliResult on = test::run_mlacheck("repro " + r1 + " --impl indexer_decode_step@R1 --report html --report-dir " + dir.string());
  EXPECT_EQ(on.status, 1) << on.out;
  EXPECT_NE(on.out.find("\nFAIL  guard of topk_buffer: "), std::string::npos) << on.out;
  EXPECT_NE(on.out.find("; picture: " + page + "\n"), std::string::npos) << on.out;
  EXPECT_TRUE(fs::exists(page));
  fs::remove_all(dir);
  const test::CliResult off = test::run_mlacheck("repro " + r1 + " --impl indexer_decode_step@R1 --report-dir " + dir.string());
  EXPECT_EQ(off.status, 1) << off.out;
  EXPECT_EQ(off.out.find("picture:"), std::string::npos) << off.out;
  EXPECT_FALSE(fs::exists(dir));
  const test::CliResult bad = test::run_mlacheck("repro " + r1 + " --report html --report-dir /dev/null/pages");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_EQ(bad.out, "mlacheck repro: --report-dir: cannot make the folder '/dev/null/pages': Not a directory\n");
}

bool have_chromium() { return std::system("command -v chromium >/dev/null 2>&1") == 0; }

TEST_F(Picture, ChromiumDrawsTheStrayElementsInTheHighlightColourAndOutlinesTheFirst) {
  if (!have_chromium()) {
    std::printf("skipped: no chromium\n");
    GTEST_SKIP() << "skipped: no chromium";
  }
#ifndef MLACHECK_HAVE_ZLIB
  GTEST_SKIP() << "skipped: no zlib to read the screenshot";
#else
  const fs::path dir = fs::temp_directory_path() / ("mlacheck-report-html-" + std::to_string(getpid()));
  fs::remove_all(dir);
  const std::string page = write_guard_picture_html(picture(), dir.string(), "topk_buffer", "report_html_test");
  const std::string shot = (dir / "shot.png").string();
  const std::string cmd = "timeout 90 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars "
                          "--force-device-scale-factor=1 --window-size=1200,1400 --user-data-dir='" +
                          (dir / "profile").string() + "' --screenshot='" + shot + "' 'file://" + page +
                          "' >'" + (dir / "chromium.log").string() + "' 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const Image img = read_png(shot);
  ASSERT_GT(img.w, 0) << "cannot read " << shot;
  // The grid is the box framed in the frame colour.
  const uint32_t frame = std::stoul(kPictureFrameColour, nullptr, 16);
  int x0 = img.w, y0 = img.h, x1 = -1, y1 = -1;
  for (int y = 0; y < img.h; ++y) {
    for (int x = 0; x < img.w; ++x) {
      if (img.at(x, y) != frame) continue;
      x0 = std::min(x0, x), y0 = std::min(y0, y), x1 = std::max(x1, x), y1 = std::max(y1, y);
    }
  }
  ASSERT_GE(x1, 0) << "no grid frame in the screenshot " << shot;
  std::vector<Region> stray = regions(img, std::stoul(kPictureStrayColour, nullptr, 16), x0, y0, x1, y1);
  const std::vector<Region> output = regions(img, std::stoul(kPictureOutputColour, nullptr, 16), x0, y0, x1, y1);
  ASSERT_EQ(stray.size(), 6u) << "stray elements drawn in the highlight colour, in " << shot;
  EXPECT_EQ(output.size(), 9u) << "output view elements, in " << shot;
  // The first stray (row 3, column 0) is the top-left stray element and alone is outlined: its red
  // is smaller than the others', and black lies just inside its cell.
  std::sort(stray.begin(), stray.end(), [](const Region& a, const Region& b) {
    const int ay = (a.y0 + a.y1) / 2, by = (b.y0 + b.y1) / 2;
    return std::abs(ay - by) > 4 ? ay < by : a.x0 < b.x0;
  });
  for (size_t i = 1; i < stray.size(); ++i) {
    EXPECT_LT(stray[0].area, stray[i].area) << "element " << i;
    EXPECT_GE(stray[i].area, 100) << "element " << i;
  }
  EXPECT_EQ(img.at(stray[0].x0 - 1, stray[0].y0), 0x000000u);
  // Every stray element lies below every output element (rows 3 and 4 come after rows 0 to 2).
  for (const Region& o : output) EXPECT_LT(o.y1, stray[0].y0);
  if (HasFailure()) {
    std::printf("the page and its screenshot are kept: %s, %s\n", page.c_str(), shot.c_str());
  } else {
    fs::remove_all(dir);
  }
#endif
}

}  // namespace
}  // namespace mlacheck
