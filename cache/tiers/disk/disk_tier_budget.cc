// Copyright 2026 The pagedkv Authors.
//
// DiskTier's byte budget shared by the processes of one folder (folder_usage.h, and "Budget" in
// pagedkv/tiers/disk_tier.h), in the writer thread: a value is published only while the usage
// file is locked and after evicting until it fits, so the folder's value files never exceed the
// budget of the process that published last. Victims come from this process's policy first (the
// files it wrote, found at its start scan or adopted on a lookup), then from the oldest files of
// the folder it does not index (a listing, made when it has none of its own left, amortised over
// up to kMaxCandidates evictions).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cache/tiers/disk/disk_files.h"
#include "cache/tiers/disk/disk_tier_impl.h"

namespace pagedkv {
namespace {

constexpr size_t kMaxCandidates = 65536;  // files of other processes kept from one listing

}  // namespace

bool DiskTier::Impl::LockUsage() {
  bool rebuilt = false;
  const absl::Status locked = usage.Lock(&rebuilt);
  if (locked.ok() && !rebuilt && !usage_broken) return true;
  if (absl::IsNotFound(locked)) return false;  // the folder is gone: it holds nothing to count
  std::lock_guard lock(mu);
  if (rebuilt) {
    FaultLocked(&DiskTierStats::corrupt_values,
                absl::DataLossError(absl::StrCat(
                    usage.path(), " was damaged; rebuilt by counting the folder's files")));
  }
  if (!locked.ok() && !usage_broken) {
    FaultLocked(&DiskTierStats::write_errors,
                absl::Status(locked.code(), absl::StrCat(locked.message(),
                                                         "; until it works this process keeps "
                                                         "to its own budget only")));
  }
  usage_broken = !locked.ok();
  return locked.ok();
}

void DiskTier::Impl::UnlockUsage() {
  const absl::Status written = usage.Unlock();
  if (written.ok()) return;
  std::lock_guard lock(mu);
  FaultLocked(&DiskTierStats::write_errors, written);
}

absl::Status DiskTier::Impl::UnlinkCounted(const BlockHash& hash, bool recount_if_gone) {
  const std::string path = ValuePath(model_dir, hash);
  if (::unlink(path.c_str()) == 0) {
    if (usage.locked()) usage.Add(ShardOf(hash), -1);
    return absl::OkStatus();
  }
  const int error = errno;
  if (error != ENOENT) return absl::ErrnoToStatus(error, absl::StrCat("cannot remove ", path));
  // Gone already: another process evicted it (and subtracted it), or it was removed by hand.
  if (usage.locked() && recount_if_gone) usage.Recount(ShardOf(hash));
  return absl::OkStatus();
}

absl::StatusOr<bool> DiskTier::Impl::PublishWithinBudget(const Job& job, const std::string& temp) {
  const std::string path = ValuePath(model_dir, job.hash);
  if (!LockUsage()) return PublishTemporary(temp, path);  // this process's own budget only
  bool room = MakeRoomLocked(job.hash);
  if (!room) {  // nothing of this process's left to evict: learn the folder's other files
    UnlockUsage();
    RefillCandidates();
    if (!LockUsage()) return PublishTemporary(temp, path);
    room = MakeRoomLocked(job.hash);
  }
  bool live = false;
  {
    std::lock_guard lock(mu);
    auto it = entries.find(job.hash);
    live = it != entries.end() && it->second.pending == job.bytes;  // not evicted meanwhile
  }
  absl::StatusOr<bool> published = false;
  if (!room) {
    published = absl::ResourceExhaustedError(
        absl::StrCat(model_dir,
                     " is at its byte budget and holds no file this process can "
                     "evict (all are being written); the value is dropped"));
  } else if (live) {
    published = PublishTemporary(temp, path);
    if (published.ok() && *published) usage.Add(ShardOf(job.hash), 1);
  }
  // Inside the lock, as a publish is: while another process holds it, each writer has at most
  // one temporary (a leftover is removed by the next scan once old).
  if (!room || !live) RemoveFile(temp).IgnoreError();
  UnlockUsage();
  return published;
}

bool DiskTier::Impl::MakeRoomLocked(const BlockHash& publishing) {
  RunQueuedRemovalsLocked();  // files this process already chose to evict go first
  const int64_t capacity_files = options.capacity_bytes / file_bytes;
  while (usage.files() + 1 > capacity_files) {
    std::optional<BlockHash> victim = NextLocalVictim(publishing);
    if (!victim.has_value()) victim = NextCandidate();
    if (!victim.has_value()) return false;
    const absl::Status removed = UnlinkCounted(*victim);
    std::lock_guard lock(mu);
    if (auto it = removing.find(*victim); it != removing.end() && --it->second == 0) {
      removing.erase(it);
    }
    if (!removed.ok()) FaultLocked(&DiskTierStats::write_errors, removed);
  }
  return true;
}

void DiskTier::Impl::RunQueuedRemovalsLocked() {
  std::deque<Removal> queued;
  {
    std::lock_guard lock(mu);
    queued.swap(removals);
  }
  std::vector<absl::Status> results;
  for (const Removal& r : queued) results.push_back(UnlinkCounted(r.hash, r.written));
  std::lock_guard lock(mu);
  for (size_t i = 0; i < queued.size(); ++i) {
    if (auto it = removing.find(queued[i].hash); it != removing.end() && --it->second == 0) {
      removing.erase(it);
    }
    if (!results[i].ok()) FaultLocked(&DiskTierStats::write_errors, results[i]);
  }
}

std::optional<BlockHash> DiskTier::Impl::NextLocalVictim(const BlockHash& publishing) {
  std::lock_guard lock(mu);
  bool skipped = false;  // `publishing` came up: it goes back after the others
  std::optional<BlockHash> found;
  while (std::optional<BlockHash> victim = policy->EvictOne()) {
    if (*victim == publishing) {
      skipped = true;
      continue;
    }
    auto it = entries.find(*victim);
    const bool written = it != entries.end() && it->second.pending == nullptr;
    ++stats.evictions;
    DropLocked(*victim, /*remove_file=*/false, nullptr);  // a queued value: its write is skipped
    if (!written) continue;
    ++removing[*victim];  // a lookup must not adopt it before the unlink
    found = victim;
    break;
  }
  // Back as the most recent entry (the policy holds one fewer now, so nothing is dropped).
  if (skipped) policy->Insert(publishing);
  return found;
}

std::optional<BlockHash> DiskTier::Impl::NextCandidate() {
  std::lock_guard lock(mu);
  while (!candidates.empty()) {
    const BlockHash h = candidates.front();
    candidates.pop_front();
    auto it = entries.find(h);
    if (it != entries.end() && it->second.pending != nullptr) continue;  // ours, not written yet
    if (it != entries.end()) DropLocked(h, /*remove_file=*/false, nullptr);  // adopted since
    ++stats.evictions;
    ++removing[h];
    return h;
  }
  return std::nullopt;
}

void DiskTier::Impl::RefillCandidates() {
  candidates.clear();
  absl::StatusOr<std::vector<ValueFileInfo>> files = ListFolderCounted();
  if (!files.ok()) return;  // the folder is gone: nothing to evict, and it holds nothing
  std::sort(files->begin(), files->end(),
            [](const ValueFileInfo& a, const ValueFileInfo& b) { return a.mtime_ns < b.mtime_ns; });
  std::lock_guard lock(mu);
  for (const ValueFileInfo& f : *files) {
    if (candidates.size() >= kMaxCandidates) break;
    if (!entries.contains(f.hash)) candidates.push_back(f.hash);
  }
}

}  // namespace pagedkv
