// Copyright 2026 The pagedkv Authors.
//
// CacheRequest: incremental chained hashing of a request's full blocks.
#include "pagedkv/cache/cache_request.h"

#include <algorithm>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/checked_math.h"

namespace pagedkv {
namespace {

absl::Status CheckVocab(std::span<const TokenId> tokens, int32_t vocab_size, int64_t first_index) {
  // Branch-free OR reduction that vectorises even with plain SSE2: for t in [0, max_id] neither t
  // nor max_id - t has the sign bit set; a negative t, or t > max_id, sets it in one of the two.
  const uint32_t limit = vocab_size > 0 ? static_cast<uint32_t>(vocab_size) : uint32_t{1} << 31;
  const uint32_t max_id = limit - 1;
  uint32_t acc = 0;
  for (const TokenId t : tokens) {
    const auto u = static_cast<uint32_t>(t);
    acc |= u | (max_id - u);
  }
  if ((acc >> 31) == 0) return absl::OkStatus();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const TokenId t = tokens[i];
    if (static_cast<uint32_t>(t) < limit) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "token ", t, " at index ", first_index + static_cast<int64_t>(i),
        vocab_size > 0 ? absl::StrCat(" is outside the vocabulary [0, ", vocab_size, ")")
                       : std::string(" is negative")));
  }
  return absl::OkStatus();
}

}  // namespace

CacheRequest::CacheRequest(CacheRequestOptions options) : options_(std::move(options)) {
  hasher_ = options_.hasher != nullptr
                ? options_.hasher
                : std::shared_ptr<const BlockHasher>(std::shared_ptr<const BlockHasher>(),
                                                     &DefaultBlockHasher());
  root_ = RootHash(options_.cache_salt, options_.model_fingerprint);
}

absl::StatusOr<CacheRequest> CacheRequest::Create(CacheRequestOptions options,
                                                  std::span<const TokenId> prompt) {
  if (options.block_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CacheRequestOptions.block_size must be > 0, got ", options.block_size));
  }
  if (options.vocab_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CacheRequestOptions.vocab_size must be >= 0, got ", options.vocab_size));
  }
  for (size_t i = 0; i < options.multimodal.size(); ++i) {
    const MultimodalInput& mm = options.multimodal[i];
    int64_t end = 0;
    if (mm.offset < 0 || mm.length <= 0 || !CheckedAdd<int64_t>(mm.offset, mm.length, &end)) {
      return absl::InvalidArgumentError(
          absl::StrCat("multimodal input ", i, " has offset ", mm.offset, " and length ", mm.length,
                       "; need offset >= 0, length > 0 and offset + length within 64 bits"));
    }
    if (i > 0 && mm.offset < options.multimodal[i - 1].offset) {
      return absl::InvalidArgumentError(
          absl::StrCat("multimodal inputs must be sorted by offset; input ", i, " starts at ",
                       mm.offset, " before input ", i - 1));
    }
  }
  if (absl::Status p = options.priority.Validate("CacheRequestOptions.priority"); !p.ok()) {
    return p;
  }
  if (absl::Status s = ValidatePrioritySpans(options.priority_spans); !s.ok()) return s;
  absl::Status vocab = CheckVocab(prompt, options.vocab_size, 0);
  if (!vocab.ok()) return vocab;
  CacheRequest request(std::move(options));
  request.tokens_.assign(prompt.begin(), prompt.end());
  request.num_prompt_tokens_ = static_cast<int64_t>(prompt.size());
  const size_t prompt_blocks = prompt.size() / static_cast<size_t>(request.options_.block_size);
  request.block_hashes_.reserve(prompt_blocks + 1);
  request.block_extra_digests_.reserve(prompt_blocks + 1);
  request.HashNewBlocks();
  return request;
}

absl::Status CacheRequest::AppendTokens(std::span<const TokenId> tokens) {
  absl::Status vocab = CheckVocab(tokens, options_.vocab_size, num_tokens());
  if (!vocab.ok()) return vocab;
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  HashNewBlocks();
  return absl::OkStatus();
}

absl::Status CacheRequest::Truncate(int64_t num_tokens) {
  if (num_tokens < 0 || num_tokens > this->num_tokens()) {
    return absl::InvalidArgumentError(absl::StrCat("request ", id(), " has ", this->num_tokens(),
                                                   " tokens; cannot truncate it to ", num_tokens));
  }
  tokens_.resize(static_cast<size_t>(num_tokens));
  const size_t blocks = static_cast<size_t>(num_tokens / options_.block_size);
  if (block_hashes_.size() > blocks) {
    block_hashes_.resize(blocks);
    block_extra_digests_.resize(blocks);
    mm_cursor_ = 0;  // HashNewBlocks skips inputs that end before the next block again
  }
  num_prompt_tokens_ = std::min(num_prompt_tokens_, num_tokens);
  return absl::OkStatus();
}

void CacheRequest::HashNewBlocks() {
  const int64_t bs = options_.block_size;
  if (static_cast<int64_t>(block_hashes_.size() + 1) * bs > num_tokens())
    return;  // decode fast path
  const std::vector<MultimodalInput>& mm = options_.multimodal;
  absl::InlinedVector<BlockHash, 4> mm_hashes;
  while (static_cast<int64_t>(block_hashes_.size() + 1) * bs <= num_tokens()) {
    const int64_t i = static_cast<int64_t>(block_hashes_.size());
    const int64_t start = i * bs;
    const int64_t end = start + bs;
    BlockExtraKeys extra{.adapter_id = options_.adapter_id};
    if (!mm.empty()) {
      while (mm_cursor_ < mm.size() && mm[mm_cursor_].offset + mm[mm_cursor_].length <= start) {
        ++mm_cursor_;
      }
      mm_hashes.clear();
      for (size_t j = mm_cursor_; j < mm.size() && mm[j].offset < end; ++j) {
        if (mm[j].offset + mm[j].length > start) mm_hashes.push_back(mm[j].content_hash);
      }
      extra.multimodal = mm_hashes;
    }
    block_hashes_.push_back(HashBlock(*hasher_, ParentHashOf(i), BlockTokens(i), extra));
    block_extra_digests_.push_back(mm.empty() ? BlockHash{options_.adapter_id, 0}
                                              : ExtraKeysDigest(extra));
  }
}

}  // namespace pagedkv
