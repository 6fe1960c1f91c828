// Copyright 2026 The pagedkv Authors.
//
// Workspace: the reusable device scratch of the CUDA launchers (split-K attention partials), the
// device + pinned host words their content checks report through, and the default device flag of
// deferred content checks (ContentCheck::kDeferred, pagedkv/kernels/cuda_ops.h). It grows on demand
// and is never shrunk, so steady-state launches allocate nothing. A launcher locks the workspace
// for its whole call, so one workspace may be shared by threads; work enqueued with it must stay on
// one stream at a time (kernels of a later call may otherwise overwrite partials an earlier call on
// another stream still reads).
//
// Launchers given no workspace (LaunchOptions::workspace == nullptr) use DefaultWorkspace(device,
// stream): one per (device, stream) pair, created on first use and kept for the process's life.
// An engine that destroys and recreates streams while work is still in flight on them should pass
// its own Workspace instead (a new stream can reuse a destroyed one's handle).
//
// Example:
//   pagedkv::cuda::Workspace workspace;  // one per stream, owned by the caller
//   PAGEDKV_RETURN_IF_ERROR(pagedkv::cuda::PagedAttention(args, stream, {.workspace =
//   &workspace}));
#ifndef PAGEDKV_KERNELS_CUDA_WORKSPACE_H_
#define PAGEDKV_KERNELS_CUDA_WORKSPACE_H_

#include <cstddef>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "pagedkv/export.h"

// The CUDA runtime's stream and cuBLAS's handle types, declared as the toolkit declares them so
// this header compiles without the CUDA headers (a repeated identical typedef is valid C++).
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

namespace pagedkv::cuda {

class PAGEDKV_EXPORT Workspace {
 public:
  // Words a content-check kernel writes: [0] the smallest bad-entry word (pagedkv/kernels/
  // bad_entry.h) it found, all ones when none; [1] an op-specific value (the largest kv_len for
  // paged attention).
  static constexpr int kCheckWords = 2;

  Workspace() = default;
  // Waits for the device before freeing (work enqueued with this workspace may still run).
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  // Held by a launcher for its whole call.
  absl::Mutex& mutex() { return mutex_; }

  // At least `bytes` of device memory on the current device, valid until the next call. Growing
  // waits for the device once (the old memory may still be read) and frees it.
  // REQUIRES: mutex() held; always used on the same device.
  absl::StatusOr<void*> Scratch(size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  // kCheckWords device words and their pinned host mirror, allocated on first use.
  // REQUIRES: mutex() held.
  absl::StatusOr<uint64_t*> DeviceCheckWords() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  uint64_t* HostCheckWords() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return host_words_; }

  // The workspace's own deferred-check flag: one device word, kNoBadEntry (0) when allocated on
  // first use (a synchronous allocation: call once before capturing a CUDA graph). Launches with
  // ContentCheck::kDeferred and no LaunchOptions::deferred_flag record into it; read it with
  // ReadAndClearDeferredCheck(workspace, stream). REQUIRES: mutex() held.
  absl::StatusOr<uint64_t*> DeferredFlag() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

 private:
  absl::Status BindDevice() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  absl::Mutex mutex_;
  int device_ ABSL_GUARDED_BY(mutex_) = -1;
  void* scratch_ ABSL_GUARDED_BY(mutex_) = nullptr;
  size_t scratch_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t* device_words_ ABSL_GUARDED_BY(mutex_) = nullptr;  // kCheckWords, then the flag
  uint64_t* host_words_ ABSL_GUARDED_BY(mutex_) = nullptr;
};

// The workspace of (current device, stream), created on first use; never destroyed.
PAGEDKV_EXPORT absl::StatusOr<Workspace*> DefaultWorkspace(cudaStream_t stream);

// `workspace` when non-null, else DefaultWorkspace(stream).
PAGEDKV_EXPORT absl::StatusOr<Workspace*> WorkspaceOrDefault(Workspace* workspace,
                                                             cudaStream_t stream);

}  // namespace pagedkv::cuda

#endif  // PAGEDKV_KERNELS_CUDA_WORKSPACE_H_
