// Copyright 2026 The pagedkv Authors.
//
// MappedFile: a read-only memory map of a whole file (safetensors payloads are read in place and
// converted once, never copied whole into memory; GGUF matrices that the loader does not reorder
// are kept in place, see pagedkv/model/model_weights.h).
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

#include "absl/status/status.h"
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

// Gives back the resident pages that lie wholly inside [data, data + bytes) (madvise
// MADV_DONTNEED; the partial pages at either end stay). For a MappedFile's bytes, which are never
// written, a later read maps them again from the file: the same bytes while the file is
// unchanged. Internal when madvise fails (nothing else happens). An empty range does nothing.
// REQUIRES: the range lies inside one MappedFile's bytes (never anonymous memory: its pages
// would read back as zeros).
PAGEDKV_EXPORT absl::Status ReleaseMappedPages(const void* data, size_t bytes);

}  // namespace pagedkv::model_internal

#endif  // PAGEDKV_ENGINE_MODEL_FORMATS_MAPPED_FILE_H_
