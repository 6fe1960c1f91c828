// Copyright 2026 The pagedkv Authors.
//
// EngineLoop: one thread that owns an Engine and steps it while requests are live (continuous
// batching of whatever has arrived), and the thread-safe doors through which HTTP threads reach
// it. Between two steps the loop admits submitted requests (Engine::AddRequest), applies aborts
// (Engine::AbortRequest: the request's blocks are freed before the next step runs), runs queued
// tasks, then steps; after each step it hands every request's new tokens to its RequestChannel,
// publishes the step's KV event batch, and updates the queue gauges.
//
// Backpressure: Submit refuses (ResourceExhausted) while max_queued_requests requests are
// waiting (submitted, not yet scheduled); a request the engine refuses (prompt + max tokens past
// the context or the pool, bad ids) gets the engine's InvalidArgument; nothing is queued then.
// Drain: BeginDrain refuses new submissions (Unavailable); WaitIdle waits for the live requests;
// AbortAll ends the rest; the destructor stops the thread.
//
// Example:
//   auto loop = EngineLoop::Start(std::move(engine), {.max_queued_requests = 256});
//   PAGEDKV_ASSIGN_OR_RETURN(auto channel, loop->Submit(std::move(request)));
//   for (;;) {
//     RequestChannel::Update u = channel->Wait(absl::Milliseconds(50));
//     Send(u.tokens);
//     if (u.result.has_value()) break;  // finished, aborted or failed
//   }
//
// Thread-safe: every public method may be called from any thread (RunOnLoop not from the loop).
#ifndef PAGEDKV_ENGINE_SERVE_HTTP_ENGINE_LOOP_H_
#define PAGEDKV_ENGINE_SERVE_HTTP_ENGINE_LOOP_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/serve/http/server_metrics.h"
#include "pagedkv/events/kv_event_batch.h"
#include "pagedkv/events/kv_event_publisher.h"
#include "pagedkv/runtime/engine.h"

namespace pagedkv::server {

// One request's outputs, from the loop thread to the HTTP thread that waits for them.
class RequestChannel {
 public:
  struct Update {
    std::vector<TokenId> tokens;          // new since the last Wait, in order
    std::vector<TokenLogprobs> logprobs;  // one per token when the request asked for them
    // The prompt's logprobs (SamplingOptions::prompt_logprobs), with the request's first token.
    std::optional<std::vector<TokenLogprobs>> prompt_logprobs;
    std::optional<GenerationResult> result;  // set once, when the request has ended
    absl::Status status;                     // not OK: the engine failed (result is then set)
  };

  // Waits up to `timeout` for new tokens or the end; returns what arrived (maybe nothing).
  Update Wait(absl::Duration timeout);
  RequestId id() const { return id_; }

 private:
  friend class EngineLoop;
  explicit RequestChannel(RequestId id) : id_(id) {}
  // Appends `update`'s tokens (and their logprobs, when asked), keeps its prompt logprobs and,
  // when its result is set, ends the request, in one step (a waiter sees all at once).
  void Deliver(Update update);

