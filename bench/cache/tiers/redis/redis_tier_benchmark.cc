// Copyright 2026 The pagedkv Authors.
//
// Redis tier throughput on a redis-server the benchmark starts itself (loopback, persistence off;
// tests/redis_server.h): pipelined block stores (SET NX) and chain loads (one MGET), 64 blocks per
// call, and a chain lookup whose every block is missing. Compare with redis-benchmark on the same
// server and value size (bench/RESULTS.md, "KV tiers"):
//   redis-server --port 16390 --save '' --appendonly no &
//   PAGEDKV_REDIS_URL=redis://127.0.0.1:16390 build/bench/cache/redis_tier_benchmark
//   redis-benchmark -p 16390 -t set,get -d 65536 -P 64 -n 20000 -q
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bench/cache/tiers/tier_bench_chain.h"
#include "benchmark/benchmark.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/tiers/redis_tier.h"
#include "tests/redis_server.h"

namespace pagedkv {
namespace {

constexpr int64_t kBlocks = 64;

// $PAGEDKV_REDIS_URL when set (to share one server with redis-benchmark), else a server of its
// own; empty when none starts.
const std::string& ServerUrl() {
  static const std::string* url = [] {
    if (const char* env = std::getenv("PAGEDKV_REDIS_URL"); env != nullptr && *env != '\0') {
      return new std::string(env);
    }
    static std::unique_ptr<testing::RedisServer> own = testing::RedisServer::Start();
    return new std::string(own != nullptr ? own->Url() : "");
  }();
  return *url;
}

bool NoServer() { return ServerUrl().empty(); }

std::unique_ptr<RedisTier> MakeTier(int64_t value_bytes) {
  RedisTierOptions o;
  o.endpoint = ParseRedisUrl(ServerUrl()).value();
  o.model_fingerprint = "bench";
  o.format = {.block_size = 16, .num_layers = 1, .value_bytes = value_bytes};
  o.io_timeout_ms = 5000;
  return RedisTier::Create(o).value();
}

using Chain = bench::TierBenchChain;

void BM_RedisTierStore(benchmark::State& state) {
  if (NoServer()) return state.SkipWithError("redis-server did not start");
  const int64_t bytes = state.range(0);
  auto tier = MakeTier(bytes);
  Chain chain(kBlocks, bytes, 1, 99);
  uint64_t next = uint64_t{1} << 40;
  for (auto _ : state) {
    for (TierStoreItem& item : chain.items) item.block.hash = BlockHash{next++, 7};
    benchmark::DoNotOptimize(tier->Store(chain.items));
  }
  if (tier->stats().faults > 0) state.SkipWithError("stores failed");
  state.SetItemsProcessed(state.iterations() * kBlocks);
  state.SetBytesProcessed(state.iterations() * kBlocks * bytes);
}

void BM_RedisTierLoad(benchmark::State& state) {
  if (NoServer()) return state.SkipWithError("redis-server did not start");
  const int64_t bytes = state.range(0);
  auto tier = MakeTier(bytes);
  Chain chain(kBlocks, bytes, static_cast<uint64_t>(bytes), 99);
  if (!tier->Store(chain.items).ok()) return state.SkipWithError("store failed");
  for (auto _ : state) {
    auto n = tier->LoadPrefix(chain.blocks, [](int64_t, std::span<const std::byte> v) {
      benchmark::DoNotOptimize(v.data());
      return true;
    });
    if (!n.ok() || *n != kBlocks) return state.SkipWithError("load missed");
  }
  state.SetItemsProcessed(state.iterations() * kBlocks);
  state.SetBytesProcessed(state.iterations() * kBlocks * bytes);
}

// Every block of a 64-block chain missing: one MGET round trip, nothing decoded.
void BM_RedisTierLookupAllMissing(benchmark::State& state) {
  if (NoServer()) return state.SkipWithError("redis-server did not start");
  auto tier = MakeTier(1024);
  Chain missing(kBlocks, 1024, uint64_t{1} << 50, 99);
  for (auto _ : state) {
    auto n =
        tier->LoadPrefix(missing.blocks, [](int64_t, std::span<const std::byte>) { return true; });
    benchmark::DoNotOptimize(n);
  }
  state.SetItemsProcessed(state.iterations() * kBlocks);
}

BENCHMARK(BM_RedisTierStore)->Arg(64 << 10)->Arg(256 << 10)->UseRealTime();
BENCHMARK(BM_RedisTierLoad)->Arg(64 << 10)->Arg(256 << 10)->UseRealTime();
BENCHMARK(BM_RedisTierLookupAllMissing)->UseRealTime();

}  // namespace
}  // namespace pagedkv
