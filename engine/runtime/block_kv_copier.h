// Copyright 2026 The pagedkv Authors.
//
// BlockKvCopier: one device block's K/V pages of every layer as one contiguous value, the form a
// KV tier (pagedkv/tiers/kv_tier.h) stores; the engine's BlockValueIo (cache/tiers/tier_chain.h).
// The value is, for each page array in layer order, the block's K page then its V page (one array
// per layer; with KV cache groups, layers of different groups share arrays, and a block holds one
// group's layers: each shared array is copied once), each PagedKvLayout::PageElements() elements of
// the KV dtype, as they lie in the model runner's pages (so strides and padding inside a page are
// kept). Copies go through the backend: Read and Write synchronously (a memcpy on the CPU backend);
// the asynchronous forms (BlockValueIo) on a backend with async_copies() (the CUDA plugin's copy
// stream) stage each value in the backend's pinned staging memory and use LoadAsync / FenceLoads /
// StoreAsync / SynchronizeCopies; on other backends they are Read and Write, so the CPU backend
// copies exactly as before. Staging contract: a slot is taken per WriteAsync / ReadAsync and handed
// back only by SynchronizeCopies (after the backend's copies completed; a ReadAsync's bytes are
// copied into its `out` then). At most kMaxStagingSlots are held: the next one synchronizes first.
//
// Example:
//   BlockKvCopier copier(runner);
//   std::vector<std::byte> value(static_cast<size_t>(copier.value_bytes()));
//   PAGEDKV_RETURN_IF_ERROR(copier.Read(block, value));
//   PAGEDKV_RETURN_IF_ERROR(copier.Write(other_block, value));  // same KV in another block
//
// Not thread-safe; the runner must outlive it.
#ifndef PAGEDKV_ENGINE_RUNTIME_BLOCK_KV_COPIER_H_
#define PAGEDKV_ENGINE_RUNTIME_BLOCK_KV_COPIER_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/tiers/tier_chain.h"
#include "engine/model/runner/model_runner.h"
#include "pagedkv/export.h"
#include "pagedkv/tiers/kv_tier.h"
#include "pagedkv/types.h"

namespace pagedkv {

class PAGEDKV_EXPORT BlockKvCopier final : public BlockValueIo {
 public:
  explicit BlockKvCopier(ModelRunner* runner);

  // Bytes of one block's value: page arrays * 2 * PageElements * dtype size.
  int64_t value_bytes() const override { return value_bytes_; }
  // "dtype=f32 layout=kv-pages-v1 heads=2 head_dim=8 layers=2 block=16": what a value's bytes
  // mean, for tier headers (a reader with another format must not use the bytes).
  const std::string& format() const { return format_; }
  // The same as a TierValueFormat (layout_digest: of format()).
  TierValueFormat value_format() const;

  // Copies block `block`'s pages into `out`. InvalidArgument for a block out of range or an
  // `out` that is not value_bytes() long; a backend copy error as is.
  absl::Status Read(BlockId block, std::span<std::byte> out) override;
  // Copies `value` into block `block`'s pages (same checks as Read).
  absl::Status Write(BlockId block, std::span<const std::byte> value) override;

  // Copies block `src`'s pages into block `dst`'s, on the device (a block copied on write).
  // InvalidArgument for a block out of range; a backend copy error as is.
  absl::Status Copy(BlockId src, BlockId dst);

  // The asynchronous forms (see the banner and BlockValueIo), same checks as Read and Write.
  absl::Status WriteAsync(BlockId block, std::span<const std::byte> value) override;
  absl::Status FenceWrites() override;
  absl::Status ReadAsync(BlockId block, std::span<std::byte> out) override;
  absl::Status SynchronizeCopies() override;

  ~BlockKvCopier() override;
  BlockKvCopier(const BlockKvCopier&) = delete;
  BlockKvCopier& operator=(const BlockKvCopier&) = delete;

  static constexpr size_t kMaxStagingSlots = 64;

 private:
  struct PendingRead {
    const std::byte* staged;
    std::span<std::byte> out;
  };
  absl::Status Check(BlockId block, size_t bytes) const;
  // A free staging slot of value_bytes() (allocating or synchronizing when none is free).
  absl::StatusOr<std::byte*> TakeStaging();
  // The device address of `block`'s K (kv 0) or V (kv 1) page of `layer`.
  std::byte* Page(BlockId block, int32_t layer, int kv) const;

  ModelRunner* runner_;
  int64_t page_bytes_[2] = {0, 0};    // bytes of one K page, of one V page
  std::vector<int32_t> page_layers_;  // the first layer of each distinct page array
  int64_t value_bytes_ = 0;
  std::string format_;
  std::vector<std::byte*> staging_;  // slots from Backend::AllocateStaging, value_bytes_ each
  size_t staging_used_ = 0;          // slots [0, staging_used_) wait for SynchronizeCopies
  std::vector<PendingRead> reads_;   // ReadAsync values to copy out after the copies completed
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_BLOCK_KV_COPIER_H_
