// Copyright 2026 The pagedkv Authors.
//
// BlockKvCopier: one device block's K/V pages of every layer as one contiguous value, the form a
// KV tier (pagedkv/kv_tier.h) stores; the engine's BlockValueIo (cache/tier_chain.h). The value is,
// for layer 0..n_layers-1, the block's K page then its V page, each PagedKvLayout::PageElements()
// elements of the KV dtype, as they lie in the model runner's pages (so strides and padding inside
// a page are kept). Copies go through the backend (a memcpy on the CPU backend; on CUDA a
// synchronous copy).
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

#include "absl/status/status.h"
#include "cache/tier_chain.h"
#include "engine/model/model_runner.h"
#include "pagedkv/export.h"
#include "pagedkv/kv_tier.h"
#include "pagedkv/types.h"

namespace pagedkv {

class PAGEDKV_EXPORT BlockKvCopier final : public BlockValueIo {
 public:
  explicit BlockKvCopier(ModelRunner* runner);

  // Bytes of one block's value: n_layers * 2 * PageElements * dtype size.
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

 private:
  absl::Status Check(BlockId block, size_t bytes) const;

  ModelRunner* runner_;
  int64_t page_bytes_ = 0;  // bytes of one K (or V) page
  int64_t value_bytes_ = 0;
  std::string format_;
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_BLOCK_KV_COPIER_H_