  const RequestId id_;
  absl::Mutex mu_;
  std::vector<TokenId> tokens_ ABSL_GUARDED_BY(mu_);
  std::vector<TokenLogprobs> logprobs_ ABSL_GUARDED_BY(mu_);
  std::optional<std::vector<TokenLogprobs>> prompt_logprobs_ ABSL_GUARDED_BY(mu_);
  std::optional<GenerationResult> result_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool taken_end_ ABSL_GUARDED_BY(mu_) = false;
};

struct EngineLoopOptions {
  int32_t max_queued_requests = 256;  // waiting requests before Submit refuses; >= 1
  // Each step's KV event batch goes here; null: no events. Not owned; outlives the loop.
  KvEventPublisher* publisher = nullptr;
  ServerMetrics* metrics = nullptr;  // not owned; null: none
};

class EngineLoop {
 public:
  // Starts the loop thread over `engine`. InvalidArgument for max_queued_requests < 1.
  static absl::StatusOr<std::unique_ptr<EngineLoop>> Start(std::unique_ptr<Engine> engine,
                                                           const EngineLoopOptions& options);
  ~EngineLoop();  // aborts what is live, stops the thread
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Queues `request` and waits until the loop has added it to the engine. ResourceExhausted
  // when the queue is full, Unavailable while draining or after an engine failure, the
  // engine's InvalidArgument for a request it refuses.
  absl::StatusOr<std::shared_ptr<RequestChannel>> Submit(GenerationRequest request);
  // The samples of one prompt (OpenAI's `n`), queued together and added in one pass between two
  // steps: samples 1.. take their prompt KV from sample 0 (GenerationRequest::prompt_source is set
  // to its id). Channels in order. The queue check counts them all; on any error none stays
  // (those added are aborted) and the first error is returned.
  absl::StatusOr<std::vector<std::shared_ptr<RequestChannel>>> SubmitSamples(
      std::vector<GenerationRequest> samples);

  // Why a request is ended early (counted apart in the metrics).
  enum class AbortReason {
    kClientGone,  // the client disconnected (or the server drains)
    kStopString,  // the HTTP thread found a stop string: the request is done
  };
  // Ends the request (its channel then gets the aborted result). No-op once it has ended.
  void Abort(RequestId id, AbortReason reason);

  // Runs `task` on the loop thread between steps and waits for it. Unavailable once stopped.
  absl::Status RunOnLoop(std::function<void(Engine&)> task);

  // The engine's immutable parts, readable from any thread.
  const Engine& engine() const { return *engine_; }

  void BeginDrain();
  // True when nothing is live (or pending) before `deadline`.
  bool WaitIdle(absl::Time deadline);
  void AbortAll();
  bool healthy() const { return healthy_.load(); }

 private:
  struct Pending;  // a submission waiting for the loop
  struct Live;     // a request the engine runs: its channel and timing
  struct Work;

  EngineLoop(std::unique_ptr<Engine> engine, const EngineLoopOptions& options);
  void Run();
  Work TakeWork();
  void Admit(std::vector<std::shared_ptr<Pending>>& pending);
  // SubmitSamples' answer once `group` is done: its channels, or its first error (the others
  // aborted).
  absl::StatusOr<std::vector<std::shared_ptr<RequestChannel>>> TakeChannels(
      const std::vector<std::shared_ptr<Pending>>& group) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyAborts(const std::vector<std::pair<RequestId, AbortReason>>& aborts, bool all);
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status StepOnce();
  void Dispatch(const StepOutput& step);
  void FailAll(const absl::Status& status);
  void UpdateGauges();
  void PublishEvents();

  std::unique_ptr<Engine> engine_;
  const EngineLoopOptions options_;
  KvEventBatcher batcher_;                     // loop thread only
  int event_listener_ = -1;                    // loop thread only
  absl::flat_hash_map<RequestId, Live> live_;  // loop thread only
  std::atomic<bool> healthy_{true};

  mutable absl::Mutex mu_;
  std::deque<std::shared_ptr<Pending>> pending_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<RequestId, AbortReason>> aborts_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void(Engine&)>> tasks_ ABSL_GUARDED_BY(mu_);
  int64_t tasks_done_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t tasks_queued_ ABSL_GUARDED_BY(mu_) = 0;
  int32_t waiting_ ABSL_GUARDED_BY(mu_) = 0;   // engine's waiting requests after the last step
  int64_t num_live_ ABSL_GUARDED_BY(mu_) = 0;  // requests added and not yet finished
  bool busy_ ABSL_GUARDED_BY(mu_) = false;     // the engine has unfinished requests
  bool abort_all_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace pagedkv::server

#endif  // PAGEDKV_ENGINE_SERVE_HTTP_ENGINE_LOOP_H_
