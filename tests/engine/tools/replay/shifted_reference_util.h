// Copyright 2026 The pagedkv Authors.
//
// Shared by the brute-force references of the shifted-hit replay tests (LRU in
// shifted_replay_test.cc, belady in belady_shifted_test.cc): the counters a reference computes and
// the small rag workload they replay.
#ifndef PAGEDKV_TESTS_ENGINE_TOOLS_REPLAY_SHIFTED_REFERENCE_UTIL_H_
#define PAGEDKV_TESTS_ENGINE_TOOLS_REPLAY_SHIFTED_REFERENCE_UTIL_H_

#include <cstdint>

#include "engine/tools/replay/workload/generators.h"
#include "engine/tools/replay/workload/workload.h"

namespace pagedkv::replay::shifted_reference {

// What a brute-force reference counts, named as in CacheReplayResult.
struct ShiftedCounts {
  int64_t hit_blocks = 0;
  int64_t evictions = 0;
  int64_t chunk_hits = 0;
  int64_t chunk_hits_moved = 0;
  int64_t shifted_hit_tokens = 0;
  int64_t shifted_hit_tokens_moved = 0;
  int64_t chunks_in_prefix = 0;
  int64_t chunks_registered = 0;
  int64_t chunk_register_failures = 0;
};

// A rag workload small enough for quadratic references: 12 documents of 8-60 tokens, 1-4 per
// request.
inline Workload SmallRag(uint64_t seed, int requests) {
  return GenerateRagWorkload({.num_requests = requests,
                              .num_documents = 12,
                              .document_tokens = {8, 60},
                              .documents_per_request = {1, 4},
                              .instruction_tokens = 12,
                              .question_tokens = {3, 20},
                              .seed = seed});
}

}  // namespace pagedkv::replay::shifted_reference

#endif  // PAGEDKV_TESTS_ENGINE_TOOLS_REPLAY_SHIFTED_REFERENCE_UTIL_H_
