// Copyright 2026 The pagedkv Authors.
//
// ServerMetrics: the request counters, queue gauges and latency histograms that GET /metrics
// shows next to the KV cache manager's pagedkv_ metrics (vLLM's names, pagedkv_ prefix):
//   pagedkv_requests_received_total     generation requests that reached the engine queue
//   pagedkv_requests_finished_total     of those, finished by a stop condition or length
//   pagedkv_requests_aborted_total      of those, aborted (client gone, drain, stop-string cut)
//   pagedkv_requests_rejected_total     answered with an error before reaching the engine
//   pagedkv_prompt_tokens_total / pagedkv_generation_tokens_total
//   pagedkv_num_requests_running / pagedkv_num_requests_waiting       (gauges, after each step)
//   pagedkv_time_to_first_token_seconds, pagedkv_inter_token_latency_seconds,
//   pagedkv_e2e_request_latency_seconds                               (histograms)
//   pagedkv_cache_config_info{cache_dtype,block_size,num_blocks} 1  (vLLM's cache_config_info)
//   pagedkv_kv_cache_bytes_per_token / pagedkv_kv_cache_capacity_tokens  (gauges, SetKvPool)
//   pagedkv_tier_{queried_blocks,hit_blocks,loaded_bytes,stored_blocks,stored_bytes,evictions,
//     faults}_total, pagedkv_tier_{resident,shared_resident}_bytes (per tier="host"|"disk"|
//     "remote", SetTiers)
// Latencies are measured at the server: from the request's arrival in the engine queue to the
// step that produced its first token (TTFT), between its consecutive tokens' steps, and to its
// last step (end to end). A stop-string cut counts as aborted in the engine but "stop" to the
// client; it is counted in requests_finished_total, not aborted.
//
// Example:
//   ServerMetrics metrics;
//   metrics.ObserveFirstToken(0.120);
//   std::string text;
//   metrics.WritePrometheus(&text);
//
// Thread-safe: every method takes the metrics' mutex.
#ifndef PAGEDKV_ENGINE_SERVE_HTTP_SERVER_METRICS_H_
#define PAGEDKV_ENGINE_SERVE_HTTP_SERVER_METRICS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "pagedkv/cache/cache_metrics.h"
#include "pagedkv/tiers/kv_tier.h"

namespace pagedkv::server {

class ServerMetrics {
 public:
  ServerMetrics();

  void CountReceived(int64_t prompt_tokens);
  void CountFinished(bool aborted);
  void CountRejected();
  void CountGenerated(int64_t tokens);
  void SetQueue(int32_t running, int32_t waiting);
  // Prompt tokens the samples of n > 1 took from their prompt source since the start
  // (SchedulerStats::num_copied_tokens): copied, not computed.
  void SetCopiedPromptTokens(int64_t tokens);
  void ObserveFirstToken(double seconds);
  void ObserveInterToken(double seconds);
  void ObserveEndToEnd(double seconds);
  // The KV pool the engine allocated: its dtype's name, block size, blocks, K and V bytes of one
  // token over every layer (scales included) and the tokens it holds.
  void SetKvPool(const std::string& dtype, int64_t block_size, int64_t num_blocks,
                 int64_t bytes_per_token, int64_t tokens);

  // The KV tiers' counters (Engine::tier_stats), each sample labelled tier="host" / "disk" /
  // "remote".
  void SetTiers(std::vector<std::pair<std::string, TierStats>> tiers);

  int32_t num_running() const;
  int32_t num_waiting() const;

  // Appends the families above in the Prometheus text format.
  void WritePrometheus(std::string* out) const;

 private:
  mutable absl::Mutex mu_;
  int64_t received_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t finished_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t aborted_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rejected_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t prompt_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t generated_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  int32_t running_ ABSL_GUARDED_BY(mu_) = 0;
  int32_t waiting_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t copied_prompt_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  Histogram ttft_ ABSL_GUARDED_BY(mu_);
  Histogram itl_ ABSL_GUARDED_BY(mu_);
  Histogram e2e_ ABSL_GUARDED_BY(mu_);
  std::string kv_dtype_ ABSL_GUARDED_BY(mu_);  // empty until SetKvPool
  int64_t kv_block_size_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t kv_num_blocks_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t kv_bytes_per_token_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t kv_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::pair<std::string, TierStats>> tiers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pagedkv::server

#endif  // PAGEDKV_ENGINE_SERVE_HTTP_SERVER_METRICS_H_
