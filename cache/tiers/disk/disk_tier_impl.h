// Copyright 2026 The pagedkv Authors.
//
// DiskTier's state (pagedkv/tiers/disk_tier.h), shared by the engine thread (disk_tier.cc) and
// the writer thread (disk_tier_writer.cc) under one mutex.
// Invariants (under mu): `entries` and the policy's resident set hold the same hashes; an entry
// with `pending` set has a kWrite job queued (or running) with the same bytes, and pending_bytes /
// pending_blocks sum those entries; an entry without `pending` has its file written (or found by
// a scan or a lookup), unless another process removed it since (a lookup then drops it).
// A job's work on files runs without the lock; it checks the entry again before and after.
// The folder's shared budget (folder_usage.h) is the writer thread's alone: it publishes a value
// and removes files only while it holds the usage file's lock (never while waiting for it with
// `mu` held: the lock order is usage, then mu), and evicts within that hold until the folder
// has room (disk_tier_budget.cc).
#ifndef PAGEDKV_CACHE_TIERS_DISK_DISK_TIER_IMPL_H_
#define PAGEDKV_CACHE_TIERS_DISK_DISK_TIER_IMPL_H_

#include <unistd.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/policies/tier_policies.h"
#include "cache/tiers/disk/disk_files.h"
#include "cache/tiers/disk/folder_usage.h"
#include "cache/tiers/disk/read_helpers.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/tiers/disk_tier.h"
#include "pagedkv/tiers/kv_tier.h"
#include "pagedkv/tiers/tier_policy.h"

namespace pagedkv {

struct DiskTier::Impl {
  struct Entry {
    std::shared_ptr<const std::string> pending;  // the encoded value until its file is written
    bool announced = false;                      // a kBlockStored event went out for it
    // When this process last set its file's modification time (a write or a touching hit), or
    // the time the start scan found: a hit touches the file again only a second later.
    int64_t touched_ns = 0;
  };
  struct Job {
    enum class Kind { kScan, kWrite, kRecount } kind;
    BlockHash hash = {};  // kRecount: a hash of the shard to count again
    std::shared_ptr<const std::string> bytes = nullptr;  // kWrite
  };

