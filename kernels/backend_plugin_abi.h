// Copyright 2026 The pagedkv Authors.
//
// The binary interface between pagedkv and a backend plugin: a shared library (the CUDA backend,
// libpagedkv_cuda.so) that the engine loads with dlopen only when that backend is asked for, so
// nothing else links the CUDA runtime or cuBLAS. As ggml's dynamically loaded backends do, the
// plugin exports one C function, `pagedkv_backend_plugin`, that returns a table of C function
// pointers. Only plain data crosses the boundary: the op argument structs of
// pagedkv/kernels/op_args.h (standard-layout structs of pointers and integers), integers, and
// C strings; no Abseil or STL type, no exception.
//
// Versioning: the loader asks for kPagedkvPluginAbiVersion and refuses a table whose abi_version,
// table_size or args_fingerprint differ (the fingerprint folds the size of every argument struct,
// so a plugin built against other op_args.h is refused even when the version was not bumped). Bump
// the version whenever a function is added, removed or changes meaning. Optional additions that
// old plugins may lack go into extension tables with entry points and versions of their own (the
// copy-stream extension at the end of this file), so they need no bump.
//
// Errors: every fallible function returns 0 (absl::StatusCode::kOk) or an absl::StatusCode value
// and writes a NUL-terminated message into the caller's PagedkvPluginError.
//
// Example (what engine/model/runner/plugin_backend.cc does):
//   auto entry = reinterpret_cast<PagedkvBackendPluginEntry>(dlsym(lib, kPagedkvPluginEntryName));
//   const PagedkvBackendPlugin* table = entry(kPagedkvPluginAbiVersion);
//   PagedkvPluginError error{};
//   void* backend = nullptr;
//   if (table->create(/*device=*/0, &backend, &error) != 0) { /* error.message says why */ }
#ifndef PAGEDKV_KERNELS_BACKEND_PLUGIN_ABI_H_
#define PAGEDKV_KERNELS_BACKEND_PLUGIN_ABI_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>

#include "pagedkv/kernels/op_args.h"

// Version of the table below; the loader and the plugin must agree on it. 2: PagedAttentionArgs
// gained sliding_window (same size, so the args fingerprint alone would not catch it). 3:
// SamplingParams gained top_k and min_p (issue 42). 4: PagedKvLayout gained v_dtype and V's
// strides (issue 41: K and V in different dtypes). 5: ReshapeAndCacheArgs gained rotated_k and
// ReRotateArgs src_keys (issue 41: float keys kept until a move).
inline constexpr uint32_t kPagedkvPluginAbiVersion = 5;
// Name of the exported entry point.
inline constexpr const char kPagedkvPluginEntryName[] = "pagedkv_backend_plugin";

// Size of every op argument struct folded into one number (FNV-1a over the sizes).
constexpr uint64_t PagedkvPluginArgsFingerprint() {
  const uint64_t sizes[] = {
      sizeof(pagedkv::LinearArgs),          sizeof(pagedkv::EmbeddingGatherArgs),
      sizeof(pagedkv::GatherRowsArgs),      sizeof(pagedkv::RmsNormArgs),
      sizeof(pagedkv::SwiGluArgs),          sizeof(pagedkv::LmHeadArgs),
      sizeof(pagedkv::ReshapeAndCacheArgs), sizeof(pagedkv::ReRotateArgs),
      sizeof(pagedkv::PagedAttentionArgs),  sizeof(pagedkv::SampleArgs),
      sizeof(pagedkv::SamplingParams),      sizeof(pagedkv::PagedKvLayout),
      sizeof(pagedkv::RopeTableView)};
  uint64_t hash = 1469598103934665603ull;
  for (uint64_t size : sizes) hash = (hash ^ size) * 1099511628211ull;
  return hash;
}

