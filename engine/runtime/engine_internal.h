// Copyright 2026 The pagedkv Authors.
//
// The Engine's internal parts, for the engine's own code and for tests: the model runner and the
// chunk reuse (when EngineOptions.chunk_reuse is on). Not part of the public API: an embedding
// engine goes through include/pagedkv/runtime/engine.h only.
//
// Example (a test reading the K/V a step wrote):
//   ModelRunner& runner = pagedkv::EngineInternal::Runner(*engine);
//   PAGEDKV_RETURN_IF_ERROR(runner.ReadKv(0, slots, &k, &v));
#ifndef PAGEDKV_ENGINE_RUNTIME_ENGINE_INTERNAL_H_
#define PAGEDKV_ENGINE_RUNTIME_ENGINE_INTERNAL_H_

#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "cache/tiers/tier_chain.h"
#include "engine/model/runner/model_runner.h"
#include "engine/runtime/block_kv_copier.h"
#include "engine/runtime/context_limit.h"
#include "engine/runtime/shift/shifted_chunk_reuse.h"
#include "pagedkv/export.h"
#include "pagedkv/runtime/engine.h"

namespace pagedkv {

struct PAGEDKV_EXPORT Engine::Internals {
  std::unique_ptr<ModelRunner> runner;
  ContextLimit context;  // what AddRequest enforces (engine/runtime/context_limit.h)
  std::unique_ptr<ShiftedChunkReuse> reuse;  // after runner: destroyed first (uses the runner)
  // Over the runner: the tiers' io and the scheduler's block copies (ScheduledBatch::block_copies).
  std::unique_ptr<BlockKvCopier> copier;
  std::unique_ptr<TierChain> tiers;      // after copier: destroyed first; null without tiers
  std::vector<RequestId> onboard_queue;  // added, not yet admitted: looked up in the tiers
  // Engine::AddEventListener id -> (device pool listener id, one listener id per tier).
  absl::flat_hash_map<int, std::pair<int, std::vector<int>>> listeners;
  int next_listener_id = 0;
};

class PAGEDKV_EXPORT EngineInternal {
 public:
  static ModelRunner& Runner(Engine& engine) { return *engine.internals_->runner; }
  // Null unless EngineOptions.chunk_reuse is on.
  static ShiftedChunkReuse* ChunkReuse(Engine& engine) { return engine.internals_->reuse.get(); }
  // Null without tiers.
  static TierChain* Tiers(Engine& engine) { return engine.internals_->tiers.get(); }
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_ENGINE_INTERNAL_H_
