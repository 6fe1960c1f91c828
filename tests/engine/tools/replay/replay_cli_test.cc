// Copyright 2026 The pagedkv Authors.
//
// `pagedkv replay` end to end, in process: CLI11 parsing, RunReplay, output and exit codes.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "engine/tools/cli/commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pagedkv::cli {
namespace {

using ::testing::HasSubstr;

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

CliResult RunCli(std::vector<std::string> args) {
  CLI::App app{"pagedkv"};
  app.require_subcommand(1);
  CliResult result;
  AddReplayCommand(app, &result.exit_code);
  args.insert(args.begin(), "pagedkv");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    result.exit_code = app.exit(e);
  }
  result.out = ::testing::internal::GetCapturedStdout();
  result.err = ::testing::internal::GetCapturedStderr();
  return result;
}

std::string TempDir(const std::string& name) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

TEST(ReplayCliTest, RagJsonCountsShiftedHitsUnlessTurnedOff) {
  CliResult r = RunCli(
      {"replay", "--workload", "rag", "--requests", "150", "--capacity-blocks", "3000", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["shifted_counted"].get<bool>());
  for (const char* key :
       {"shifted_hit_tokens", "shifted_hit_rate", "prefix_plus_shifted_token_hit_rate"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_GT(j["shifted_hit_tokens"].get<int64_t>(), 0);
  CliResult off = RunCli({"replay", "--workload", "rag", "--requests", "150", "--capacity-blocks",
                          "3000", "--json", "--no-shifted"});
  ASSERT_EQ(off.exit_code, 0) << off.err;
  const auto jo = nlohmann::json::parse(off.out);
  EXPECT_FALSE(jo["shifted_counted"].get<bool>());
  EXPECT_FALSE(jo.contains("shifted_hit_rate"));
}

TEST(ReplayCliTest, ServeModeCountsShiftedHitsAndComparesWithoutThem) {
  const std::vector<std::string> base = {"replay", "--mode",     "serve", "--workload",
                                         "rag",    "--requests", "100",   "--capacity-blocks",
                                         "4000"};
  std::vector<std::string> args = base;
  args.push_back("--json");
  CliResult r = RunCli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["shifted_counted"].get<bool>());
  EXPECT_GT(j["shifted_hit_tokens"].get<int64_t>(), 0);
  ASSERT_TRUE(j.contains("without_shifted"));
  EXPECT_GT(j["without_shifted"]["computed_tokens"].get<int64_t>(),
            j["computed_tokens"].get<int64_t>());
  args.push_back("--no-shifted");
  CliResult off = RunCli(args);
  ASSERT_EQ(off.exit_code, 0) << off.err;
  const auto jo = nlohmann::json::parse(off.out);
  EXPECT_FALSE(jo["shifted_counted"].get<bool>());
  EXPECT_FALSE(jo.contains("without_shifted"));
  EXPECT_EQ(jo["computed_tokens"], j["without_shifted"]["computed_tokens"]);
  CliResult table = RunCli(base);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("shifted hit rate"));
  EXPECT_THAT(table.out, HasSubstr("without shifted reuse"));
}

TEST(ReplayCliTest, JsonHasTheDocumentedFields) {
  CliResult r = RunCli({"replay", "--workload", "system-prompt", "--requests", "200",
                        "--capacity-blocks", "500", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"requests", "blocks", "hit_blocks", "block_hit_rate", "token_hit_rate",
                          "infinite_cache_block_hit_rate", "evictions", "misses"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["requests"], 200);
  EXPECT_EQ(j["policy"], "lru");
  EXPECT_EQ(j["capacity_blocks"], 500);
  EXPECT_LE(j["block_hit_rate"].get<double>(), j["infinite_cache_block_hit_rate"].get<double>());
  EXPECT_TRUE(j["misses"].contains("never_seen"));
  EXPECT_TRUE(j["misses"].contains("evicted"));
  EXPECT_TRUE(j["misses"].contains("not_full_block_tokens"));
}

TEST(ReplayCliTest, SweepWritesCsvAndPlotAndTable) {
  const std::string dir = TempDir("replay_sweep");
  CliResult r = RunCli({"replay", "--workload", "rag", "--requests", "150", "--sweep", "50,200,800",
                        "--policies", "lru,belady", "--out-dir", dir, "--plot", dir + "/plot.svg"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("belady"));
  EXPECT_THAT(r.out, HasSubstr("block_hit"));
  std::ifstream csv(dir + "/rag_sweep.csv");
  ASSERT_TRUE(csv.good());
  std::string line;
  int lines = 0;
  while (std::getline(csv, line)) ++lines;
  EXPECT_EQ(lines, 1 + 3 * 2);  // header + capacities x policies
  std::ifstream svg(dir + "/plot.svg");
  ASSERT_TRUE(svg.good());
  std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("<svg"));
}

TEST(ReplayCliTest, ServeModePrintsTtftAndThroughput) {
  CliResult r = RunCli({"replay", "--workload", "system-prompt", "--requests", "60", "--mode",
                        "serve", "--gpu", "H100", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["finished"], 60);
  EXPECT_TRUE(j.contains("ttft_p99_s"));
  EXPECT_TRUE(j.contains("output_tokens_per_second"));
  EXPECT_EQ(j["gpu"], "H100");
}

// --kv-cache-dtype sets the KV bytes of a block: 1 GiB of llama-3-8b KV (32 layers, 8 KV heads,
// head_dim 128, 16-token blocks) holds 512 bf16 blocks, 1008 int8 ones (128 + 2 bytes a row) and
// 1820 q4_0 ones (4 blocks of 18 bytes); serve mode's pool grows the same way.
TEST(ReplayCliTest, KvCacheDTypeSetsTheBlocksAGibHolds) {
  const std::vector<std::pair<std::string, std::string>> want = {{"bf16", "lru              512"},
                                                                 {"int8", "lru             1008"},
                                                                 {"q4_0", "lru             1820"}};
  for (const auto& [dtype, row] : want) {
    CliResult r = RunCli({"replay", "--workload", "system-prompt", "--requests", "50",
                          "--capacity-gib", "1", "--policy", "lru", "--kv-cache-dtype", dtype});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr(row)) << dtype;
    EXPECT_THAT(r.out, HasSubstr("of " + dtype + " KV")) << dtype;
  }
  auto serve_blocks = [](const std::string& dtype) {
    CliResult r = RunCli({"replay", "--workload", "system-prompt", "--requests", "20", "--mode",
                          "serve", "--json", "--kv-cache-dtype", dtype});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out)["capacity_blocks"].get<int64_t>();
  };
  EXPECT_GT(serve_blocks("int8"), 19 * serve_blocks("bf16") / 10);
  CliResult bad = RunCli(
      {"replay", "--workload", "system-prompt", "--capacity-gib", "1", "--kv-cache-dtype", "int3"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("--kv-cache-dtype: unknown dtype 'int3'"));
}

// A measured profile replaces the GPU preset and the model preset's bytes: a device 1,000x
// slower than an H100 makes every request slower, and the JSON names the profile.
TEST(ReplayCliTest, HardwareProfileStandsInForTheGpu) {
  const std::string path = TempDir("hardware_profile") + "/profile.json";
  std::ofstream(path) << R"({"name": "slow-cpu", "model": "smollm2-135m", "peak_flops": 1e10,
      "memory_bandwidth": 1e10, "memory_bytes": 1e12, "step_overhead_s": 0.002,
      "additive": true, "kv_bytes_per_element": 4, "weight_bytes_per_parameter": 4})";
  const std::vector<std::string> base = {"replay", "--workload", "system-prompt", "--requests",
                                         "20",     "--mode",     "serve",         "--json"};
  std::vector<std::string> profiled = base;
  profiled.insert(profiled.end(), {"--hardware-profile", path, "--capacity-blocks", "4000"});
  CliResult slow = RunCli(profiled);
  ASSERT_EQ(slow.exit_code, 0) << slow.err;
  std::vector<std::string> h100 = base;
  h100.insert(h100.end(),
              {"--gpu", "H100", "--model", "smollm2-135m", "--capacity-blocks", "4000"});
  CliResult fast = RunCli(h100);
  ASSERT_EQ(fast.exit_code, 0) << fast.err;
  const auto s = nlohmann::json::parse(slow.out);
  const auto f = nlohmann::json::parse(fast.out);
  EXPECT_EQ(s["gpu"], "slow-cpu");
  EXPECT_EQ(s["model"], "smollm2-135m");
  EXPECT_EQ(s["finished"], 20);
  EXPECT_GT(s["ttft_p50_s"].get<double>(), 10 * f["ttft_p50_s"].get<double>());

  profiled.back() = "1";  // --capacity-gib is refused with a profile
  profiled[profiled.size() - 2] = "--capacity-gib";
  CliResult gib = RunCli(profiled);
  EXPECT_NE(gib.exit_code, 0);
  EXPECT_THAT(gib.err, HasSubstr("--capacity-blocks"));
}

