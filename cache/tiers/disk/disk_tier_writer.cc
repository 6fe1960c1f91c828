// Copyright 2026 The pagedkv Authors.
//
// DiskTier's writer thread and the index updates both threads share (disk_tier_impl.h).
#include <malloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cache/tiers/disk/disk_files.h"
#include "cache/tiers/disk/disk_tier_impl.h"

namespace pagedkv {
namespace {

constexpr int64_t kStaleTemporaryNs = int64_t{600} * 1'000'000'000;  // 10 minutes
constexpr size_t kScanChunk = 4096;  // files indexed per hold of the lock

}  // namespace

std::shared_ptr<std::string> DiskTier::Impl::AcquireBuffer() {
  std::unique_ptr<std::string> buffer;
  {
    std::lock_guard lock(spare_mu);
    if (!spare.empty()) {
      buffer = std::move(spare.back());
      spare.pop_back();
      spare_bytes -= static_cast<int64_t>(buffer->capacity());
    }
  }
  if (buffer == nullptr) buffer = std::make_unique<std::string>();
  return std::shared_ptr<std::string>(buffer.release(), [this](std::string* released) {
    std::unique_ptr<std::string> owned(released);
    std::lock_guard lock(spare_mu);
    const int64_t bytes = static_cast<int64_t>(owned->capacity());
    if (spare_bytes + bytes > options.max_pending_bytes) return;
    spare_bytes += bytes;
    spare.push_back(std::move(owned));
  });
}

bool DiskTier::Impl::HoldsSpares() {
  std::lock_guard lock(spare_mu);
  return !spare.empty();
}

void DiskTier::Impl::DropSpares() {
  std::vector<std::unique_ptr<std::string>> dropped;
  {
    std::lock_guard lock(spare_mu);
    dropped.swap(spare);
    spare_bytes = 0;
  }
  dropped.clear();
#ifdef __GLIBC__
  // glibc keeps freed multi-MiB chunks in its heaps once its mmap threshold has risen to their
  // size; hand those pages back to the system too.
  malloc_trim(0);
#endif
}

void DiskTier::Impl::Report(std::string_view line) const {
  if (options.report) {
    options.report(line);
  } else {
    std::cerr << line << "\n";
  }
}

void DiskTier::Impl::FaultLocked(int64_t DiskTierStats::*kind, const absl::Status& why) {
  ++(disk.*kind);
  ++stats.faults;
  if (in_incident) return;
  in_incident = true;
  ++stats.incidents;
  Report(absl::StrCat("pagedkv: disk tier ", model_dir, ": ", why.message(),
                      " (treated as a miss; reported once until it recovers)"));
}

void DiskTier::Impl::SuccessLocked() {
  if (!in_incident) return;
  in_incident = false;
  Report(absl::StrCat("pagedkv: disk tier ", model_dir, " works again"));
}

void DiskTier::Impl::DropLocked(const BlockHash& hash, bool remove_file,
                                std::vector<BlockHash>* removed) {
  auto it = entries.find(hash);
  if (it == entries.end()) return;
  policy->Erase(hash);
  if (it->second.pending != nullptr) {
    disk.pending_bytes -= static_cast<int64_t>(it->second.pending->size());
    --disk.pending_blocks;  // its queued write finds the entry gone and writes nothing
  }
  // A pending value's write may be under way: it checks the entry before it publishes, and a
  // file it published before this drop goes with the removal (run after it).
  if (remove_file) QueueRemoveLocked(hash, /*written=*/it->second.pending == nullptr);
  if (it->second.announced) (removed != nullptr ? removed : &writer_removed)->push_back(hash);
  entries.erase(it);
}

void DiskTier::Impl::QueueRemoveLocked(const BlockHash& hash, bool written) {
  ++removing[hash];
  removals.push_back({.hash = hash, .written = written});
  work_cv.notify_one();
}

void DiskTier::Impl::InsertLocked(const BlockHash& hash, Entry entry,
                                  std::vector<BlockHash>* removed) {
  for (const BlockHash& victim : policy->Insert(hash)) {
    ++stats.evictions;
    DropLocked(victim, /*remove_file=*/true, removed);
  }
  entries.emplace(hash, std::move(entry));
}

void DiskTier::Impl::WriterLoop() {
  std::unique_lock lock(mu);
  const auto has_work = [this] { return stop || !jobs.empty() || !removals.empty(); };
  while (true) {
    if (HoldsSpares() && !work_cv.wait_for(lock, options.spare_buffer_idle, has_work)) {
      lock.unlock();  // idle for spare_buffer_idle: no lookup waits on the frees
      DropSpares();
      lock.lock();
      continue;
    }
    work_cv.wait(lock, has_work);
    if (jobs.empty() && removals.empty()) break;  // stop, and nothing left to do
    // Removals wait for a store that needs the room (MakeRoomLocked), for a write of their own
    // hash (which must not find the evicted file still there), or for an empty job queue; then
    // all run in one locked section of the usage file. Running them early is always safe: a
    // write of the same hash queued before its removal belongs to an evicted entry.
    std::optional<Job> job;
    const bool removals_first =
        !removals.empty() && (jobs.empty() || (jobs.front().kind == Job::Kind::kWrite &&
                                               removing.contains(jobs.front().hash)));
    if (!removals_first) {
      job = std::move(jobs.front());
      jobs.pop_front();
    }
    busy = true;
    lock.unlock();
    if (!job.has_value()) {
      RunRemovals();
    } else if (job->kind == Job::Kind::kScan) {
      RunScan();
    } else if (job->kind == Job::Kind::kWrite) {
      RunWrite(*job);
    } else {
      RunRecount(*job);
    }
    lock.lock();
    busy = false;
    if (jobs.empty() && removals.empty()) idle_cv.notify_all();
  }
}

void DiskTier::Impl::RunWrite(const Job& job) {
  const auto live = [&] {
    auto it = entries.find(job.hash);
    return it != entries.end() && it->second.pending == job.bytes;
  };
  {
    std::lock_guard lock(mu);
    if (!live()) return;  // evicted before its turn
  }
  const std::string shard = ShardDir(model_dir, job.hash);
  const auto bytes = std::as_bytes(std::span<const char>(*job.bytes));
  absl::StatusOr<TempFile> temp = WriteTemporary(shard, ValueFileName(job.hash), bytes);
  if (absl::IsNotFound(temp.status()) && MakeDirectories(shard).ok()) {  // the folder was deleted
    temp = WriteTemporary(shard, ValueFileName(job.hash), bytes);
  }
  absl::Status written = temp.status();
  if (temp.ok()) written = PublishWithinBudget(job, &*temp).status();
  std::lock_guard lock(mu);
  if (!live()) return;  // evicted while it was written: the removal queued then takes the file
  Entry& entry = entries.at(job.hash);
  disk.pending_bytes -= static_cast<int64_t>(job.bytes->size());
  --disk.pending_blocks;
  if (written.ok()) {  // published, or the same value was there already
    entry.pending = nullptr;
    entry.touched_ns = FileClockNowNs();
    ++stats.stored_blocks;
    stats.stored_bytes += static_cast<int64_t>(job.bytes->size());
    SuccessLocked();
    return;
  }
  entry.pending = nullptr;  // accounted above; DropLocked must not count it again
  DropLocked(job.hash, /*remove_file=*/false, nullptr);
  FaultLocked(&DiskTierStats::write_errors, written);
}

void DiskTier::Impl::RunRemovals() {
  const bool locked = LockUsage();
  RunQueuedRemovalsLocked();
  if (locked) UnlockUsage();
}

void DiskTier::Impl::RunRecount(const Job& job) {
  if (!LockUsage()) return;
  usage.Recount(ShardOf(job.hash));
  UnlockUsage();
}

void DiskTier::Impl::RunScan() {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<ValueFileInfo>> files = ListFolderCounted();
  if (files.ok()) {
    std::sort(files->begin(), files->end(), [](const ValueFileInfo& a, const ValueFileInfo& b) {
      return a.mtime_ns < b.mtime_ns;
    });
    IndexScanned(*files);
  }
  std::lock_guard lock(mu);
  if (!files.ok()) FaultLocked(&DiskTierStats::read_errors, files.status());
  disk.scan_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - start)
                     .count();
  disk.scan_done = true;
}

