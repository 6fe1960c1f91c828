// Copyright 2026 The pagedkv Authors.
//
// The files of the disk tier (pagedkv/tiers/disk_tier.h): plain POSIX calls, each returning a
// status that names the path and the errno, so the tier can count and report the fault and go on.
// Layout under a model folder: 256 shard folders named by the first two hex digits of a block's
// chain hash, each holding one file per value, "<32 hex digits of the hash>.kv". A value is
// written to an unnamed file in its shard (open(2) with O_TMPFILE) and then linked to its name,
// so a reader sees either no file or the whole value, and a crash leaves nothing behind. On a
// file system without unnamed files it is written to a temporary name
// (".<name>.<pid>.<seq>.tmp") and renamed; such temporaries left by a crash are removed by the
// next scan once they are old.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(TempFile temp, WriteTemporary(shard_dir, ValueFileName(hash), bytes));
//   PAGEDKV_ASSIGN_OR_RETURN(bool created, PublishTemporary(temp, shard_dir + "/" + name));
//   absl::StatusOr<std::span<const std::byte>> read =
//       ReadValueFile(model_fd, ValueRelativePath(hash), expected_bytes, &buffer);
//   if (absl::IsNotFound(read.status())) ...;  // a miss
#ifndef PAGEDKV_CACHE_TIERS_DISK_DISK_FILES_H_
#define PAGEDKV_CACHE_TIERS_DISK_DISK_FILES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/cache/block_hash.h"

namespace pagedkv {

// "<32 hex digits>.kv" (high word first).
std::string ValueFileName(const BlockHash& hash);
// The hash of a value file's name; nullopt for any other name (temporaries included).
std::optional<BlockHash> ParseValueFileName(std::string_view name);
// "<model_dir>/<2 hex digits>": the shard folder of `hash`.
std::string ShardDir(const std::string& model_dir, const BlockHash& hash);
// ShardDir + "/" + ValueFileName.
std::string ValuePath(const std::string& model_dir, const BlockHash& hash);
// "<2 hex digits>/<32 hex digits>.kv": ValuePath relative to the model folder.
std::string ValueRelativePath(const BlockHash& hash);

// mkdir -p `path` (mode 0755). The error names the path and errno.
absl::Status MakeDirectories(const std::string& path);

// A value written and not yet published: an unnamed file, open, or a file under a temporary
// name. Dropped unpublished, it is removed (closed, or unlinked).
class TempFile {
 public:
  TempFile() = default;
  TempFile(TempFile&& other) noexcept;
  TempFile& operator=(TempFile&& other) noexcept;
  ~TempFile();

  bool unnamed() const { return fd_ >= 0; }
  // Removes the file now (closes an unnamed one, unlinks a named one); then it holds nothing.
  void Remove();

 private:
  friend absl::StatusOr<TempFile> WriteTemporary(const std::string& dir, const std::string& name,
                                                 std::span<const std::byte> bytes);
  friend absl::StatusOr<bool> PublishTemporary(TempFile& temp, const std::string& path);

