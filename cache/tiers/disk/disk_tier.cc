// Copyright 2026 The pagedkv Authors.
//
// DiskTier (pagedkv/tiers/disk_tier.h): creation and the engine thread's calls. The writer
// thread and the shared index updates are in disk_tier_writer.cc.
#include "pagedkv/tiers/disk_tier.h"

#include <fcntl.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cache/tiers/disk/disk_files.h"
#include "cache/tiers/disk/disk_tier_impl.h"
#include "cache/tiers/disk/read_helpers.h"
#include "cache/tiers/tier_value_codec.h"
#include "pagedkv/status_macros.h"
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace pagedkv {
namespace {

absl::Status ValidateOptions(const DiskTierOptions& o) {
  if (o.directory.empty()) {
    return absl::InvalidArgumentError("DiskTierOptions.directory must name a folder");
  }
  if (o.format.value_bytes <= 0 || o.format.block_size <= 0) {
    return absl::InvalidArgumentError(
        "DiskTierOptions.format needs value_bytes > 0 and block_size > 0");
  }
  if (o.max_pending_bytes <= 0 || o.store.threshold < 0 || o.medium.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DiskTierOptions needs max_pending_bytes > 0 (got ", o.max_pending_bytes,
        "), store.threshold >= 0 (got ", o.store.threshold, ") and a non-empty medium"));
  }
  if (o.spare_buffer_idle.count() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DiskTierOptions needs spare_buffer_idle > 0 (got ", o.spare_buffer_idle.count(), " ms)"));
  }
  if (o.read_threads < 1 || o.read_threads > kMaxDiskReadThreads) {
    return absl::InvalidArgumentError(absl::StrCat("DiskTierOptions.read_threads must be in [1, ",
                                                   kMaxDiskReadThreads, "], got ", o.read_threads));
  }
  return absl::OkStatus();
}

// "<directory>/<16 hex digits>": XXH3-64 of the fingerprint and every field of the format,
// seeded with the value format's version (a folder of another version is never read).
std::string ModelDirectory(const DiskTierOptions& o) {
  XXH3_state_t state;
  XXH3_64bits_reset_withSeed(&state, kTierValueVersion);
  XXH3_64bits_update(&state, o.model_fingerprint.data(), o.model_fingerprint.size());
  const TierValueFormat& f = o.format;
  const int64_t fields[] = {f.dtype, f.layout, f.block_size, f.num_layers, f.value_bytes};
  XXH3_64bits_update(&state, fields, sizeof(fields));
  XXH3_64bits_update(&state, &f.layout_digest, sizeof(f.layout_digest));
  std::string root = o.directory;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return absl::StrFormat("%s/%016x", root, XXH3_64bits_digest(&state));
}

// Values LoadPrefix reads per batch: a few per helper thread when they are small, so that one
// fork and join serves at least kReadBatchBytes per thread (at most kMaxReadsPerThread values).
constexpr int64_t kReadBatchBytes = int64_t{256} << 10;
constexpr int64_t kMaxReadsPerThread = 8;
// One thread reads one value at a time: a read ahead of the value it settles gains nothing.
int64_t ReadBatchValues(int32_t read_threads, int64_t file_bytes) {
  if (read_threads == 1) return 1;
  return read_threads * std::clamp<int64_t>(kReadBatchBytes / file_bytes, 1, kMaxReadsPerThread);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DiskTier>> DiskTier::Create(DiskTierOptions options) {
  PAGEDKV_RETURN_IF_ERROR(ValidateOptions(options));
  const int64_t file_bytes = static_cast<int64_t>(kTierValueHeaderBytes) +
                             int64_t{options.format.block_size} * int64_t{sizeof(TokenId)} +
                             options.format.value_bytes;
  if (options.capacity_bytes < file_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("DiskTierOptions.capacity_bytes ", options.capacity_bytes,
                     " holds no block (a file is ", file_bytes, " bytes); raise it"));
  }
  PAGEDKV_ASSIGN_OR_RETURN(
      std::unique_ptr<EvictingTierPolicy> policy,
      MakeEvictingTierPolicy(options.policy, options.capacity_bytes / file_bytes));
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<ReadHelpers> readers,
                           ReadHelpers::Create(options.read_threads - 1));
  std::string model_dir = ModelDirectory(options);
  auto impl = std::make_unique<Impl>(std::move(options), std::move(model_dir), file_bytes,
                                     std::move(policy));
  impl->readers = std::move(readers);
  impl->read_buffers.resize(
      static_cast<size_t>(ReadBatchValues(impl->options.read_threads, file_bytes)));
  if (const absl::Status made = MakeDirectories(impl->model_dir); !made.ok()) {
    std::lock_guard lock(impl->mu);
    impl->FaultLocked(&DiskTierStats::write_errors, made);
  }
  impl->model_fd = ::open(impl->model_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (impl->options.scan_at_start) {
    // The saves first, before any lookup (a request naming a save must find its links); they are
    // few. The value files, maybe millions, are indexed by the writer thread.
    impl->ScanPinned();
    impl->jobs.push_back({.kind = Impl::Job::Kind::kScan});
  } else {
    impl->disk.scan_done = true;
  }
  impl->writer = std::thread([raw = impl.get()] { raw->WriterLoop(); });
  return std::unique_ptr<DiskTier>(new DiskTier(std::move(impl)));
}

DiskTier::DiskTier(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DiskTier::~DiskTier() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->work_cv.notify_all();
  impl_->writer.join();
}

std::string_view DiskTier::medium() const { return impl_->options.medium; }
const TierStoreOptions& DiskTier::store_options() const { return impl_->options.store; }
const std::string& DiskTier::model_directory() const { return impl_->model_dir; }
std::string DiskTier::PathOf(const BlockHash& hash) const {
  return ValuePath(impl_->model_dir, hash);
}
int64_t DiskTier::file_bytes() const { return impl_->file_bytes; }
int64_t DiskTier::capacity_blocks() const { return impl_->policy->capacity(); }

TierStats DiskTier::stats() const {
  std::lock_guard lock(impl_->mu);
  TierStats s = impl_->stats;
  s.resident_blocks = static_cast<int64_t>(impl_->entries.size());
  s.resident_bytes = s.resident_blocks * impl_->file_bytes;
  s.shared_resident_bytes =
      impl_->disk.folder_files >= 0 ? impl_->disk.folder_files * impl_->file_bytes : -1;
  return s;
}

DiskTierStats DiskTier::disk_stats() const {
  DiskTierStats stats;
  {
    std::lock_guard lock(impl_->mu);
    stats = impl_->disk;
  }
  std::lock_guard lock(impl_->spare_mu);
  stats.spare_buffer_bytes = impl_->spare_bytes;
  return stats;
}

void DiskTier::Flush() {
  std::unique_lock lock(impl_->mu);
  impl_->idle_cv.wait(
      lock, [this] { return impl_->jobs.empty() && impl_->removals.empty() && !impl_->busy; });
}

void DiskTier::EmitWriterRemovals() {
  std::vector<BlockHash> removed;
  {
    std::lock_guard lock(impl_->mu);
    removed.swap(impl_->writer_removed);
  }
  for (const BlockHash& h : removed) {
    Emit(KvEvent{.type = KvEventType::kBlockRemoved, .hash = h, .medium = medium()});
  }
}

}  // namespace pagedkv
