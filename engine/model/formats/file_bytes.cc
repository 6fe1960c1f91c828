// Copyright 2026 The pagedkv Authors.
#include "engine/model/formats/file_bytes.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace pagedkv::model_internal {

absl::StatusOr<std::string> ReadFileBytes(const std::string& path, std::string_view what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s '%s' is a directory, not a file", what, path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrFormat("cannot open %s '%s': %s", what, path, std::strerror(errno)));
  }
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    return absl::InternalError(absl::StrFormat("error reading %s '%s'", what, path));
  }
  return bytes;
}

}  // namespace pagedkv::model_internal
