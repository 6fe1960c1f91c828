// Copyright 2026 The pagedkv Authors.
//
// The backend plugin loader: dlopen, the versioned table checks and their messages, the search
// path of the CUDA plugin, and a Backend over a plugin's table (fake_cpu_plugin.cc, the CPU ops
// behind the C table); backend_ops_test.cc runs every op case on it.
#include "engine/model/runner/plugin_backend.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/runner/backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/kernels/op_args.h"

namespace pagedkv {
namespace {

using ::testing::HasSubstr;

TEST(BackendPluginTest, MissingFileIsNotFoundWithDlopensReason) {
  auto plugin = BackendPlugin::Load("/nonexistent/libpagedkv_cuda.so", BackendKind::kCuda);
  ASSERT_TRUE(absl::IsNotFound(plugin.status())) << plugin.status();
  EXPECT_THAT(plugin.status().message(), HasSubstr("/nonexistent/libpagedkv_cuda.so"));
}

TEST(BackendPluginTest, LibraryWithoutEntryPointIsRefused) {
  auto plugin = BackendPlugin::Load(FAKE_PLUGIN_NO_ENTRY, BackendKind::kCuda);
  ASSERT_TRUE(absl::IsInvalidArgument(plugin.status())) << plugin.status();
  EXPECT_THAT(plugin.status().message(), HasSubstr("is not a pagedkv backend plugin"));
}

TEST(BackendPluginTest, OtherAbiVersionIsRefusedNamingBothVersions) {
  auto plugin = BackendPlugin::Load(FAKE_PLUGIN_BAD_ABI, BackendKind::kCuda);
  ASSERT_TRUE(absl::IsInvalidArgument(plugin.status())) << plugin.status();
  EXPECT_THAT(plugin.status().message(),
              HasSubstr("ABI version " + std::to_string(kPagedkvPluginAbiVersion + 41)));
  EXPECT_THAT(plugin.status().message(),
              HasSubstr("expects version " + std::to_string(kPagedkvPluginAbiVersion)));
}

TEST(BackendPluginTest, EntryPointWithoutThisAbiIsRefused) {
  auto plugin = BackendPlugin::Load(FAKE_PLUGIN_NO_TABLE, BackendKind::kCuda);
  ASSERT_TRUE(absl::IsInvalidArgument(plugin.status())) << plugin.status();
  EXPECT_THAT(plugin.status().message(), HasSubstr("does not offer plugin ABI version"));
}

TEST(BackendPluginTest, NoDeviceIsUnavailable) {
  auto plugin = BackendPlugin::Load(FAKE_PLUGIN_NO_DEVICE, BackendKind::kCuda);
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  absl::StatusOr<int> devices = (*plugin)->DeviceCount();
  ASSERT_TRUE(absl::IsUnavailable(devices.status())) << devices.status();
  EXPECT_THAT(devices.status().message(), HasSubstr("found no device"));
}

TEST(BackendPluginTest, CudaCandidatesHonourTheEnvironmentVariable) {
  ASSERT_EQ(setenv("PAGEDKV_CUDA_PLUGIN", "/opt/x/libpagedkv_cuda.so", 1), 0);
  EXPECT_EQ(CudaPluginCandidates(), std::vector<std::string>{"/opt/x/libpagedkv_cuda.so"});
  ASSERT_EQ(unsetenv("PAGEDKV_CUDA_PLUGIN"), 0);
  const std::vector<std::string> candidates = CudaPluginCandidates();
  ASSERT_GE(candidates.size(), 3u);
  EXPECT_THAT(candidates[0], HasSubstr("/libpagedkv_cuda.so"));  // beside this test program
  EXPECT_THAT(candidates[1], HasSubstr("/lib/libpagedkv_cuda.so"));
  EXPECT_EQ(candidates.back(), "libpagedkv_cuda.so");  // the dynamic loader's search
}

// What the plugin backend computes, op by op against the CPU ops, is in backend_ops_test.cc.
TEST(BackendPluginTest, PluginBackendReportsTheTablesNameAndTheRequestedKind) {
  auto plugin = BackendPlugin::Load(FAKE_PLUGIN_OK, BackendKind::kCuda);
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  ASSERT_EQ((*plugin)->DeviceCount().value_or(0), 1);
  auto backend = (*plugin)->CreateBackend(0);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->name(), "fake:0");
  EXPECT_EQ((*backend)->kind(), BackendKind::kCuda);
  EXPECT_FALSE((*backend)->host_memory());
}

TEST(BackendPluginTest, ErrorsCrossTheTableWithTheirCodeAndMessage) {
  auto plugin = BackendPlugin::Load(FAKE_PLUGIN_OK, BackendKind::kCuda);
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  EXPECT_TRUE(absl::IsUnavailable((*plugin)->CreateBackend(3).status()));
  auto backend = (*plugin)->CreateBackend(0).value();
  absl::Status status = backend->RmsNorm({.num_rows = 1, .dim = 4});  // null pointers
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_FALSE(status.message().empty());
}

TEST(BackendPluginTest, CudaRequestWithoutPluginSaysHowToFixIt) {
  if (CudaBackendAvailable()) GTEST_SKIP() << "a CUDA device is visible";
  auto backend = CreateBackend(BackendKind::kCuda);
  ASSERT_TRUE(absl::IsUnavailable(backend.status())) << backend.status();
  EXPECT_THAT(backend.status().message(), HasSubstr("CUDA backend requested but"));
  auto fallback = CreateBackend(BackendKind::kAuto);
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  EXPECT_EQ((*fallback)->kind(), BackendKind::kCpu);
}

}  // namespace
}  // namespace pagedkv
