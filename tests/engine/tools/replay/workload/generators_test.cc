// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/workload/generators.h"

#include <algorithm>
#include <map>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagedkv::replay {
namespace {

using ::testing::HasSubstr;

bool SameWorkload(const Workload& a, const Workload& b) {
  if (a.requests.size() != b.requests.size()) return false;
  for (size_t i = 0; i < a.requests.size(); ++i) {
    const ReplayRequest& x = a.requests[i];
    const ReplayRequest& y = b.requests[i];
    if (x.arrival_ms != y.arrival_ms || x.input_length != y.input_length ||
        x.output_length != y.output_length || x.segments.size() != y.segments.size() ||
        x.chunks.size() != y.chunks.size()) {
      return false;
    }
    for (size_t s = 0; s < x.segments.size(); ++s) {
      if (x.segments[s].content_id != y.segments[s].content_id ||
          x.segments[s].length != y.segments[s].length) {
        return false;
      }
    }
  }
  return true;
}

bool IsPrefix(const std::vector<Segment>& prefix, const std::vector<Segment>& of) {
  if (prefix.size() > of.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (prefix[i].content_id != of[i].content_id || prefix[i].length != of[i].length) return false;
  }
  return true;
}

TEST(GeneratorsTest, SameSeedSameWorkloadDifferentSeedDifferent) {
  for (const std::string& name : BuiltinWorkloadNames()) {
    auto a = MakeBuiltinWorkload(name, {.num_requests = 200, .seed = 5});
    auto b = MakeBuiltinWorkload(name, {.num_requests = 200, .seed = 5});
    auto c = MakeBuiltinWorkload(name, {.num_requests = 200, .seed = 6});
    ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << name;
    EXPECT_TRUE(SameWorkload(*a, *b)) << name;
    EXPECT_FALSE(SameWorkload(*a, *c)) << name;
    EXPECT_TRUE(ValidateWorkload(*a).ok()) << name << ": " << ValidateWorkload(*a);
    EXPECT_EQ(a->name, name);
    EXPECT_GT(a->requests.size(), 50u) << name;
  }
}

TEST(GeneratorsTest, SystemPromptsFollowZipfPopularity) {
  SystemPromptOptions o{.num_requests = 4000, .num_system_prompts = 20, .zipf_alpha = 1.2};
  Workload w = GenerateSystemPromptWorkload(o);
  ASSERT_EQ(w.requests.size(), 4000u);
  std::map<uint64_t, int> count;
  std::set<uint64_t> users;
  for (const ReplayRequest& r : w.requests) {
    ASSERT_EQ(r.segments.size(), 2u);
    ++count[r.segments[0].content_id];
    EXPECT_TRUE(users.insert(r.segments[1].content_id).second) << "user messages are unique";
    EXPECT_GE(r.segments[0].length, o.system_tokens.min);
    EXPECT_LE(r.segments[0].length, o.system_tokens.max);
  }
  EXPECT_LE(count.size(), 20u);
  std::vector<int> counts;
  for (const auto& [id, n] : count) counts.push_back(n);
  std::sort(counts.rbegin(), counts.rend());
  // The most popular prompt is far more popular than the median one.
  EXPECT_GT(counts[0], 4 * counts[counts.size() / 2]);
  EXPECT_TRUE(ValidateWorkload(w).ok());
}

TEST(GeneratorsTest, EachConversationTurnExtendsThePreviousOne) {
  Workload w = GenerateConversationWorkload({.num_conversations = 40, .seed = 9});
  ASSERT_TRUE(ValidateWorkload(w).ok()) << ValidateWorkload(w);
  int later_turns = 0;
  for (size_t i = 0; i < w.requests.size(); ++i) {
    const ReplayRequest& r = w.requests[i];
    if (r.segments.size() <= 2) continue;  // a first turn: system prompt + message
    ++later_turns;
    // The previous turn: this prompt minus (answer, new message), arriving earlier, whose
    // output length is the answer's length.
    std::vector<Segment> prev(r.segments.begin(), r.segments.end() - 2);
    bool found = false;
    for (size_t j = 0; j < i && !found; ++j) {
      const ReplayRequest& p = w.requests[j];
      found = p.segments.size() == prev.size() && IsPrefix(p.segments, prev) &&
              p.output_length == r.segments[r.segments.size() - 2].length &&
              p.arrival_ms <= r.arrival_ms;
    }
    EXPECT_TRUE(found) << "request " << i << " extends no earlier turn";
  }
  EXPECT_GT(later_turns, 40);
}

TEST(GeneratorsTest, RagDocumentsAreMarkedChunksAtVaryingPositions) {
  Workload w = GenerateRagWorkload({.num_requests = 300, .num_documents = 30, .seed = 4});
  ASSERT_TRUE(ValidateWorkload(w).ok()) << ValidateWorkload(w);
  std::map<uint64_t, std::set<int64_t>> offsets;
  for (const ReplayRequest& r : w.requests) {
    ASSERT_FALSE(r.chunks.empty());
    const std::vector<TokenId> prompt = MaterializePrompt(r, 32000);
    for (const ChunkSpan& c : r.chunks) {
      offsets[c.content_id].insert(c.token_offset);
      // The span holds exactly the document's position-free tokens.
      for (int64_t k = 0; k < c.length; k += 37) {
        ASSERT_EQ(prompt[c.token_offset + k], SegmentToken(c.content_id, k, 32000));
      }
    }
  }
  int moved = 0;
  for (const auto& [doc, at] : offsets) moved += at.size() > 1;
  EXPECT_GT(moved, 5) << "shared documents should appear at several positions";
}

TEST(GeneratorsTest, MixedMergesAllThreeByArrival) {
  auto w = MakeBuiltinWorkload("mixed", {.num_requests = 300, .seed = 2});
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(std::is_sorted(
      w->requests.begin(), w->requests.end(),
      [](const ReplayRequest& a, const ReplayRequest& b) { return a.arrival_ms < b.arrival_ms; }));
  bool has_chunks = false;
  for (const ReplayRequest& r : w->requests) has_chunks |= !r.chunks.empty();
  EXPECT_TRUE(has_chunks);
}

TEST(GeneratorsTest, UnknownNameAndBadSizeAreErrors) {
  auto w = MakeBuiltinWorkload("chatbot", {});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(w.status().message(), HasSubstr("unknown workload \"chatbot\""));
  EXPECT_THAT(w.status().message(), HasSubstr("conversation"));
  EXPECT_FALSE(MakeBuiltinWorkload("rag", {.num_requests = -1}).ok());
}

TEST(GeneratorsTest, SegmentTokensAreDeterministicAndInVocabulary) {
  for (uint64_t id : {0ull, 1ull, 77ull, ~0ull}) {
    for (int64_t off = 0; off < 100; ++off) {
      const TokenId t = SegmentToken(id, off, 1000);
      EXPECT_GE(t, 0);
      EXPECT_LT(t, 1000);
      EXPECT_EQ(t, SegmentToken(id, off, 1000));
    }
  }
  EXPECT_NE(SegmentToken(1, 0, 1 << 30), SegmentToken(2, 0, 1 << 30));
}

}  // namespace
}  // namespace pagedkv::replay
