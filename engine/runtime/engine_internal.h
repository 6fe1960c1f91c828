// Copyright 2026 The pagedkv Authors.
//
// The Engine's internal parts, for the engine's own code and for tests: the model runner and the
// chunk reuse (when EngineOptions.chunk_reuse is on). Not part of the public API: an embedding
// engine goes through include/pagedkv/engine.h only.
//
// Example (a test reading the K/V a step wrote):
//   ModelRunner& runner = pagedkv::EngineInternal::Runner(*engine);
//   PAGEDKV_RETURN_IF_ERROR(runner.ReadKv(0, slots, &k, &v));
#ifndef PAGEDKV_ENGINE_RUNTIME_ENGINE_INTERNAL_H_
#define PAGEDKV_ENGINE_RUNTIME_ENGINE_INTERNAL_H_

#include <memory>

#include "engine/model/model_runner.h"
#include "engine/shift/engine_chunk_reuse.h"
#include "pagedkv/engine.h"
#include "pagedkv/export.h"

namespace pagedkv {

struct PAGEDKV_EXPORT Engine::Internals {
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<EngineChunkReuse> reuse;  // after runner: destroyed first (it uses the runner)
};

class PAGEDKV_EXPORT EngineInternal {
 public:
  static ModelRunner& Runner(Engine& engine) { return *engine.internals_->runner; }
  // Null unless EngineOptions.chunk_reuse is on.
  static EngineChunkReuse* ChunkReuse(Engine& engine) { return engine.internals_->reuse.get(); }
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_ENGINE_INTERNAL_H_
