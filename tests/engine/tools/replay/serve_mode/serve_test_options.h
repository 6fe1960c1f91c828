// Copyright 2026 The pagedkv Authors.
//
// Serve-replay options the replay tests share: Llama-3-8B on one H100, with a small scheduler
// (2,048 batched tokens, 32 sequences) and a 32,000-token vocabulary.
#ifndef PAGEDKV_TESTS_ENGINE_TOOLS_REPLAY_SERVE_MODE_SERVE_TEST_OPTIONS_H_
#define PAGEDKV_TESTS_ENGINE_TOOLS_REPLAY_SERVE_MODE_SERVE_TEST_OPTIONS_H_

#include "engine/tools/replay/serve_mode/cost_model.h"
#include "engine/tools/replay/serve_mode/serve_replay.h"

namespace pagedkv::testing {

inline replay::ServeReplayOptions SmallServeOptions() {
  replay::ServeReplayOptions o;
  o.gpu = *replay::FindGpuPreset("H100");
  o.model = *replay::FindModelPreset("llama-3-8b");
  o.scheduler.max_num_batched_tokens = 2048;
  o.scheduler.max_num_seqs = 32;
  o.vocab_size = 32000;
  return o;
}

// SmallServeOptions with a pool of 1,500 blocks and shifted hits not counted (the multi-instance
// tests).
inline replay::ServeReplayOptions SmallPoolServeOptions() {
  replay::ServeReplayOptions o = SmallServeOptions();
  o.capacity_blocks = 1500;
  o.count_shifted = false;
  return o;
}

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_ENGINE_TOOLS_REPLAY_SERVE_MODE_SERVE_TEST_OPTIONS_H_
