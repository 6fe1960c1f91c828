// Copyright 2026 The pagedkv Authors.
//
// DiskTier's lookup and store (pagedkv/tiers/disk_tier.h), called from the engine thread.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cache/tiers/disk/disk_files.h"
#include "cache/tiers/disk/disk_tier_impl.h"
#include "cache/tiers/tier_value_codec.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/tiers/disk_tier.h"

namespace pagedkv {

bool DiskTier::Impl::ReopenModelFolder() {
  struct stat st;
  if (model_fd >= 0 && ::fstat(model_fd, &st) == 0 && st.st_nlink > 0) return false;  // still there
  if (model_fd >= 0) ::close(model_fd);
  model_fd = ::open(model_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return model_fd >= 0;
}

absl::StatusOr<std::span<const std::byte>> DiskTier::Impl::ReadChecked(const TierBlock& block,
                                                                       bool in_model_dir,
                                                                       const std::string& path,
                                                                       ReadRecency recency) {
  for (int attempt = 0;; ++attempt) {
    const bool relative = in_model_dir && model_fd >= 0;
    const absl::StatusOr<std::span<const std::byte>> read = ReadValueFile(
        relative ? model_fd : AT_FDCWD, relative || !in_model_dir ? path : model_dir + "/" + path,
        file_bytes, &read_buffer, recency);
    if (read.ok()) return DecodeTierValue(options.format, block.tokens, *read);
    // The model folder deleted and made again (by a store) since model_fd was opened.
    if (!absl::IsNotFound(read.status()) || !in_model_dir || attempt > 0 || !ReopenModelFolder()) {
      return read.status();
    }
  }
}

// Reads `block`'s value: from the writer's queue while its file is not written yet, else from a
// named save that pins it, else from its file. A miss (no file, a bad file, an I/O error) is
// nullopt, with the index and counters updated; `*source` says where a value came from. The value
// lives in held or read_buffer until the next call.
std::optional<std::span<const std::byte>> DiskTier::Impl::FetchValue(
    const TierBlock& block, ValueSource* source, std::vector<BlockHash>* removed) {
  bool indexed = false;
  std::string path;
  ReadRecency recency = ReadRecency::kKeep;
  {
    std::lock_guard lock(mu);
    ++stats.queried_blocks;
    auto it = entries.find(block.hash);
    indexed = it != entries.end();
    held = indexed ? it->second.pending : nullptr;
    auto pin = pinned.find(block.hash);
    *source = held != nullptr       ? ValueSource::kQueue
              : pin != pinned.end() ? ValueSource::kSave
                                    : ValueSource::kFile;
    if (*source == ValueSource::kFile && !indexed && removing.contains(block.hash)) {
      return std::nullopt;  // evicted, its file about to go
    }
    if (*source == ValueSource::kSave) path = SavePath(pin->second, block.hash);
    if (*source == ValueSource::kFile) {
      path = ValueRelativePath(block.hash);
      const int64_t now = FileClockNowNs();
      if (!indexed) {
        recency = ReadRecency::kTouchIfOld;  // another process's: LoadPrefix adopts it with `now`
      } else if (now - it->second.touched_ns > kTouchGranularityNs) {
        recency = ReadRecency::kTouch;
        it->second.touched_ns = now;
      }
    }
  }
  const absl::StatusOr<std::span<const std::byte>> payload =
      *source == ValueSource::kQueue
          ? DecodeTierValue(options.format, block.tokens,
                            std::as_bytes(std::span<const char>(*held)))
          : ReadChecked(block, *source == ValueSource::kFile, path, recency);
  if (payload.ok()) return *payload;
  std::lock_guard lock(mu);
  if (*source == ValueSource::kSave) {  // a save's file deleted or damaged by hand: unpinned
    pinned.erase(block.hash);
    disk.pinned_blocks = static_cast<int64_t>(pinned.size());
  }
  if (absl::IsNotFound(payload.status())) {
    if (indexed && *source == ValueSource::kFile) {  // evicted elsewhere, or removed by hand
      ++disk.vanished;
      jobs.push_back({.kind = Job::Kind::kRecount, .hash = block.hash});  // heals the usage
      work_cv.notify_one();
    }
    if (*source == ValueSource::kFile) DropLocked(block.hash, /*remove_file=*/false, removed);
  } else if (absl::IsDataLoss(payload.status())) {
    if (*source != ValueSource::kSave) DropLocked(block.hash, /*remove_file=*/false, removed);
    if (*source == ValueSource::kFile) QueueRemoveLocked(block.hash, /*written=*/true);
    if (*source == ValueSource::kSave) RemoveFile(path).IgnoreError();  // counted below
    FaultLocked(&DiskTierStats::corrupt_values, payload.status());
  } else {
    FaultLocked(&DiskTierStats::read_errors, payload.status());
  }
  return std::nullopt;
}

absl::StatusOr<int64_t> DiskTier::LoadPrefix(std::span<const TierBlock> blocks,
                                             TierValueSink sink) {
  EmitWriterRemovals();
  Impl& impl = *impl_;
  {
    std::lock_guard lock(impl.mu);
    ++impl.stats.lookups;
  }
  int64_t taken = 0;
  std::vector<BlockHash> removed;
  std::vector<const TierBlock*> announce;
  absl::Status sink_error;
  for (const TierBlock& b : blocks) {
    Impl::ValueSource source = Impl::ValueSource::kFile;
    const std::optional<std::span<const std::byte>> value = impl.FetchValue(b, &source, &removed);
    if (!value.has_value()) break;
    absl::StatusOr<bool> took = sink(taken, *value);
    if (!took.ok()) sink_error = took.status();
    if (!took.ok() || !*took) break;
    ++taken;
    std::lock_guard lock(impl.mu);
    ++impl.stats.hit_blocks;
    impl.stats.loaded_bytes += static_cast<int64_t>(value->size());
    impl.SuccessLocked();
    auto it = impl.entries.find(b.hash);
    if (it == impl.entries.end() && source == Impl::ValueSource::kSave) continue;  // unbudgeted
    if (it == impl.entries.end()) {  // another process's file: ours now too
      ++impl.disk.adopted;
      impl.InsertLocked(b.hash, Impl::Entry{.touched_ns = FileClockNowNs()}, &removed);
      it = impl.entries.find(b.hash);
    } else {
      impl.policy->Hit(b.hash);
    }
    if (HasListeners() && !it->second.announced) {
      it->second.announced = true;
      announce.push_back(&b);
    }
  }
  for (const BlockHash& h : removed) {
    Emit(KvEvent{.type = KvEventType::kBlockRemoved, .hash = h, .medium = medium()});
  }
  for (const TierBlock* b : announce) {
    Emit(KvEvent{.type = KvEventType::kBlockStored,
                 .hash = b->hash,
                 .token_count = static_cast<int32_t>(b->tokens.size()),
                 .token_ids = b->tokens,
                 .medium = medium()});
  }
  if (!sink_error.ok()) return sink_error;
  return taken;
}

absl::Status DiskTier::Store(std::span<const TierStoreItem> items) {
  const TierValueFormat& f = impl_->options.format;
  for (const TierStoreItem& item : items) {
    if (static_cast<int64_t>(item.value.size()) != f.value_bytes ||
        static_cast<int64_t>(item.block.tokens.size()) != f.block_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("DiskTier::Store: a value of ", item.value.size(), " bytes for ",
                       item.block.tokens.size(), " tokens; this tier holds ", f.value_bytes,
                       "-byte values of ", f.block_size, "-token blocks"));
    }
  }
  EmitWriterRemovals();
  std::vector<BlockHash> removed;
  std::vector<const TierStoreItem*> accepted;
  for (const TierStoreItem& item : items) {
    if (StoreOne(item, &removed)) accepted.push_back(&item);
  }
  for (const BlockHash& h : removed) {
    Emit(KvEvent{.type = KvEventType::kBlockRemoved, .hash = h, .medium = medium()});
  }
  for (const TierStoreItem* item : accepted) {
    if (!HasListeners()) break;
    Emit(KvEvent{.type = KvEventType::kBlockStored,
                 .hash = item->block.hash,
                 .token_count = static_cast<int32_t>(item->block.tokens.size()),
                 .token_ids = item->block.tokens,
                 .medium = medium()});
  }
  return absl::OkStatus();
}

bool DiskTier::StoreOne(const TierStoreItem& item, std::vector<BlockHash>* removed) {
  Impl& impl = *impl_;
  {
    std::lock_guard lock(impl.mu);
    if (impl.entries.contains(item.block.hash)) {
      ++impl.stats.store_skipped;
      return false;
    }
    if (impl.disk.pending_bytes + impl.file_bytes > impl.options.max_pending_bytes) {
      ++impl.disk.dropped_backlog;  // the disk is behind: keep the engine's memory bounded
      return false;
    }
  }
  std::shared_ptr<const std::string> bytes;
  try {
    std::shared_ptr<std::string> buffer = impl.AcquireBuffer();
    EncodeTierValueInto(impl.options.format, item.block.tokens, item.value, buffer.get());
    bytes = std::move(buffer);
  } catch (const std::bad_alloc&) {
    std::lock_guard lock(impl.mu);
    impl.FaultLocked(&DiskTierStats::write_errors,
                     absl::ResourceExhaustedError("out of host memory for a queued value"));
    return false;
  }
  std::lock_guard lock(impl.mu);
  if (impl.entries.contains(item.block.hash)) {  // the start scan indexed it meanwhile
    ++impl.stats.store_skipped;
    return false;
  }
  impl.InsertLocked(item.block.hash, Impl::Entry{.pending = bytes, .announced = HasListeners()},
                    removed);
  impl.disk.pending_bytes += static_cast<int64_t>(bytes->size());
  ++impl.disk.pending_blocks;
  impl.jobs.push_back({.kind = Impl::Job::Kind::kWrite, .hash = item.block.hash, .bytes = bytes});
  impl.work_cv.notify_one();
  return true;
}

}  // namespace pagedkv
