// Copyright 2026 The pagedkv Authors.
//
// FolderUsage: the byte budget every process on one disk-tier folder shares
// (pagedkv/tiers/disk_tier.h). "<model>/usage" is a small file (2,112 bytes) that all of them
// update under flock(2): a header (magic, version, shard count, file size, XXH3-64 checksum) and,
// for each of the 256 shard folders, how many value files it holds. All value files of one model
// folder have the same size, so files() * file_bytes is the folder's bytes.
// Protocol (DiskTier's writer thread): a name appears (rename) or disappears (unlink) only while
// the file is locked, and the same locked section adds or subtracts its count; only one process's
// unlink of a name succeeds, so only one subtracts. What escapes the protocol (a process killed
// between its rename and its count, files removed by hand) drifts a shard's count until the next
// Recount of that shard: every start scan recounts every shard, and a tier that finds a file
// gone recounts its shard. A process killed while holding the lock loses it with its descriptor.
// Faults: a file of the wrong size, magic, version or checksum is rebuilt by counting every shard
// under the lock (Lock reports it); a file that cannot be opened, locked or written (a read-only
// folder, a folder deleted meanwhile) is an error the caller counts, going on without it. A
// deleted file (its folder removed) is noticed at the next Lock and made again.
// Thread-safety: one thread per object (the tier's writer); processes and objects exclude each
// other through the lock.
//
// Example:
//   FolderUsage usage(model_dir, file_bytes);
//   bool rebuilt = false;
//   if (usage.Lock(&rebuilt).ok()) {
//     if (usage.files() < capacity_files && PublishTemporary(temp, path).value_or(false)) {
//       usage.Add(ShardOf(hash), 1);
//     }
//     absl::Status written = usage.Unlock();
//   }
#ifndef PAGEDKV_CACHE_TIERS_DISK_FOLDER_USAGE_H_
#define PAGEDKV_CACHE_TIERS_DISK_FOLDER_USAGE_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/status.h"

struct stat;

namespace pagedkv {

class FolderUsage {
 public:
  static constexpr int kShards = 256;

  // Opens nothing yet (the first Lock does).
  FolderUsage(std::string model_dir, int64_t file_bytes);
  ~FolderUsage();
  FolderUsage(const FolderUsage&) = delete;
  FolderUsage& operator=(const FolderUsage&) = delete;

  // "<model_dir>/usage".
  const std::string& path() const { return path_; }

  // Locks the file, opening it first (again when its folder was deleted), and reads its table. A
  // new file, or one that fails its checks, is rebuilt by counting every shard folder under the
  // lock; `*rebuilt_corrupt` says whether the file was damaged (not just new). An error when the
  // file cannot be opened, locked or read (NotFound: the folder is gone); nothing is held then.
  // REQUIRES: not locked.
  absl::Status Lock(bool* rebuilt_corrupt);
  // Writes the table when it changed, then unlocks. The error of a failed write (the lock is
  // released anyway; the next Lock finds the old table, or a damaged one, and goes on).
  // REQUIRES: locked.
  absl::Status Unlock();
  bool locked() const { return locked_; }

  // REQUIRES: locked. Value files in the folder.
  int64_t files() const;
  // REQUIRES: locked. A file appeared (+1) or went (-1) in `shard`.
  void Add(int shard, int64_t delta);
  // REQUIRES: locked. Sets `shard`'s count to what its folder holds (readdir), or to `files`.
  void Recount(int shard);
  void SetCount(int shard, int64_t files);

 private:
  // Opens (creating) the file, locks it and stats it into `*st`; a descriptor whose file lost
  // its name (the folder was deleted) is closed and the file opened again. Nothing is held on
  // error.
  absl::Status OpenLocked(struct stat* st);
  // Reads the table of a file of `st`; `*fresh` when the file is new (empty); DataLoss when it
  // fails a check.
  absl::Status Read(const struct stat& st, bool* fresh);
  void RecountAll();
  uint64_t Checksum() const;

  const std::string model_dir_;
  const std::string path_;
  const int64_t file_bytes_;
  int fd_ = -1;
  bool locked_ = false;
  bool dirty_ = false;
  bool oversized_ = false;  // the file is longer than a table (damaged): Unlock cuts it
  std::array<int64_t, kShards> counts_ = {};
};

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_TIERS_DISK_FOLDER_USAGE_H_
