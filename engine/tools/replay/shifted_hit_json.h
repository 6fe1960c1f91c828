// Copyright 2026 The pagedkv Authors.
//
// The shifted-hit fields that both replay modes report in --json, under the same names. Cache and
// serve results carry the same counters (shifted_hit_tokens, chunk_hits, ...); this writes them
// once for either.
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_SHIFTED_HIT_JSON_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_SHIFTED_HIT_JSON_H_

#include "nlohmann/json.hpp"

namespace pagedkv::replay {

// Adds the shifted-hit fields of `r` (a CacheReplayResult or a ServeReplayResult) to `j`.
template <typename Result>
void AddShiftedHitJson(const Result& r, nlohmann::json& j) {
  j["shifted_hit_tokens"] = r.shifted_hit_tokens;
  j["shifted_hit_tokens_moved"] = r.shifted_hit_tokens_moved;
  j["shifted_hit_tokens_same_position"] = r.shifted_hit_tokens_same_position();
  j["shifted_hit_blocks"] = r.shifted_hit_blocks;
  j["shifted_hit_rate"] = r.shifted_hit_rate();
  j["prefix_plus_shifted_token_hit_rate"] = r.prefix_plus_shifted_token_hit_rate();
  j["chunks"] = {{"marked", r.chunks},
                 {"in_prefix_hit", r.chunks_in_prefix},
                 {"hits", r.chunk_hits},
                 {"hits_moved", r.chunk_hits_moved},
                 {"registered", r.chunks_registered},
                 {"register_failures", r.chunk_register_failures}};
}

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_SHIFTED_HIT_JSON_H_
