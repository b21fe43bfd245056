// Tests of core/backend/backend.h: backend names, the status of each backend, and the CUDA architecture match.
#include "core/backend/backend.h"

#include <gtest/gtest.h>

namespace mlacheck {
namespace {

TEST(Backend, NamesRoundTripAndOtherTextIsRefused) {
  for (Backend b : {Backend::kHost, Backend::kCuda, Backend::kHip}) {
    ASSERT_TRUE(parse_backend(backend_name(b)).has_value()) << backend_name(b);
    EXPECT_EQ(*parse_backend(backend_name(b)), b);
  }
  EXPECT_STREQ(backend_name(Backend::kHost), "host");
  EXPECT_STREQ(backend_name(Backend::kCuda), "cuda");
  EXPECT_STREQ(backend_name(Backend::kHip), "hip");
  for (const char* bad : {"", "CUDA", "cuda ", "rocm", "cpu"}) EXPECT_FALSE(parse_backend(bad).has_value()) << bad;
}

TEST(Backend, StatusesListTheThreeBackendsInOrderAndHostIsUsable) {
  const std::vector<BackendStatus> s = backend_statuses();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].backend, Backend::kHost);
  EXPECT_EQ(s[1].backend, Backend::kCuda);
  EXPECT_EQ(s[2].backend, Backend::kHip);
  EXPECT_TRUE(s[0].built);
  EXPECT_TRUE(s[0].usable);
  EXPECT_EQ(s[0].detail.rfind("thread blocks as CPU fibers", 0), 0u) << s[0].detail;
  // HIP kernels are compile-checked at most, never run.
  EXPECT_FALSE(s[2].usable);
  EXPECT_NE(s[2].detail.find("gfx90a and gfx940"), std::string::npos) << s[2].detail;
  for (const BackendStatus& b : s) {
    EXPECT_FALSE(b.detail.empty()) << backend_name(b.backend);
    EXPECT_EQ(b.detail.find('\n'), std::string::npos) << b.detail;
    EXPECT_TRUE(b.built || !b.usable) << backend_name(b.backend);  // usable implies built
  }
#if MLACHECK_HAVE_CUDA
  EXPECT_TRUE(s[1].built);
  // Usable names the device; unusable names the runtime's error.
  if (s[1].usable) {
    EXPECT_NE(s[1].detail.find(" SMs, sm_"), std::string::npos) << s[1].detail;
  } else {
    EXPECT_NE(s[1].detail.find("cudaError"), std::string::npos) << s[1].detail;
  }
#else
  EXPECT_FALSE(s[1].built);
  EXPECT_FALSE(s[1].usable);
  EXPECT_EQ(s[1].detail.find("this build has no CUDA backend (nvcc was not found"), 0u) << s[1].detail;
#endif
}

TEST(Backend, CudaArchitectureListsMatchTheDevicesTheirCodeRunsOn) {
  // The cuda preset's list: sm_90a code runs on an H100/H200 only, sm_100a on a B200 only.
  EXPECT_TRUE(cuda_archs_run_on("90a,100a", 9, 0));
  EXPECT_TRUE(cuda_archs_run_on("90a;100a", 10, 0));
  EXPECT_FALSE(cuda_archs_run_on("90a,100a", 8, 0));
  EXPECT_FALSE(cuda_archs_run_on("90a,100a", 10, 3));
  EXPECT_FALSE(cuda_archs_run_on("90a,100a", 12, 0));
  // PTX ("80", "80-virtual") is compiled by the driver for later devices; machine code ("80-real")
  // runs on later minors of its major only; family code ("100f") likewise.
  EXPECT_TRUE(cuda_archs_run_on("80", 9, 0));
  EXPECT_TRUE(cuda_archs_run_on("80-virtual", 12, 0));
  EXPECT_FALSE(cuda_archs_run_on("90", 8, 9));
  EXPECT_TRUE(cuda_archs_run_on("80-real", 8, 6));
  EXPECT_FALSE(cuda_archs_run_on("80-real", 9, 0));
  EXPECT_TRUE(cuda_archs_run_on("100f", 10, 3));
  EXPECT_FALSE(cuda_archs_run_on("100f", 12, 0));
  EXPECT_TRUE(cuda_archs_run_on("native", 7, 5));
  EXPECT_TRUE(cuda_archs_run_on("all", 12, 1));
  EXPECT_FALSE(cuda_archs_run_on("", 9, 0));
  EXPECT_FALSE(cuda_archs_run_on("sm_90", 9, 0));  // not CMake's spelling
}

}  // namespace
}  // namespace mlacheck
