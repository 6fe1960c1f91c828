// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/report.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagedkv::replay {
namespace {

using ::testing::HasSubstr;

std::vector<CacheReplayResult> TwoPolicies() {
  std::vector<CacheReplayResult> results;
  for (const char* policy : {"lru", "belady"}) {
    for (int64_t cap : {100, 1000}) {
      CacheReplayResult r;
      r.policy = policy;
      r.capacity_blocks = cap;
      r.blocks = 1000;
      r.hit_blocks = cap / 20 + (policy[0] == 'b' ? 10 : 0);
      r.infinite_hit_blocks = 300;
      results.push_back(r);
    }
  }
  return results;
}

TEST(ReportTest, BuiltInSvgHasOneLinePerPolicyAndTheInfiniteCacheLine) {
  const std::string svg = HitRateSvg(TwoPolicies(), "a <title>");
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr("a &lt;title&gt;"));
  size_t lines = 0;
  for (size_t pos = 0; (pos = svg.find("<polyline", pos)) != std::string::npos; ++pos) ++lines;
  EXPECT_EQ(lines, 2u);
  EXPECT_THAT(svg, HasSubstr(">belady</text>"));
  EXPECT_THAT(svg, HasSubstr("infinite cache"));
}

TEST(ReportTest, TableAndJsonCarryTheCounters) {
  const auto results = TwoPolicies();
  const std::string table = FormatCacheTable(results);
  EXPECT_THAT(table, HasSubstr("belady"));
  EXPECT_THAT(table, HasSubstr("30.00%"));  // infinite cache 300 / 1000
  const nlohmann::json j = CacheResultJson(results[1]);
  EXPECT_EQ(j["hit_blocks"], 50);
  EXPECT_DOUBLE_EQ(j["block_hit_rate"].get<double>(), 0.05);
  EXPECT_DOUBLE_EQ(j["infinite_cache_block_hit_rate"].get<double>(), 0.3);
}

TEST(ReportTest, KvGroupsRowsReportTheirKvAndTierHits) {
  CacheReplayResult r;
  r.capacity_blocks = 200;  // pages
  r.requests = 3;
  r.total_tokens = 1000;
  r.hit_tokens = 250;
  r.evictions = 7;
  r.host_capacity_blocks = 50;
  r.host_hit_tokens = 40;
  r.kv_groups = KvGroupsRow{.name = "hybrid",
                            .groups = "full x12 | window 128 x12",
                            .model_layers = 24,
                            .refused = 1,
                            .mean_prefill_layer_blocks = 48,
                            .peak_prefill_layer_blocks = 96,
                            .mean_decode_layer_blocks = 24,
                            .peak_decode_layer_blocks = 72};
  const std::string table = FormatCacheTable({r});
  EXPECT_THAT(table, HasSubstr("full x12 | window 128 x12"));
  EXPECT_THAT(table, HasSubstr("25.00%"));
  EXPECT_THAT(table, HasSubstr("hybrid    tiers: 40 host / 0 disk / 0 remote hit tokens"));
  EXPECT_THAT(table, ::testing::Not(HasSubstr("block_hit")));
  const nlohmann::json j = CacheResultJson(r);
  EXPECT_EQ(j["pages"], 200);
  EXPECT_EQ(j["refused"], 1);
  EXPECT_EQ(j["prefix_cache_queries"], 1000);
  EXPECT_DOUBLE_EQ(j["mean_prefill_blocks"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["peak_decode_blocks"].get<double>(), 3.0);
  EXPECT_FALSE(j.contains("block_hit_rate"));
}

TEST(ReportTest, PlotPathMustBeSvgOrPng) {
  auto r = WriteHitRatePlot(::testing::TempDir() + "/plot.pdf", TwoPolicies(), "t");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(".svg or .png"));
}

TEST(ReportTest, CsvHasAHeaderAndOneRowPerResult) {
  const std::string path = ::testing::TempDir() + "/report_test/sweep.csv";
  ASSERT_TRUE(WriteSweepCsv(path, TwoPolicies()).ok());
  std::ifstream in(path);
  std::string line;
  int rows = 0;
  std::getline(in, line);
  EXPECT_THAT(line, HasSubstr("policy,capacity_blocks"));
  while (std::getline(in, line)) ++rows;
  EXPECT_EQ(rows, 4);
}

}  // namespace
}  // namespace pagedkv::replay
