// Copyright 2026 The pagedkv Authors.
//
// Helpers shared by the scheduler tests: building a KvCacheManager, describing batch sequences as
// strings for readable expectations, and checking a batch's internal consistency (positions, slot
// mapping and block tables agree).
#ifndef PAGEDKV_TESTS_ENGINE_RUNTIME_SCHEDULER_SCHEDULER_TEST_UTIL_H_
#define PAGEDKV_TESTS_ENGINE_RUNTIME_SCHEDULER_SCHEDULER_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/runtime/scheduler.h"

namespace pagedkv::testing {

inline std::unique_ptr<KvCacheManager> MakeManager(int32_t num_blocks, int32_t block_size,
                                                   int32_t vocab_size = 0) {
  KvCacheManagerOptions options;
  options.num_blocks = num_blocks;
  options.block_size = block_size;
  options.vocab_size = vocab_size;
  options.model_fingerprint = "scheduler-test";
  auto manager = KvCacheManager::Create(options);
  EXPECT_TRUE(manager.ok()) << manager.status();
  return std::move(manager).value();
}

// Tokens first, first + 1, ..., first + n - 1.
inline std::vector<TokenId> Iota(int32_t n, TokenId first) {
  std::vector<TokenId> v(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = first + i;
  return v;
}

// "id=3 c=8 s=4 sample new hit=8": one sequence, compactly.
inline std::string Describe(const ScheduledSequence& s) {
  std::string out = absl::StrCat("id=", s.request_id, " c=", s.num_computed_tokens,
                                 " s=", s.num_scheduled_tokens);
  if (s.samples) absl::StrAppend(&out, " sample");
  if (s.newly_admitted) absl::StrAppend(&out, " new hit=", s.num_prefix_hit_tokens);
  return out;
}

inline std::string Describe(const ScheduledBatch& batch) {
  std::vector<std::string> parts;
  for (const ScheduledSequence& s : batch.sequences) parts.push_back(Describe(s));
  return absl::StrJoin(parts, " | ");
}

// Checks that the flat arrays agree with each other and with the per-sequence fields.
inline void ExpectBatchConsistent(const ScheduledBatch& batch) {
  const int32_t n = batch.num_sequences();
  const int32_t bs = batch.block_size;
  ASSERT_GT(bs, 0);
  ASSERT_EQ(batch.query_start_loc.size(), static_cast<size_t>(n + 1));
  ASSERT_EQ(batch.block_table_start.size(), static_cast<size_t>(n + 1));
  ASSERT_EQ(batch.positions.size(), batch.token_ids.size());
  ASSERT_EQ(batch.slot_mapping.size(), batch.token_ids.size());
  EXPECT_EQ(batch.query_start_loc[0], 0);
  EXPECT_EQ(batch.query_start_loc[static_cast<size_t>(n)], batch.num_tokens());
  EXPECT_EQ(batch.block_table_start[static_cast<size_t>(n)],
            static_cast<int32_t>(batch.block_table_ids.size()));
  EXPECT_EQ(batch.stats.num_scheduled_tokens, batch.num_tokens());
  EXPECT_EQ(batch.stats.num_scheduled_seqs, n);
  EXPECT_EQ(batch.stats.num_prefill_tokens + batch.stats.num_decode_tokens, batch.num_tokens());
  for (int32_t i = 0; i < n; ++i) {
    const ScheduledSequence& s = batch.sequences[static_cast<size_t>(i)];
    EXPECT_GE(s.num_scheduled_tokens, 1);
    EXPECT_EQ(s.query_start, batch.query_start_loc[static_cast<size_t>(i)]);
    EXPECT_EQ(s.query_start + s.num_scheduled_tokens,
              batch.query_start_loc[static_cast<size_t>(i + 1)]);
    EXPECT_EQ(s.block_table_start, batch.block_table_start[static_cast<size_t>(i)]);
    const auto table = batch.BlockTable(i);
    EXPECT_EQ(static_cast<int32_t>(table.size()), s.num_blocks);
    EXPECT_EQ(s.num_blocks, (s.seq_len() + bs - 1) / bs);
    for (int32_t j = 0; j < s.num_scheduled_tokens; ++j) {
      const size_t k = static_cast<size_t>(s.query_start + j);
      const int32_t pos = s.num_computed_tokens + j;
      EXPECT_EQ(batch.positions[k], pos);
      ASSERT_LT(pos / bs, static_cast<int32_t>(table.size()));
      EXPECT_EQ(batch.slot_mapping[k],
                static_cast<int64_t>(table[static_cast<size_t>(pos / bs)]) * bs + pos % bs);
    }
  }
}

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_ENGINE_RUNTIME_SCHEDULER_SCHEDULER_TEST_UTIL_H_
