// Copyright 2026 The pagedkv Authors.
//
// Every eviction policy of EvictionPolicyNames() under a real KvCacheManager (token verification
// on): random requests that share document prefixes, admitted and freed in random order.
// After every step the manager's invariants hold; every hit's blocks hold exactly the request's
// tokens; and the hits never exceed those of an infinite cache (every full block ever computed).
// Victim order is each policy's own (tests/cache/policies/*_policy_test.cc); this checks what the
// pool and the manager make of it.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/cache/eviction_policy.h"
#include "pagedkv/cache/kv_cache_manager.h"

namespace pagedkv {
namespace {

constexpr int kBs = 4;

class PolicyUnderManager : public ::testing::TestWithParam<std::string> {};

TEST_P(PolicyUnderManager, RandomTrafficKeepsInvariantsAndHitsOnlyTrueContent) {
  std::mt19937 rng(29);
  auto made = KvCacheManager::Create(
      {.num_blocks = 24, .block_size = kBs, .verify_tokens = true, .eviction_policy = GetParam()});
  ASSERT_TRUE(made.ok()) << made.status();
  KvCacheManager& m = **made;
  std::vector<std::vector<TokenId>> docs(5, std::vector<TokenId>(40));
  for (auto& doc : docs) {
    for (TokenId& t : doc) t = static_cast<TokenId>(rng() % 7);
  }
  std::set<std::vector<TokenId>> computed;  // every full-block prefix ever computed
  std::vector<RequestId> live;
  int64_t hit_tokens = 0, infinite_tokens = 0;
  for (RequestId id = 1; id < 1500; ++id) {
    if (!live.empty() && (live.size() >= 3 || rng() % 2 == 0)) {
      const size_t k = rng() % live.size();
      ASSERT_TRUE(m.Free(live[k]).ok());
      live.erase(live.begin() + static_cast<ptrdiff_t>(k));
    }
    const auto& doc = docs[rng() % docs.size()];
    std::vector<TokenId> prompt(doc.begin(), doc.begin() + 4 + rng() % 30);
    for (int i = 0, n = static_cast<int>(rng() % 6); i < n; ++i) prompt.push_back(rng() % 7);
    auto req = m.NewRequest(id, prompt);
    ASSERT_TRUE(req.ok()) << req.status();
    auto hit = m.GetComputedBlocks(*req);
    ASSERT_TRUE(hit.ok()) << hit.status();
    for (size_t b = 0; b < hit->blocks.size(); ++b) {
      const auto begin = prompt.begin() + static_cast<ptrdiff_t>(b * kBs);
      ASSERT_TRUE(m.pool().TokensMatch(hit->blocks[b], {&*begin, kBs})) << "block " << b;
    }
    const int64_t max_blocks = (static_cast<int64_t>(prompt.size()) - 1) / kBs;
    int64_t ideal = 0;
    while (ideal < max_blocks && computed.contains(std::vector<TokenId>(
                                     prompt.begin(), prompt.begin() + (ideal + 1) * kBs)))
      ++ideal;
    ASSERT_LE(static_cast<int64_t>(hit->blocks.size()), ideal);
    const absl::Status st =
        m.AllocateSlots(*req, req->num_tokens() - hit->num_computed_tokens, *hit);
    if (!st.ok()) {  // out of blocks: the request is not admitted
      ASSERT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
      ASSERT_TRUE(m.ValidateInvariants().ok());
      continue;
    }
    live.push_back(id);
    hit_tokens += hit->num_computed_tokens;
    infinite_tokens += ideal * kBs;
    for (int64_t b = 1; b * kBs <= static_cast<int64_t>(prompt.size()); ++b) {
      computed.insert(std::vector<TokenId>(prompt.begin(), prompt.begin() + b * kBs));
    }
    ASSERT_TRUE(m.ValidateInvariants().ok());
  }
  EXPECT_GT(hit_tokens, 0);
  EXPECT_LT(hit_tokens, infinite_tokens);  // 24 blocks cannot hold five documents
  EXPECT_GT(m.stats().evictions, 0);
}

std::vector<std::string> Names() {
  std::vector<std::string> out;
  for (std::string_view n : EvictionPolicyNames()) out.emplace_back(n);
  return out;
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, PolicyUnderManager, ::testing::ValuesIn(Names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace pagedkv
