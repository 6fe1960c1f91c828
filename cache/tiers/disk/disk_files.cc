// Copyright 2026 The pagedkv Authors.
#include "cache/tiers/disk/disk_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

constexpr std::string_view kValueSuffix = ".kv";  // ValueFileName and TempName spell them too
constexpr std::string_view kTempSuffix = ".tmp";

absl::Status ErrnoError(int error, const char* what, const std::string& path) {
  return absl::ErrnoToStatus(error, absl::StrCat(what, " ", path));
}

// Closes a descriptor when it goes out of scope (the error of an explicit Close() is reported).
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // close(2) now; its errno (0 when it succeeded).
  int Close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

int WriteAll(int fd, std::span<const std::byte> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

// Whether WriteTemporary tries O_TMPFILE (SetUnnamedTemporaries).
std::atomic<bool> unnamed_temporaries{true};

// open(2)'s errors that say the file system has no unnamed files (or the kernel has no O_TMPFILE).
bool NoUnnamedFiles(int error) { return error == EOPNOTSUPP || error == EISDIR || error == EINVAL; }

std::string TempName(const std::string& name) {
  static std::atomic<uint64_t> sequence{0};
  return absl::StrCat(".", name, ".", ::getpid(), ".", sequence.fetch_add(1), ".tmp");
}

int64_t MtimeNs(const struct stat& st) {
  return int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
}

// Lists one shard folder into `out` (a missing folder holds nothing).
void ListShard(const std::string& shard, int64_t stale_before_ns, std::vector<ValueFileInfo>* out,
               ScanCounts* counts) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(shard.c_str()), &::closedir);
  if (dir == nullptr) return;
  const int dir_fd = ::dirfd(dir.get());
  while (const struct dirent* e = ::readdir(dir.get())) {
    const std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (::fstatat(dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // just removed
    const std::optional<BlockHash> hash = ParseValueFileName(name);
    if (hash.has_value() && S_ISREG(st.st_mode)) {
      out->push_back({.hash = *hash, .mtime_ns = MtimeNs(st), .bytes = st.st_size});
    } else if (name.starts_with(".") && name.ends_with(kTempSuffix)) {
      if (MtimeNs(st) < stale_before_ns && ::unlinkat(dir_fd, e->d_name, 0) == 0) {
        ++counts->removed_temporaries;
      }
    } else {
      ++counts->other_files;
    }
  }
}

// Writes `value` as `digits` lower-case hex digits ending just before `end`.
void WriteHex(uint64_t value, int digits, char* end) {
  for (int i = 1; i <= digits; ++i, value >>= 4) end[-i] = "0123456789abcdef"[value & 0xF];
}

}  // namespace

std::string ValueFileName(const BlockHash& hash) {
  std::string name(32 + kValueSuffix.size(), '.');
  WriteHex(hash.high, 16, name.data() + 16);
  WriteHex(hash.low, 16, name.data() + 32);
  name.replace(32, kValueSuffix.size(), kValueSuffix);
  return name;
}

std::optional<BlockHash> ParseValueFileName(std::string_view name) {
  if (name.size() != 32 + kValueSuffix.size() || !name.ends_with(kValueSuffix)) {
    return std::nullopt;
  }
  BlockHash hash;
  for (char c : name.substr(0, 32)) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c)) || absl::ascii_isupper(c)) {
      return std::nullopt;
    }
  }
  if (!absl::SimpleHexAtoi(absl::string_view(name.data(), 16), &hash.high) ||
      !absl::SimpleHexAtoi(absl::string_view(name.data() + 16, 16), &hash.low)) {
    return std::nullopt;
  }
  return hash;
}

std::string ShardDir(const std::string& model_dir, const BlockHash& hash) {
  return absl::StrFormat("%s/%02x", model_dir, hash.high >> 56);
}

std::string ValuePath(const std::string& model_dir, const BlockHash& hash) {
  return absl::StrCat(model_dir, "/", ValueRelativePath(hash));
}

std::string ValueRelativePath(const BlockHash& hash) {
  std::string path = "00/" + ValueFileName(hash);
  WriteHex(hash.high >> 56, 2, path.data() + 2);
  return path;
}

absl::Status MakeDirectories(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("MakeDirectories: empty path");
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = path.substr(0, slash);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoError(errno, "cannot create folder", prefix);
    }
    if (slash == std::string::npos) break;
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoError(errno, "cannot stat", path);
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a folder"));
  }
  return absl::OkStatus();
}

