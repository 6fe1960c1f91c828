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

std::optional<DiskTier::Impl::Located> DiskTier::Impl::Locate(const TierBlock& block) {
  Located at;
  std::lock_guard lock(mu);
  auto it = entries.find(block.hash);
  at.indexed = it != entries.end();
  at.held = at.indexed ? it->second.pending : nullptr;
  auto pin = pinned.find(block.hash);
  at.source = at.held != nullptr    ? ValueSource::kQueue
              : pin != pinned.end() ? ValueSource::kSave
                                    : ValueSource::kFile;
  if (at.source == ValueSource::kFile && !at.indexed && removing.contains(block.hash)) {
    return std::nullopt;  // evicted, its file about to go
  }
  if (at.source == ValueSource::kSave) at.path = SavePath(pin->second, block.hash);
  if (at.source == ValueSource::kFile) {
    at.path = ValueRelativePath(block.hash);
    const int64_t now = FileClockNowNs();
    if (!at.indexed) {
      at.recency = ReadRecency::kTouchIfOld;  // another process's: LoadPrefix adopts it with `now`
    } else if (now - it->second.touched_ns > kTouchGranularityNs) {
      at.recency = ReadRecency::kTouch;
      it->second.touched_ns = now;
    }
  }
  return at;
}

absl::StatusOr<std::span<const std::byte>> DiskTier::Impl::ReadLocated(const TierBlock& block,
                                                                       const Located& at,
                                                                       ReadBuffer* buffer) const {
  if (at.source == ValueSource::kQueue) {
    return DecodeTierValue(options.format, block.tokens,
                           std::as_bytes(std::span<const char>(*at.held)));
  }
  const bool relative = at.source == ValueSource::kFile && model_fd >= 0;
  const std::string full_path =
      at.source == ValueSource::kFile && !relative ? model_dir + "/" + at.path : std::string();
  PAGEDKV_ASSIGN_OR_RETURN(
      const std::span<const std::byte> read,
      ReadValueFile(relative ? model_fd : AT_FDCWD, full_path.empty() ? at.path : full_path,
                    file_bytes, buffer, at.recency));
  return DecodeTierValue(options.format, block.tokens, read);
}

std::optional<std::span<const std::byte>> DiskTier::Impl::Settle(
    const TierBlock& block, const Located& at, absl::StatusOr<std::span<const std::byte>> read,
    ReadBuffer* buffer, std::vector<BlockHash>* removed) {
  // The model folder deleted and made again (by a store) since model_fd was opened.
  if (absl::IsNotFound(read.status()) && at.source == ValueSource::kFile && ReopenModelFolder()) {
    read = ReadLocated(block, at, buffer);
  }
  if (read.ok()) return *read;
  std::lock_guard lock(mu);
  if (at.source == ValueSource::kSave) {  // a save's file deleted or damaged by hand: unpinned
    pinned.erase(block.hash);
    disk.pinned_blocks = static_cast<int64_t>(pinned.size());
  }
  if (absl::IsNotFound(read.status())) {
    if (at.indexed && at.source == ValueSource::kFile) {  // evicted elsewhere, or removed by hand
      ++disk.vanished;
      jobs.push_back({.kind = Job::Kind::kRecount, .hash = block.hash});  // heals the usage
      work_cv.notify_one();
    }
    if (at.source == ValueSource::kFile) DropLocked(block.hash, /*remove_file=*/false, removed);
  } else if (absl::IsDataLoss(read.status())) {
    if (at.source != ValueSource::kSave) DropLocked(block.hash, /*remove_file=*/false, removed);
    if (at.source == ValueSource::kFile) QueueRemoveLocked(block.hash, /*written=*/true);
    if (at.source == ValueSource::kSave) RemoveFile(at.path).IgnoreError();  // counted below
    FaultLocked(&DiskTierStats::corrupt_values, read.status());
  } else {
    FaultLocked(&DiskTierStats::read_errors, read.status());
  }
  return std::nullopt;
}

std::span<const DiskTier::Impl::Located> DiskTier::Impl::ReadBatch(
    std::span<const TierBlock> blocks, std::vector<Located>* located,
    std::vector<absl::StatusOr<std::span<const std::byte>>>* reads) {
  located->clear();
  reads->clear();
  for (const TierBlock& b : blocks) {
    std::optional<Located> at = Locate(b);
    if (!at.has_value()) break;
    located->push_back(*std::move(at));
    reads->emplace_back(absl::UnknownError("not read"));
  }
  readers->Run(located->size(), [&](size_t i) {
    (*reads)[i] = ReadLocated(blocks[i], (*located)[i], &read_buffers[i]);
  });
  return *located;
}

void DiskTier::Impl::CountHit(const TierBlock& block, ValueSource source, int64_t bytes,
                              bool announce, std::vector<BlockHash>* removed,
                              std::vector<const TierBlock*>* announced) {
  std::lock_guard lock(mu);
  ++stats.hit_blocks;
  stats.loaded_bytes += bytes;
  SuccessLocked();
  auto it = entries.find(block.hash);
  if (it == entries.end() && source == ValueSource::kSave) return;  // unbudgeted
  if (it == entries.end()) {  // another process's file: ours now too
    ++disk.adopted;
    InsertLocked(block.hash, Entry{.touched_ns = FileClockNowNs()}, removed);
    it = entries.find(block.hash);
  } else {
    policy->Hit(block.hash);
  }
  if (announce && !it->second.announced) {
    it->second.announced = true;
    announced->push_back(&block);
  }
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
  std::vector<Impl::Located> located;
  std::vector<absl::StatusOr<std::span<const std::byte>>> reads;
  int64_t examined = 0;  // blocks looked at in chain order (not those read ahead of a miss)
  const size_t batch = impl.read_buffers.size();
  for (bool go_on = true; go_on && taken < static_cast<int64_t>(blocks.size());) {
    const std::span<const TierBlock> rest = blocks.subspan(static_cast<size_t>(taken));
    const std::span<const TierBlock> next = rest.first(std::min(batch, rest.size()));
    const std::span<const Impl::Located> at = impl.ReadBatch(next, &located, &reads);
    for (size_t i = 0; go_on && i < at.size(); ++i) {
      ++examined;
      const std::optional<std::span<const std::byte>> value =
          impl.Settle(next[i], at[i], std::move(reads[i]), &impl.read_buffers[i], &removed);
      if (!value.has_value()) {
        go_on = false;
        break;
      }
      absl::StatusOr<bool> took = sink(taken, *value);
      if (!took.ok()) sink_error = took.status();
      go_on = took.ok() && *took;
      if (!go_on) break;
      ++taken;
      impl.CountHit(next[i], at[i].source, static_cast<int64_t>(value->size()), HasListeners(),
                    &removed, &announce);
    }
    if (go_on && at.size() < next.size()) {  // Locate's miss, known without a read
      ++examined;
      go_on = false;
    }
  }
  impl.readers->Rest();
  {
    std::lock_guard lock(impl.mu);
    impl.stats.queried_blocks += examined;
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
