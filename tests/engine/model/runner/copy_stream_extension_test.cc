// Copyright 2026 The pagedkv Authors.
//
// The optional copy-stream extension of the plugin ABI (kernels/backend_plugin_abi.h) on the fake
// plugins (fake_cpu_plugin.cc): it is found by its own entry point and versioned on its own, a
// plugin without it (built before it) is still a valid plugin for the loader and simply has no
// such symbol, and the host-memory implementation does every call at once, in order.
#include <dlfcn.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/runner/backend.h"
#include "engine/model/runner/plugin_backend.h"
#include "gtest/gtest.h"
#include "kernels/backend_plugin_abi.h"

namespace pagedkv {
namespace {

class CopyStreamExtensionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lib_ = dlopen(FAKE_PLUGIN_OK, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
    auto entry = reinterpret_cast<PagedkvBackendPluginEntry>(dlsym(lib_, kPagedkvPluginEntryName));
    auto ext = reinterpret_cast<PagedkvCopyStreamEntry>(dlsym(lib_, kPagedkvCopyStreamEntryName));
    log_ = reinterpret_cast<const char* (*)()>(dlsym(lib_, "fake_plugin_copy_log"));
    ASSERT_NE(entry, nullptr);
    ASSERT_NE(ext, nullptr);
    ASSERT_NE(log_, nullptr);
    main_ = entry(kPagedkvPluginAbiVersion);
    copy_ = ext(kPagedkvCopyStreamAbiVersion);
    EXPECT_EQ(ext(kPagedkvCopyStreamAbiVersion + 1), nullptr);
    ASSERT_NE(main_, nullptr);
    ASSERT_NE(copy_, nullptr);
    ASSERT_EQ(main_->create(0, &backend_, &error_), 0) << error_.message;
    log_();  // start with an empty log
  }
  void TearDown() override {
    if (backend_ != nullptr) main_->destroy(backend_);
    if (lib_ != nullptr) dlclose(lib_);
  }

