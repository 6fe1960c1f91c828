// Copyright 2026 The pagedkv Authors.
//
// Tier copies of an engine on a plugin backend (the fake plugin of tests/engine/model, loaded as
// the CUDA plugin through $PAGEDKV_CUDA_PLUGIN). Built twice:
//   FAKE_PLUGIN_HAS_COPY_STREAM 1: the plugin has the copy-stream extension and logs its calls
//     with the compute ops between them: every host-tier load is fenced into the compute stream
//     before the next forward's first op, and every write-through store comes after the compute
//     that wrote its block and is synchronized before the next op or load;
//   FAKE_PLUGIN_HAS_COPY_STREAM 0: the plugin lacks it; the same engine copies synchronously.
// Either way the greedy tokens equal an uncached CPU run's.
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/model/model_weights.h"
#include "pagedkv/runtime/engine.h"
#include "tests/engine/model/tiny_llama2c.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::MakeTinyLlama2c;
using ::pagedkv::testing::TinyShape;
using ::pagedkv::testing::WriteTempFile;

constexpr int kBlockSize = 4;

// The fake plugin's call log since the last call ("" for a plugin without the log).
std::string TakeLog() {
  void* lib = dlopen(FAKE_PLUGIN, RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return "";
  auto log = reinterpret_cast<const char* (*)()>(dlsym(lib, "fake_plugin_copy_log"));
  std::string out = log == nullptr ? "" : log();
  dlclose(lib);
  return out;
}

// Checks the order of a log (see the banner); returns what is wrong, empty when nothing.
std::string OrderProblem(const std::vector<std::string>& calls) {
  bool computed = false;  // an op ran since the last store run began
  for (size_t i = 0; i < calls.size(); ++i) {
    if (calls[i] == "op") computed = true;
    if (calls[i] == "load") {
      size_t j = i;
      while (j < calls.size() && calls[j] == "load") ++j;
      if (j < calls.size() && calls[j] != "fence") {
        return "loads at " + std::to_string(i) + " are followed by " + calls[j] + ", not a fence";
      }
      i = j - 1;
    } else if (calls[i] == "store") {
      if (!computed) return "a store at " + std::to_string(i) + " before any compute";
      size_t j = i;
      while (j < calls.size() && calls[j] == "store") ++j;
      if (j == calls.size() || calls[j] != "sync") {
        return "stores at " + std::to_string(i) + " are not synchronized before what follows";
      }
      computed = false;
      i = j - 1;
    }
  }
  return "";
}

class EngineCopyStreamTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(setenv("PAGEDKV_CUDA_PLUGIN", FAKE_PLUGIN, 1), 0); }

  EngineCopyStreamTest() {
    TinyShape shape;
    shape.seq_len = 96;
    shape.shared_classifier = false;
    const auto path =
        WriteTempFile("engine_copy_stream_model.bin", MakeTinyLlama2c(shape, 43).FileBytes());
    weights_ =
        std::make_shared<const ModelWeights>(ModelWeights::LoadLlama2c(path.string()).value());
  }
  std::unique_ptr<Engine> MakeEngine(BackendKind backend, bool tiers) {
    EngineOptions o;
    o.backend = backend;
    o.block_size = kBlockSize;
    o.num_kv_blocks = 64;
    o.enable_prefix_caching = tiers;
    if (tiers) o.host_tier = {.capacity_blocks = 32};  // write-through
    absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Create(weights_, o);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? std::move(e).value() : nullptr;
  }
  static GenerationResult Run(Engine& engine, const std::vector<TokenId>& prompt) {
    GenerationRequest r;
    r.prompt_tokens = prompt;
    r.max_new_tokens = 10;
    r.stop_at_eos = false;
    absl::StatusOr<std::vector<GenerationResult>> out = engine.Generate({r});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? (*out)[0] : GenerationResult{};
  }
  static std::vector<TokenId> Prompt(uint32_t seed, int n) {
    std::mt19937 rng(seed);
    std::vector<TokenId> t(static_cast<size_t>(n));
    for (TokenId& x : t) x = static_cast<TokenId>(3 + rng() % 61);
    return t;
  }

  std::shared_ptr<const ModelWeights> weights_;
};

TEST_F(EngineCopyStreamTest, HostTierLoadsAreFencedBeforeTheForwardAndStoresFollowCompute) {
  const std::vector<TokenId> prompt = Prompt(11, 30);  // 7 reusable blocks
  auto cpu = MakeEngine(BackendKind::kCpu, /*tiers=*/false);
  auto engine = MakeEngine(BackendKind::kCuda, /*tiers=*/true);
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->backend_name(), "fake:0");
  const std::vector<TokenId> want = Run(*cpu, prompt).output_tokens;
  TakeLog();  // start with an empty log

  const GenerationResult first = Run(*engine, prompt);
  const std::string stores = TakeLog();
  engine->kv_cache_manager().ResetPrefixCache();  // the device forgets; the host tier keeps
  const GenerationResult second = Run(*engine, prompt);
  const std::string loads = TakeLog();

  EXPECT_EQ(first.output_tokens, want);
  EXPECT_EQ(second.output_tokens, want);
  EXPECT_EQ(second.num_host_hit_tokens, 28);
  if (!FAKE_PLUGIN_HAS_COPY_STREAM) {
    EXPECT_EQ(stores, "");  // no extension: nothing went through it
    EXPECT_EQ(loads, "");
    return;
  }
  // Write-through: the first run's blocks leave through store_async after its forward passes.
  EXPECT_NE(stores.find("op,store"), std::string::npos) << stores;
  EXPECT_EQ(stores.find("load"), std::string::npos) << stores;
  EXPECT_EQ(OrderProblem(absl::StrSplit(stores, ',')), "") << stores;
  // The second run loads 7 blocks (2 pages x 2 layers each) and fences once before its first op.
  const std::string prefix = loads.substr(0, loads.find(",op"));
  EXPECT_EQ(prefix.rfind("load,fence"), prefix.size() - 10) << loads;
  EXPECT_EQ(loads.find("op"), prefix.size() + 1) << loads;
  const std::vector<std::string> calls = absl::StrSplit(loads, ',');
  EXPECT_EQ(std::count(calls.begin(), calls.end(), std::string("load")), 7 * 2 * 2) << loads;
  EXPECT_EQ(std::count(calls.begin(), calls.end(), std::string("fence")), 1) << loads;
  EXPECT_EQ(OrderProblem(calls), "") << loads;
}

TEST(EngineCopyStreamOrder, TheCheckCatchesAMissingFenceAndAnUnsynchronizedStore) {
  // The order check itself, on logs a broken engine would write.
  EXPECT_EQ(OrderProblem(absl::StrSplit("load,load,fence,op,store,sync", ',')), "");
  EXPECT_NE(OrderProblem(absl::StrSplit("load,load,op", ',')), "");
  EXPECT_NE(OrderProblem(absl::StrSplit("op,store,op,sync", ',')), "");
  EXPECT_NE(OrderProblem(absl::StrSplit("store,sync", ',')), "");
}

}  // namespace
}  // namespace pagedkv
