// Copyright 2026 The pagedkv Authors.
//
// What the Engine keeps per request (Engine::RequestRecord) and the bookkeeping of which KV tier
// loaded each block of a waiting request's chain: shared by engine.cc (admission, results) and
// engine_tiers.cc (tier lookup while a request waits). Internal to the engine.
#ifndef PAGEDKV_ENGINE_RUNTIME_ENGINE_REQUEST_H_
#define PAGEDKV_ENGINE_RUNTIME_ENGINE_REQUEST_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cache/tiers/tier_chain.h"
#include "engine/runtime/shift/chunk_key_buffer.h"
#include "pagedkv/runtime/engine.h"

namespace pagedkv {

// Where each block of a waiting request's chain came from, as its onboardings found it.
enum class BlockSource : uint8_t { kDevice = 0, kHost, kDisk, kRemote };

// Records one onboarding's hits in `sources` (per chain block, grown as needed): the blocks it
// loaded are marked with their tier; blocks it found on the device keep their mark (a block an
// earlier onboarding of the same wait loaded is still the tier's).
void NoteOnboarding(const TierHits& hits, std::vector<BlockSource>* sources);

// Tokens of an admission's prefix hit of `hit_tokens` (whole blocks along the chain) that the
// host, disk and remote tiers loaded; the rest was on the device.
struct TierHitTokens {
  int32_t host = 0;
  int32_t remote = 0;
  int32_t disk = 0;
};
TierHitTokens AttributeTierHits(int32_t hit_tokens, int32_t block_size,
                                const std::vector<BlockSource>& sources);

struct Engine::RequestRecord {
  std::vector<TokenId> prompt;
  std::vector<TokenId> context;  // prompt + generated tokens (drafting looks them up)
  SamplingOptions sampling;
  int32_t num_generated = 0;
  int32_t num_prefix_hit_tokens = 0;
  int32_t num_shifted_hit_tokens = 0;
  int32_t num_admissions = 0;
  int32_t num_host_hit_tokens = 0;
  int32_t num_remote_hit_tokens = 0;
  int32_t num_disk_hit_tokens = 0;
  // Over re-admissions after preemption (GenerationResult::num_readmission_*).
  int32_t num_readmission_hit_tokens = 0;
  int32_t num_readmission_host_hit_tokens = 0;
  int32_t num_readmission_remote_hit_tokens = 0;
  int32_t num_readmission_disk_hit_tokens = 0;
  // Waiting for its next admission (added, or preempted): in Internals::onboard_queue.
  bool awaiting_admission = true;
  // Per chain block: the tier that loaded it while the request waited (TierChain::Onboard).
  std::vector<BlockSource> block_sources;
  std::string cache_salt;
  std::vector<PromptChunk> chunks;
  // Per chunk: reused (fully or in part) in the current admission, so its KV may be approximate
  // and it is never registered from this request.
  std::vector<char> chunk_reused;
  // With chunk float keys on: per chunk, its float keys as the steps computing it hand them back
  // (sized at the first; freed when the chunk is registered).
  std::vector<ChunkKeyBuffer> chunk_keys;
  // With a repetition penalty: the prompt's distinct tokens, ascending (logit_edit_builder.h).
  std::vector<TokenId> prompt_set;
  std::vector<std::pair<TokenId, float>> logit_bias;  // GenerationRequest::logit_bias
  // With min_tokens: the distinct tokens that end the request, which it bans until then.
  std::vector<TokenId> stop_tokens;
  // With SamplingOptions::prompt_logprobs: prompt tokens 1.. so far, in order.
  std::vector<TokenLogprobs> prompt_logprobs;
  std::chrono::steady_clock::time_point added;
  double time_to_first_token_s = 0.0;
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_ENGINE_REQUEST_H_
