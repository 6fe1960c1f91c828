// Copyright 2026 The pagedkv Authors.
//
// Output of `pagedkv replay`: readable tables, JSON objects, the sweep CSV and the hit-rate plot.
//
// Example:
//   std::printf("%s", FormatCacheTable(results).c_str());
//   PAGEDKV_RETURN_IF_ERROR(WriteSweepCsv("out/replay/sweep.csv", results));
//   PAGEDKV_ASSIGN_OR_RETURN(std::string how,
//                            WriteHitRatePlot("out/replay/hit_rate.svg", results, "mixed"));
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_REPORT_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/tools/replay/cache_mode/cache_replay.h"
#include "nlohmann/json.hpp"
#include "pagedkv/export.h"

namespace pagedkv::replay {

// One row per result: policy, capacity, hit rates, evictions and the miss breakdown. Rows over KV
// cache groups (CacheReplayResult::kv_groups, set on every row or on none): name, groups, pages,
// token hit rate, KV per request (full-model blocks), evictions, refused requests, then each
// row's tier hit tokens when it has tiers.
PAGEDKV_EXPORT std::string FormatCacheTable(const std::vector<CacheReplayResult>& results);

// Every counter and rate of one cache-mode run (requests, blocks, hit_blocks, block_hit_rate,
// token_hit_rate, infinite_cache_block_hit_rate, evictions, misses{...}, ...). A row over KV
// cache groups: groups, pages, requests, refused, prefix_cache_queries, prefix_cache_hits,
// token_hit_rate, mean/peak_prefill_blocks, mean/peak_decode_blocks, evictions and tier hits.
PAGEDKV_EXPORT nlohmann::json CacheResultJson(const CacheReplayResult& result);

// CSV with a header row and one row per result (creates parent directories).
PAGEDKV_EXPORT absl::Status WriteSweepCsv(const std::string& path,
                                          const std::vector<CacheReplayResult>& results);

// Plot of block hit rate (%) against capacity (blocks, log scale), one line per policy, plus the
// infinite-cache rate as a dashed line. `path` ends in .svg or .png. Uses gnuplot when it is
// installed (pngcairo / svg terminals); without gnuplot an .svg is written directly and a .png is
// FailedPrecondition. Returns how it was drawn ("gnuplot" or "built-in SVG writer").
PAGEDKV_EXPORT absl::StatusOr<std::string> WriteHitRatePlot(
    const std::string& path, const std::vector<CacheReplayResult>& results,
    const std::string& title);

// True when a `gnuplot` executable is on the PATH.
PAGEDKV_EXPORT bool GnuplotAvailable();

// The SVG document WriteHitRatePlot writes without gnuplot.
PAGEDKV_EXPORT std::string HitRateSvg(const std::vector<CacheReplayResult>& results,
                                      const std::string& title);

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_REPORT_H_