absl::StatusOr<std::vector<ValueFileInfo>> DiskTier::Impl::ListFolderCounted() {
  struct stat st;
  if (::stat(model_dir.c_str(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot scan ", model_dir));
  }
  const int64_t stale_before = FileClockNowNs() - kStaleTemporaryNs;
  std::vector<ValueFileInfo> files;
  ScanCounts counts;
  for (int shard = 0; shard < FolderUsage::kShards; ++shard) {
    // Under the lock, so the count is exact: no process renames or unlinks in it meanwhile.
    const bool locked = LockUsage();
    const int64_t found = ListValueShard(model_dir, shard, stale_before, &files, &counts);
    if (locked) usage.SetCount(shard, found);
    if (locked) UnlockUsage();
  }
  return files;
}

void DiskTier::Impl::IndexScanned(std::vector<ValueFileInfo>& files) {
  for (size_t begin = 0; begin < files.size(); begin += kScanChunk) {
    std::vector<BlockHash> wrong_size;
    {
      std::lock_guard lock(mu);
      for (size_t i = begin; i < std::min(files.size(), begin + kScanChunk); ++i) {
        const ValueFileInfo& f = files[i];
        if (f.bytes != file_bytes) {
          wrong_size.push_back(f.hash);
          FaultLocked(&DiskTierStats::corrupt_values,
                      absl::DataLossError(absl::StrCat(ValueFileName(f.hash), " holds ", f.bytes,
                                                       " bytes, expected ", file_bytes)));
          continue;
        }
        // Stored or adopted since the start, or evicted since (its removal is queued).
        if (entries.contains(f.hash) || removing.contains(f.hash)) continue;
        InsertLocked(f.hash, Entry{.touched_ns = f.mtime_ns}, nullptr);
        ++disk.scanned_files;
      }
    }
    if (wrong_size.empty()) continue;
    const bool locked = LockUsage();
    for (const BlockHash& h : wrong_size) {
      UnlinkCounted(h).IgnoreError();  // the file was counted as corrupt above
    }
    if (locked) UnlockUsage();
  }
}

}  // namespace pagedkv
