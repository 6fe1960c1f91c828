// Copyright 2026 The pagedkv Authors.
//
// Plugin loading (dlopen, table checks) and PluginBackend, the Backend over a plugin's table.
#include "engine/model/runner/plugin_backend.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/runner/backend.h"
#include "kernels/backend_plugin_abi.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/version.h"

namespace pagedkv {
namespace {

// An absl::Status from a plugin call's code and message.
absl::Status FromPlugin(int32_t code, const PagedkvPluginError& error) {
  if (code == 0) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(code), error.message);
}

// Calls fn(args..., &error) and converts the result.
template <typename Fn, typename... Args>
absl::Status Call(Fn fn, Args... args) {
  PagedkvPluginError error{};
  const int32_t code = fn(args..., &error);
  return FromPlugin(code, error);
}

class PluginBackend final : public Backend {
 public:
  // `copy`: the copy-stream extension's table, null when the plugin lacks it.
  PluginBackend(const PagedkvBackendPlugin* table, const PagedkvCopyStreamPlugin* copy,
                PagedkvPluginBackend handle, BackendKind kind)
      : t_(table), c_(copy), h_(handle), kind_(kind) {}
  ~PluginBackend() override { t_->destroy(h_); }
  PluginBackend(const PluginBackend&) = delete;
  PluginBackend& operator=(const PluginBackend&) = delete;

  BackendKind kind() const override { return kind_; }
  std::string name() const override { return t_->name(h_); }
  bool host_memory() const override { return false; }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    void* ptr = nullptr;
    PAGEDKV_RETURN_IF_ERROR(Call(t_->allocate, h_, bytes, &ptr));
    return ptr;
  }
  void Free(void* ptr) override { t_->free(h_, ptr); }
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    return Call(t_->copy_to_device, h_, dst, src, bytes);
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    return Call(t_->copy_to_host, h_, dst, src, bytes);
  }
  absl::Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes) override {
    return Call(t_->copy_device_to_device, h_, dst, src, bytes);
  }
  absl::Status Synchronize() override { return Call(t_->synchronize, h_); }

  absl::Status Linear(const LinearArgs& a) override { return Call(t_->linear, h_, &a); }
  absl::Status EmbeddingGather(const EmbeddingGatherArgs& a) override {
    return Call(t_->embedding_gather, h_, &a);
  }
  absl::Status GatherRows(const GatherRowsArgs& a) override {
    return Call(t_->gather_rows, h_, &a);
  }
  absl::Status RmsNorm(const RmsNormArgs& a) override { return Call(t_->rms_norm, h_, &a); }
  absl::Status SwiGlu(const SwiGluArgs& a) override { return Call(t_->swiglu, h_, &a); }
  absl::Status LmHead(const LmHeadArgs& a) override { return Call(t_->lm_head, h_, &a); }
  absl::Status ReshapeAndCache(const ReshapeAndCacheArgs& a) override {
    return Call(t_->reshape_and_cache, h_, &a);
  }
  absl::Status ReRotate(const ReRotateArgs& a) override { return Call(t_->rerotate, h_, &a); }
  absl::Status PagedAttention(const PagedAttentionArgs& a) override {
    return Call(t_->paged_attention, h_, &a);
  }
  absl::Status Sample(const SampleArgs& a) override { return Call(t_->sample, h_, &a); }

  // Tier copies: the extension's when the plugin has it, else Backend's synchronous defaults.
  bool async_copies() const override { return c_ != nullptr; }
  absl::StatusOr<void*> AllocateStaging(size_t bytes) override {
    if (c_ == nullptr) return Backend::AllocateStaging(bytes);
    void* host = nullptr;
    PAGEDKV_RETURN_IF_ERROR(Call(c_->stage_alloc, h_, bytes, &host));
    return host;
  }
  void FreeStaging(void* host) override {
    if (c_ == nullptr) return Backend::FreeStaging(host);
    if (host != nullptr) c_->stage_free(h_, host);
  }
  absl::Status LoadAsync(void* dst, const void* src, size_t bytes) override {
    if (c_ == nullptr) return Backend::LoadAsync(dst, src, bytes);
    return Call(c_->load_async, h_, dst, src, bytes);
  }
  absl::Status FenceLoads() override {
    return c_ == nullptr ? absl::OkStatus() : Call(c_->fence_loads, h_);
  }
  absl::Status StoreAsync(void* dst, const void* src, size_t bytes) override {
    if (c_ == nullptr) return Backend::StoreAsync(dst, src, bytes);
    return Call(c_->store_async, h_, dst, src, bytes);
  }
  absl::Status SynchronizeCopies() override {
    return c_ == nullptr ? absl::OkStatus() : Call(c_->copy_synchronize, h_);
  }

 private:
  const PagedkvBackendPlugin* t_;     // the plugin's table (static in the plugin)
  const PagedkvCopyStreamPlugin* c_;  // its copy-stream extension, or null
  PagedkvPluginBackend h_;            // owned: destroyed with the backend
  BackendKind kind_;
};

// InvalidArgument unless `table` is one this build can use.
absl::Status CheckTable(const PagedkvBackendPlugin* table, const std::string& path) {
  if (table == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the plugin does not offer plugin ABI version ",
                     kPagedkvPluginAbiVersion, " (it was built from another pagedkv version; ",
                     "rebuild it from pagedkv ", PAGEDKV_VERSION_STRING, ")"));
  }
  if (table->abi_version != kPagedkvPluginAbiVersion ||
      table->table_size != sizeof(PagedkvBackendPlugin) ||
      table->args_fingerprint != PagedkvPluginArgsFingerprint()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": plugin ABI mismatch: the plugin has ABI version ", table->abi_version,
        " (table size ", table->table_size, ", argument fingerprint ", table->args_fingerprint,
        ", built from pagedkv ", table->pagedkv_version == nullptr ? "?" : table->pagedkv_version,
        "), this program expects version ", kPagedkvPluginAbiVersion, " (table size ",
        sizeof(PagedkvBackendPlugin), ", argument fingerprint ", PagedkvPluginArgsFingerprint(),
        ", pagedkv ", PAGEDKV_VERSION_STRING, "); rebuild the plugin with this pagedkv"));
  }
  return absl::OkStatus();
}

