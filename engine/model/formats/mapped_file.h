// Copyright 2026 The pagedkv Authors.
//
// MappedFile: a read-only memory map of a whole file (safetensors payloads are read in place and
// converted once, never copied whole into memory).
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
//   std::string_view bytes = file.bytes();  // valid while `file` lives
//
// Thread-compatible: the bytes are read-only and may be read from many threads.
#ifndef PAGEDKV_ENGINE_MODEL_FORMATS_MAPPED_FILE_H_
#define PAGEDKV_ENGINE_MODEL_FORMATS_MAPPED_FILE_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "pagedkv/export.h"

namespace pagedkv::model_internal {

class PAGEDKV_EXPORT MappedFile {
 public:
  // Maps `path` read-only. NotFound when it cannot be opened, InvalidArgument when it is not a
  // regular file, Internal when mmap fails. An empty file maps to empty bytes.
  static absl::StatusOr<MappedFile> Open(const std::string& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  // The file's bytes; valid until this object is destroyed or moved from.
  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  void Reset();

  std::string path_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace pagedkv::model_internal

#endif  // PAGEDKV_ENGINE_MODEL_FORMATS_MAPPED_FILE_H_
