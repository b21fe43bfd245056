// Tests of core/backend/cuda_runtime.h that need no GPU: error classification, messages, and the probe's answer.
#include "core/backend/cuda_runtime.h"

#include <gtest/gtest.h>

namespace mlacheck::cuda {
namespace {

TEST(CudaErrors, StickyFaultsAreTheErrorsThatKillTheContext) {
  for (cudaError_t e : {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorMisalignedAddress,
                        cudaErrorHardwareStackError, cudaErrorIllegalInstruction, cudaErrorInvalidPc, cudaErrorAssert,
                        cudaErrorInvalidAddressSpace, cudaErrorLaunchTimeout, cudaErrorECCUncorrectable}) {
    EXPECT_TRUE(is_sticky(e)) << cudaGetErrorName(e);
  }
  for (cudaError_t e : {cudaSuccess, cudaErrorInvalidConfiguration, cudaErrorLaunchOutOfResources, cudaErrorInvalidValue,
                        cudaErrorMemoryAllocation, cudaErrorNoDevice, cudaErrorInsufficientDriver,
                        cudaErrorStreamCaptureUnsupported, cudaErrorStreamCaptureInvalidated,
                        cudaErrorCooperativeLaunchTooLarge, cudaErrorNoKernelImageForDevice}) {
    EXPECT_FALSE(is_sticky(e)) << cudaGetErrorName(e);
  }
}

TEST(CudaErrors, CheckThrowsTheRightTypeWithAOneLineMessage) {
  EXPECT_NO_THROW(check(cudaSuccess, "nothing"));
  try {
    check(cudaErrorInvalidConfiguration, "launch of 'topk'");
    FAIL() << "no throw";
  } catch (const StickyFault&) {
    FAIL() << "a bad configuration is not sticky";
  } catch (const LaunchError& e) {
    EXPECT_EQ(e.code(), cudaErrorInvalidConfiguration);
    EXPECT_EQ(std::string(e.what()), "launch of 'topk': cudaErrorInvalidConfiguration (invalid configuration argument)");
    EXPECT_FALSE(is_sticky_fault(e));
  }
  try {
    check(cudaErrorIllegalAddress, "cudaStreamSynchronize");
    FAIL() << "no throw";
  } catch (const StickyFault& e) {
    EXPECT_EQ(e.code(), cudaErrorIllegalAddress);
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("cudaStreamSynchronize: cudaErrorIllegalAddress (an illegal memory access was encountered)", 0), 0u) << m;
    EXPECT_NE(m.find("context is lost"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_TRUE(is_sticky_fault(e));
  }
  // Both are mlacheck::Error, so callers that only know the toolkit's error type still catch them.
  EXPECT_THROW(check(cudaErrorMisalignedAddress, "x"), Error);
  EXPECT_THROW(check(cudaErrorInvalidValue, "x"), Error);
}

TEST(CudaProbe, NeverThrowsAndSaysWhy) {
  DeviceInfo d;
  ASSERT_NO_THROW(d = probe_device());
  if (d.usable) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.sm_count, 0);
    EXPECT_GT(d.global_bytes, 0);
    EXPECT_TRUE(d.why_not.empty());
  } else {
    // "no GPU (cudaErrorNoDevice)", "no usable driver (cudaErrorInsufficientDriver: ...)", ...
    EXPECT_NE(d.why_not.find("(cudaError"), std::string::npos) << d.why_not;
    const bool known_start = d.why_not.rfind("no GPU (", 0) == 0 || d.why_not.rfind("no usable driver (", 0) == 0 ||
                             d.why_not.rfind("CUDA unusable (", 0) == 0;
    EXPECT_TRUE(known_start) << d.why_not;
  }
}

}  // namespace
}  // namespace mlacheck::cuda