TempFile::TempFile(TempFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {
  other.path_.clear();
}

TempFile& TempFile::operator=(TempFile&& other) noexcept {
  if (this != &other) {
    Remove();
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    other.path_.clear();
  }
  return *this;
}

TempFile::~TempFile() { Remove(); }

void TempFile::Remove() {
  if (fd_ >= 0) ::close(fd_);  // an unnamed file goes with its last descriptor
  if (!path_.empty()) ::unlink(path_.c_str());
  fd_ = -1;
  path_.clear();
}

void SetUnnamedTemporaries(bool enabled) { unnamed_temporaries.store(enabled); }

absl::StatusOr<TempFile> WriteTemporary(const std::string& dir, const std::string& name,
                                        std::span<const std::byte> bytes) {
  TempFile temp;
  if (unnamed_temporaries.load(std::memory_order_relaxed)) {
    temp.fd_ = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    if (temp.fd_ < 0 && !NoUnnamedFiles(errno)) {
      return ErrnoError(errno, "cannot create", absl::StrCat(dir, "/", name));
    }
    if (temp.fd_ < 0) unnamed_temporaries.store(false);  // this file system has none
  }
  if (temp.fd_ < 0) {
    const std::string path = absl::StrCat(dir, "/", TempName(name));
    temp.fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (temp.fd_ < 0) return ErrnoError(errno, "cannot create", path);
    temp.path_ = path;
  }
  int error = WriteAll(temp.fd_, bytes);
  if (!temp.path_.empty()) {  // a named file is closed now; an unnamed one stays open to be linked
    const int close_rc = ::close(std::exchange(temp.fd_, -1));
    if (error == 0 && close_rc != 0) error = errno;
  }
  if (error != 0) return ErrnoError(error, "cannot write", absl::StrCat(dir, "/", name));
  return temp;
}

absl::StatusOr<bool> PublishTemporary(TempFile& temp, const std::string& path) {
  if (temp.fd_ >= 0) {
    const std::string proc = absl::StrCat("/proc/self/fd/", temp.fd_);
    const int rc = ::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW);
    const int error = errno;
    temp.Remove();
    if (rc == 0) return true;
    if (error == EEXIST) return false;
    if (error == ENOENT && ::access("/proc/self/fd", F_OK) != 0) {
      unnamed_temporaries.store(false);  // no /proc: later values get temporary names
    }
    return ErrnoError(error, "cannot write", path);
  }
  int rc = ::renameat2(AT_FDCWD, temp.path_.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE);
  if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {
    // No RENAME_NOREPLACE here: link(2) fails with EEXIST just the same.
    rc = ::link(temp.path_.c_str(), path.c_str());
    if (rc != 0 && errno != EEXIST) rc = ::rename(temp.path_.c_str(), path.c_str());  // no links
  }
  const int error = errno;
  if (rc == 0 && ::access(temp.path_.c_str(), F_OK) != 0) temp.path_.clear();  // renamed
  temp.Remove();  // unlinks what link(2) left, or the temporary of a failed publish
  if (rc == 0) return true;
  if (error == EEXIST) return false;
  return ErrnoError(error, "cannot write", path);
}

void ReadBuffer::Free::operator()(std::byte* p) const { std::free(p); }

std::span<std::byte> ReadBuffer::Reserve(size_t bytes) {
  constexpr size_t kPage = 4096;
  if (capacity_ < bytes) {
    const size_t rounded = (bytes + kPage - 1) / kPage * kPage;
    data_.reset(static_cast<std::byte*>(std::aligned_alloc(kPage, rounded)));
    capacity_ = data_ != nullptr ? rounded : 0;
    if (data_ == nullptr) return {};
  }
  return std::span<std::byte>(data_.get(), bytes);
}

absl::StatusOr<std::span<const std::byte>> ReadValueFile(int dir_fd, const std::string& path,
                                                         size_t expected_bytes, ReadBuffer* buffer,
                                                         ReadRecency recency) {
  Fd fd(::openat(dir_fd, path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return absl::NotFoundError(path);
    return ErrnoError(errno, "cannot open", path);
  }
  // One byte more than the value: a read that fills it finds a longer file.
  const std::span<std::byte> out = buffer->Reserve(expected_bytes + 1);
  if (out.empty()) return absl::ResourceExhaustedError("out of memory for a value read");
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(fd.get(), out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EISDIR) return absl::DataLossError(absl::StrCat(path, " is a folder"));
    if (n < 0) return ErrnoError(errno, "cannot read", path);
    if (n == 0) break;  // the end of the file
    done += static_cast<size_t>(n);
    // A short read of a regular file ends at its end: the read that would return 0 is saved.
    // (Were it short for another reason, the value read is still whole, and the caller checks it.)
    if (done == expected_bytes) break;
  }
  if (done != expected_bytes) {
    return absl::DataLossError(
        done > expected_bytes
            ? absl::StrCat(path, " holds more than ", expected_bytes, " bytes")
            : absl::StrCat(path, " holds ", done, " bytes, expected ", expected_bytes));
  }
  struct stat st;
  const bool old = recency == ReadRecency::kTouchIfOld && ::fstat(fd.get(), &st) == 0 &&
                   FileClockNowNs() - MtimeNs(st) > kTouchGranularityNs;
  if ((recency == ReadRecency::kTouch || old) && ::futimens(fd.get(), nullptr) != 0) {
    // Only the order a restart rebuilds suffers (a read-only folder, another owner): not a fault.
  }
  return out.first(expected_bytes);
}

std::optional<int64_t> FileMtimeNs(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return MtimeNs(st);
}

absl::Status RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError(errno, "cannot remove", path);
  }
  return absl::OkStatus();
}

int64_t ListValueShard(const std::string& model_dir, int shard, int64_t stale_before_ns,
                       std::vector<ValueFileInfo>* out, ScanCounts* counts) {
  const size_t before = out->size();
  ListShard(absl::StrFormat("%s/%02x", model_dir, shard), stale_before_ns, out, counts);
  return static_cast<int64_t>(out->size() - before);
}

int64_t CountValueShard(const std::string& model_dir, int shard) {
  const std::string path = absl::StrFormat("%s/%02x", model_dir, shard);
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(path.c_str()), &::closedir);
  if (dir == nullptr) return 0;
  int64_t n = 0;
  while (const struct dirent* e = ::readdir(dir.get())) {
    if (!ParseValueFileName(e->d_name).has_value()) continue;
    struct stat st;
    const bool regular = e->d_type == DT_REG ||
                         (e->d_type == DT_UNKNOWN &&
                          ::fstatat(::dirfd(dir.get()), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                          S_ISREG(st.st_mode));
    if (regular) ++n;
  }
  return n;
}

int64_t FileClockNowNs() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace pagedkv
