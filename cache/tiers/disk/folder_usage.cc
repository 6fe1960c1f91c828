// Copyright 2026 The pagedkv Authors.
#include "cache/tiers/disk/folder_usage.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cache/tiers/disk/disk_files.h"
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace pagedkv {
namespace {

// The file: a 64-byte header, then one int64 count per shard (native byte order: the folder is
// local to one machine).
constexpr char kMagic[8] = {'P', 'K', 'V', 'U', 'S', 'A', 'G', 'E'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 64;
constexpr size_t kFileBytes = kHeaderBytes + sizeof(int64_t) * FolderUsage::kShards;
constexpr int64_t kMaxCount = int64_t{1} << 40;  // a count above this is damage

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t shards;
  int64_t file_bytes;
  uint64_t checksum;  // XXH3-64 of the counts, seeded with the fields above
  char reserved[kHeaderBytes - 32];
};
static_assert(sizeof(Header) == kHeaderBytes);

absl::Status ErrnoError(int error, const char* what, const std::string& path) {
  return absl::ErrnoToStatus(error, absl::StrCat(what, " ", path));
}

// Retries a call interrupted by a signal.
template <typename Call>
int Retry(Call call) {
  int rc;
  do {
    rc = call();
  } while (rc < 0 && errno == EINTR);
  return rc;
}

}  // namespace

FolderUsage::FolderUsage(std::string model_dir, int64_t file_bytes)
    : model_dir_(std::move(model_dir)),
      path_(absl::StrCat(model_dir_, "/usage")),
      file_bytes_(file_bytes) {}

FolderUsage::~FolderUsage() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock too
}

uint64_t FolderUsage::Checksum() const {
  const uint64_t seed = (uint64_t{kVersion} << 32) ^ uint64_t { kShards } ^
                        (static_cast<uint64_t>(file_bytes_) * 0x9E3779B97F4A7C15ULL);
  return XXH3_64bits_withSeed(counts_.data(), sizeof(counts_), seed);
}

absl::Status FolderUsage::OpenLocked(struct stat* st) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (fd_ < 0) {
      // O_NOATIME: every write moves the file's mtime past its atime, so relatime would write
      // the inode on every read too (allowed for the file's owner; others open without it).
      constexpr int kFlags = O_RDWR | O_CREAT | O_CLOEXEC;
      fd_ = Retry([&] { return ::open(path_.c_str(), kFlags | O_NOATIME, 0644); });
      if (fd_ < 0 && errno == EPERM)
        fd_ = Retry([&] { return ::open(path_.c_str(), kFlags, 0644); });
      if (fd_ < 0) return ErrnoError(errno, "cannot open the folder's usage file", path_);
    }
    if (Retry([&] { return ::flock(fd_, LOCK_EX); }) != 0) {
      return ErrnoError(errno, "cannot lock", path_);
    }
    if (::fstat(fd_, st) != 0) {
      const int error = errno;
      ::flock(fd_, LOCK_UN);
      return ErrnoError(error, "cannot stat", path_);
    }
    if (st->st_nlink > 0) return absl::OkStatus();
    // Its folder was deleted: a new file goes with the new folder.
    ::close(fd_);  // unlocks
    fd_ = -1;
  }
  return absl::UnavailableError(absl::StrCat(path_, " is deleted again and again"));
}

absl::Status FolderUsage::Read(const struct stat& st, bool* fresh) {
  *fresh = st.st_size == 0;
  oversized_ = static_cast<uint64_t>(st.st_size) > kFileBytes;
  if (*fresh) return absl::OkStatus();
  if (static_cast<uint64_t>(st.st_size) != kFileBytes) {
    return absl::DataLossError(
        absl::StrCat(path_, " holds ", st.st_size, " bytes, expected ", kFileBytes));
  }
  char bytes[kFileBytes];
  const ssize_t n = ::pread(fd_, bytes, kFileBytes, 0);
  if (n < 0) return ErrnoError(errno, "cannot read", path_);
  if (static_cast<size_t>(n) != kFileBytes) {
    return absl::DataLossError(absl::StrCat(path_, " is shorter than its size"));
  }
  Header header;
  std::memcpy(&header, bytes, sizeof(header));
  std::memcpy(counts_.data(), bytes + kHeaderBytes, sizeof(counts_));
  bool ok = std::memcmp(header.magic, kMagic, sizeof(kMagic)) == 0 && header.version == kVersion &&
            header.shards == kShards && header.file_bytes == file_bytes_ &&
            header.checksum == Checksum();
  for (int64_t c : counts_) ok = ok && c >= 0 && c <= kMaxCount;
  if (!ok) return absl::DataLossError(absl::StrCat(path_, " fails its checks (damaged)"));
  return absl::OkStatus();
}

void FolderUsage::RecountAll() {
  for (int shard = 0; shard < kShards; ++shard) Recount(shard);
}

absl::Status FolderUsage::Lock(bool* rebuilt_corrupt) {
  *rebuilt_corrupt = false;
  struct stat st;
  if (absl::Status opened = OpenLocked(&st); !opened.ok()) return opened;
  locked_ = true;
  dirty_ = false;
  bool fresh = false;
  const absl::Status read = Read(st, &fresh);
  if (read.ok() && !fresh) return absl::OkStatus();
  if (!read.ok() && !absl::IsDataLoss(read)) {
    ::flock(fd_, LOCK_UN);
    locked_ = false;
    return read;
  }
  *rebuilt_corrupt = !fresh;
  RecountAll();  // under the lock: no process changes a shard meanwhile
  dirty_ = true;
  return absl::OkStatus();
}

absl::Status FolderUsage::Unlock() {
  absl::Status written = absl::OkStatus();
  if (dirty_) {
    char bytes[kFileBytes] = {};
    Header header = {};
    std::memcpy(header.magic, kMagic, sizeof(kMagic));
    header.version = kVersion;
    header.shards = kShards;
    header.file_bytes = file_bytes_;
    header.checksum = Checksum();
    std::memcpy(bytes, &header, sizeof(header));
    std::memcpy(bytes + kHeaderBytes, counts_.data(), sizeof(counts_));
    const ssize_t n = ::pwrite(fd_, bytes, kFileBytes, 0);
    if (n != static_cast<ssize_t>(kFileBytes)) {
      written = ErrnoError(n < 0 ? errno : EIO, "cannot write", path_);
    } else if (oversized_ && ::ftruncate(fd_, kFileBytes) != 0) {  // damaged: cut to size
      written = ErrnoError(errno, "cannot truncate", path_);
    }
  }
  ::flock(fd_, LOCK_UN);
  locked_ = false;
  dirty_ = false;
  return written;
}

int64_t FolderUsage::files() const {
  int64_t total = 0;
  for (int64_t c : counts_) total += c;
  return total;
}

void FolderUsage::Add(int shard, int64_t delta) {
  int64_t& c = counts_[static_cast<size_t>(shard)];
  c = c + delta < 0 ? 0 : c + delta;
  dirty_ = true;
}

void FolderUsage::Recount(int shard) { SetCount(shard, CountValueShard(model_dir_, shard)); }

void FolderUsage::SetCount(int shard, int64_t files) {
  counts_[static_cast<size_t>(shard)] = files;
  dirty_ = true;
}

}  // namespace pagedkv
