// Copyright 2026 The pagedkv Authors.
#include "engine/model/formats/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace pagedkv::model_internal {

absl::StatusOr<MappedFile> MappedFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrFormat("cannot open '%s': %s", path, std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrFormat("'%s' is not a regular file", path));
  }
  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<size_t>(st.st_size);
  if (file.size_ > 0) {
    void* p = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(
          absl::StrFormat("cannot memory-map '%s': %s", path, std::strerror(err)));
    }
    file.data_ = p;
  }
  ::close(fd);
  return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    Reset();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { Reset(); }

void MappedFile::Reset() {
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

absl::Status ReleaseMappedPages(const void* data, size_t bytes) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data);
  if (data == nullptr || bytes < page || bytes > UINTPTR_MAX - begin) return absl::OkStatus();
  const uintptr_t first = (begin + page - 1) / page * page;  // whole pages only
  const uintptr_t last = (begin + bytes) / page * page;
  if (first >= last) return absl::OkStatus();
  if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0) {
    return absl::InternalError(
        absl::StrFormat("cannot release %d mapped bytes: %s", last - first, std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace pagedkv::model_internal
