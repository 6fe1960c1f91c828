// Copyright 2026 The pagedkv Authors.
//
// The CUDA plugin's copy-stream extension (kernels/backend_plugin_abi.h, kernels/cuda/
// copy_stream.h) through its C tables, as a loader calls it: loads queued on the copy stream and
// fenced are seen by work queued next on the compute stream, stores read what the compute stream
// wrote before them, many blocks at once, against a host reference. Skips without a device (so
// it runs only on a GPU check: scripts/gpu_check.sh).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend_plugin_abi.h"
#include "tests/kernels/cuda_test_util.h"

extern "C" const PagedkvBackendPlugin* pagedkv_backend_plugin(uint32_t abi_version);
extern "C" const PagedkvCopyStreamPlugin* pagedkv_backend_copy_stream(uint32_t abi_version);

namespace pagedkv {
namespace {

class CudaCopyStreamTest : public cuda_testing::CudaDeviceTest {
 protected:
  void SetUp() override {
    cuda_testing::CudaDeviceTest::SetUp();
    if (IsSkipped()) return;
    main_ = pagedkv_backend_plugin(kPagedkvPluginAbiVersion);
    copy_ = pagedkv_backend_copy_stream(kPagedkvCopyStreamAbiVersion);
    ASSERT_NE(main_, nullptr);
    ASSERT_NE(copy_, nullptr);
    ASSERT_EQ(copy_->table_size, sizeof(PagedkvCopyStreamPlugin));
    ASSERT_EQ(main_->create(0, &backend_, &error_), 0) << error_.message;
  }
  void TearDown() override {
    if (backend_ != nullptr) main_->destroy(backend_);
  }

  const PagedkvBackendPlugin* main_ = nullptr;
  const PagedkvCopyStreamPlugin* copy_ = nullptr;
  PagedkvPluginBackend backend_ = nullptr;
  PagedkvPluginError error_{};
};

TEST_F(CudaCopyStreamTest, AnotherVersionGetsNoTable) {
  EXPECT_EQ(pagedkv_backend_copy_stream(kPagedkvCopyStreamAbiVersion + 1), nullptr);
}

TEST_F(CudaCopyStreamTest, FencedLoadsAreSeenByTheComputeStreamAndStoresReadItsWrites) {
  constexpr size_t kBlocks = 64;
  constexpr size_t kBlockBytes = size_t{256} << 10;  // a 256 KiB value per block
  constexpr size_t kBytes = kBlocks * kBlockBytes;
  std::mt19937 rng(7);
  std::vector<uint32_t> want(kBytes / 4);
  for (uint32_t& w : want) w = static_cast<uint32_t>(rng());
  void* staged_in = nullptr;
  void* staged_out = nullptr;
  void* device = nullptr;
  void* device_copy = nullptr;
  ASSERT_EQ(copy_->stage_alloc(backend_, kBytes, &staged_in, &error_), 0) << error_.message;
  ASSERT_EQ(copy_->stage_alloc(backend_, kBytes, &staged_out, &error_), 0) << error_.message;
  ASSERT_EQ(main_->allocate(backend_, kBytes, &device, &error_), 0) << error_.message;
  ASSERT_EQ(main_->allocate(backend_, kBytes, &device_copy, &error_), 0) << error_.message;
  std::memcpy(staged_in, want.data(), kBytes);
  // Loads on the copy stream, block by block, then the fence; the compute stream's next op (a
  // device-to-device copy) must see every loaded byte.
  for (size_t b = 0; b < kBlocks; ++b) {
    ASSERT_EQ(copy_->load_async(backend_, static_cast<std::byte*>(device) + b * kBlockBytes,
                                static_cast<const std::byte*>(staged_in) + b * kBlockBytes,
                                kBlockBytes, &error_),
              0)
        << error_.message;
  }
  ASSERT_EQ(copy_->fence_loads(backend_, &error_), 0) << error_.message;
  ASSERT_EQ(main_->copy_device_to_device(backend_, device_copy, device, kBytes, &error_), 0);
  // Stores on the copy stream after that compute-stream op: they read the copy it wrote.
  ASSERT_EQ(copy_->store_async(backend_, staged_out, device_copy, kBytes, &error_), 0)
      << error_.message;
  ASSERT_EQ(copy_->copy_synchronize(backend_, &error_), 0) << error_.message;
  EXPECT_EQ(std::memcmp(staged_out, want.data(), kBytes), 0);
  copy_->stage_free(backend_, staged_in);
  copy_->stage_free(backend_, staged_out);
  copy_->stage_free(backend_, nullptr);
  main_->free(backend_, device);
  main_->free(backend_, device_copy);
}

}  // namespace
}  // namespace pagedkv
