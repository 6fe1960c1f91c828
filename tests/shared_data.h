// Copyright 2026 The pagedkv Authors.
//
// Locates the read-only shared data (../shared/data beside the checkout) for tests.
//
// Example:
//   auto dir = pagedkv::testing::SharedDataDir();
//   if (!dir) GTEST_SKIP() << pagedkv::testing::kNoSharedDataMessage;
//   LoadTrace(*dir / "traces/conversation_trace.jsonl.gz");
#ifndef PAGEDKV_TESTS_SHARED_DATA_H_
#define PAGEDKV_TESTS_SHARED_DATA_H_

#include <cstdlib>
#include <filesystem>
#include <optional>

namespace pagedkv::testing {

inline constexpr const char* kNoSharedDataMessage =
    "../shared/data not found (set PAGEDKV_DATA_DIR to point at it); skipping";

// Returns $PAGEDKV_DATA_DIR when set, else the configured ../shared/data, when it exists.
inline std::optional<std::filesystem::path> SharedDataDir() {
  std::filesystem::path dir;
  if (const char* env = std::getenv("PAGEDKV_DATA_DIR"); env != nullptr && *env != '\0') {
    dir = env;
  } else {
#ifdef PAGEDKV_SHARED_DATA_DIR
    dir = PAGEDKV_SHARED_DATA_DIR;
#endif
  }
  std::error_code ec;
  if (dir.empty() || !std::filesystem::is_directory(dir, ec)) return std::nullopt;
  return dir;
}

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_SHARED_DATA_H_
