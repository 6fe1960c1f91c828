// Copyright 2026 The pagedkv Authors.
//
// Reads a whole file into memory, with errors that name the file.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path, "checkpoint"));
#ifndef PAGEDKV_ENGINE_MODEL_FORMATS_FILE_BYTES_H_
#define PAGEDKV_ENGINE_MODEL_FORMATS_FILE_BYTES_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "pagedkv/export.h"

namespace pagedkv::model_internal {

// The bytes of the file at `path`. NotFound when it cannot be opened, InvalidArgument when it is
// not a regular file, Internal on a read error; messages name `what` and `path`.
PAGEDKV_EXPORT absl::StatusOr<std::string> ReadFileBytes(const std::string& path,
                                                         std::string_view what);

}  // namespace pagedkv::model_internal

#endif  // PAGEDKV_ENGINE_MODEL_FORMATS_FILE_BYTES_H_
