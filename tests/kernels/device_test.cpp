// Tests of kernels/device.h: the host device, capture and replay of launches (host, and cuda when a
// GPU is usable), memory freed while a graph holds it quarantined and watched, and clear refusals
// for backends that cannot run here.
#include "kernels/device.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "kernels/pack_decode_glue.h"

namespace mlacheck::kernels {
namespace {

// The MPS daemon is found by its control pipe, in $CUDA_MPS_PIPE_DIRECTORY (else /tmp/nvidia-mps).
TEST(Device, MpsDaemonIsFoundByItsControlPipe) {
  const char* was = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  const std::string saved = was != nullptr ? was : "";
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "mlacheck-mps-test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ::setenv("CUDA_MPS_PIPE_DIRECTORY", dir.c_str(), 1);
  EXPECT_FALSE(mps_daemon_running()) << "an empty pipe directory";
  std::ofstream(dir / "control") << "";
  EXPECT_TRUE(mps_daemon_running()) << "a control pipe there";
  ::setenv("CUDA_MPS_PIPE_DIRECTORY", (dir / "elsewhere").c_str(), 1);
  EXPECT_FALSE(mps_daemon_running()) << "the variable names another directory";
  std::filesystem::remove_all(dir);
  if (was != nullptr) {
    ::setenv("CUDA_MPS_PIPE_DIRECTORY", saved.c_str(), 1);
  } else {
    ::unsetenv("CUDA_MPS_PIPE_DIRECTORY");
  }
}

TEST(Device, HostDeviceGivesGuardedHostMemory) {
  const auto d = make_device(Backend::kHost);
  EXPECT_EQ(d->backend(), Backend::kHost);
  auto buf = d->allocate("x", 64);
  EXPECT_FALSE(buf->on_device());
  EXPECT_EQ(buf->size(), 64);
  const int32_t v = 7;
  buf->write(4, &v, 4);
  const DeviceTensor t{buf->data(), View::contiguous(DType::kI32, {2}, 4)};
  EXPECT_EQ(*t.data<int32_t>(), 7);
  d->synchronize();
  EXPECT_EQ(d->multiprocessors(), 16);
  EXPECT_TRUE(device_usable(Backend::kHost));
}

// Captures a row copy, checks that nothing ran, replays it, writes new source rows into the same
// buffer and replays again: the replay reads the buffers' current contents.
void check_capture_and_replay(Device& d) {
  auto src = d.allocate("src", 4 * 8), dst = d.allocate("dst", 4 * 8);
  const std::vector<int32_t> first{1, 2, 3, 4, 5, 6, 7, 8}, second{9, 10, 11, 12, 13, 14, 15, 16}, zeros(8, 0);
  src->write(0, first.data(), 32);
  dst->write(0, zeros.data(), 32);
  const DeviceTensor s{src->data(), View::contiguous(DType::kI32, {4, 2})}, t{dst->data(), View::contiguous(DType::kI32, {4, 2})};
  const auto graph = d.capture([&] { copy_rows(d, s, t); });
  d.synchronize();
  EXPECT_EQ(graph->launch_count(), 1u);
  std::vector<int32_t> got(8);
  dst->read(0, got.data(), 32);
  EXPECT_EQ(got, zeros) << "a captured launch ran during capture";
  graph->replay();
  d.synchronize();
  dst->read(0, got.data(), 32);
  EXPECT_EQ(got, first);
  src->write(0, second.data(), 32);
  graph->replay();
  d.synchronize();
  dst->read(0, got.data(), 32);
  EXPECT_EQ(got, second);
  // Eager launches after a capture run at once again.
  src->write(0, first.data(), 32);
  copy_rows(d, s, t);
  d.synchronize();
  dst->read(0, got.data(), 32);
  EXPECT_EQ(got, first);
}

TEST(Device, CaptureRecordsLaunchesAndReplayReadsTheBuffersAnew) {
  const auto d = make_device(Backend::kHost);
  check_capture_and_replay(*d);
  // A failure inside the body ends the capture: the stream runs launches at once afterwards.
  EXPECT_THROW(d->capture([] { throw Error("boom"); }), Error);
  auto buf = d->allocate("x", 32);
  const std::vector<int32_t> v{1, 2, 3, 4, 5, 6, 7, 8};
  buf->write(0, v.data(), 32);
  copy_rows(*d, {buf->data(), View::contiguous(DType::kI32, {2, 2})}, {buf->data(), View::contiguous(DType::kI32, {2, 2}, 16)});
  std::vector<int32_t> got(8);
  buf->read(0, got.data(), 32);
  EXPECT_EQ(got, (std::vector<int32_t>{1, 2, 3, 4, 1, 2, 3, 4}));
}

TEST(Device, CaptureAndReplayOnCudaWhenAGpuIsPresent) {
  std::string why;
  if (!device_usable(Backend::kCuda, &why)) GTEST_SKIP() << "skipped: no GPU (" << why << ")";
  const auto d = make_device(Backend::kCuda);
  check_capture_and_replay(*d);
}

// Scratch freed after a capture (TensorRT-LLM #16290): the graph keeps its address. The device
// quarantines it instead of reusing it, a replay's write to it is reported naming it, and a replay
// that reads it reads NaN. Memory freed with no graph alive, or after the last graph is gone, is
// not watched.
void check_freed_scratch_is_quarantined(Device& d) {
  auto src = d.allocate("src", 32), dst = d.allocate("dst", 32);
  auto scratch = d.allocate("capture scratch", 32);
  const std::vector<int32_t> rows{1, 2, 3, 4, 5, 6, 7, 8};
  src->write(0, rows.data(), 32);
  scratch->write(0, rows.data(), 32);
  const View v = View::contiguous(DType::kI32, {4, 2});
  const DeviceTensor s{src->data(), v}, t{dst->data(), v}, w{scratch->data(), v};
  auto into_scratch = d.capture([&] { copy_rows(d, s, w); });
  auto from_scratch = d.capture([&] { copy_rows(d, w, t); });
  scratch.reset();  // freed when "capture" returns
  d.synchronize();
  EXPECT_TRUE(d.writes_to_freed_memory().empty()) << "nothing ran since the free";
  from_scratch->replay();
  d.synchronize();
  std::vector<uint32_t> got(8);
  dst->read(0, got.data(), 32);
  for (uint32_t x : got) EXPECT_EQ(x, 0x7FA5A5A5u) << "a read of freed memory reads the float poison (NaN)";
  EXPECT_TRUE(d.writes_to_freed_memory().empty()) << "a read is not a write";
  into_scratch->replay();
  d.synchronize();
  const std::vector<std::string> writes = d.writes_to_freed_memory();
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_NE(writes[0].find("'capture scratch' (32 bytes), freed while a captured graph was alive, was written"),
            std::string::npos)
      << writes[0];
  into_scratch.reset(), from_scratch.reset();
  auto later = d.allocate("later", 32);
  later.reset();  // no graph alive: freed as usual, never reported
  EXPECT_TRUE(d.writes_to_freed_memory().empty());
}

TEST(Device, ScratchFreedAfterACaptureIsQuarantinedAndAReplaysWriteToItReported) {
  const auto d = make_device(Backend::kHost);
  check_freed_scratch_is_quarantined(*d);
}

TEST(Device, ScratchFreedAfterACaptureOnCudaWhenAGpuIsPresent) {
  std::string why;
  if (!device_usable(Backend::kCuda, &why)) GTEST_SKIP() << "skipped: no GPU (" << why << ")";
  const auto d = make_device(Backend::kCuda);
  check_freed_scratch_is_quarantined(*d);
}

// Per-call scratch allocated and freed inside the captured body (docs/bugs.md T4): freed before the
// capture ends, and baked into the graph all the same. The quarantine covers the capture from its
// start: the scratch is kept, poisoned as the capture closes, and the first replay's write to it is
// reported. Scratch the body frees without launching on it is kept too and never reported.
void check_scratch_freed_inside_a_capture_is_quarantined(Device& d) {
  auto src = d.allocate("src", 32), dst = d.allocate("dst", 32);
  const std::vector<int32_t> rows{1, 2, 3, 4, 5, 6, 7, 8};
  src->write(0, rows.data(), 32);
  const View v = View::contiguous(DType::kI32, {4, 2});
  const DeviceTensor s{src->data(), v}, t{dst->data(), v};
  auto graph = d.capture([&] {
    auto scratch = d.allocate("per-call scratch", 32);
    auto unused = d.allocate("unused scratch", 32);
    const DeviceTensor w{scratch->data(), v};
    copy_rows(d, s, w);
    copy_rows(d, w, t);
  });  // both freed as the body returns, before the capture ends
  d.synchronize();
  EXPECT_TRUE(d.writes_to_freed_memory().empty()) << "the capture recorded the launches; nothing ran";
  graph->replay();
  d.synchronize();
  const std::vector<std::string> writes = d.writes_to_freed_memory();
  ASSERT_EQ(writes.size(), 1u) << "only the scratch the graph launches on is written";
  EXPECT_NE(writes[0].find("'per-call scratch' (32 bytes), freed while a captured graph was alive, was written"),
            std::string::npos)
      << writes[0];
  std::vector<int32_t> got(8);
  dst->read(0, got.data(), 32);
  EXPECT_EQ(got, rows) << "the replay's own result is right: only the freed bytes tell";
  graph.reset();
  auto later = d.allocate("later", 32);
  later.reset();  // no graph alive and no capture open: freed as usual
  EXPECT_TRUE(d.writes_to_freed_memory().empty());
}

TEST(Device, ScratchFreedInsideACaptureIsQuarantinedAndAReplaysWriteToItReported) {
  const auto d = make_device(Backend::kHost);
  check_scratch_freed_inside_a_capture_is_quarantined(*d);
}

TEST(Device, ScratchFreedInsideACaptureOnCudaWhenAGpuIsPresent) {
  std::string why;
  if (!device_usable(Backend::kCuda, &why)) GTEST_SKIP() << "skipped: no GPU (" << why << ")";
  const auto d = make_device(Backend::kCuda);
  check_scratch_freed_inside_a_capture_is_quarantined(*d);
}

TEST(Device, HipIsRefusedWithOneLine) {
  std::string why;
  EXPECT_FALSE(device_usable(Backend::kHip, &why));
  EXPECT_NE(why.find("hip"), std::string::npos) << why;
  EXPECT_THROW(make_device(Backend::kHip), Error);
}

TEST(Device, CudaRunsOrSaysWhyNot) {
  std::string why;
  if (!device_usable(Backend::kCuda, &why)) {
    EXPECT_NE(why.find("cuda: not usable"), std::string::npos) << why;
    try {
      make_device(Backend::kCuda);
      ADD_FAILURE() << "make_device(cuda) succeeded although " << why;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
    }
    GTEST_SKIP() << "skipped: no GPU (" << why << ")";
  }
  const auto d = make_device(Backend::kCuda);
  auto buf = d->allocate("x", 64);
  EXPECT_TRUE(buf->on_device());
  EXPECT_GT(d->multiprocessors(), 0);
  d->synchronize();
}

}  // namespace
}  // namespace mlacheck::kernels