// The directory of the running program, empty when it cannot be read.
std::filesystem::path ProgramDirectory() {
  std::error_code error;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return {};
  return exe.parent_path();
}

// The copy-stream extension of `library` when it has one this build speaks, else null (every
// plugin built before the extension lacks the symbol; one with another version is used without
// it: its synchronous copies of the main table still work).
const PagedkvCopyStreamPlugin* FindCopyStream(void* library) {
  auto entry =
      reinterpret_cast<PagedkvCopyStreamEntry>(dlsym(library, kPagedkvCopyStreamEntryName));
  if (entry == nullptr) return nullptr;
  const PagedkvCopyStreamPlugin* table = entry(kPagedkvCopyStreamAbiVersion);
  if (table == nullptr || table->abi_version != kPagedkvCopyStreamAbiVersion ||
      table->table_size != sizeof(PagedkvCopyStreamPlugin)) {
    return nullptr;
  }
  return table;
}

bool IsPath(const std::string& name) { return name.find('/') != std::string::npos; }

}  // namespace

absl::StatusOr<std::unique_ptr<BackendPlugin>> BackendPlugin::Load(const std::string& path,
                                                                   BackendKind kind) {
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    return absl::NotFoundError(absl::StrCat("dlopen(", path, "): ", why == nullptr ? "?" : why));
  }
  auto entry = reinterpret_cast<PagedkvBackendPluginEntry>(dlsym(library, kPagedkvPluginEntryName));
  if (entry == nullptr) {
    dlclose(library);
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a pagedkv backend plugin (no ",
                                                   kPagedkvPluginEntryName, " symbol)"));
  }
  const PagedkvBackendPlugin* table = entry(kPagedkvPluginAbiVersion);
  if (absl::Status status = CheckTable(table, path); !status.ok()) {
    dlclose(library);
    return status;
  }
  // The library stays loaded for the life of the process: backends hold pointers into it.
  return std::unique_ptr<BackendPlugin>(
      new BackendPlugin(path, table, FindCopyStream(library), kind));
}

absl::StatusOr<int> BackendPlugin::DeviceCount() const {
  int32_t count = 0;
  PagedkvPluginError error{};
  const int32_t code = table_->device_count(&count, &error);
  if (code != 0 || count == 0) {
    return absl::UnavailableError(
        absl::StrCat("the ", table_->backend_name, " plugin (", path_, ") found no device",
                     code != 0 ? absl::StrCat(": ", error.message) : std::string()));
  }
  return count;
}

absl::StatusOr<std::unique_ptr<Backend>> BackendPlugin::CreateBackend(int device) const {
  PagedkvPluginBackend handle = nullptr;
  PAGEDKV_RETURN_IF_ERROR(Call(table_->create, device, &handle));
  return std::unique_ptr<Backend>(new PluginBackend(table_, copy_stream_, handle, kind_));
}

std::vector<std::string> CudaPluginCandidates() {
  const std::string file(kCudaPluginFileName);
  if (const char* env = std::getenv("PAGEDKV_CUDA_PLUGIN"); env != nullptr && *env != '\0') {
    return {env};
  }
  std::vector<std::string> candidates;
  if (const std::filesystem::path dir = ProgramDirectory(); !dir.empty()) {
    candidates.push_back((dir / file).string());
    candidates.push_back((dir.parent_path() / "lib" / file).string());
  }
#if defined(PAGEDKV_INSTALL_LIBDIR)
  candidates.push_back((std::filesystem::path(PAGEDKV_INSTALL_LIBDIR) / file).string());
#endif
  candidates.push_back(file);
  return candidates;
}

absl::StatusOr<const BackendPlugin*> LoadCudaPlugin() {
  static absl::once_flag once;
  static absl::StatusOr<std::unique_ptr<BackendPlugin>>* loaded = nullptr;
  absl::call_once(once, [] {
    std::vector<std::string> tried;
    for (const std::string& candidate : CudaPluginCandidates()) {
      std::error_code error;
      if (IsPath(candidate) && !std::filesystem::exists(candidate, error)) {
        tried.push_back(absl::StrCat(candidate, " (no such file)"));
        continue;
      }
      auto plugin = BackendPlugin::Load(candidate, BackendKind::kCuda);
      if (plugin.ok() || !absl::IsNotFound(plugin.status())) {
        loaded = new absl::StatusOr<std::unique_ptr<BackendPlugin>>(std::move(plugin));
        return;
      }
      tried.push_back(std::string(plugin.status().message()));
    }
    loaded = new absl::StatusOr<std::unique_ptr<BackendPlugin>>(absl::NotFoundError(absl::StrCat(
        "the CUDA backend plugin ", kCudaPluginFileName,
        " could not be loaded; tried: ", absl::StrJoin(tried, "; "),
        ". Build pagedkv with nvcc on PATH (it builds the plugin beside the pagedkv binary) or set "
        "PAGEDKV_CUDA_PLUGIN to the plugin's path")));
  });
  if (!loaded->ok()) return loaded->status();
  return loaded->value().get();
}

}  // namespace pagedkv