// Inputs that would need far more memory than the budget are refused up front, naming the flag
// or the trace line responsible; none aborts.
TEST(ReplayCliTest, MemoryBudgetRefusesHugeWorkloadsUpFront) {
  const std::string dir = ::testing::TempDir();
  const std::string giant = dir + "/giant.jsonl";
  {
    std::ofstream out(giant);
    out << R"({"timestamp": 0, "input_length": 2147483648, "output_length": 1, )"
        << R"("hash_ids": [1, 2]})"
        << "\n";
    out << R"({"timestamp": 1, "input_length": 2147483648, "output_length": 1, )"
        << R"("hash_ids": [3, 4]})"
        << "\n";
  }
  CliResult expand = RunCli({"replay", "--trace", giant, "--trace-block-size", "1073741824",
                             "--capacity-blocks", "1000", "--max-memory-gib", "4"});
  EXPECT_NE(expand.exit_code, 0);
  EXPECT_THAT(expand.err, HasSubstr("giant.jsonl line 1"));
  EXPECT_THAT(expand.err, HasSubstr("more than --max-memory-gib 4"));
  // Serve mode never materializes a prompt longer than the pool: both are rejected.
  CliResult serve = RunCli({"replay", "--trace", giant, "--trace-block-size", "1073741824",
                            "--mode", "serve", "--capacity-blocks", "1000", "--json"});
  ASSERT_EQ(serve.exit_code, 0) << serve.err;
  EXPECT_EQ(nlohmann::json::parse(serve.out)["rejected"], 2);
  CliResult requests = RunCli({"replay", "--requests", "2000000000", "--max-memory-gib", "4"});
  EXPECT_NE(requests.exit_code, 0);
  EXPECT_THAT(requests.err, HasSubstr("--requests 2000000000"));
  CliResult pool = RunCli({"replay", "--requests", "30", "--capacity-blocks", "2147483647"});
  EXPECT_NE(pool.exit_code, 0);
  EXPECT_THAT(pool.err, HasSubstr("a pool of 2147483647 blocks (--capacity-blocks 2147483647)"));
}

