// Copyright 2026 The pagedkv Authors.
//
// DiskTier: KV blocks in files on local storage, below the host tier (KvTier, kv_tier.h). What it
// holds survives a restart, and the processes of one machine that point at one folder share it.
//
// Files: "<directory>/<model>/<shard>/<hash>.kv", one per block (cache/tiers/disk/disk_files.h),
// where <model> is 16 hex digits of XXH3-64 of the model fingerprint and the value format (dtype,
// layout, block size, sizes), so an engine with another model, KV dtype or block size never opens
// another's files; <hash> is the block's portable chain hash (block_hash.h), the Redis tier's key.
// A file holds the Redis tier's value (cache/tiers/tier_value_codec.h: header, token ids,
// payload, checksum). One file per value rather than a few slab files with an index: a KV block
// is tens to hundreds of KiB, so a file's open / rename / close cost little beside its bytes
// (measured in bench/RESULTS.md), and the file system then gives what a slab index would have to
// build: atomic replacement (a temporary name, then rename), sharing between processes without a
// lock, eviction by unlink that never breaks a read in flight (an open file outlives its name).
//
// Writes are asynchronous: Store encodes each value and queues it for the tier's writer thread,
// which writes and renames; until then a lookup is served from the queued bytes. When more than
// max_pending_bytes wait, further stores are dropped (counted). Reads are synchronous, in the
// caller's thread, like the other tiers' lookups: LoadPrefix opens the blocks' files in order.
// A file this process did not index (another process wrote it) is read and adopted like its own.
//
// Budget: capacity_bytes over whole files; the tier's policy ("lru" or "arc", tier_policy.h)
// evicts by removing files. The index is in memory; at start the writer thread rebuilds it from
// the folder (oldest modification time first; a hit refreshes a file's time), so lookups do not
// wait for the scan. Processes sharing a folder share its budget: a count of the folder's files
// ("<model>/usage", updated under flock(2) with every rename and unlink) makes the writer evict
// before it publishes a file (the older, by file time, of its own policy's next victim and the
// oldest file of the others), so the folder's value files never exceed the budget of the
// process that publishes (plus one temporary per writer in flight); give every process the same
// capacity_bytes. A file one process evicts is a miss for the others (never an error).
// docs/tiers.md has the protocol.
//
// Faults are misses, never wrong KV: a truncated or corrupted file (deleted, counted), a full disk
// or read-only folder (the store is dropped and counted), a folder deleted under the tier (stores
// recreate it, indexed files read as misses). Each kind is counted in DiskTierStats; the first
// fault after a success is reported once through options.report.
//
// Events (kv_tier.h): kBlockStored when Store accepts a block or a lookup adopts one,
// kBlockRemoved when the tier evicts a block it announced or finds it gone; medium "DISK" (vLLM's
// offloading connector's name for a disk tier). Blocks found by the start scan are announced
// when first hit.
//
// Thread-safety: LoadPrefix, Store, stats and Flush from one thread (the engine's), as for every
// tier; the writer thread is internal.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<pagedkv::DiskTier> disk,
//                            pagedkv::DiskTier::Create({.directory = "/var/cache/pagedkv",
//                                                       .capacity_bytes = int64_t{64} << 30,
//                                                       .model_fingerprint = fingerprint,
//                                                       .format = format}));
#ifndef PAGEDKV_TIERS_DISK_TIER_H_
#define PAGEDKV_TIERS_DISK_TIER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/export.h"
#include "pagedkv/tiers/kv_tier.h"

