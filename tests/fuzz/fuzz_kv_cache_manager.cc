// Copyright 2026 The pagedkv Authors.
//
// Fuzz target: random operation sequences on a KvCacheManager (new requests with prefix hits,
// allocation of hostile token counts, appends, frees, resets, event batches), with
// ValidateInvariants after every step. A failed call must leave the manager consistent.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <vector>

#include "pagedkv/cache/kv_cache_manager.h"

namespace {

using pagedkv::CacheRequest;
using pagedkv::KvCacheManager;
using pagedkv::TokenId;

// Token counts a caller might pass, hostile ones included.
int64_t TokenCount(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0:
      return in.ConsumeIntegralInRange<int64_t>(-2, 40);
    case 1:
      return INT64_MAX - in.ConsumeIntegralInRange<int64_t>(0, 4);
    case 2:
      return INT64_MIN;
    default:
      return in.ConsumeIntegral<int32_t>();
  }
}

void NewRequest(FuzzedDataProvider& in, KvCacheManager& manager,
                std::map<uint64_t, CacheRequest>& requests) {
  const uint64_t id = in.ConsumeIntegralInRange<uint64_t>(0, 7);
  std::vector<TokenId> prompt(in.ConsumeIntegralInRange<size_t>(0, 40));
  const TokenId base = in.ConsumeIntegralInRange<TokenId>(-1, 3);  // shared prefixes, some bad
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = base + static_cast<TokenId>(i % 5);
  auto request = manager.NewRequest(id, prompt);
  if (!request.ok()) return;
  auto computed = manager.GetComputedBlocks(*request);
  if (!computed.ok()) std::abort();  // a fresh valid request always has a (maybe empty) hit
  const int64_t tokens = static_cast<int64_t>(prompt.size()) - computed->num_computed_tokens;
  if (manager.AllocateSlots(*request, in.ConsumeBool() ? tokens : TokenCount(in), *computed).ok()) {
    requests.insert_or_assign(id, *std::move(request));
  }
}

void Step(FuzzedDataProvider& in, KvCacheManager& manager,
          std::map<uint64_t, CacheRequest>& requests) {
  auto it = requests.begin();
  if (!requests.empty()) {
    std::advance(it, in.ConsumeIntegralInRange<size_t>(0, requests.size() - 1));
  }
  switch (in.ConsumeIntegralInRange(0, 5)) {
    case 0:
      NewRequest(in, manager, requests);
      break;
    case 1:  // decode: append a token and allocate its slot (it may not fit; the request stays)
      if (it != requests.end() && it->second.AppendToken(in.ConsumeIntegral<uint8_t>()).ok()) {
        const int64_t before = manager.NumAllocatedTokens(it->first).value_or(-1);
        if (!manager.AllocateSlots(it->second, 1).ok() &&
            manager.NumAllocatedTokens(it->first).value_or(-1) != before) {
          std::abort();  // a failed allocation changes nothing
        }
      }
      break;
    case 2:  // hostile counts on a live request
      if (it != requests.end() && manager.AllocateSlots(it->second, TokenCount(in)).ok()) {
        if (manager.NumAllocatedTokens(it->first).value_or(-1) < 0) std::abort();
      }
      break;
    case 3:
      if (it != requests.end()) {
        if (!manager.Free(it->first).ok()) std::abort();
        requests.erase(it);
      } else {
        const uint64_t id = in.ConsumeIntegral<uint8_t>();
        const bool live = manager.HasRequest(id);
        // Free succeeds exactly for live requests, and forgets them.
        if (manager.Free(id).ok() != live || manager.HasRequest(id)) std::abort();
      }
      break;
    case 4:
      manager.ResetPrefixCache();
      break;
    default: {
      const pagedkv::KvEventBatch batch = manager.TakeEventBatch(1.0);
      if (batch.events.size() > 100000) std::abort();
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  pagedkv::KvCacheManagerOptions options;
  options.num_blocks = in.ConsumeIntegralInRange(1, 24);
  options.block_size = in.ConsumeIntegralInRange(1, 8);
  options.verify_tokens = in.ConsumeBool();
  options.enable_prefix_caching = in.ConsumeBool();
  options.vocab_size = in.ConsumeBool() ? 0 : 300;
  options.collect_event_batches = true;
  auto manager = KvCacheManager::Create(options);
  if (!manager.ok()) std::abort();
  std::map<uint64_t, CacheRequest> requests;
  while (in.remaining_bytes() > 0) {
    Step(in, **manager, requests);
    if (!(*manager)->ValidateInvariants().ok()) std::abort();
  }
  return 0;
}
