// Copyright 2026 The pagedkv Authors.
//
// Cache-mode replay against vLLM's real v1 KVCacheManager: data/small_trace.jsonl (made by
// bench/replay/real_peers/make_small_trace.py) replayed through vLLM 0.33.0 by
// bench/replay/real_peers/vllm_replay.py, once, on a CPU; its hit counts are stored in
// data/small_trace_vllm.jsonl (one line per block size, capacity and block model; "vllm" names
// the version). Default replay must give vLLM-as-it-serves' counts exactly ("serve" lines), and
// --cache-partial-tail those of vLLM fed pagedkv's old block model ("pagedkv" lines). LRU, which
// is what vLLM's free queue is.
#include <fstream>
#include <string>
#include <vector>

#include "engine/tools/replay/cache_mode/cache_replay.h"
#include "engine/tools/replay/workload/block_expansion.h"
#include "engine/tools/replay/workload/mooncake_trace.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pagedkv::replay {
namespace {

std::string DataPath(const char* name) { return std::string(PAGEDKV_TEST_DATA_DIR) + "/" + name; }

std::vector<nlohmann::json> Expectations() {
  std::vector<nlohmann::json> rows;
  std::ifstream in(DataPath("small_trace_vllm.jsonl"));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

TEST(VllmReferenceTest, ReplayEqualsVllmsRealManagerInBothBlockModels) {
  const std::vector<nlohmann::json> rows = Expectations();
  ASSERT_EQ(rows.size(), 12u) << "read " << DataPath("small_trace_vllm.jsonl");
  auto workload = LoadMooncakeTrace(DataPath("small_trace.jsonl"), {.trace_block_size = 16});
  ASSERT_TRUE(workload.ok()) << workload.status();
  for (const nlohmann::json& want : rows) {
    const bool partial_tail = want["model"] == "pagedkv";
    const int32_t block_size = want["block_size"];
    SCOPED_TRACE(want.dump());
    ASSERT_EQ(want["vllm"], "0.33.0");
    ASSERT_EQ(want["trace_block_size"], 16);
    auto e = ExpandWorkload(
        *workload,
        {.block_size = block_size, .compute_next_use = false, .cache_partial_tail = partial_tail});
    ASSERT_TRUE(e.ok()) << e.status();
    auto got = RunCacheReplay(*e, {.capacity_blocks = want["capacity_blocks"], .policy = "lru"});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->blocks, want["blocks"].get<int64_t>());
    EXPECT_EQ(got->hit_blocks, want["hit_blocks"].get<int64_t>());
    EXPECT_EQ(got->hit_tokens, want["hit_tokens"].get<int64_t>());
    EXPECT_EQ(got->total_tokens, want["total_tokens"].get<int64_t>());
  }
}

}  // namespace
}  // namespace pagedkv::replay