namespace pagedkv {

// The most threads DiskTierOptions::read_threads takes.
inline constexpr int32_t kMaxDiskReadThreads = 64;

struct PAGEDKV_EXPORT DiskTierOptions {
  std::string directory;          // root folder (created if missing); files under <model>/
  int64_t capacity_bytes = 0;     // > 0: bytes of this model's files (headers and tokens too)
  std::string model_fingerprint;  // the engine's; names the model folder with `format`
  TierValueFormat format = {};    // what values are (value_bytes > 0, block_size > 0)
  std::string policy = "lru";     // "lru" or "arc" (tier_policy.h)
  TierStoreOptions store = {};    // read by the engine (see kv_tier.h)
  std::string medium = "DISK";    // KvTier::medium(), the events' medium
  int64_t max_pending_bytes = int64_t{256} << 20;  // > 0: queued bytes beyond which stores drop
  bool scan_at_start = true;  // index the saves (at once) and the files (in the writer thread)
  // The writer keeps the encode buffers of finished stores for reuse (at most max_pending_bytes)
  // and frees them once it has had nothing to write for this long. > 0.
  std::chrono::milliseconds spare_buffer_idle{5000};
  // Threads that read and check LoadPrefix's values: the calling thread and read_threads - 1
  // helpers (which sleep while no lookup runs). With more than one, values are read a batch at a
  // time (a few per thread when they are small), so reads ahead of a miss are wasted and touch
  // their files' times as hits do; the answer is the same. In [1, kMaxDiskReadThreads].
  int32_t read_threads = 2;
  // One line per incident and per recovery; null: to stderr ("pagedkv: disk tier ...").
  std::function<void(std::string_view)> report = nullptr;
};

// The disk tier's own counters, beside TierStats (faults there is the sum of the first three).
struct PAGEDKV_EXPORT DiskTierStats {
  int64_t write_errors = 0;     // stores dropped by a failed write (ENOSPC, EROFS, EACCES, ...)
  int64_t read_errors = 0;      // lookups cut short by an I/O error other than a missing file
  int64_t corrupt_values = 0;   // files with a wrong size, header, tokens or checksum (removed)
  int64_t vanished = 0;         // indexed files found missing (evicted elsewhere, folder deleted)
  int64_t adopted = 0;          // files a lookup found that this process had not indexed
  int64_t dropped_backlog = 0;  // stores dropped because max_pending_bytes were queued
  int64_t pending_blocks = 0;   // values queued for the writer now
  int64_t pending_bytes = 0;    // their bytes
  int64_t scanned_files = 0;    // value files the start scan indexed
  int64_t scan_ms = 0;          // how long it took
  bool scan_done = false;       // whether it finished (or was not asked for)
  int64_t pinned_blocks = 0;    // blocks of named saves (Pin), outside the budget
  int64_t spare_buffer_bytes = 0;  // encode buffers kept for reuse (DiskTierOptions)
  // Value files in the folder, every process's, as the usage file said when the writer last held
  // it (-1 before that, or while it cannot be used); TierStats::shared_resident_bytes in bytes.
  int64_t folder_files = -1;
};

class PAGEDKV_EXPORT DiskTier final : public KvTier {
 public:
  // InvalidArgument for an empty directory, capacity_bytes below one file, a format without
  // value_bytes or block_size, an unknown policy, max_pending_bytes <= 0, a negative threshold,
  // an empty medium, or read_threads outside [1, kMaxDiskReadThreads]; ResourceExhausted when
  // the read helper threads cannot be started. A folder that cannot be created is not an error
  // here (a fault: reported, and every store retries it), so a full or read-only disk never stops
  // the engine starting.
  static absl::StatusOr<std::unique_ptr<DiskTier>> Create(DiskTierOptions options);
  // Writes what is queued, then stops the writer thread.
  ~DiskTier() override;

  std::string_view name() const override { return "disk"; }
  std::string_view medium() const override;
  const TierStoreOptions& store_options() const override;
  absl::StatusOr<int64_t> LoadPrefix(std::span<const TierBlock> blocks,
                                     TierValueSink sink) override;
  absl::Status Store(std::span<const TierStoreItem> items) override;
  TierStats stats() const override;

  DiskTierStats disk_stats() const;
  // Waits until every queued store is written (or dropped) and the start scan is done.
  void Flush();

  // Named saves (llama.cpp's slot save, vLLM's and LMCache's pinned prefixes): pins the leading
  // run of `chain` (a prompt's block hashes, in order) that the tier holds under `name`, after
  // Flush, as hard links in "<model>/names/<name>/"; returns how many blocks it pinned. Pinned
  // blocks outlive eviction and restarts (a lookup that finds a block only there restores it) and
  // do not count against capacity_bytes; delete the folder to drop them. Saving a name again
  // replaces it. InvalidArgument for a name that is empty, longer than 128 characters, starts
  // with '.' or has characters other than letters, digits, '.', '_' and '-'; another error for
  // a failed file operation (nothing stays pinned then).
  absl::StatusOr<int64_t> Pin(std::string_view name, std::span<const BlockHash> chain);
  // Whether a save `name` exists (its folder is there). A save another process made since this
  // tier started is indexed here, so lookups then read its blocks.
  bool HasPin(std::string_view name) const;
  // "<directory>/<model>": this model's folder.
  const std::string& model_directory() const;
  // The file that holds `hash`'s value.
  std::string PathOf(const BlockHash& hash) const;
  // Bytes of one file (header, tokens and value).
  int64_t file_bytes() const;
  // Files the budget holds.
  int64_t capacity_blocks() const;

 private:
  struct Impl;
  explicit DiskTier(std::unique_ptr<Impl> impl);
  // Emits kBlockRemoved for announced blocks the writer dropped (failed writes, scan evictions).
  void EmitWriterRemovals();
  // Queues one checked item; false when it was skipped or dropped. Victims go to `removed`.
  bool StoreOne(const TierStoreItem& item, std::vector<BlockHash>* removed);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagedkv

#endif  // PAGEDKV_TIERS_DISK_TIER_H_