extern "C" {

// Error out-parameter of the plugin's functions.
struct PagedkvPluginError {
  int32_t code;        // absl::StatusCode; 0 = OK
  char message[1024];  // NUL-terminated, truncated to fit
};

// Opaque handle of one backend instance (a device, a stream, library handles).
typedef void* PagedkvPluginBackend;

// The plugin's function table. Every `int32_t` function returns an absl::StatusCode (0 = OK).
struct PagedkvBackendPlugin {
  uint32_t abi_version;         // kPagedkvPluginAbiVersion the plugin was built with
  uint32_t table_size;          // sizeof(PagedkvBackendPlugin) in the plugin
  uint64_t args_fingerprint;    // PagedkvPluginArgsFingerprint() in the plugin
  const char* pagedkv_version;  // pagedkv version the plugin was built from, e.g. "0.2.0"
  const char* backend_name;     // "cuda"

  // Devices this plugin can run on now (0 when none); `error` says why when there are none.
  int32_t (*device_count)(int32_t* count, PagedkvPluginError* error);
  // A backend on `device`; destroy it with `destroy`.
  int32_t (*create)(int32_t device, PagedkvPluginBackend* backend, PagedkvPluginError* error);
  void (*destroy)(PagedkvPluginBackend backend);
  // Human-readable name, e.g. "cuda:0 (NVIDIA H200)"; valid until destroy.
  const char* (*name)(PagedkvPluginBackend backend);

  // Memory: zero-initialised, 64-byte aligned; free(nullptr) is a no-op.
  int32_t (*allocate)(PagedkvPluginBackend backend, size_t bytes, void** ptr,
                      PagedkvPluginError* error);
  void (*free)(PagedkvPluginBackend backend, void* ptr);
  int32_t (*copy_to_device)(PagedkvPluginBackend backend, void* dst, const void* src, size_t bytes,
                            PagedkvPluginError* error);
  int32_t (*copy_to_host)(PagedkvPluginBackend backend, void* dst, const void* src, size_t bytes,
                          PagedkvPluginError* error);
  int32_t (*copy_device_to_device)(PagedkvPluginBackend backend, void* dst, const void* src,
                                   size_t bytes, PagedkvPluginError* error);
  int32_t (*synchronize)(PagedkvPluginBackend backend, PagedkvPluginError* error);

  // Compute: each op as in pagedkv/kernels/op_args.h, pointers into this backend's memory.
  int32_t (*linear)(PagedkvPluginBackend, const pagedkv::LinearArgs*, PagedkvPluginError*);
  int32_t (*embedding_gather)(PagedkvPluginBackend, const pagedkv::EmbeddingGatherArgs*,
                              PagedkvPluginError*);
  int32_t (*gather_rows)(PagedkvPluginBackend, const pagedkv::GatherRowsArgs*, PagedkvPluginError*);
  int32_t (*rms_norm)(PagedkvPluginBackend, const pagedkv::RmsNormArgs*, PagedkvPluginError*);
  int32_t (*swiglu)(PagedkvPluginBackend, const pagedkv::SwiGluArgs*, PagedkvPluginError*);
  int32_t (*lm_head)(PagedkvPluginBackend, const pagedkv::LmHeadArgs*, PagedkvPluginError*);
  int32_t (*reshape_and_cache)(PagedkvPluginBackend, const pagedkv::ReshapeAndCacheArgs*,
                               PagedkvPluginError*);
  int32_t (*rerotate)(PagedkvPluginBackend, const pagedkv::ReRotateArgs*, PagedkvPluginError*);
  int32_t (*paged_attention)(PagedkvPluginBackend, const pagedkv::PagedAttentionArgs*,
                             PagedkvPluginError*);
  int32_t (*sample)(PagedkvPluginBackend, const pagedkv::SampleArgs*, PagedkvPluginError*);
};

// The entry point: the table for `abi_version`, or null when the plugin does not speak it.
typedef const PagedkvBackendPlugin* (*PagedkvBackendPluginEntry)(uint32_t abi_version);

}  // extern "C"

// The compute ops of PagedkvBackendPlugin, in table order, as X(member, ArgsType): the list code
// that walks every op reads (the op-case coverage test, tests/kernels/op_cases/op_cases.h). They
// end the table; the static_asserts below fail when an op is added to the table and not here, or
// here and not there, or when a member's signature is not `int32_t (backend, const
// pagedkv::ArgsType*, error)`.
#define PAGEDKV_PLUGIN_OPS(X)               \
  X(linear, LinearArgs)                     \
  X(embedding_gather, EmbeddingGatherArgs)  \
  X(gather_rows, GatherRowsArgs)            \
  X(rms_norm, RmsNormArgs)                  \
  X(swiglu, SwiGluArgs)                     \
  X(lm_head, LmHeadArgs)                    \
  X(reshape_and_cache, ReshapeAndCacheArgs) \
  X(rerotate, ReRotateArgs)                 \
  X(paged_attention, PagedAttentionArgs)    \
  X(sample, SampleArgs)

// The member names of PAGEDKV_PLUGIN_OPS, in order ("linear", ..., "sample").
#define PAGEDKV_PLUGIN_OP_NAME(member, Args) #member,
inline constexpr const char* kPagedkvPluginOpNames[] = {PAGEDKV_PLUGIN_OPS(PAGEDKV_PLUGIN_OP_NAME)};
#undef PAGEDKV_PLUGIN_OP_NAME
inline constexpr size_t kPagedkvPluginNumOps = std::size(kPagedkvPluginOpNames);

