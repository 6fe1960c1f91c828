// Copyright 2026 The pagedkv Authors.
#include "engine/model/formats/file_bytes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <new>
#include <string>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace pagedkv::model_internal {
namespace {

// Closes the descriptor when the read is over, however it ends.
struct ClosesFd {
  int fd;
  ~ClosesFd() { ::close(fd); }
};

// Appends what `fd` holds until end of file: `size_hint` bytes in one read for a regular file,
// then chunks (a file that grew, a pipe). errno is kept on failure.
bool ReadAll(int fd, size_t size_hint, std::string* bytes) {
  constexpr size_t kChunk = size_t{1} << 16;
  bytes->resize(size_hint > 0 ? size_hint + 1 : kChunk);  // + 1: sees the end in the same read
  size_t used = 0;
  while (true) {
    if (used == bytes->size()) bytes->resize(used + kChunk);
    const ssize_t n = ::read(fd, bytes->data() + used, bytes->size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  bytes->resize(used);
  return true;
}

}  // namespace

absl::StatusOr<std::string> ReadFileBytes(const std::string& path, std::string_view what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s '%s' is a directory, not a file", what, path));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrFormat("cannot open %s '%s': %s", what, path, std::strerror(errno)));
  }
  const ClosesFd closes{fd};
  struct stat st {};
  const size_t size_hint = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? st.st_size : 0;
  std::string bytes;
  try {
    if (!ReadAll(fd, size_hint, &bytes)) {
      return absl::InternalError(
          absl::StrFormat("error reading %s '%s': %s", what, path, std::strerror(errno)));
    }
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("%s '%s' (%d bytes) does not fit in memory", what, path, size_hint));
  }
  return bytes;
}

}  // namespace pagedkv::model_internal
