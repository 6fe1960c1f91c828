// Copyright 2026 The pagedkv Authors.
//
// Helpers of the CUDA kernel tests: host <-> device copies that fail the test on error, a
// tolerance check against the CPU reference, and a fixture that skips without a visible device.
#ifndef PAGEDKV_TESTS_KERNELS_CUDA_TEST_UTIL_H_
#define PAGEDKV_TESTS_KERNELS_CUDA_TEST_UTIL_H_

#include <cmath>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/cublas_handle.h"
#include "kernels/cuda/cuda_check.h"
#include "pagedkv/kernels/cuda_ops.h"
#include "tests/kernels/cuda_array.h"

namespace pagedkv::cuda_testing {

template <typename T>
cuda::CudaArray<T> Upload(const std::vector<T>& host) {
  auto buffer = cuda::CudaArray<T>::FromHost(host);
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  return std::move(*buffer);
}

template <typename T>
std::vector<T> Download(const cuda::CudaArray<T>& buffer) {
  auto host = buffer.ToHost();
  EXPECT_TRUE(host.ok()) << host.status();
  return *host;
}

inline void ExpectClose(const std::vector<float>& gpu, const std::vector<float>& cpu, double rel,
                        double abs_tol, const char* what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  for (size_t i = 0; i < gpu.size(); ++i) {
    ASSERT_NEAR(gpu[i], cpu[i], abs_tol + rel * std::abs(cpu[i])) << what << " at " << i;
  }
}

// Skips when no CUDA device is visible; owns a cuBLAS handle.
class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::VisibleDeviceCount() == 0) GTEST_SKIP() << "no CUDA device visible; skipping";
    auto handle = cuda::CublasHandle::Create();
    ASSERT_TRUE(handle.ok()) << handle.status();
    cublas_ = std::move(*handle);
  }
  void Sync() { ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess); }
  cuda::CublasHandle cublas_;
};

}  // namespace pagedkv::cuda_testing

#endif  // PAGEDKV_TESTS_KERNELS_CUDA_TEST_UTIL_H_
