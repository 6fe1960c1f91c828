// Copyright 2026 The pagedkv Authors.
//
// CacheRequest: the cache-side state of one request - every token id so far, the cache salt,
// adapter id and multimodal inputs, and the chained hashes of its full blocks, computed
// incrementally (appending tokens hashes only the blocks that became full).
//
// The scheduler owns one per request (usually made by KvCacheManager::NewRequest, which fills in
// the manager's block size, model fingerprint, vocabulary size and hasher), appends each sampled
// token, and passes it to KvCacheManager::GetComputedBlocks / AllocateSlots.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(pagedkv::CacheRequest req,
//                            manager->NewRequest(/*id=*/7, prompt, {.cache_salt = "user-42"}));
//   req.block_hashes();                           // one hash per full prompt block
//   PAGEDKV_RETURN_IF_ERROR(req.AppendToken(next));  // hashes the block it completes, if any
#ifndef PAGEDKV_CACHE_CACHE_REQUEST_H_
#define PAGEDKV_CACHE_CACHE_REQUEST_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/cache/cache_priority.h"
#include "pagedkv/export.h"
#include "pagedkv/types.h"

namespace pagedkv {

struct PAGEDKV_EXPORT CacheRequestOptions {
  RequestId id = 0;                           // the engine's request id
  int32_t block_size = 16;                    // tokens per block (> 0); must match the manager's
  std::string cache_salt;                     // requests with different salts never share blocks
  std::string model_fingerprint;              // model id + RoPE config, hashed into the root
  uint64_t adapter_id = 0;                    // LoRA adapter id hashed into every block; 0 = none
  std::vector<MultimodalInput> multimodal;    // sorted by offset; hashed into overlapping blocks
  int32_t vocab_size = 0;                     // > 0: every token must lie in [0, vocab_size)
  std::shared_ptr<const BlockHasher> hasher;  // block hasher; null = DefaultBlockHasher()
  // Eviction priority of the request's blocks, and spans of its prompt with their own (used when
  // the manager enables priorities; never hashed). See cache_priority.h.
  CachePriority priority;
  std::vector<PrioritySpan> priority_spans;
};

// Copyable value type. Not thread-safe.
class PAGEDKV_EXPORT CacheRequest {
 public:
  // Validates options (block size > 0, vocab size >= 0, multimodal inputs with offset >= 0,
  // length > 0, sorted by offset) and the prompt's tokens (InvalidArgument naming the first bad
  // token), then hashes the prompt's full blocks.
  static absl::StatusOr<CacheRequest> Create(CacheRequestOptions options,
                                             std::span<const TokenId> prompt);

  // Appends tokens (e.g. sampled ones) and hashes every block they complete. All-or-nothing:
  // InvalidArgument when a token lies outside the vocabulary; nothing is appended then.
  absl::Status AppendTokens(std::span<const TokenId> tokens);
  absl::Status AppendToken(TokenId token) {
    return AppendTokens(std::span<const TokenId>(&token, 1));
  }

  // Keeps the first `num_tokens` tokens and the hashes of the blocks they fill; drops the rest
  // (e.g. rejected speculative tokens). A prompt cut short counts only what is kept as prompt.
  // InvalidArgument, with nothing changed, unless 0 <= num_tokens <= this->num_tokens().
  absl::Status Truncate(int64_t num_tokens);

  RequestId id() const { return options_.id; }
  int32_t block_size() const { return options_.block_size; }
  const std::string& cache_salt() const { return options_.cache_salt; }
  const std::string& model_fingerprint() const { return options_.model_fingerprint; }
  uint64_t adapter_id() const { return options_.adapter_id; }
  int32_t vocab_size() const { return options_.vocab_size; }
  std::span<const MultimodalInput> multimodal() const { return options_.multimodal; }
  // The eviction priority of block i (its span's, else the request's).
  CachePriority BlockPriorityOf(int64_t i) const {
    return BlockPriority(options_.priority, options_.priority_spans, i * options_.block_size,
                         options_.block_size);
  }
  const BlockHasher& hasher() const { return *hasher_; }

  // Every token so far (prompt first). Valid until the next Append.
  std::span<const TokenId> tokens() const { return tokens_; }
  int64_t num_tokens() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t num_prompt_tokens() const { return num_prompt_tokens_; }

  // Chained hashes of the full blocks: block_hashes()[i] covers tokens [i*bs, (i+1)*bs).
  std::span<const BlockHash> block_hashes() const { return block_hashes_; }
  int64_t num_full_blocks() const { return static_cast<int64_t>(block_hashes_.size()); }
  const BlockHash& root_hash() const { return root_; }
  // The hash block `i` chains from: root_hash() for 0, else block_hashes()[i - 1].
  // REQUIRES: 0 <= i <= num_full_blocks().
  const BlockHash& ParentHashOf(int64_t i) const { return i == 0 ? root_ : block_hashes_[i - 1]; }
  // ExtraKeysDigest of full block `i` (adapter id and overlapping multimodal keys), which the
  // manager stores with cached blocks and compares on hits. REQUIRES: 0 <= i < num_full_blocks().
  const BlockHash& BlockExtraDigest(int64_t i) const { return block_extra_digests_[i]; }
  // Tokens of full block `i`. REQUIRES: 0 <= i < num_full_blocks().
  std::span<const TokenId> BlockTokens(int64_t i) const {
    return std::span<const TokenId>(tokens_).subspan(i * options_.block_size, options_.block_size);
  }

 private:
  explicit CacheRequest(CacheRequestOptions options);
  // Hashes every block that is full but not hashed yet.
  void HashNewBlocks();

  CacheRequestOptions options_;
  std::shared_ptr<const BlockHasher> hasher_;
  BlockHash root_;
  std::vector<TokenId> tokens_;
  std::vector<BlockHash> block_hashes_;
  std::vector<BlockHash> block_extra_digests_;  // parallel to block_hashes_
  int64_t num_prompt_tokens_ = 0;
  size_t mm_cursor_ = 0;  // first multimodal input that may overlap the next block to hash
};

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_CACHE_REQUEST_H_
