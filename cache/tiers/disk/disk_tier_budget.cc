// Copyright 2026 The pagedkv Authors.
//
// DiskTier's byte budget shared by the processes of one folder (folder_usage.h, and "Budget" in
// pagedkv/tiers/disk_tier.h), in the writer thread: a value is published only while the usage
// file is locked and after evicting until it fits, so the folder's value files never exceed the
// budget of the process that published last. Each victim is the older, by file time, of this
// process's policy's next victim (files it wrote, found at its start scan or adopted on a lookup)
// and the oldest file of the folder it does not index (from a listing made when it has nothing of
// its own to evict, or at most once per capacity's worth of evictions; up to kMaxCandidates
// kept).
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
// Listings one store may make: another process may evict every listed file between a listing and
// the relock (the listed files are then gone and count for nothing), so a store lists again, a
// few times, before it gives up and drops its value.
constexpr int kMaxListingsPerStore = 3;

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
  if (!locked.ok()) disk.folder_files = -1;  // unknown until the usage file works again
  return locked.ok();
}

void DiskTier::Impl::UnlockUsage() {
  const int64_t files = usage.files();
  const absl::Status written = usage.Unlock();
  std::lock_guard lock(mu);
  disk.folder_files = written.ok() ? files : -1;
  if (!written.ok()) FaultLocked(&DiskTierStats::write_errors, written);
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

absl::StatusOr<bool> DiskTier::Impl::PublishWithinBudget(const Job& job, TempFile* temp) {
  const std::string path = ValuePath(model_dir, job.hash);
  if (!LockUsage()) return PublishTemporary(*temp, path);  // this process's own budget only
  Room room = MakeRoomLocked(/*may_list=*/true);
  for (int listings = 0; room != Room::kRoom && listings < kMaxListingsPerStore; ++listings) {
    UnlockUsage();  // list the folder without holding the others up
    RefillCandidates();
    if (!LockUsage()) return PublishTemporary(*temp, path);
    room = MakeRoomLocked(/*may_list=*/false);
  }
  bool live = false;
  {
    std::lock_guard lock(mu);
    auto it = entries.find(job.hash);
    live = it != entries.end() && it->second.pending == job.bytes;  // not evicted meanwhile
  }
  absl::StatusOr<bool> published = false;
  if (room != Room::kRoom) {
    published = absl::ResourceExhaustedError(
        absl::StrCat(model_dir,
                     " is at its byte budget and holds no file this process can "
                     "evict (all are being written); the value is dropped"));
  } else if (live) {
    published = PublishTemporary(*temp, path);
    if (published.ok() && *published) usage.Add(ShardOf(job.hash), 1);
  }
  // Inside the lock, as a publish is: while another process holds it, each writer has at most
  // one temporary (a named one left by a crash is removed by the next scan once old).
  if (room != Room::kRoom || !live) temp->Remove();
  UnlockUsage();
  return published;
}

DiskTier::Impl::Room DiskTier::Impl::MakeRoomLocked(bool may_list) {
  const int64_t capacity_files = options.capacity_bytes / file_bytes;
  while (usage.files() + 1 > capacity_files) {
    // Files this process already chose to evict go first, one per file needed: a removal beside
    // each create costs the file system less than a run of removals and then a run of creates
    // (ext4 passes over recently freed inodes when it allocates one).
    if (RunOneQueuedRemovalLocked()) continue;
    const std::optional<BlockHash> own = PeekOwnVictim();
    // A listing costs a pass over the folder: made when this process has nothing of its own to
    // evict, or at most once per capacity_files evictions (so its cost per eviction is bounded).
    if (candidates.empty() && may_list &&
        (!own.has_value() || evictions_since_listing >= capacity_files)) {
      return Room::kNeedListing;
    }
    bool take_own = false;
    const std::optional<BlockHash> victim = ChooseVictim(own, &take_own);
    if (!victim.has_value()) return Room::kNoVictim;
    ++evictions_since_listing;
    // A listed file found gone was most likely evicted by its owner (who subtracted it): no
    // recount for it (the next listing recounts every shard anyway).
    const absl::Status removed = UnlinkCounted(*victim, /*recount_if_gone=*/take_own);
    std::lock_guard lock(mu);
    if (auto it = removing.find(*victim); it != removing.end() && --it->second == 0) {
      removing.erase(it);
    }
    if (!removed.ok()) FaultLocked(&DiskTierStats::write_errors, removed);
  }
  return Room::kRoom;
}

std::optional<BlockHash> DiskTier::Impl::ChooseVictim(const std::optional<BlockHash>& own,
                                                      bool* take_own) {
  // The older of this process's next victim and the oldest listed file of the others, by
  // modification time (a store, or a hit at most a second ago): an approximate LRU over the
  // folder, so a process never keeps evicting its own newer files while older ones of an idle
  // process stay.
  while (!candidates.empty()) {
    const BlockHash listed = candidates.front();
    const std::optional<int64_t> listed_time = FileMtimeNs(ValuePath(model_dir, listed));
    bool adopted = false;
    {
      std::lock_guard lock(mu);
      adopted = entries.contains(listed);
    }
    if (!listed_time.has_value() || adopted) {  // gone, or indexed here since: own now
      candidates.pop_front();
      continue;
    }
    const std::optional<int64_t> own_time =
        own.has_value() ? FileMtimeNs(ValuePath(model_dir, *own)) : std::nullopt;
    if (own.has_value() && (!own_time.has_value() || *own_time <= *listed_time)) break;
    candidates.pop_front();
    std::lock_guard lock(mu);
    ++stats.evictions;
    ++removing[listed];
    return listed;
  }
  *take_own = true;
  return TakeOwnVictim();
}

bool DiskTier::Impl::RunOneQueuedRemovalLocked() {
  Removal next;
  {
    std::lock_guard lock(mu);
    if (removals.empty()) return false;
    next = removals.front();
    removals.pop_front();
  }
  const absl::Status removed = UnlinkCounted(next.hash, next.written);
  std::lock_guard lock(mu);
  if (auto it = removing.find(next.hash); it != removing.end() && --it->second == 0) {
    removing.erase(it);
  }
  if (!removed.ok()) FaultLocked(&DiskTierStats::write_errors, removed);
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

std::optional<BlockHash> DiskTier::Impl::PeekOwnVictim() {
  std::lock_guard lock(mu);
  return policy->Victim([this](const BlockHash& h) { return IsWrittenLocked(h); });
}

std::optional<BlockHash> DiskTier::Impl::TakeOwnVictim() {
  std::lock_guard lock(mu);
  // Only written files free room; queued values (the one being published among them) stay.
  const std::optional<BlockHash> victim =
      policy->EvictOne([this](const BlockHash& h) { return IsWrittenLocked(h); });
  if (!victim.has_value()) return std::nullopt;
  ++stats.evictions;
  DropLocked(*victim, /*remove_file=*/false, nullptr);
  ++removing[*victim];  // a lookup must not adopt it before the unlink
  return victim;
}

bool DiskTier::Impl::IsWrittenLocked(const BlockHash& hash) const {
  auto it = entries.find(hash);
  return it != entries.end() && it->second.pending == nullptr;
}

void DiskTier::Impl::RefillCandidates() {
  candidates.clear();
  evictions_since_listing = 0;
  absl::StatusOr<std::vector<ValueFileInfo>> files = ListFolderCounted();
  if (!files.ok()) return;  // the folder is gone: nothing to evict, and it holds nothing
  {
    std::lock_guard lock(mu);
    std::erase_if(*files, [this](const ValueFileInfo& f) { return entries.contains(f.hash); });
  }
  const auto older = [](const ValueFileInfo& a, const ValueFileInfo& b) {
    return a.mtime_ns < b.mtime_ns;
  };
  const size_t kept = std::min(files->size(), kMaxCandidates);
  std::partial_sort(files->begin(), files->begin() + static_cast<std::ptrdiff_t>(kept),
                    files->end(), older);
  for (size_t i = 0; i < kept; ++i) candidates.push_back((*files)[i].hash);
}

}  // namespace pagedkv