  Impl(DiskTierOptions o, std::string dir, int64_t bytes, std::unique_ptr<EvictingTierPolicy> p)
      : options(std::move(o)),
        model_dir(std::move(dir)),
        file_bytes(bytes),
        usage(model_dir, file_bytes),
        policy(std::move(p)) {}
  ~Impl() {
    if (model_fd >= 0) ::close(model_fd);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // Where a lookup found a value.
  enum class ValueSource { kQueue, kFile, kSave };
  // Where Locate found a block's value: what ReadLocated reads and Settle settles.
  struct Located {
    ValueSource source = ValueSource::kFile;
    bool indexed = false;  // in `entries` when located
    std::string path;      // kFile: relative to the model folder; kSave: the full path
    ReadRecency recency = ReadRecency::kKeep;  // what a kFile read does to the file's time
    std::shared_ptr<const std::string> held;   // kQueue: the queued encoded value
  };
  // Engine thread: says where `block`'s value is: in the writer's queue while its file is not
  // written yet, else in a named save that pins it, else in its file. nullopt for a miss known
  // without reading (evicted, its file about to go).
  std::optional<Located> Locate(const TierBlock& block);
  // Any thread (it changes no tier state, only the file's time as at.recency says): reads and
  // checks `block`'s value into `buffer` (unused for kQueue); its payload (valid until `buffer`
  // or at.held changes), or NotFound (no file), DataLoss (a bad one) or the I/O error.
  absl::StatusOr<std::span<const std::byte>> ReadLocated(const TierBlock& block, const Located& at,
                                                         ReadBuffer* buffer) const;
  // Engine thread, while no ReadLocated runs: the value, or nullopt for a miss. A file that was
  // not found is read once more after reopening model_fd when the model folder was removed and
  // made again; a failed read is then counted and the index updated (a vanished file dropped, a
  // bad one removed, a save's bad file unpinned).
  std::optional<std::span<const std::byte>> Settle(const TierBlock& block, const Located& at,
                                                   absl::StatusOr<std::span<const std::byte>> read,
                                                   ReadBuffer* buffer,
                                                   std::vector<BlockHash>* removed);
  // Engine thread: locates the leading run of `blocks` (up to the first Locate miss) into
  // *located and reads them at once (value i into read_buffers[i], on the engine thread and the
  // readers' helpers) into *reads; the located run. REQUIRES: blocks.size() <= read_buffers.size().
  std::span<const Located> ReadBatch(
      std::span<const TierBlock> blocks, std::vector<Located>* located,
      std::vector<absl::StatusOr<std::span<const std::byte>>>* reads);
  // Engine thread: counts a value LoadPrefix's sink took (from `source`, `bytes` long): a hit, the
  // policy's, and the adoption of another process's file; adds it to *announced when `announce`
  // and no kBlockStored event went out for it yet.
  void CountHit(const TierBlock& block, ValueSource source, int64_t bytes, bool announce,
                std::vector<BlockHash>* removed, std::vector<const TierBlock*>* announced);
  // Engine thread: after a file was not found, reopens model_fd when the model folder it names
  // was removed (or was never opened); whether the read is worth trying again.
  bool ReopenModelFolder();

  // Writer thread: runs jobs until `stop` and no job is left.
  void WriterLoop();
  void RunWrite(const Job& job);
  // Runs every queued removal, in one locked section of the usage file.
  void RunRemovals();
  void RunRecount(const Job& job);
  void RunScan();

  // The shared budget (disk_tier_budget.cc), writer thread only.
  // Publishes `temp` as `job`'s file once the folder has room for it under the budget; false
  // when the file was there already or the entry was dropped meanwhile. `temp` holds nothing
  // afterwards.
  absl::StatusOr<bool> PublishWithinBudget(const Job& job, TempFile* temp);
  enum class Room { kRoom, kNeedListing, kNoVictim };
  // REQUIRES: usage locked. Runs the queued removals, then evicts until one more file fits: each
  // victim is the older (by file time) of this process's policy's next victim with a written
  // file and the oldest file of the others from the last listing. kNeedListing (only when
  // `may_list`) asks the caller to list the folder without the lock first; kNoVictim when
  // nothing is left to evict. Queued values (the one being published among them) stay.
  Room MakeRoomLocked(bool may_list);
  // REQUIRES: usage locked (or unusable). Runs every queued removal now.
  void RunQueuedRemovalsLocked();
  // REQUIRES: usage locked. Runs the oldest queued removal; false when none is queued.
  bool RunOneQueuedRemovalLocked();
  // The policy's next victim among the entries with a written file, left in place.
  std::optional<BlockHash> PeekOwnVictim();
  // Drops that victim from the index (its file is the caller's to unlink).
  std::optional<BlockHash> TakeOwnVictim();
  // MakeRoomLocked's choice between `own` (PeekOwnVictim) and the oldest listed file; sets
  // `*take_own` when it took its own victim (TakeOwnVictim).
  std::optional<BlockHash> ChooseVictim(const std::optional<BlockHash>& own, bool* take_own);
  // REQUIRES: mu held. Whether `hash` is indexed with its file written.
  bool IsWrittenLocked(const BlockHash& hash) const;
  // Lists the folder (recounting each shard) and keeps its oldest files this process does not
  // index as eviction candidates.
  void RefillCandidates();
  // REQUIRES: usage locked (or unusable). Unlinks `hash`'s file and subtracts it; a file found
  // gone makes its shard be counted again. The error of a failed unlink (not counted here).
  // `recount_if_gone` false: the file may never have been written (a queued value evicted).
  absl::Status UnlinkCounted(const BlockHash& hash, bool recount_if_gone = true);
  // Locks the usage file: false (counted once per incident) when it cannot be used.
  bool LockUsage();
  void UnlockUsage();
  // The value files of every shard, each shard listed and recounted under the usage lock.
  absl::StatusOr<std::vector<ValueFileInfo>> ListFolderCounted();
  // Indexes the named saves under names/ (at Create, before any lookup).
  void ScanPinned();
  // Indexes the links of save `name` (one another process made since this tier started).
  void IndexSave(const std::string& name);
  // Pin's work: links the leading run of `chain` the tier holds into folder `dir` (an evicted
  // block from an earlier save that holds it); returns the hashes linked.
  absl::StatusOr<std::vector<BlockHash>> LinkChain(const std::string& dir,
                                                   std::span<const BlockHash> chain);
  // "<names>/<name>/<hash>.kv": a named save's file of `hash`.
  std::string SavePath(const std::string& name, const BlockHash& hash) const;
  // "<model_dir>/names".
  std::string NamesDir() const { return model_dir + "/names"; }
  // Indexes scanned files (oldest first), a chunk at a time under the lock.
  void IndexScanned(std::vector<ValueFileInfo>& files);

  // REQUIRES: mu held. Queues the removal of `hash`'s file.
  // `written`: its file was written (false for a value whose write may not have run).
  void QueueRemoveLocked(const BlockHash& hash, bool written);
  // REQUIRES: mu held. Drops `hash` from the index and the policy (a victim or a bad file): a
  // written file is queued for removal when `remove_file`; an announced entry is added to
  // `*removed` (or writer_removed when null) for its kBlockRemoved event.
  void DropLocked(const BlockHash& hash, bool remove_file, std::vector<BlockHash>* removed);
  // REQUIRES: mu held. Indexes `hash` (a new store, an adopted or scanned file) and drops the
  // policy's victims.
  void InsertLocked(const BlockHash& hash, Entry entry, std::vector<BlockHash>* removed);
  // REQUIRES: mu held. Counts a fault of `kind` and reports the first of a run.
  void FaultLocked(int64_t DiskTierStats::*kind, const absl::Status& why);
  // REQUIRES: mu held. Ends a run of faults (reports the recovery).
  void SuccessLocked();
  void Report(std::string_view line) const;

  const DiskTierOptions options;
  const std::string model_dir;
  const int64_t file_bytes;
  // The writer thread's own (no lock): the shared budget and the oldest files of other
  // processes, evicted when this process's own are gone.
  FolderUsage usage;
  std::deque<BlockHash> candidates;
  int64_t evictions_since_listing = 0;
  bool usage_broken = false;  // the last LockUsage failed (one fault per run of failures)

  // Encoded-value buffers for reuse (a fresh multi-MiB allocation page-faults on every store and
  // is unmapped after its write): AcquireBuffer hands one out as a shared_ptr whose deleter gives
  // it back, keeping spares while they hold at most max_pending_bytes. A new one is made only
  // when no spare is left, so spares and queued values together stay near what the queue may
  // hold anyway (max_pending_bytes; a value dropped from the index stays in its job until the
  // writer reaches it). Declared before everything that holds buffers (destroyed after them); its
  // own lock, since a buffer may be released with `mu` held. The writer frees the spares once it
  // has had nothing to do for options.spare_buffer_idle (DropSpares), so an idle server does not
  // keep a burst's buffers resident.
  std::shared_ptr<std::string> AcquireBuffer();
  bool HoldsSpares();
  void DropSpares();
  std::mutex spare_mu;
  std::vector<std::unique_ptr<std::string>> spare;
  int64_t spare_bytes = 0;  // the spares' capacity

  mutable std::mutex mu;
  std::condition_variable work_cv;  // a job was queued, or stop
  std::condition_variable idle_cv;  // the queues ran empty
  std::unique_ptr<EvictingTierPolicy> policy;
  absl::flat_hash_map<BlockHash, Entry> entries;
  std::deque<Job> jobs;
  struct Removal {
    BlockHash hash = {};
    bool written = false;  // the file was written (a missing one then means the usage count is off)
  };
  // Files to remove (evicted or bad): run one per file a store needs room for, all at once
  // before a write of a hash among them, and all when no job waits.
  std::deque<Removal> removals;
  bool busy = false;  // the writer is running a job
  bool stop = false;
  bool in_incident = false;
  // Hashes in `removals` or being removed (an evicted file): a lookup must not adopt the
  // file about to go. Counts, as one hash may be evicted, stored and evicted again.
  absl::flat_hash_map<BlockHash, int32_t> removing;
  std::vector<BlockHash> writer_removed;
  // Blocks of named saves: hash -> the save's name (Pin, and the start scan of names/).
  absl::flat_hash_map<BlockHash, std::string>
      pinned;  // announced entries the writer dropped (events)
  TierStats stats;
  DiskTierStats disk;
  std::thread writer;

  // The engine thread's own (no lock). LoadPrefix reads a batch of read_buffers.size() values
  // (a few per thread when values are small) at once, value i of a batch into read_buffers[i], on
  // the engine thread and `readers`' options.read_threads - 1 helpers; the value it hands out
  // lives there or in a Located's held bytes until the next batch.
  std::vector<ReadBuffer> read_buffers;
  std::unique_ptr<ReadHelpers> readers;
  // The model folder, open (-1 when it could not be opened): value files open relative to it.
  // Reopened (ReopenModelFolder) only while no read runs.
  int model_fd = -1;
};

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_TIERS_DISK_DISK_TIER_IMPL_H_