struct ErrorCase {
  std::vector<std::string> args;
  std::string message;
};

class ReplayCliErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ReplayCliErrorTest, FailsWithAClearMessage) {
  std::vector<std::string> args = {"replay", "--requests", "30"};
  args.insert(args.end(), GetParam().args.begin(), GetParam().args.end());
  CliResult r = RunCli(args);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr(GetParam().message));
  EXPECT_EQ(r.out, "");
}

INSTANTIATE_TEST_SUITE_P(
    All, ReplayCliErrorTest,
    ::testing::Values(ErrorCase{{"--trace", "/no/such/trace.jsonl.gz"}, "not found"},
                      ErrorCase{{"--capacity-blocks", "0"},
                                "--capacity-blocks: 0 is not a number > 0"},
                      ErrorCase{{"--capacity-blocks", "-1"}, "-1 is not a number > 0"},
                      ErrorCase{{"--sweep", "100,0"}, "'0' in '100,0' is not a capacity"},
                      ErrorCase{{"--sweep", "1,,2"}, "'' in '1,,2' is not a capacity"},
                      ErrorCase{{"--capacity-gib", "0"}, "--capacity-gib: 0 is not a number > 0"},
                      ErrorCase{{"--capacity-gib", "-1"}, "-1 is not a number > 0"},
                      ErrorCase{{"--capacity-gib", "nan"}, "nan is not a finite number"},
                      ErrorCase{{"--capacity-gib", "inf"}, "inf is not a finite number"},
                      ErrorCase{{"--capacity-gib", "1e30"}, "at most 2^31 - 1 blocks"},
                      ErrorCase{{"--gpu-memory-utilization", "1.5"}, "not a fraction in (0, 1]"},
                      ErrorCase{{"--requests", "-5"}, "-5 is not a number >= 0"},
                      ErrorCase{{"--max-memory-gib", "0"}, "0 is not a number > 0"},
                      ErrorCase{{"--capacity-gib", "1e-9"}, "holds no block"},
                      ErrorCase{{"--policies", "lru,mru"}, "unknown eviction policy \"mru\""},
                      ErrorCase{{"--mode", "serve", "--policy", "belady"}, "cache mode only"},
                      ErrorCase{{"--mode", "batch"}, "unknown --mode"},
                      ErrorCase{{"--workload", "nope"}, "unknown workload"},
                      ErrorCase{{"--block-size", "0"}, "--block-size: 0 is not a number > 0"},
                      ErrorCase{{"--capacity-blocks", "10", "--capacity-gib", "1"}, "excludes"},
                      ErrorCase{{"--model", "gpt-9", "--capacity-gib", "1"}, "unknown model"}));

