// Copyright 2026 The pagedkv Authors.
//
// A backend plugin for the loader's tests (engine/model/runner/plugin_backend.h): the CPU ops
// behind the C table of kernels/backend_plugin_abi.h, so the whole dlopen path runs without a GPU.
// Built several times with one defect each (FAKE_PLUGIN_VARIANT):
//   0: a working plugin with one device,
//   1: a table that claims another ABI version,
//   2: an entry point that offers no table for this ABI,
//   3: no entry point at all,
//   4: a working table that reports no device,
//   5: a working plugin with one device and no copy-stream extension (engine fallback tests).
// Variant 0 also offers the copy-stream extension (kernels/backend_plugin_abi.h), implemented
// synchronously as a host-memory backend must, and records every extension call in order, with
// "op" for a run of compute ops in between (fake_plugin_copy_log, "op,store,sync,load,fence,op"),
// so a loader's ordering against the forward pass can be checked; the others lack it, as every
// plugin built before it does.
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "kernels/backend_plugin_abi.h"
#include "pagedkv/kernels/cpu_ops.h"

#ifndef FAKE_PLUGIN_VARIANT
#error "define FAKE_PLUGIN_VARIANT"
#endif

namespace {

int32_t Report(const absl::Status& status, PagedkvPluginError* error) {
  error->code = static_cast<int32_t>(status.code());
  std::strncpy(error->message, std::string(status.message()).c_str(), sizeof(error->message) - 1);
  error->message[sizeof(error->message) - 1] = '\0';
  return error->code;
}

int32_t DeviceCount(int32_t* count, PagedkvPluginError* error) {
  *count = FAKE_PLUGIN_VARIANT == 4 ? 0 : 1;
  return Report(absl::OkStatus(), error);
}
int32_t Create(int32_t device, PagedkvPluginBackend* out, PagedkvPluginError* error) {
  if (device != 0) return Report(absl::UnavailableError("fake plugin: only device 0"), error);
  *out = new int(device);
  return Report(absl::OkStatus(), error);
}
void Destroy(PagedkvPluginBackend backend) { delete static_cast<int*>(backend); }
const char* Name(PagedkvPluginBackend) { return "fake:0"; }
int32_t Allocate(PagedkvPluginBackend, size_t bytes, void** ptr, PagedkvPluginError* error) {
  *ptr = std::calloc(1, bytes == 0 ? 1 : bytes);
  return Report(*ptr == nullptr ? absl::ResourceExhaustedError("fake plugin: calloc failed")
                                : absl::OkStatus(),
                error);
}
void Free(PagedkvPluginBackend, void* ptr) { std::free(ptr); }
int32_t Copy(PagedkvPluginBackend, void* dst, const void* src, size_t bytes,
             PagedkvPluginError* error) {
  if (bytes != 0) std::memmove(dst, src, bytes);
  return Report(absl::OkStatus(), error);
}
int32_t Synchronize(PagedkvPluginBackend, PagedkvPluginError* error) {
  return Report(absl::OkStatus(), error);
}

// The call log of variant 0 (see the banner).
// A plain static, destroyed when the plugin is unloaded (a never-freed `new` would be a leak to
// LeakSanitizer once dlclose unmaps the pointer to it).
std::string& CopyLog() {
  static std::string log;
  return log;
}
void LogCall(const char* call) {
  if (!CopyLog().empty()) CopyLog() += ",";
  CopyLog() += call;
}
// A compute op: logged as "op", once per run of ops.
void LogOp() {
  if (FAKE_PLUGIN_VARIANT != 0) return;
  const std::string& log = CopyLog();
  if (log == "op" || (log.size() > 3 && log.compare(log.size() - 3, 3, ",op") == 0)) return;
  LogCall("op");
}

// One table entry per CPU op.
#define FAKE_PLUGIN_OP(name, Args, op)                                                \
  int32_t name(PagedkvPluginBackend, const pagedkv::Args* a, PagedkvPluginError* e) { \
    LogOp();                                                                          \
    return Report(pagedkv::cpu::op(*a), e);                                           \
  }
FAKE_PLUGIN_OP(OpLinear, LinearArgs, Linear)
FAKE_PLUGIN_OP(OpEmbeddingGather, EmbeddingGatherArgs, EmbeddingGather)
FAKE_PLUGIN_OP(OpGatherRows, GatherRowsArgs, GatherRows)
FAKE_PLUGIN_OP(OpRmsNorm, RmsNormArgs, RmsNorm)
FAKE_PLUGIN_OP(OpSwiGlu, SwiGluArgs, SwiGlu)
FAKE_PLUGIN_OP(OpLmHead, LmHeadArgs, LmHead)
FAKE_PLUGIN_OP(OpReshapeAndCache, ReshapeAndCacheArgs, ReshapeAndCache)
FAKE_PLUGIN_OP(OpReRotate, ReRotateArgs, ReRotate)
FAKE_PLUGIN_OP(OpPagedAttention, PagedAttentionArgs, PagedAttention)
FAKE_PLUGIN_OP(OpSample, SampleArgs, Sample)
#undef FAKE_PLUGIN_OP

#if FAKE_PLUGIN_VARIANT == 0
// The copy-stream extension: every call done at once, in order, and logged.
int32_t Logged(const char* call, PagedkvPluginError* error) {
  LogCall(call);
  return Report(absl::OkStatus(), error);
}
int32_t StageAlloc(PagedkvPluginBackend b, size_t bytes, void** host, PagedkvPluginError* e) {
  return Allocate(b, bytes, host, e);
}
int32_t LoadAsync(PagedkvPluginBackend b, void* dst, const void* src, size_t bytes,
                  PagedkvPluginError* e) {
  if (const int32_t code = Copy(b, dst, src, bytes, e); code != 0) return code;
  return Logged("load", e);
}
int32_t FenceLoads(PagedkvPluginBackend, PagedkvPluginError* e) { return Logged("fence", e); }
int32_t StoreAsync(PagedkvPluginBackend b, void* dst, const void* src, size_t bytes,
                   PagedkvPluginError* e) {
  if (const int32_t code = Copy(b, dst, src, bytes, e); code != 0) return code;
  return Logged("store", e);
}
int32_t CopySynchronize(PagedkvPluginBackend, PagedkvPluginError* e) { return Logged("sync", e); }

constexpr PagedkvCopyStreamPlugin kCopyStreamTable = {
    .abi_version = kPagedkvCopyStreamAbiVersion,
    .table_size = sizeof(PagedkvCopyStreamPlugin),
    .stage_alloc = StageAlloc,
    .stage_free = Free,
    .load_async = LoadAsync,
    .fence_loads = FenceLoads,
    .store_async = StoreAsync,
    .copy_synchronize = CopySynchronize,
};
#endif

constexpr PagedkvBackendPlugin kTable = {
    .abi_version =
        FAKE_PLUGIN_VARIANT == 1 ? kPagedkvPluginAbiVersion + 41 : kPagedkvPluginAbiVersion,
    .table_size = sizeof(PagedkvBackendPlugin),
    .args_fingerprint = PagedkvPluginArgsFingerprint(),
    .pagedkv_version = "fake",
    .backend_name = "fake",
    .device_count = DeviceCount,
    .create = Create,
    .destroy = Destroy,
    .name = Name,
    .allocate = Allocate,
    .free = Free,
    .copy_to_device = Copy,
    .copy_to_host = Copy,
    .copy_device_to_device = Copy,
    .synchronize = Synchronize,
    .linear = OpLinear,
    .embedding_gather = OpEmbeddingGather,
    .gather_rows = OpGatherRows,
    .rms_norm = OpRmsNorm,
    .swiglu = OpSwiGlu,
    .lm_head = OpLmHead,
    .reshape_and_cache = OpReshapeAndCache,
    .rerotate = OpReRotate,
    .paged_attention = OpPagedAttention,
    .sample = OpSample,
};

}  // namespace

#if FAKE_PLUGIN_VARIANT != 3
extern "C" __attribute__((visibility("default"))) const PagedkvBackendPlugin*
pagedkv_backend_plugin(uint32_t abi_version) {
  if (FAKE_PLUGIN_VARIANT == 2 || abi_version != kPagedkvPluginAbiVersion) return nullptr;
  return &kTable;
}
#endif

#if FAKE_PLUGIN_VARIANT == 0
extern "C" __attribute__((visibility("default"))) const PagedkvCopyStreamPlugin*
pagedkv_backend_copy_stream(uint32_t abi_version) {
  return abi_version == kPagedkvCopyStreamAbiVersion ? &kCopyStreamTable : nullptr;
}
// The extension calls so far, comma-separated; cleared by each call of this function.
extern "C" __attribute__((visibility("default"))) const char* fake_plugin_copy_log() {
  static std::string last;
  last = CopyLog();
  CopyLog().clear();
  return last.c_str();
}
#endif
