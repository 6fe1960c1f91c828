// Copyright 2026 The pagedkv Authors.
//
// DiskTier's state (pagedkv/tiers/disk_tier.h), shared by the engine thread (disk_tier.cc) and
// the writer thread (disk_tier_writer.cc) under one mutex.
// Invariants (under mu): `entries` and the policy's resident set hold the same hashes; an entry
// with `pending` set has a kWrite job queued (or running) with the same bytes, and pending_bytes /
// pending_blocks sum those entries; an entry without `pending` has its file written (or found by
// a scan or a lookup), unless another process removed it since (a lookup then drops it).
// A job's work on files runs without the lock; it checks the entry again before and after.
#ifndef PAGEDKV_CACHE_TIERS_DISK_DISK_TIER_IMPL_H_
#define PAGEDKV_CACHE_TIERS_DISK_DISK_TIER_IMPL_H_

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
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/tiers/disk_tier.h"
#include "pagedkv/tiers/kv_tier.h"
#include "pagedkv/tiers/tier_policy.h"

namespace pagedkv {

struct DiskTier::Impl {
  struct Entry {
    std::shared_ptr<const std::string> pending;  // the encoded value until its file is written
    bool announced = false;                      // a kBlockStored event went out for it
  };
  struct Job {
    enum class Kind { kScan, kWrite, kRemove } kind;
    BlockHash hash = {};
    std::shared_ptr<const std::string> bytes = nullptr;  // kWrite
  };

  Impl(DiskTierOptions o, std::string dir, int64_t bytes, std::unique_ptr<TierPolicy> p)
      : options(std::move(o)), model_dir(std::move(dir)), file_bytes(bytes), policy(std::move(p)) {}

  // Where FetchValue found a value.
  enum class ValueSource { kQueue, kFile, kSave };
  // Engine thread: `block`'s value from the writer's queue, a named save or its file; nullopt
  // for a miss, with the index and counters updated. Valid until the next call (held /
  // read_buffer).
  std::optional<std::span<const std::byte>> FetchValue(const TierBlock& block, ValueSource* source,
                                                       std::vector<BlockHash>* removed);

  // Writer thread: runs jobs until `stop` and no job is left.
  void WriterLoop();
  void RunWrite(const Job& job);
  void RunRemove(const Job& job);
  void RunScan();
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
  void IndexScanned(std::vector<struct ValueFileInfo>& files);

  // REQUIRES: mu held. Queues the removal of `hash`'s file.
  void QueueRemoveLocked(const BlockHash& hash);
  // REQUIRES: mu held. Drops `hash` from the index and the policy (a victim or a bad file): a
  // written file gets a kRemove job when `remove_file`; an announced entry is added to
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

  // Encoded-value buffers for reuse (a fresh multi-MiB allocation page-faults on every store):
  // AcquireBuffer hands one out as a shared_ptr whose deleter gives it back, keeping at most
  // kMaxSpareBuffers. Declared before everything that holds buffers (destroyed after them); its
  // own lock, since a buffer may be released with `mu` held.
  static constexpr size_t kMaxSpareBuffers = 8;
  std::shared_ptr<std::string> AcquireBuffer();
  std::mutex spare_mu;
  std::vector<std::unique_ptr<std::string>> spare;

  mutable std::mutex mu;
  std::condition_variable work_cv;  // a job was queued, or stop
  std::condition_variable idle_cv;  // the queue ran empty
  std::unique_ptr<TierPolicy> policy;
  absl::flat_hash_map<BlockHash, Entry> entries;
  std::deque<Job> jobs;
  bool busy = false;  // the writer is running a job
  bool stop = false;
  bool in_incident = false;
  // Hashes with a kRemove job queued or running (an evicted file): a lookup must not adopt the
  // file about to go. Counts, as one hash may be evicted, stored and evicted again.
  absl::flat_hash_map<BlockHash, int32_t> removing;
  std::vector<BlockHash> writer_removed;
  // Blocks of named saves: hash -> the save's name (Pin, and the start scan of names/).
  absl::flat_hash_map<BlockHash, std::string>
      pinned;  // announced entries the writer dropped (events)
  TierStats stats;
  DiskTierStats disk;
  std::thread writer;

  // The engine thread's own (no lock): the value LoadPrefix hands out lives in one of these.
  std::vector<std::byte> read_buffer;
  std::shared_ptr<const std::string> held;
};

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_TIERS_DISK_DISK_TIER_IMPL_H_
