// Copyright 2026 The pagedkv Authors.
//
// Block residency histograms (fed by the pool's lifecycle hooks, on a fake clock) and
// KvCacheManager::WritePrometheus. tests/python/test_metrics.py parses the text with Debian's
// prometheus_client.
#include "pagedkv/cache/cache_metrics.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"

namespace pagedkv {
namespace {

std::vector<TokenId> Iota(int n, int start = 0) {
  std::vector<TokenId> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + i;
  return v;
}

TEST(HistogramTest, BucketsHoldValuesUpToTheirBound) {
  Histogram h({1.0, 2.0, 5.0});
  for (double v : {0.5, 1.0, 1.5, 5.0, 7.0}) h.Observe(v);
  EXPECT_EQ(std::vector<int64_t>(h.counts().begin(), h.counts().end()),
            (std::vector<int64_t>{2, 1, 1, 1}));
  EXPECT_EQ(h.count(), 5);
  EXPECT_DOUBLE_EQ(h.sum(), 15.0);
  h.Clear();
  EXPECT_EQ(h.count(), 0);
  const std::vector<double> bounds = Histogram::DefaultSecondsBounds();
  EXPECT_DOUBLE_EQ(bounds.front(), 0.001);
  EXPECT_DOUBLE_EQ(bounds.back(), 1800.0);
  EXPECT_TRUE(std::is_sorted(bounds.begin(), bounds.end()));
}

class MetricsTest : public ::testing::Test {
 protected:
  std::unique_ptr<KvCacheManager> Make(bool collect) {
    return *KvCacheManager::Create({.num_blocks = 4,
                                    .block_size = 4,
                                    .collect_block_metrics = collect,
                                    .metrics_clock = [this] { return now_; }});
  }
  void Serve(KvCacheManager& m, RequestId id, std::vector<TokenId> prompt) {
    CacheRequest req = *m.NewRequest(id, prompt);
    ComputedBlocks hit = *m.GetComputedBlocks(req);
    ASSERT_TRUE(m.AllocateSlots(req, req.num_tokens() - hit.num_computed_tokens, hit).ok());
  }
  double now_ = 0.0;
};

TEST_F(MetricsTest, LifetimeIdleAndReuseGapFollowTheBlocks) {
  auto m = Make(true);
  Serve(*m, 1, Iota(8));  // t=0: blocks A, B stored
  now_ = 1.0;
  ASSERT_TRUE(m->Free(1).ok());  // A, B released at 1
  now_ = 3.0;
  Serve(*m, 2, Iota(8));  // hits A only (the last block is always computed): reuse gap 3
  now_ = 4.0;
  ASSERT_TRUE(m->Free(2).ok());  // A released at 4
  now_ = 10.0;
  Serve(*m, 3, Iota(16, 100));  // 4 blocks: evicts A and B
  const BlockLifecycleMetrics& bm = *m->block_metrics();
  EXPECT_EQ(bm.reuse_gap().count(), 1);
  EXPECT_DOUBLE_EQ(bm.reuse_gap().sum(), 3.0);
  EXPECT_EQ(bm.lifetime().count(), 2);
  EXPECT_DOUBLE_EQ(bm.lifetime().sum(), 20.0);
  EXPECT_EQ(bm.idle_before_evict().count(), 2);
  EXPECT_DOUBLE_EQ(bm.idle_before_evict().sum(), 6.0 + 9.0);
  m->ResetStats();
  EXPECT_EQ(m->block_metrics()->lifetime().count(), 0);
}

TEST_F(MetricsTest, WritesThePrometheusTextFormat) {
  auto m = Make(true);
  Serve(*m, 1, Iota(8));
  now_ = 0.5;
  ASSERT_TRUE(m->Free(1).ok());
  Serve(*m, 2, Iota(8));
  std::string text = "# earlier families\n";
  ASSERT_TRUE(m->WritePrometheus(&text, {.labels = {{"model", "tiny \"v1\"\n"}}}).ok());
  EXPECT_EQ(text.rfind("# earlier families\n", 0), 0u);  // appended
  const std::string l = "{model=\"tiny \\\"v1\\\"\\n\"}";
  for (const std::string& line : std::vector<std::string>{
           "# TYPE pagedkv_prefix_cache_queries_total counter",
           "pagedkv_prefix_cache_lookups_total" + l + " 2",
           "pagedkv_prefix_cache_queries_total" + l + " 16",
           "pagedkv_prefix_cache_hits_total" + l + " 4",
           "pagedkv_prefix_cache_stored_blocks_total" + l + " 2",
           "pagedkv_prefix_cache_evicted_blocks_total" + l + " 0",
           "# TYPE pagedkv_kv_cache_usage_ratio gauge",
           "pagedkv_kv_cache_usage_ratio" + l + " 0.5",
           "pagedkv_kv_cache_blocks" + l + " 4",
           "# TYPE pagedkv_kv_block_reuse_gap_seconds histogram",
           "pagedkv_kv_block_reuse_gap_seconds_bucket{model=\"tiny \\\"v1\\\"\\n\",le=\"0.5\"} 1",
           "pagedkv_kv_block_reuse_gap_seconds_bucket{model=\"tiny "
           "\\\"v1\\\"\\n\",le=\"0.2\"} 0",
           "pagedkv_kv_block_reuse_gap_seconds_bucket{model=\"tiny \\\"v1\\\"\\n\",le=\"+Inf\"} 1",
           "pagedkv_kv_block_reuse_gap_seconds_sum" + l + " 0.5",
           "pagedkv_kv_block_reuse_gap_seconds_count" + l + " 1",
           "pagedkv_kv_block_lifetime_seconds_count" + l + " 0",
       }) {
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line << "\n---\n" << text;
  }
}

TEST_F(MetricsTest, HistogramsOnlyWhenCollectedAndBadLabelsAreRefused) {
  auto m = Make(false);
  EXPECT_EQ(m->block_metrics(), nullptr);
  std::string text;
  ASSERT_TRUE(m->WritePrometheus(&text).ok());
  EXPECT_NE(text.find("pagedkv_prefix_cache_hits_total 0\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("_seconds"), std::string::npos);
  for (const char* bad : {"", "1x", "__x", "le", "a-b"}) {
    std::string out = "kept";
    EXPECT_EQ(m->WritePrometheus(&out, {.labels = {{bad, "v"}}}).code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_EQ(out, "kept");
  }
}

}  // namespace
}  // namespace pagedkv
