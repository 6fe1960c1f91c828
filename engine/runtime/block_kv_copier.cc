// Copyright 2026 The pagedkv Authors.
#include "engine/runtime/block_kv_copier.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/dtype.h"
#include "pagedkv/kernels/paged_kv_layout.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {

BlockKvCopier::BlockKvCopier(ModelRunner* runner) : runner_(runner) {
  const PagedKvLayout& l = runner_->kv_layout(0);
  const PagedKvLayout v_side = l.VSide();
  page_bytes_[0] = l.PageElements() * DTypeSize(l.dtype);
  page_bytes_[1] = v_side.PageElements() * DTypeSize(v_side.dtype);
  // With KV cache groups, layers of different groups share page arrays: each array once.
  for (int32_t layer = 0; layer < runner_->config().n_layers; ++layer) {
    const void* k = runner_->kv_layout(layer).k;
    const bool seen = std::any_of(page_layers_.begin(), page_layers_.end(),
                                  [&](int32_t o) { return runner_->kv_layout(o).k == k; });
    if (!seen) page_layers_.push_back(layer);
  }
  const auto num_pages = static_cast<int32_t>(page_layers_.size());
  value_bytes_ = int64_t{num_pages} * (page_bytes_[0] + page_bytes_[1]);
  format_ =
      absl::StrCat("dtype=", DTypeName(l.dtype), " layout=kv-pages-v1 heads=", l.num_kv_heads,
                   " head_dim=", l.head_dim, " token_stride=", l.TokenStride(),
                   " head_stride=", l.HeadStride(), " layers=", num_pages, " block=", l.block_size);
  if (l.MixedDTypes()) {
    absl::StrAppend(&format_, " v_dtype=", DTypeName(v_side.dtype),
                    " v_token_stride=", v_side.TokenStride(),
                    " v_head_stride=", v_side.HeadStride());
  }
}

TierValueFormat BlockKvCopier::value_format() const {
  const PagedKvLayout& l = runner_->kv_layout(0);
  return TierValueFormat{.dtype = static_cast<uint8_t>(l.dtype),
                         .layout = 1,
                         .block_size = l.block_size,
                         .num_layers = static_cast<int32_t>(page_layers_.size()),
                         .value_bytes = value_bytes_,
                         .layout_digest = RootHash("", format_).low};
}

absl::Status BlockKvCopier::Check(BlockId block, size_t bytes) const {
  if (block < 0 || block >= runner_->kv_layout(0).num_blocks) {
    return absl::InvalidArgumentError(absl::StrCat("BlockKvCopier: block ", block,
                                                   " is outside the pool of ",
                                                   runner_->kv_layout(0).num_blocks));
  }
  if (static_cast<int64_t>(bytes) != value_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat("BlockKvCopier: a value of ", bytes,
                                                   " bytes; a block's KV is ", value_bytes_));
  }
  return absl::OkStatus();
}

absl::Status BlockKvCopier::Read(BlockId block, std::span<std::byte> out) {
  PAGEDKV_RETURN_IF_ERROR(Check(block, out.size()));
  std::byte* dst = out.data();
  for (const int32_t layer : page_layers_) {
    for (int kv = 0; kv < 2; ++kv) {
      const auto bytes = static_cast<size_t>(page_bytes_[kv]);
      PAGEDKV_RETURN_IF_ERROR(runner_->backend().CopyToHost(dst, Page(block, layer, kv), bytes));
      dst += bytes;
    }
  }
  return absl::OkStatus();
}

absl::Status BlockKvCopier::Write(BlockId block, std::span<const std::byte> value) {
  PAGEDKV_RETURN_IF_ERROR(Check(block, value.size()));
  const std::byte* src = value.data();
  for (const int32_t layer : page_layers_) {
    for (int kv = 0; kv < 2; ++kv) {
      const auto bytes = static_cast<size_t>(page_bytes_[kv]);
      PAGEDKV_RETURN_IF_ERROR(runner_->backend().CopyToDevice(Page(block, layer, kv), src, bytes));
      src += bytes;
    }
  }
  return absl::OkStatus();
}

