// Copyright 2026 The pagedkv Authors.
//
// ServerMetrics (see server_metrics.h).
#include "engine/serve/http/server_metrics.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "pagedkv/cache/cache_metrics.h"

namespace pagedkv::server {
namespace {

// Seconds, from 1 ms (a small model's decode step on a CPU) to 10 minutes.
std::vector<double> LatencyBounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.15, 0.2,   0.3,   0.4,
          0.5,   0.75,   1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0};
}

}  // namespace

ServerMetrics::ServerMetrics()
    : ttft_(LatencyBounds()), itl_(LatencyBounds()), e2e_(LatencyBounds()) {}

void ServerMetrics::CountReceived(int64_t prompt_tokens) {
  absl::MutexLock lock(&mu_);
  ++received_;
  prompt_tokens_ += prompt_tokens;
}

void ServerMetrics::CountFinished(bool aborted) {
  absl::MutexLock lock(&mu_);
  ++(aborted ? aborted_ : finished_);
}

void ServerMetrics::CountRejected() {
  absl::MutexLock lock(&mu_);
  ++rejected_;
}

void ServerMetrics::CountGenerated(int64_t tokens) {
  absl::MutexLock lock(&mu_);
  generated_tokens_ += tokens;
}

void ServerMetrics::SetQueue(int32_t running, int32_t waiting) {
  absl::MutexLock lock(&mu_);
  running_ = running;
  waiting_ = waiting;
}

void ServerMetrics::SetCopiedPromptTokens(int64_t tokens) {
  absl::MutexLock lock(&mu_);
  copied_prompt_tokens_ = tokens;
}

void ServerMetrics::ObserveFirstToken(double seconds) {
  absl::MutexLock lock(&mu_);
  ttft_.Observe(seconds);
}

void ServerMetrics::ObserveInterToken(double seconds) {
  absl::MutexLock lock(&mu_);
  itl_.Observe(seconds);
}

void ServerMetrics::ObserveEndToEnd(double seconds) {
  absl::MutexLock lock(&mu_);
  e2e_.Observe(seconds);
}

int32_t ServerMetrics::num_running() const {
  absl::MutexLock lock(&mu_);
  return running_;
}

int32_t ServerMetrics::num_waiting() const {
  absl::MutexLock lock(&mu_);
  return waiting_;
}

void ServerMetrics::SetKvPool(const std::string& dtype, int64_t block_size, int64_t num_blocks,
                              int64_t bytes_per_token, int64_t tokens) {
  absl::MutexLock lock(&mu_);
  kv_dtype_ = dtype;
  kv_block_size_ = block_size;
  kv_num_blocks_ = num_blocks;
  kv_bytes_per_token_ = bytes_per_token;
  kv_tokens_ = tokens;
}

void ServerMetrics::SetTiers(std::vector<std::pair<std::string, TierStats>> tiers) {
  absl::MutexLock lock(&mu_);
  tiers_ = std::move(tiers);
}

namespace {

// One family with a sample per tier (labelled tier="<name>").
void WriteTierFamily(std::string* out, const char* name, const char* type, const char* help,
                     const std::vector<std::pair<std::string, TierStats>>& tiers,
                     int64_t TierStats::*field) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  for (const auto& [tier, stats] : tiers) {
    absl::StrAppend(out, name, "{tier=\"", tier, "\"} ", stats.*field, "\n");
  }
}

