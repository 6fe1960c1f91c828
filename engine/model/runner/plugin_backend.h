// Copyright 2026 The pagedkv Authors.
//
// Backends loaded at run time: dlopen of a plugin library (kernels/backend_plugin_abi.h), the
// check of its versioned function table, and a Backend over that table. The CUDA backend is such
// a plugin, libpagedkv_cuda.so, loaded only when BackendKind::kCuda (or kAuto) asks for it, so
// nothing but the plugin links the CUDA runtime or cuBLAS.
//
// Where the CUDA plugin is looked for, first match wins:
//   1. $PAGEDKV_CUDA_PLUGIN (a path to the library; when set, nothing else is tried),
//   2. the running program's directory (the build tree puts `pagedkv` and the plugin in build/),
//   3. ../lib beside the program's directory (an installed bin/pagedkv),
//   4. the installed library directory (CMAKE_INSTALL_FULL_LIBDIR at build time),
//   5. the dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache).
// A loaded plugin stays loaded for the life of the process.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(const BackendPlugin* cuda, LoadCudaPlugin());
//   PAGEDKV_ASSIGN_OR_RETURN(int devices, cuda->DeviceCount());
//   PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, cuda->CreateBackend(0));
//
// Thread-safe.
#ifndef PAGEDKV_ENGINE_MODEL_RUNNER_PLUGIN_BACKEND_H_
#define PAGEDKV_ENGINE_MODEL_RUNNER_PLUGIN_BACKEND_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/runner/backend.h"
#include "kernels/backend_plugin_abi.h"
#include "pagedkv/export.h"
#include "pagedkv/model/backend_kind.h"

namespace pagedkv {

// A loaded and checked plugin library. Lives until the process ends.
class PAGEDKV_EXPORT BackendPlugin {
 public:
  // Loads the library at `path` (any dlopen name) and checks its table: InvalidArgument when the
  // file is not a pagedkv plugin or was built for another ABI (the message names both versions),
  // NotFound when dlopen fails (its message says why, e.g. a missing libcublas).
  // `kind` is what the created backends report.
  static absl::StatusOr<std::unique_ptr<BackendPlugin>> Load(const std::string& path,
                                                             BackendKind kind);

  // Devices the plugin can use now; Unavailable (saying why) when there are none.
  absl::StatusOr<int> DeviceCount() const;
  // A backend on `device`; Unavailable when the device cannot be used.
  absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(int device) const;

  const std::string& path() const { return path_; }
  const PagedkvBackendPlugin& table() const { return *table_; }
  // The copy-stream extension (kernels/backend_plugin_abi.h) when the plugin offers a version
  // this build speaks, else null: its backends then copy tier blocks synchronously.
  const PagedkvCopyStreamPlugin* copy_stream() const { return copy_stream_; }

 private:
  BackendPlugin(std::string path, const PagedkvBackendPlugin* table,
                const PagedkvCopyStreamPlugin* copy_stream, BackendKind kind)
      : path_(std::move(path)), table_(table), copy_stream_(copy_stream), kind_(kind) {}

  std::string path_;
  const PagedkvBackendPlugin* table_;
  const PagedkvCopyStreamPlugin* copy_stream_;  // null without the extension
  BackendKind kind_;
};

// The file name of the CUDA plugin, "libpagedkv_cuda.so".
inline constexpr char kCudaPluginFileName[] = "libpagedkv_cuda.so";

// The candidates tried for the CUDA plugin, in order (see the banner).
PAGEDKV_EXPORT std::vector<std::string> CudaPluginCandidates();

// Loads the CUDA plugin once per process (later calls return the same result). NotFound, naming
// every place tried and how to fix it, when no candidate loads.
PAGEDKV_EXPORT absl::StatusOr<const BackendPlugin*> LoadCudaPlugin();

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_MODEL_RUNNER_PLUGIN_BACKEND_H_