absl::Status BlockKvCopier::Copy(BlockId src, BlockId dst) {
  PAGEDKV_RETURN_IF_ERROR(Check(src, static_cast<size_t>(value_bytes_)));
  PAGEDKV_RETURN_IF_ERROR(Check(dst, static_cast<size_t>(value_bytes_)));
  for (const int32_t layer : page_layers_) {
    for (int kv = 0; kv < 2; ++kv) {
      PAGEDKV_RETURN_IF_ERROR(runner_->backend().CopyDeviceToDevice(
          Page(dst, layer, kv), Page(src, layer, kv), static_cast<size_t>(page_bytes_[kv])));
    }
  }
  return absl::OkStatus();
}

BlockKvCopier::~BlockKvCopier() {
  for (std::byte* slot : staging_) runner_->backend().FreeStaging(slot);  // waits for the copies
}

std::byte* BlockKvCopier::Page(BlockId block, int32_t layer, int kv) const {
  const PagedKvLayout& l = runner_->kv_layout(layer);
  const PagedKvLayout side = kv == 0 ? l.KSide() : l.VSide();
  return static_cast<std::byte*>(side.k) + block * side.BlockStride() * DTypeSize(side.dtype);
}

absl::StatusOr<std::byte*> BlockKvCopier::TakeStaging() {
  if (staging_used_ == staging_.size() && staging_.size() >= kMaxStagingSlots) {
    PAGEDKV_RETURN_IF_ERROR(SynchronizeCopies());
  }
  if (staging_used_ == staging_.size()) {
    PAGEDKV_ASSIGN_OR_RETURN(void* slot,
                             runner_->backend().AllocateStaging(static_cast<size_t>(value_bytes_)));
    staging_.push_back(static_cast<std::byte*>(slot));
  }
  return staging_[staging_used_++];
}

absl::Status BlockKvCopier::WriteAsync(BlockId block, std::span<const std::byte> value) {
  Backend& backend = runner_->backend();
  if (!backend.async_copies()) return Write(block, value);
  PAGEDKV_RETURN_IF_ERROR(Check(block, value.size()));
  PAGEDKV_ASSIGN_OR_RETURN(std::byte * staged, TakeStaging());
  std::memcpy(staged, value.data(), value.size());  // the tier's bytes may go when we return
  const std::byte* src = staged;
  for (const int32_t layer : page_layers_) {
    for (int kv = 0; kv < 2; ++kv) {
      PAGEDKV_RETURN_IF_ERROR(
          backend.LoadAsync(Page(block, layer, kv), src, static_cast<size_t>(page_bytes_[kv])));
      src += page_bytes_[kv];
    }
  }
  return absl::OkStatus();
}

absl::Status BlockKvCopier::FenceWrites() { return runner_->backend().FenceLoads(); }

absl::Status BlockKvCopier::ReadAsync(BlockId block, std::span<std::byte> out) {
  Backend& backend = runner_->backend();
  if (!backend.async_copies()) return Read(block, out);
  PAGEDKV_RETURN_IF_ERROR(Check(block, out.size()));
  PAGEDKV_ASSIGN_OR_RETURN(std::byte * staged, TakeStaging());
  reads_.push_back({.staged = staged, .out = out});
  std::byte* dst = staged;
  for (const int32_t layer : page_layers_) {
    for (int kv = 0; kv < 2; ++kv) {
      PAGEDKV_RETURN_IF_ERROR(
          backend.StoreAsync(dst, Page(block, layer, kv), static_cast<size_t>(page_bytes_[kv])));
      dst += page_bytes_[kv];
    }
  }
  return absl::OkStatus();
}

absl::Status BlockKvCopier::SynchronizeCopies() {
  Backend& backend = runner_->backend();
  if (!backend.async_copies()) return absl::OkStatus();
  PAGEDKV_RETURN_IF_ERROR(backend.SynchronizeCopies());
  // Completed: the staged reads are the callers', every slot is free again.
  for (const PendingRead& r : reads_) std::memcpy(r.out.data(), r.staged, r.out.size());
  reads_.clear();
  staging_used_ = 0;
  return absl::OkStatus();
}

}  // namespace pagedkv