void WriteTiers(std::string* out, const std::vector<std::pair<std::string, TierStats>>& tiers) {
  if (tiers.empty()) return;
  WriteTierFamily(out, "pagedkv_tier_queried_blocks_total", "counter",
                  "Blocks looked up in a KV tier (held ones plus the first missing one).", tiers,
                  &TierStats::queried_blocks);
  WriteTierFamily(out, "pagedkv_tier_hit_blocks_total", "counter",
                  "Blocks loaded from a KV tier into the device pool.", tiers,
                  &TierStats::hit_blocks);
  WriteTierFamily(out, "pagedkv_tier_loaded_bytes_total", "counter",
                  "Bytes of KV loaded from a tier.", tiers, &TierStats::loaded_bytes);
  WriteTierFamily(out, "pagedkv_tier_stored_blocks_total", "counter",
                  "Blocks written to a KV tier.", tiers, &TierStats::stored_blocks);
  WriteTierFamily(out, "pagedkv_tier_stored_bytes_total", "counter", "Bytes written to a KV tier.",
                  tiers, &TierStats::stored_bytes);
  WriteTierFamily(out, "pagedkv_tier_evictions_total", "counter",
                  "Blocks a KV tier dropped for room.", tiers, &TierStats::evictions);
  WriteTierFamily(out, "pagedkv_tier_faults_total", "counter",
                  "Lookups and stores a fault turned into a miss (I/O error, bad value, ...).",
                  tiers, &TierStats::faults);
  WriteTierFamily(out, "pagedkv_tier_resident_bytes", "gauge",
                  "Bytes a KV tier holds now (-1: a shared tier that cannot know).", tiers,
                  &TierStats::resident_bytes);
  WriteTierFamily(out, "pagedkv_tier_shared_resident_bytes", "gauge",
                  "Bytes a KV tier holds for every process sharing it (the disk tier's folder; "
                  "-1: unknown).",
                  tiers, &TierStats::shared_resident_bytes);
}

}  // namespace

void ServerMetrics::WritePrometheus(std::string* out) const {
  absl::MutexLock lock(&mu_);
  PrometheusWriter w(out, {});
  w.Counter("pagedkv_requests_received_total", "Generation requests that reached the engine queue.",
            received_);
  w.Counter("pagedkv_requests_finished_total",
            "Requests finished by a stop condition or their length.", finished_);
  w.Counter("pagedkv_requests_aborted_total",
            "Requests aborted (client disconnected, drain timeout).", aborted_);
  w.Counter("pagedkv_requests_rejected_total",
            "Requests answered with an error before reaching the engine.", rejected_);
  w.Counter("pagedkv_prompt_tokens_total", "Prompt tokens of received requests.", prompt_tokens_);
  w.Counter("pagedkv_generation_tokens_total", "Tokens generated.", generated_tokens_);
  w.Counter("pagedkv_prompt_copied_tokens_total",
            "Prompt tokens the samples of n > 1 took from the first sample's KV (copied, not "
            "computed; its full blocks count as prefix cache hits).",
            copied_prompt_tokens_);
  w.Gauge("pagedkv_num_requests_running", "Requests running after the last step.", running_);
  w.Gauge("pagedkv_num_requests_waiting", "Requests waiting after the last step.", waiting_);
  w.Histogram("pagedkv_time_to_first_token_seconds",
              "Seconds from a request's arrival to its first token.", ttft_);
  w.Histogram("pagedkv_inter_token_latency_seconds",
              "Seconds between consecutive tokens of a request.", itl_);
  w.Histogram("pagedkv_e2e_request_latency_seconds",
              "Seconds from a request's arrival to its last token.", e2e_);
  WriteTiers(out, tiers_);
  if (kv_dtype_.empty()) return;
  PrometheusWriter info(out, {.labels = {{"cache_dtype", kv_dtype_},
                                         {"block_size", absl::StrCat(kv_block_size_)},
                                         {"num_blocks", absl::StrCat(kv_num_blocks_)}}});
  info.Gauge("pagedkv_cache_config_info", "The KV cache's configuration (labels).", 1);
  w.Gauge("pagedkv_kv_cache_bytes_per_token",
          "K and V bytes of one token over every layer, scales included.",
          static_cast<double>(kv_bytes_per_token_));
  w.Gauge("pagedkv_kv_cache_capacity_tokens", "Tokens the KV pool holds.",
          static_cast<double>(kv_tokens_));
}

}  // namespace pagedkv::server
