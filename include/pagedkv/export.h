// Copyright 2026 The pagedkv Authors.
//
// PAGEDKV_EXPORT marks the public API. pagedkv builds with hidden symbol visibility; in a shared
// build (-DBUILD_SHARED_LIBS=ON) only what this macro marks is exported from the libraries. In the
// default static build it expands to the same default-visibility attribute, which is harmless.
//
// Example:
//   class PAGEDKV_EXPORT KvCacheManager { ... };
//   PAGEDKV_EXPORT absl::StatusOr<BackendKind> ParseBackendKind(std::string_view name);
#ifndef PAGEDKV_EXPORT_H_
#define PAGEDKV_EXPORT_H_

#if defined(__GNUC__) || defined(__clang__)
#define PAGEDKV_EXPORT __attribute__((visibility("default")))
#else
#define PAGEDKV_EXPORT
#endif

#endif  // PAGEDKV_EXPORT_H_
