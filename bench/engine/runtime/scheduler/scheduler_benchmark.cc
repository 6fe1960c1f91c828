// Copyright 2026 The pagedkv Authors.
//
// Per-step cost of the Scheduler: Schedule() + UpdateFromOutput() with N running requests.
//
//   BM_DecodeStep/N/P/E      N requests decoding (prompt P, block size 16): one token each;
//                            E = SchedulerOptions::emit_block_tables.
//   BM_ManagerDecodeFloor/N/P  the floor: the KvCacheManager work the same step needs and
//                            nothing else (AppendToken, AllocateSlots(1), GetBlockTable each).
//   BM_MixedStep/N           steady state with arrivals: N seqs at most, 2048-token budget,
//                            prompts of 512 sharing a 256-token system prompt, 64 new tokens;
//                            finished requests are replaced, so steps mix chunked prefill
//                            (with prefix hits) and decode.
//
// Run: build/bench/engine/runtime/scheduler/scheduler_benchmark
#include <cstdint>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/runtime/scheduler.h"

namespace pagedkv {
namespace {

constexpr int32_t kBlockSize = 16;
constexpr int32_t kPromptLen = 512;     // BM_MixedStep
constexpr int32_t kDecodeSteps = 2000;  // fixed iterations: requests must not finish

std::unique_ptr<KvCacheManager> MakeManager(int32_t num_blocks) {
  KvCacheManagerOptions options;
  options.num_blocks = num_blocks;
  options.block_size = kBlockSize;
  options.model_fingerprint = "bench";
  return KvCacheManager::Create(options).value();
}

std::vector<TokenId> Prompt(RequestId id, int32_t shared, int32_t len) {
  std::vector<TokenId> p(static_cast<size_t>(len));
  for (int32_t i = 0; i < len; ++i) {
    p[static_cast<size_t>(i)] =
        i < shared ? i % 30000
                   : static_cast<TokenId>((id * 7919 + static_cast<uint64_t>(i)) % 30000);
  }
  return p;
}

// Samples token 1 for every sequence that samples.
void FakeSample(const ScheduledBatch& batch, std::vector<SampledToken>* out) {
  out->clear();
  for (const ScheduledSequence& s : batch.sequences) {
    if (s.samples) out->push_back({s.request_id, 1});
  }
}

void BM_DecodeStep(benchmark::State& state) {
  const int32_t n = static_cast<int32_t>(state.range(0));
  const int32_t prompt_len = static_cast<int32_t>(state.range(1));
  // Early requests decode while later ones prefill (n * P / 8192 steps): room for that too.
  const int32_t max_new = kDecodeSteps + n * prompt_len / 8192 + 8;
  auto manager = MakeManager(n * ((prompt_len + max_new) / kBlockSize + 2));
  SchedulerOptions options;
  options.max_num_seqs = n;
  options.max_num_batched_tokens = 8192;
  options.emit_block_tables = state.range(2) != 0;
  std::unique_ptr<Scheduler> scheduler_owner = Scheduler::Create(options, *manager).value();
  Scheduler& scheduler = *scheduler_owner;
  for (int32_t i = 0; i < n; ++i) {
    SchedulerRequest r;
    r.id = static_cast<RequestId>(i);
    r.prompt = Prompt(r.id, 0, prompt_len);
    r.max_new_tokens = max_new;
    if (!scheduler.AddRequest(std::move(r)).ok()) state.SkipWithError("AddRequest failed");
  }
  ScheduledBatch batch;
  std::vector<SampledToken> sampled;
  // Prefill everything first.
  do {
    if (!scheduler.Schedule(&batch).ok()) state.SkipWithError("Schedule failed");
    FakeSample(batch, &sampled);
    if (!scheduler.UpdateFromOutput(sampled).ok()) state.SkipWithError("Update failed");
  } while (batch.stats.num_prefill_tokens > 0 || scheduler.num_waiting() > 0);

  for (auto _ : state) {
    if (!scheduler.Schedule(&batch).ok()) state.SkipWithError("Schedule failed");
    FakeSample(batch, &sampled);
    auto outputs = scheduler.UpdateFromOutput(sampled);
    benchmark::DoNotOptimize(outputs);
  }
  if (batch.num_tokens() != n) state.SkipWithError("not a pure decode step");
  state.counters["seqs"] = n;
  state.counters["ns_per_seq"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * n,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_DecodeStep)
    ->Args({64, 512, 1})
    ->Args({256, 512, 1})
    ->Args({1024, 512, 1})
    ->Args({256, 8192, 1})
    ->Args({256, 8192, 0})
    ->Iterations(kDecodeSteps);

void BM_ManagerDecodeFloor(benchmark::State& state) {
  const int32_t n = static_cast<int32_t>(state.range(0));
  const int32_t prompt_len = static_cast<int32_t>(state.range(1));
  const int32_t max_new = kDecodeSteps + 8;
  auto manager = MakeManager(n * ((prompt_len + max_new) / kBlockSize + 2));
  std::vector<CacheRequest> requests;
  for (int32_t i = 0; i < n; ++i) {
    const std::vector<TokenId> prompt = Prompt(static_cast<RequestId>(i), 0, prompt_len);
    requests.push_back(manager->NewRequest(static_cast<RequestId>(i), prompt).value());
    CacheRequest& r = requests.back();
    ComputedBlocks hit = manager->GetComputedBlocks(r).value();
    if (!manager->AllocateSlots(r, r.num_tokens() - hit.num_computed_tokens, hit).ok()) {
      state.SkipWithError("prefill allocation failed");
    }
  }
  std::vector<int64_t> slots(static_cast<size_t>(n));
  for (auto _ : state) {
    for (int32_t i = 0; i < n; ++i) {
      CacheRequest& r = requests[static_cast<size_t>(i)];
      if (!r.AppendToken(1).ok() || !manager->AllocateSlots(r, 1).ok()) {
        state.SkipWithError("decode allocation failed");
      }
      const auto table = manager->GetBlockTable(r.id()).value();
      const int64_t pos = r.num_tokens() - 1;
      slots[static_cast<size_t>(i)] =
          table[static_cast<size_t>(pos / kBlockSize)] * kBlockSize + pos % kBlockSize;
    }
    benchmark::DoNotOptimize(slots.data());
  }
  state.counters["seqs"] = n;
  state.counters["ns_per_seq"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * n,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ManagerDecodeFloor)
    ->Args({64, 512})
    ->Args({256, 512})
    ->Args({1024, 512})
    ->Args({256, 8192})
    ->Iterations(kDecodeSteps);

void BM_MixedStep(benchmark::State& state) {
  const int32_t n = static_cast<int32_t>(state.range(0));
  constexpr int32_t kMaxNew = 64;
  // Room for n running requests plus a cached working set.
  auto manager = MakeManager(2 * n * ((kPromptLen + kMaxNew) / kBlockSize + 2));
  SchedulerOptions options;
  options.max_num_seqs = n;
  options.max_num_batched_tokens = 2048;
  std::unique_ptr<Scheduler> scheduler_owner = Scheduler::Create(options, *manager).value();
  Scheduler& scheduler = *scheduler_owner;
  RequestId next_id = 0;
  auto add = [&] {
    SchedulerRequest r;
    r.id = next_id++;
    r.prompt = Prompt(r.id, kPromptLen / 2, kPromptLen);
    r.max_new_tokens = kMaxNew;
    if (!scheduler.AddRequest(std::move(r)).ok()) state.SkipWithError("AddRequest failed");
  };
  for (int32_t i = 0; i < 2 * n; ++i) add();
  ScheduledBatch batch;
  std::vector<SampledToken> sampled;
  int64_t tokens = 0;
  for (auto _ : state) {
    if (!scheduler.Schedule(&batch).ok()) state.SkipWithError("Schedule failed");
    FakeSample(batch, &sampled);
    auto outputs = scheduler.UpdateFromOutput(sampled);
    if (!outputs.ok()) state.SkipWithError("Update failed");
    for (const RequestOutput& out : *outputs) {
      if (out.finished()) add();
    }
    tokens += batch.num_tokens();
  }
  state.counters["seqs"] = n;
  state.counters["tokens_per_step"] =
      static_cast<double>(tokens) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_MixedStep)->Arg(64)->Arg(256);

}  // namespace
}  // namespace pagedkv
