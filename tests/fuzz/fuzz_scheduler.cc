// Copyright 2026 The pagedkv Authors.
//
// Fuzz target: the continuous-batching scheduler over a small KvCacheManager. Random requests
// (valid and not), steps, sampled tokens (right and wrong), aborts; after every step the cache's
// invariants hold, every scheduled sequence's slots lie in its own blocks, and a run that stops
// adding requests drains.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/runtime/scheduler.h"

namespace {

using pagedkv::ScheduledBatch;
using pagedkv::Scheduler;

void AddRequest(FuzzedDataProvider& in, Scheduler& scheduler) {
  pagedkv::SchedulerRequest request;
  request.id = in.ConsumeIntegralInRange<uint64_t>(0, 9);
  request.prompt.resize(in.ConsumeIntegralInRange<size_t>(0, 48));
  const int32_t base = in.ConsumeIntegralInRange(-1, 3);
  for (size_t i = 0; i < request.prompt.size(); ++i) {
    request.prompt[i] = base + static_cast<int32_t>(i % 7);
  }
  request.max_new_tokens = in.ConsumeIntegralInRange(-1, 12);
  request.priority = in.ConsumeIntegralInRange(-2, 2);
  if (in.ConsumeBool()) request.eos_token = in.ConsumeIntegralInRange(0, 9);
  if (scheduler.AddRequest(std::move(request)).ok() && !scheduler.HasUnfinishedRequests()) {
    std::abort();
  }
}

// Slots of every scheduled token lie in the block table of its sequence.
void CheckBatch(const ScheduledBatch& batch) {
  for (const pagedkv::ScheduledSequence& seq : batch.sequences) {
    for (int32_t t = 0; t < seq.num_scheduled_tokens; ++t) {
      const size_t row = static_cast<size_t>(seq.query_start + t);
      const int64_t block = batch.slot_mapping[row] / batch.block_size;
      bool found = false;
      for (int32_t b = 0; b < seq.num_blocks; ++b) {
        found =
            found || batch.block_table_ids[static_cast<size_t>(seq.block_table_start + b)] == block;
      }
      if (!found) std::abort();
    }
  }
}

// One step, and one sampled token per sampling sequence (sometimes a bad one).
void Step(FuzzedDataProvider& in, Scheduler& scheduler) {
  ScheduledBatch batch;
  if (!scheduler.Schedule(&batch).ok()) std::abort();
  CheckBatch(batch);
  std::vector<pagedkv::SampledToken> sampled;
  for (const pagedkv::ScheduledSequence& seq : batch.sequences) {
    if (seq.samples) sampled.push_back({.request_id = seq.request_id, .token = 3});
  }
  if (!sampled.empty() && in.ConsumeBool()) {
    std::vector<pagedkv::SampledToken> wrong = sampled;
    wrong[0].token = in.ConsumeBool() ? -1 : 1 << 20;
    if (scheduler.UpdateFromOutput(wrong).ok()) std::abort();  // out of the vocabulary
  }
  if (!scheduler.UpdateFromOutput(sampled).ok()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  pagedkv::KvCacheManagerOptions cache_options;
  cache_options.num_blocks = in.ConsumeIntegralInRange(1, 24);
  cache_options.block_size = in.ConsumeIntegralInRange(1, 8);
  cache_options.vocab_size = 64;
  auto cache = pagedkv::KvCacheManager::Create(cache_options);
  if (!cache.ok()) std::abort();
  pagedkv::SchedulerOptions options;
  options.max_num_batched_tokens = in.ConsumeIntegralInRange(1, 64);
  options.max_num_seqs = in.ConsumeIntegralInRange(1, 6);
  options.enable_chunked_prefill = in.ConsumeBool();
  options.policy =
      in.ConsumeBool() ? pagedkv::SchedulingPolicy::kFcfs : pagedkv::SchedulingPolicy::kPriority;
  options.cache_aware = in.ConsumeBool();
  auto scheduler = Scheduler::Create(options, **cache);
  if (!scheduler.ok()) std::abort();
  while (in.remaining_bytes() > 0) {
    switch (in.ConsumeIntegralInRange(0, 3)) {
      case 0:
      case 1:
        AddRequest(in, **scheduler);
        break;
      case 2:
        Step(in, **scheduler);
        break;
      default: {
        const uint64_t id = in.ConsumeIntegralInRange<uint64_t>(0, 9);
        if ((*scheduler)->AbortRequest(id).ok() && (*scheduler)->GetRequestInfo(id).ok()) {
          std::abort();  // an aborted request is forgotten
        }
        break;
      }
    }
    if (!(*cache)->ValidateInvariants().ok()) std::abort();
  }
  // Drain: every request finishes within a bounded number of steps.
  for (int step = 0; step < 10000 && (*scheduler)->HasUnfinishedRequests(); ++step) {
    Step(in, **scheduler);
  }
  if ((*scheduler)->HasUnfinishedRequests()) std::abort();
  return 0;
}