  void* lib_ = nullptr;
  const char* (*log_)() = nullptr;
  const PagedkvBackendPlugin* main_ = nullptr;
  const PagedkvCopyStreamPlugin* copy_ = nullptr;
  PagedkvPluginBackend backend_ = nullptr;
  PagedkvPluginError error_{};
};

TEST_F(CopyStreamExtensionTest, VersionedOnItsOwnBesideAnUnchangedMainTable) {
  EXPECT_EQ(copy_->abi_version, kPagedkvCopyStreamAbiVersion);
  EXPECT_EQ(copy_->table_size, sizeof(PagedkvCopyStreamPlugin));
  // The extension did not bump the main table (2 is PagedAttentionArgs::sliding_window's bump, 3
  // SamplingParams' top_k and min_p, 4 PagedKvLayout's V dtype and strides, 5 the KV write's
  // rotated_k and re-rotation's src_keys).
  EXPECT_EQ(kPagedkvPluginAbiVersion, 5u);
  // The loader takes a plugin with the extension as before.
  EXPECT_TRUE(BackendPlugin::Load(FAKE_PLUGIN_OK, BackendKind::kCuda).ok());
}

TEST_F(CopyStreamExtensionTest, APluginBuiltWithoutItHasNoEntryPoint) {
  void* old = dlopen(FAKE_PLUGIN_NO_DEVICE, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(old, nullptr) << dlerror();
  EXPECT_NE(dlsym(old, kPagedkvPluginEntryName), nullptr);
  EXPECT_EQ(dlsym(old, kPagedkvCopyStreamEntryName), nullptr);  // the loader keeps sync copies
  dlclose(old);
}

TEST_F(CopyStreamExtensionTest, HostMemoryDoesEveryCallAtOnceInOrder) {
  constexpr size_t kBytes = 4096;
  void* staged_in = nullptr;
  void* staged_out = nullptr;
  void* device = nullptr;
  ASSERT_EQ(copy_->stage_alloc(backend_, kBytes, &staged_in, &error_), 0);
  ASSERT_EQ(copy_->stage_alloc(backend_, kBytes, &staged_out, &error_), 0);
  ASSERT_EQ(main_->allocate(backend_, kBytes, &device, &error_), 0);
  std::vector<unsigned char> want(kBytes);
  for (size_t i = 0; i < kBytes; ++i) want[i] = static_cast<unsigned char>(i * 7 + 1);
  std::memcpy(staged_in, want.data(), kBytes);
  ASSERT_EQ(copy_->load_async(backend_, device, staged_in, kBytes / 2, &error_), 0);
  ASSERT_EQ(copy_->load_async(backend_, static_cast<std::byte*>(device) + kBytes / 2,
                              static_cast<std::byte*>(staged_in) + kBytes / 2, kBytes / 2, &error_),
            0);
  ASSERT_EQ(copy_->fence_loads(backend_, &error_), 0);
  EXPECT_EQ(std::memcmp(device, want.data(), kBytes), 0);  // already there: synchronous
  ASSERT_EQ(copy_->store_async(backend_, staged_out, device, kBytes, &error_), 0);
  ASSERT_EQ(copy_->copy_synchronize(backend_, &error_), 0);
  EXPECT_EQ(std::memcmp(staged_out, want.data(), kBytes), 0);
  EXPECT_EQ(std::string(log_()), "load,load,fence,store,sync");
  copy_->stage_free(backend_, staged_in);
  copy_->stage_free(backend_, staged_out);
  main_->free(backend_, device);
}

// Through the Backend interface: tier copies round-trip the same bytes on the CPU backend (the
// synchronous defaults), on the plugin with the extension (its calls, in order) and on one
// without it (the main table's copies).
std::vector<unsigned char> RoundTrip(Backend& backend) {
  constexpr size_t kBytes = 1000;
  void* in = backend.AllocateStaging(kBytes).value_or(nullptr);
  void* out = backend.AllocateStaging(kBytes).value_or(nullptr);
  void* device = backend.Allocate(kBytes).value_or(nullptr);
  std::vector<unsigned char> got(kBytes);
  if (in == nullptr || out == nullptr || device == nullptr) return {};
  for (size_t i = 0; i < kBytes; ++i) static_cast<unsigned char*>(in)[i] = (i * 13 + 5) & 0xff;
  EXPECT_TRUE(backend.LoadAsync(device, in, kBytes).ok());
  EXPECT_TRUE(backend.FenceLoads().ok());
  EXPECT_TRUE(backend.StoreAsync(out, device, kBytes).ok());
  EXPECT_TRUE(backend.SynchronizeCopies().ok());
  std::memcpy(got.data(), out, kBytes);
  backend.FreeStaging(in);
  backend.FreeStaging(out);
  backend.Free(device);
  return got;
}

TEST_F(CopyStreamExtensionTest, TheBackendUsesTheExtensionWhenPresentAndFallsBackWithout) {
  std::unique_ptr<Backend> cpu = CreateCpuBackend();
  EXPECT_FALSE(cpu->async_copies());
  const std::vector<unsigned char> want = RoundTrip(*cpu);
  ASSERT_EQ(want.size(), 1000u);
  EXPECT_EQ(want[7], (7 * 13 + 5) & 0xff);

  auto with = BackendPlugin::Load(FAKE_PLUGIN_OK, BackendKind::kCuda);
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_NE((*with)->copy_stream(), nullptr);
  std::unique_ptr<Backend> async = (*with)->CreateBackend(0).value();
  EXPECT_TRUE(async->async_copies());
  log_();
  EXPECT_EQ(RoundTrip(*async), want);
  EXPECT_EQ(std::string(log_()), "load,fence,store,sync");

  auto without = BackendPlugin::Load(FAKE_PLUGIN_NO_DEVICE, BackendKind::kCuda);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ((*without)->copy_stream(), nullptr);  // no symbol: the synchronous table's copies
  std::unique_ptr<Backend> sync = (*without)->CreateBackend(0).value();
  EXPECT_FALSE(sync->async_copies());
  EXPECT_EQ(RoundTrip(*sync), want);
  EXPECT_EQ(std::string(log_()), "");
}

}  // namespace
}  // namespace pagedkv