INSTANTIATE_TEST_SUITE_P(
    HostStore, ReplayCliErrorTest,
    ::testing::Values(ErrorCase{{"--host-capacity-blocks", "10", "--host-store-policy", "lazy"},
                                "write-through"},
                      ErrorCase{{"--host-store-threshold", "-1"}, "-1 is not a number >= 0"}));

// The store flags reach the simulated host tier, in the words of `pagedkv generate`
// (--host-cache-store / --host-cache-threshold are accepted as well).
TEST(ReplayCliTest, HostStoreFlagsReachTheJson) {
  for (const auto& [policy_flag, threshold_flag] :
       {std::pair{"--host-store-policy", "--host-store-threshold"},
        std::pair{"--host-cache-store", "--host-cache-threshold"}}) {
    CliResult r = RunCli({"replay", "--workload", "conversation", "--requests", "60",
                          "--capacity-blocks", "200", "--host-capacity-blocks", "400", policy_flag,
                          "write-back", threshold_flag, "2", "--json", "--no-progress"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["tiers"]["host_store_policy"], "write-back");
    EXPECT_EQ(j["tiers"]["host_store_threshold"], 2);
  }
}

// Tiers with several instances: a host tier each, one shared remote tier, per-instance and
// aggregate tier hits in the JSON.
TEST(ReplayCliTest, ServeModeSimulatesTiersWithSeveralInstances) {
  CliResult r = RunCli({"replay", "--mode", "serve", "--workload", "conversation", "--requests",
                        "80", "--instances", "2", "--capacity-blocks", "300",
                        "--host-capacity-blocks", "200", "--remote-capacity-blocks", "4000",
                        "--host-store-threshold", "1", "--json", "--no-progress"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tiers"]["remote_shared"], true);
  EXPECT_EQ(j["tiers"]["host_store_threshold"], 1);
  ASSERT_EQ(j["per_instance"].size(), 2u);
  int64_t remote = 0;
  for (const auto& instance : j["per_instance"]) {
    remote += instance["tiers"]["remote_hit_tokens"].get<int64_t>();
  }
  EXPECT_EQ(remote, j["tiers"]["remote_hit_tokens"].get<int64_t>());
  EXPECT_TRUE(j["oracle"].contains("tiers"));
}

// The memory budget names the tier flag that is too large, not the pool's capacity flag.
TEST(ReplayCliTest, MemoryBudgetNamesTheTierFlag) {
  CliResult r = RunCli({"replay", "--requests", "30", "--host-capacity-blocks", "100000000000",
                        "--max-memory-gib", "1"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("a host tier of 100000000000 blocks (--host-capacity-blocks "
                               "100000000000)"));
  CliResult serve = RunCli({"replay", "--mode", "serve", "--requests", "30", "--instances", "4",
                            "--capacity-blocks", "1000", "--remote-capacity-blocks", "100000000000",
                            "--max-memory-gib", "1"});
  EXPECT_NE(serve.exit_code, 0);
  EXPECT_THAT(serve.err, HasSubstr("per instance, 4 instances, and a remote tier of "
                                   "100000000000 blocks (--remote-capacity-blocks"));
}

TEST(ReplayCliTest, MalformedTraceLineStopsOrIsSkipped) {
  const std::string dir = TempDir("replay_bad_trace");
  const std::string path = dir + "/bad.jsonl";
  {
    std::ofstream out(path);
    out << R"({"timestamp": 0, "input_length": 20, "output_length": 2, "hash_ids": [1]})"
        << "\n"
        << R"({"timestamp": 1, "input_length": 20, "output_length": 2, "hash_ids": [1, 2]})"
        << "\n"
        << R"({"timestamp": 2, "input_length": 20, "output_length": 2, "hash_ids": [1]})"
        << "\n";
  }
  CliResult bad = RunCli({"replay", "--trace", path, "--capacity-blocks", "10"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("bad.jsonl: line 2: 2 hash_ids"));

  CliResult skip =
      RunCli({"replay", "--trace", path, "--capacity-blocks", "10", "--skip-bad-lines", "--json"});
  ASSERT_EQ(skip.exit_code, 0) << skip.err;
  EXPECT_THAT(skip.err, HasSubstr("skipped 1 malformed line"));
  const auto j = nlohmann::json::parse(skip.out);
  EXPECT_EQ(j["skipped_lines"], 1);
  EXPECT_EQ(j["requests"], 2);
  EXPECT_EQ(j["hit_blocks"], 1);  // the second good line repeats the first
}

}  // namespace
}  // namespace pagedkv::cli