  int fd_ = -1;       // an unnamed file (O_TMPFILE), open until published
  std::string path_;  // else a named temporary; empty once published or dropped
};

// Writes `bytes` to a new unnamed file in `dir` or, where the file system has none (or
// SetUnnamedTemporaries(false)), to a temporary name (".<name>.<pid>.<seq>.tmp"). On failure
// nothing is left behind and the error names errno (ENOSPC, EROFS, EACCES, ENOENT when `dir` is
// gone: the caller may recreate it).
absl::StatusOr<TempFile> WriteTemporary(const std::string& dir, const std::string& name,
                                        std::span<const std::byte> bytes);

// Publishes `temp` as `path` unless `path` exists: an unnamed file is linked to it (linkat(2)
// through /proc/self/fd), a named one renamed (renameat2 with RENAME_NOREPLACE; link + unlink on
// a file system without it). Readers see the whole file or none, and exactly one of several
// processes publishing the same name creates it. True when this call created `path`; false when a
// file was already there (same name, same content). Either way, and on failure (the error names
// errno), `temp` holds nothing afterwards.
absl::StatusOr<bool> PublishTemporary(TempFile& temp, const std::string& path);

// Whether WriteTemporary tries unnamed files (on by default; turned off for the process the
// first time a file system refuses them, or linking one fails for want of /proc). For tests.
void SetUnnamedTemporaries(bool enabled);

// Whether a read refreshes the file's modification time (its recency after a restart): never,
// always, or when it is older than kTouchGranularityNs (a file the caller knows nothing of; this
// costs an fstat(2)).
enum class ReadRecency { kKeep, kTouch, kTouchIfOld };

// The resolution of the recency a read leaves: the tier touches a file it touched less than this
// ago no more (a block read again and again dirties its inode once a second at most).
inline constexpr int64_t kTouchGranularityNs = 1'000'000'000;

// A buffer for file reads whose data starts on a page boundary, reused from read to read. The
// kernel copies a file into an aligned destination at full speed: into one 16 bytes off a 64-byte
// line (where malloc puts a large block) the copy ran 1.3-2.3x slower, 8 bytes off 5x slower, on
// the AMD EPYC (Zen 4) we measure on (docs/tiers.md).
class ReadBuffer {
 public:
  // At least `bytes` bytes (the contents are not kept when it grows); empty when out of memory.
  std::span<std::byte> Reserve(size_t bytes);

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte[], Free> data_;
  size_t capacity_ = 0;
};

// Reads the file `path` (relative to the open folder `dir_fd`, or any path with AT_FDCWD) into
// `buffer` and returns its bytes, without stat(2): one read(2) of one byte more than expected
// finds a longer file. Then sets the file's modification time to now as `recency` says (on the
// open descriptor; a failure to do so is ignored). NotFound when there is no file (a miss),
// DataLoss when it holds other than `expected_bytes` bytes (truncated, even while it is read, or
// foreign), ResourceExhausted when `buffer` cannot grow, another error for an I/O failure. The
// bytes stay valid until the buffer's next use.
absl::StatusOr<std::span<const std::byte>> ReadValueFile(int dir_fd, const std::string& path,
                                                         size_t expected_bytes, ReadBuffer* buffer,
                                                         ReadRecency recency = ReadRecency::kKeep);

// The modification time of the file at `path` (its last store, or a hit); nullopt when there is
// none (or it cannot be read).
std::optional<int64_t> FileMtimeNs(const std::string& path);

// Removes `path`; a missing file is fine (another process removed it first).
absl::Status RemoveFile(const std::string& path);

// A value file found by a scan.
struct ValueFileInfo {
  BlockHash hash;
  int64_t mtime_ns = 0;  // last store or hit
  int64_t bytes = 0;
};

// What ListValueFiles found besides the values.
struct ScanCounts {
  int64_t removed_temporaries = 0;  // temporaries older than the cut-off, removed
  int64_t other_files = 0;          // names that are not value files (left alone)
};

// The value files of shard folder `shard` (0-255) of `model_dir`, appended to `out` (a missing
// folder holds none); returns how many names it found (any size). Temporaries whose modification
// time is before `stale_before_ns` (a writer that crashed) are removed.
int64_t ListValueShard(const std::string& model_dir, int shard, int64_t stale_before_ns,
                       std::vector<ValueFileInfo>* out, ScanCounts* counts);

// How many value files shard folder `shard` of `model_dir` holds (names only: readdir, no stat
// of regular entries); 0 for a missing folder.
int64_t CountValueShard(const std::string& model_dir, int shard);

// The shard folder number of `hash` (0-255).
inline int ShardOf(const BlockHash& hash) { return static_cast<int>(hash.high >> 56); }

// Wall-clock nanoseconds (CLOCK_REALTIME, the clock of file times).
int64_t FileClockNowNs();

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_TIERS_DISK_DISK_FILES_H_
