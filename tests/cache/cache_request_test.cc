// Copyright 2026 The pagedkv Authors.
#include "pagedkv/cache/cache_request.h"

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cache/test_hashers.h"

namespace pagedkv {
namespace {

std::vector<TokenId> Iota(int n, int start = 0) {
  std::vector<TokenId> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + i;
  return v;
}

// The chain computed directly with HashBlock, as the header documents it.
std::vector<BlockHash> DirectChain(const std::vector<TokenId>& tokens, int bs,
                                   const BlockHash& root, uint64_t adapter = 0) {
  std::vector<BlockHash> out;
  BlockHash parent = root;
  for (size_t i = 0; (i + 1) * bs <= tokens.size(); ++i) {
    parent =
        HashBlock(DefaultBlockHasher(), parent,
                  std::span<const TokenId>(tokens).subspan(i * bs, bs), {.adapter_id = adapter});
    out.push_back(parent);
  }
  return out;
}

TEST(CacheRequestTest, HashesOnlyFullBlocks) {
  auto req = CacheRequest::Create({.id = 3, .block_size = 4, .model_fingerprint = "m"}, Iota(10));
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->id(), 3u);
  EXPECT_EQ(req->num_tokens(), 10);
  EXPECT_EQ(req->num_prompt_tokens(), 10);
  EXPECT_EQ(req->num_full_blocks(), 2);
  EXPECT_EQ(req->root_hash(), RootHash("", "m"));
  const std::vector<BlockHash> want = DirectChain(Iota(10), 4, RootHash("", "m"));
  EXPECT_EQ(std::vector<BlockHash>(req->block_hashes().begin(), req->block_hashes().end()), want);
  EXPECT_EQ(req->ParentHashOf(0), req->root_hash());
  EXPECT_EQ(req->ParentHashOf(1), want[0]);
  EXPECT_EQ(std::vector<TokenId>(req->BlockTokens(1).begin(), req->BlockTokens(1).end()),
            (std::vector<TokenId>{4, 5, 6, 7}));
}

TEST(CacheRequestTest, IncrementalAppendEqualsHashingAtOnce) {
  const std::vector<TokenId> all = Iota(37, 100);
  auto whole = CacheRequest::Create({.block_size = 5, .cache_salt = "s", .adapter_id = 9}, all);
  ASSERT_TRUE(whole.ok());
  auto inc = CacheRequest::Create({.block_size = 5, .cache_salt = "s", .adapter_id = 9},
                                  std::span<const TokenId>(all).subspan(0, 3));
  ASSERT_TRUE(inc.ok());
  size_t pos = 3;
  int step = 1;
  while (pos < all.size()) {
    const size_t n = std::min<size_t>(step, all.size() - pos);
    ASSERT_TRUE(inc->AppendTokens(std::span<const TokenId>(all).subspan(pos, n)).ok());
    pos += n;
    step = step % 4 + 1;
    EXPECT_EQ(inc->num_full_blocks(), static_cast<int64_t>(pos / 5));
  }
  EXPECT_EQ(inc->num_prompt_tokens(), 3);
  EXPECT_EQ(std::vector<BlockHash>(inc->block_hashes().begin(), inc->block_hashes().end()),
            std::vector<BlockHash>(whole->block_hashes().begin(), whole->block_hashes().end()));
  EXPECT_EQ(std::vector<BlockHash>(whole->block_hashes().begin(), whole->block_hashes().end()),
            DirectChain(all, 5, RootHash("s", ""), 9));
}

TEST(CacheRequestTest, SaltAdapterAndFingerprintSeparateChains) {
  const std::vector<TokenId> p = Iota(8);
  auto base = CacheRequest::Create({.block_size = 4}, p);
  auto salted = CacheRequest::Create({.block_size = 4, .cache_salt = "x"}, p);
  auto adapted = CacheRequest::Create({.block_size = 4, .adapter_id = 1}, p);
  auto other_model = CacheRequest::Create({.block_size = 4, .model_fingerprint = "m2"}, p);
  ASSERT_TRUE(base.ok() && salted.ok() && adapted.ok() && other_model.ok());
  for (int i = 0; i < 2; ++i) {
    EXPECT_NE(base->block_hashes()[i], salted->block_hashes()[i]);
    EXPECT_NE(base->block_hashes()[i], adapted->block_hashes()[i]);
    EXPECT_NE(base->block_hashes()[i], other_model->block_hashes()[i]);
  }
  EXPECT_EQ(base->root_hash(), kEmptyRootHash);
}

TEST(CacheRequestTest, MultimodalHashesGoIntoOverlappingBlocksOnly) {
  const std::vector<TokenId> p = Iota(16);
  const BlockHash image{0xabc, 0xdef};
  // Input covers tokens [5, 9): blocks 1 ([4,8)) and 2 ([8,12)).
  auto plain = CacheRequest::Create({.block_size = 4}, p);
  auto mm = CacheRequest::Create(
      {.block_size = 4, .multimodal = {{.offset = 5, .length = 4, .content_hash = image}}}, p);
  ASSERT_TRUE(plain.ok() && mm.ok()) << mm.status();
  EXPECT_EQ(plain->block_hashes()[0], mm->block_hashes()[0]);
  EXPECT_NE(plain->block_hashes()[1], mm->block_hashes()[1]);
  // Block 2 differs through its own key and its parent; check its own key explicitly.
  const BlockHash keys[1] = {image};
  EXPECT_EQ(mm->block_hashes()[2],
            HashBlock(DefaultBlockHasher(), mm->block_hashes()[1], mm->BlockTokens(2),
                      {.multimodal = std::span<const BlockHash>(keys)}));
  EXPECT_EQ(mm->block_hashes()[3],
            HashBlock(DefaultBlockHasher(), mm->block_hashes()[2], mm->BlockTokens(3)));
  // A different image changes the hashes.
  auto mm2 = CacheRequest::Create(
      {.block_size = 4, .multimodal = {{.offset = 5, .length = 4, .content_hash = {1, 1}}}}, p);
  ASSERT_TRUE(mm2.ok());
  EXPECT_NE(mm->block_hashes()[1], mm2->block_hashes()[1]);
}

TEST(CacheRequestTest, RejectsBadOptions) {
  EXPECT_EQ(CacheRequest::Create({.block_size = 0}, Iota(4)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CacheRequest::Create({.vocab_size = -1}, Iota(4)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      CacheRequest::Create({.multimodal = {{.offset = -1, .length = 2}}}, Iota(4)).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      CacheRequest::Create({.multimodal = {{.offset = 1, .length = 0}}}, Iota(4)).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CacheRequest::Create(
                {.multimodal = {{.offset = 4, .length = 1}, {.offset = 2, .length = 1}}}, Iota(4))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  // offset + length past INT64_MAX would wrap and the input would cover no block: two requests
  // with different images would then share block hashes.
  EXPECT_EQ(CacheRequest::Create({.multimodal = {{.offset = 2, .length = INT64_MAX}}}, Iota(4))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CacheRequestTest, VocabularyIsEnforcedAndFailedAppendChangesNothing) {
  EXPECT_EQ(CacheRequest::Create({.block_size = 2, .vocab_size = 10}, {{1, 10}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CacheRequest::Create({.block_size = 2}, {{1, -1}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto req = CacheRequest::Create({.block_size = 2, .vocab_size = 10}, {{1, 2, 3}});
  ASSERT_TRUE(req.ok());
  const std::vector<BlockHash> before(req->block_hashes().begin(), req->block_hashes().end());
  const absl::Status bad = req->AppendTokens({{4, 5, 99}});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("99"), std::string::npos) << bad;
  EXPECT_EQ(req->num_tokens(), 3);
  EXPECT_EQ(std::vector<BlockHash>(req->block_hashes().begin(), req->block_hashes().end()), before);
  EXPECT_TRUE(req->AppendToken(9).ok());
  EXPECT_EQ(req->num_full_blocks(), 2);
}

TEST(CacheRequestTest, VocabularyBoundaries) {
  constexpr TokenId kMax = std::numeric_limits<TokenId>::max();
  constexpr TokenId kMin = std::numeric_limits<TokenId>::min();
  EXPECT_TRUE(CacheRequest::Create({.vocab_size = 10}, {{0, 9}}).ok());
  EXPECT_FALSE(CacheRequest::Create({.vocab_size = 10}, {{0, 10}}).ok());
  EXPECT_FALSE(CacheRequest::Create({.vocab_size = 10}, {{kMax}}).ok());
  EXPECT_FALSE(CacheRequest::Create({.vocab_size = 10}, {{kMin}}).ok());
  EXPECT_TRUE(CacheRequest::Create({.vocab_size = kMax}, {{kMax - 1}}).ok());
  EXPECT_FALSE(CacheRequest::Create({.vocab_size = kMax}, {{kMax}}).ok());
  EXPECT_TRUE(CacheRequest::Create({}, {{0, kMax}}).ok());  // no vocabulary: only negatives fail
  EXPECT_FALSE(CacheRequest::Create({}, {{kMin}}).ok());
  // The error names the first bad token and its index.
  const absl::Status st = CacheRequest::Create({.vocab_size = 5}, {{1, 2, 7, 9}}).status();
  EXPECT_NE(st.message().find("token 7 at index 2"), std::string::npos) << st;
}

TEST(CacheRequestTest, PluggedHasherIsUsedForBlocksButNotForTheRoot) {
  auto hasher = std::make_shared<testing::CollidingHasher>(2);
  auto req = CacheRequest::Create({.block_size = 2, .hasher = hasher}, Iota(20));
  ASSERT_TRUE(req.ok());
  EXPECT_EQ(req->root_hash(), kEmptyRootHash);
  for (const BlockHash& h : req->block_hashes()) {
    EXPECT_LT(h.low, 4u);
    EXPECT_EQ(h.high, 0u);
  }
}

TEST(CacheRequestTest, CopiesAreIndependent) {
  auto req = CacheRequest::Create({.block_size = 2}, Iota(3));
  ASSERT_TRUE(req.ok());
  CacheRequest copy = *req;
  ASSERT_TRUE(copy.AppendToken(7).ok());
  EXPECT_EQ(req->num_tokens(), 3);
  EXPECT_EQ(copy.num_full_blocks(), 2);
}

}  // namespace
}  // namespace pagedkv
