// Copyright 2026 The pagedkv Authors.
//
// ManagerReplayer: cache-mode replay's per-request step over the real KvCacheManager of KV cache
// groups (CacheReplayOptions::groups: a `--hybrid-kv` row, hybrid_cache_mode.cc), driven by the
// one replay loop of RunCacheReplay (cache_replay.h) beside the bare-pool walk.
//
// Tokens: block j of request r gets block_size tokens derived from its key (ExpandedWorkload keys
// chain, so equal keys mean equal prefixes), the prompt's tokens in no full block get tokens of
// their own. Per request: the tier walk's onboarding (TierChain over the manager's groups, through
// ServeTiers: each full-attention group's prefix, then the blocks each sliding-window group's
// window needs), GetComputedBlocks, AllocateSlots of the whole prompt (the peak), the tier pins
// released and the computed blocks written through; the marked chunks through ChunkReplay over the
// manager's chunk index (a copy per group); then `decode_tokens` (or its output_tokens) decode
// steps of AllocateSlots(1) (window blocks out of reach are released), and Free. A request that
// does not fit the pool is refused and counted.
//
// Example (what RunCacheReplay does with options.groups set):
//   PAGEDKV_ASSIGN_OR_RETURN(auto replayer, ManagerReplayer::Create(expanded, options, result));
//   for (size_t r = 0; r < expanded.num_requests(); ++r) {
//     PAGEDKV_RETURN_IF_ERROR(replayer->ReplayRequest(r));
//   }
//   replayer->Finish();
//
// Not thread-safe; `expanded` and `result` must outlive it.
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_CACHE_MODE_MANAGER_REPLAY_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_CACHE_MODE_MANAGER_REPLAY_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/tools/replay/cache_mode/cache_replay.h"
#include "engine/tools/replay/cache_mode/chunk_replay.h"
#include "engine/tools/replay/serve_mode/serve_tiers.h"
#include "engine/tools/replay/workload/block_expansion.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/export.h"

namespace pagedkv::replay {

class PAGEDKV_EXPORT ManagerReplayer {
 public:
  // A manager of options.capacity_blocks pages over options.groups (tiers and chunk reuse as the
  // options say) that counts into `result`. InvalidArgument for groups the manager refuses, the
  // belady policy, a negative decode_tokens or bad tier options.
  static absl::StatusOr<std::unique_ptr<ManagerReplayer>> Create(const ExpandedWorkload& w,
                                                                 const CacheReplayOptions& options,
                                                                 CacheReplayResult& result);

  // Streaming: waits until request r is expanded (`ready` > r).
  void WaitFor(const std::atomic<int64_t>& ready, size_t r) const;

  // Replays request r (see the banner). Errors only from the tier walk's or the chunk reuse's
  // bookkeeping.
  absl::Status ReplayRequest(size_t r);

  // After the last request: the manager's totals (queried and hit tokens, evictions) and the
  // row's KvGroupsRow (its name and model_layers left for the caller).
  void Finish();

 private:
  ManagerReplayer(const ExpandedWorkload& w, const CacheReplayOptions& options,
                  CacheReplayResult& result)
      : w_(w), options_(options), result_(result) {}
  // Admits request r's `req` (tier walk, lookup, prompt allocation); the prefix hit's tokens, or
  // -1 when the pool refused it.
  absl::StatusOr<int64_t> Admit(size_t r, CacheRequest& req);
  // Decode steps of request `id`, then the KV it held after its prompt and after decoding.
  void Decode(CacheRequest& req, int64_t decode_tokens, int64_t prefill);

  const ExpandedWorkload& w_;
  const CacheReplayOptions& options_;
  CacheReplayResult& result_;
  std::unique_ptr<KvCacheManager> manager_;
  std::unique_ptr<ServeTiers> tiers_;    // null: no tiers
  std::unique_ptr<ChunkReplay> chunks_;  // null: shifted hits not counted
  double prefill_sum_ = 0;               // layer-blocks held after prompts, over admitted requests
  double decode_sum_ = 0;                // the same after decoding
  int64_t admitted_ = 0;
};

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_CACHE_MODE_MANAGER_REPLAY_H_
