// Copyright 2026 The pagedkv Authors.
//
// Internal to serve-mode replay (serve_replay.cc): the state of one simulated serving run and its
// steps. RunServeReplay validates the options, then drives a ServeSimulation:
//
//   PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<ServeSimulation> sim,
//                            ServeSimulation::Create(workload, options, capacity_blocks));
//   while (sim->HasWork()) PAGEDKV_RETURN_IF_ERROR(sim->Step());
//   PAGEDKV_ASSIGN_OR_RETURN(ServeReplayResult result, sim->Finish());
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_SERVE_SIMULATION_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_SERVE_SIMULATION_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/runtime/shift/shifted_chunk_reuse.h"
#include "engine/tools/replay/serve_mode/cost_model.h"
#include "engine/tools/replay/serve_mode/instance_tiers.h"
#include "engine/tools/replay/serve_mode/serve_replay.h"
#include "engine/tools/replay/workload/workload.h"
#include "pagedkv/cache/kv_cache_groups.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/runtime/scheduler.h"

namespace pagedkv::replay {

// One request while it is in the scheduler.
struct TrackedRequest {
  double arrival_s = 0;
  double first_token_s = -1;  // -1 until its first token
  bool admitted = false;      // admitted at least once (its first admission's hit is counted)
  int64_t prompt_tokens = 0;
  std::vector<PromptChunk> chunks;  // marked chunks (only with shifted reuse on)
  std::vector<TokenId> prompt;      // the prompt, kept only when chunks is not empty
};

class ServeSimulation {
 public:
  // REQUIRES: the workload and options are validated; 1 <= capacity_blocks < 2^31.
  static absl::StatusOr<std::unique_ptr<ServeSimulation>> Create(const Workload& workload,
                                                                 const ServeReplayOptions& options,
                                                                 int64_t capacity_blocks);

  // True while requests are still to arrive or the scheduler holds unfinished ones.
  bool HasWork() const;

  // Admits the requests that have arrived by the clock (jumping it to the next arrival when the
  // scheduler is idle), then runs one scheduler step, if anything is left to schedule.
  absl::Status Step();

  // Checks that nothing is still held and fills the statistics and latency percentiles.
  absl::StatusOr<ServeReplayResult> Finish();

 private:
  ServeSimulation(const Workload& workload, const ServeReplayOptions& options,
                  RooflineCostModel cost);

  double ArrivalSeconds(size_t index) const {
    return workload_.requests[index].arrival_ms / 1000.0;
  }
  absl::Status AdmitArrivals();
  absl::Status AdmitRequest(size_t index);
  absl::Status RunBatch();
  void SampleTokens(StepWork& work);
  // Counts the prefix hits of first admissions (re-admissions after preemption excluded).
  void CountFirstAdmissions();
  absl::Status RegisterFinishedChunks(StepWork& work);
  void RecordOutputs(const std::vector<RequestOutput>& outputs);
  void CountDone();
  // Create's part: the KV cache manager (one group or options.hybrid_groups) and the scheduler.
  absl::Status CreateCacheAndScheduler(int64_t capacity_blocks);
  // The manager's statistics, pool, invariants and event batch, whichever manager it is.
  CacheStats ManagerStats() const;
  const BlockPool& Pool() const;
  absl::Status ValidateManager() const;
  KvEventBatch TakeEventBatch(double timestamp);

  const Workload& workload_;
  const ServeReplayOptions& options_;
  const RooflineCostModel cost_;
  std::unique_ptr<KvCacheManager> manager_;  // over options.hybrid_groups when given
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<ShiftedChunkReuse> reuse_;  // no mover; null without shifted reuse
  std::unique_ptr<InstanceTiers> tiers_;      // null without tiers
  ServeReplayResult result_;
  absl::flat_hash_map<RequestId, TrackedRequest> live_;
  std::vector<double> ttft_, e2e_, tpot_;  // seconds, per finished request
  std::chrono::steady_clock::time_point wall_start_;
  double start_s_ = 0;  // the first arrival
  double now_s_ = 0;    // the simulated clock
  size_t next_ = 0;     // the next request to arrive
  int64_t done_ = 0;    // finished or rejected requests
  ScheduledBatch batch_;
  std::vector<SampledToken> sampled_;
  double sum_running_ = 0, sum_used_blocks_ = 0;  // over steps that ran a batch
  int64_t batches_run_ = 0;
};

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_SERVE_SIMULATION_H_