#define PAGEDKV_PLUGIN_OP_SIGNATURE(member, Args)                                      \
  static_assert(std::is_same_v<decltype(PagedkvBackendPlugin::member),                 \
                               int32_t (*)(PagedkvPluginBackend, const pagedkv::Args*, \
                                           PagedkvPluginError*)>,                      \
                "PagedkvBackendPlugin::" #member " must take const pagedkv::" #Args "*");
PAGEDKV_PLUGIN_OPS(PAGEDKV_PLUGIN_OP_SIGNATURE)
#undef PAGEDKV_PLUGIN_OP_SIGNATURE

// True when the members of PAGEDKV_PLUGIN_OPS are, in order, the last members of the table.
constexpr bool PagedkvPluginOpsEndTheTable() {
#define PAGEDKV_PLUGIN_OP_OFFSET(member, Args) offsetof(PagedkvBackendPlugin, member),
  constexpr size_t offsets[] = {PAGEDKV_PLUGIN_OPS(PAGEDKV_PLUGIN_OP_OFFSET)};
#undef PAGEDKV_PLUGIN_OP_OFFSET
  constexpr size_t slot = sizeof(PagedkvBackendPlugin::linear);
  for (size_t i = 0; i < std::size(offsets); ++i) {
    if (offsets[i] != offsets[0] + i * slot) return false;
  }
  return offsets[0] + std::size(offsets) * slot == sizeof(PagedkvBackendPlugin);
}
static_assert(PagedkvPluginOpsEndTheTable(),
              "PAGEDKV_PLUGIN_OPS must list every compute op of PagedkvBackendPlugin, in order");

extern "C" {

// ---- Optional extension: asynchronous KV-tier copies on a copy stream ---------------------------
//
// A plugin may export a second entry point, kPagedkvCopyStreamEntryName, returning the table
// below for kPagedkvCopyStreamAbiVersion (null for a version it does not speak). It is versioned
// on its own (abi_version, table_size) so that the main table's kPagedkvPluginAbiVersion stays
// 1 and both directions stay compatible: a loader finds the extension with dlsym and, when the
// symbol is missing (every plugin built before it) or refuses its version, keeps the synchronous
// copy_to_device / copy_to_host of the main table; a loader that predates it never asks.
//
// The model: the backend's ops run on its compute stream; these copies run on a second, copy
// stream, so tier loads for requests being onboarded overlap the step being computed.
//   load_async  - host (staged) -> device on the copy stream; returns at once.
//   fence_loads - an event on the copy stream after every load queued so far, and the compute
//                 stream waits for it (cudaStreamWaitEvent): ops queued after the fence read the
//                 loaded blocks; the host does not block.
//   store_async - device -> host (staged) on the copy stream, after everything queued on the
//                 compute stream before the call (an event recorded there, waited by the copy
//                 stream), so it reads what the step wrote; returns at once.
//   copy_synchronize - the host waits for every copy queued on the copy stream: staged stores are
//                 readable, staged load sources may be reused.
// Staging buffers come from stage_alloc (page-locked host memory, so the copies are truly
// asynchronous). A backend whose memory is host memory (the CPU backend, the test plugin)
// implements every call synchronously, in order, with the same results.
//
// Status: the CUDA plugin implements it (kernels/cuda/copy_stream.h); it is compiled, never run
// here (no GPU), and the engine does not use it yet (its tier copies are the main table's).

inline constexpr uint32_t kPagedkvCopyStreamAbiVersion = 1;
inline constexpr const char kPagedkvCopyStreamEntryName[] = "pagedkv_backend_copy_stream";

struct PagedkvCopyStreamPlugin {
  uint32_t abi_version;  // kPagedkvCopyStreamAbiVersion the plugin was built with
  uint32_t table_size;   // sizeof(PagedkvCopyStreamPlugin) in the plugin

  // `bytes` of page-locked host memory for staging; free with stage_free (which first waits for
  // the copy stream). stage_free(nullptr) is a no-op.
  int32_t (*stage_alloc)(PagedkvPluginBackend backend, size_t bytes, void** host,
                         PagedkvPluginError* error);
  void (*stage_free)(PagedkvPluginBackend backend, void* host);
  // REQUIRES: `src` stays unchanged until copy_synchronize.
  int32_t (*load_async)(PagedkvPluginBackend backend, void* dst, const void* src, size_t bytes,
                        PagedkvPluginError* error);
  int32_t (*fence_loads)(PagedkvPluginBackend backend, PagedkvPluginError* error);
  // REQUIRES: `dst` is read only after copy_synchronize.
  int32_t (*store_async)(PagedkvPluginBackend backend, void* dst, const void* src, size_t bytes,
                         PagedkvPluginError* error);
  int32_t (*copy_synchronize)(PagedkvPluginBackend backend, PagedkvPluginError* error);
};

// The extension's entry point: its table for `abi_version`, or null.
typedef const PagedkvCopyStreamPlugin* (*PagedkvCopyStreamEntry)(uint32_t abi_version);

}  // extern "C"

#endif  // PAGEDKV_KERNELS_BACKEND_PLUGIN_ABI_H_
