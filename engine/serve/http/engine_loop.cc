// Copyright 2026 The pagedkv Authors.
//
// EngineLoop (see engine_loop.h). The loop thread alone touches the Engine, the batcher and
// live_; everything the HTTP threads share with it sits under mu_. Engine calls run without mu_
// held, so a long step never blocks a Submit from queueing (only from returning).
#include "engine/serve/http/engine_loop.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::server {

namespace {

using Clock = std::chrono::steady_clock;

double SecondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

// ---- RequestChannel -----------------------------------------------------------------------------

RequestChannel::Update RequestChannel::Wait(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !tokens_.empty() || prompt_logprobs_.has_value() || (result_.has_value() && !taken_end_);
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  Update update;
  update.tokens = std::move(tokens_);
  tokens_.clear();
  update.logprobs = std::move(logprobs_);
  logprobs_.clear();
  update.prompt_logprobs = std::move(prompt_logprobs_);
  prompt_logprobs_.reset();
  if (result_.has_value() && !taken_end_) {
    update.result = *result_;
    update.status = status_;
    taken_end_ = true;
  }
  return update;
}

void RequestChannel::Deliver(Update update) {
  absl::MutexLock lock(&mu_);
  tokens_.insert(tokens_.end(), update.tokens.begin(), update.tokens.end());
  for (TokenLogprobs& l : update.logprobs) logprobs_.push_back(std::move(l));
  if (update.prompt_logprobs.has_value()) prompt_logprobs_ = std::move(update.prompt_logprobs);
  if (update.result.has_value()) {
    result_ = std::move(update.result);
    status_ = std::move(update.status);
  }
}

// ---- EngineLoop ---------------------------------------------------------------------------------

struct EngineLoop::Pending {
  GenerationRequest request;
  // Another sample of the same prompt, queued before this one (SubmitSamples): once added, its
  // id becomes request.prompt_source.
  std::shared_ptr<Pending> prompt_source;
  bool done = false;  // under EngineLoop::mu_
  absl::Status status;
  std::shared_ptr<RequestChannel> channel;
};

struct EngineLoop::Live {
  std::shared_ptr<RequestChannel> channel;
  Clock::time_point arrival;
  Clock::time_point last_token;
  int32_t num_tokens = 0;
  std::optional<AbortReason> abort_reason;
};

struct EngineLoop::Work {
  std::vector<std::shared_ptr<Pending>> pending;
  std::vector<std::pair<RequestId, AbortReason>> aborts;
  std::vector<std::function<void(Engine&)>> tasks;
  bool abort_all = false;
  bool stop = false;
};

absl::StatusOr<std::unique_ptr<EngineLoop>> EngineLoop::Start(std::unique_ptr<Engine> engine,
                                                              const EngineLoopOptions& options) {
  if (engine == nullptr) return absl::InvalidArgumentError("EngineLoop: no engine");
  if (options.max_queued_requests < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_queued_requests must be >= 1, got ", options.max_queued_requests));
  }
  std::unique_ptr<EngineLoop> loop(new EngineLoop(std::move(engine), options));
  loop->thread_ = std::thread([raw = loop.get()] { raw->Run(); });
  return loop;
}

EngineLoop::EngineLoop(std::unique_ptr<Engine> engine, const EngineLoopOptions& options)
    : engine_(std::move(engine)), options_(options) {
  if (options_.publisher != nullptr) {
    event_listener_ = engine_->AddEventListener([this](const KvEvent& e) { batcher_.Add(e); });
  }
}

EngineLoop::~EngineLoop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
  if (event_listener_ >= 0) engine_->RemoveEventListener(event_listener_);
}

absl::StatusOr<std::shared_ptr<RequestChannel>> EngineLoop::Submit(GenerationRequest request) {
  std::vector<GenerationRequest> one;
  one.push_back(std::move(request));
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<RequestChannel>> channels,
                           SubmitSamples(std::move(one)));
  return channels[0];
}

absl::StatusOr<std::vector<std::shared_ptr<RequestChannel>>> EngineLoop::SubmitSamples(
    std::vector<GenerationRequest> samples) {
  std::vector<std::shared_ptr<Pending>> group;
  for (GenerationRequest& sample : samples) {
    auto pending = std::make_shared<Pending>();
    pending->request = std::move(sample);
    if (!group.empty()) pending->prompt_source = group[0];
    group.push_back(std::move(pending));
  }
  absl::MutexLock lock(&mu_);
  if (stop_ || stopped_ || !healthy_.load()) {
    return absl::UnavailableError("the engine has stopped; no new requests are taken");
  }
  if (draining_) return absl::UnavailableError("the server is shutting down (draining)");
  const int64_t queued = waiting_ + static_cast<int64_t>(pending_.size());
  if (queued + static_cast<int64_t>(group.size()) > options_.max_queued_requests) {
    return absl::ResourceExhaustedError(absl::StrCat(
        queued, " requests are already waiting (--max-queued-requests ",
        options_.max_queued_requests, "), no room for ", group.size(), "; retry later"));
  }
  pending_.insert(pending_.end(), group.begin(), group.end());
  Pending* last = group.back().get();
  mu_.Await(absl::Condition(
      +[](Pending* q) { return q->done; }, last));  // added in order: the others are done too
  return TakeChannels(group);
}

absl::StatusOr<std::vector<std::shared_ptr<RequestChannel>>> EngineLoop::TakeChannels(
    const std::vector<std::shared_ptr<Pending>>& group) {
  std::vector<std::shared_ptr<RequestChannel>> channels;
  absl::Status status;
  for (const std::shared_ptr<Pending>& p : group) {
    status.Update(p->status);
    if (p->channel != nullptr) channels.push_back(p->channel);
  }
  if (status.ok()) return channels;
  for (const auto& c : channels) aborts_.emplace_back(c->id(), AbortReason::kClientGone);
  return status;
}

void EngineLoop::Abort(RequestId id, AbortReason reason) {
  absl::MutexLock lock(&mu_);
  aborts_.emplace_back(id, reason);
}

absl::Status EngineLoop::RunOnLoop(std::function<void(Engine&)> task) {
  absl::MutexLock lock(&mu_);
  if (stop_ || stopped_) return absl::UnavailableError("the engine loop has stopped");
  tasks_.push_back(std::move(task));
  const int64_t ticket = ++tasks_queued_;
  auto done = [this, ticket]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return tasks_done_ >= ticket || stopped_; };
  mu_.Await(absl::Condition(&done));
  if (tasks_done_ < ticket) return absl::UnavailableError("the engine loop has stopped");
  return absl::OkStatus();
}

void EngineLoop::BeginDrain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
}

bool EngineLoop::WaitIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return (num_live_ == 0 && pending_.empty()) || stopped_;
  };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

void EngineLoop::AbortAll() {
  absl::MutexLock lock(&mu_);
  abort_all_ = true;
}

bool EngineLoop::HasWork() const {
  return stop_ || busy_ || abort_all_ || !pending_.empty() || !aborts_.empty() || !tasks_.empty();
}

EngineLoop::Work EngineLoop::TakeWork() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &EngineLoop::HasWork));
  Work work;
  work.stop = stop_;
  work.pending.assign(pending_.begin(), pending_.end());
  pending_.clear();
  work.aborts = std::move(aborts_);
  aborts_.clear();
  work.tasks = std::move(tasks_);
  tasks_.clear();
  work.abort_all = abort_all_;
  abort_all_ = false;
  return work;
}

void EngineLoop::Run() {
  for (;;) {
    Work work = TakeWork();
    if (work.stop) break;
    Admit(work.pending);
    ApplyAborts(work.aborts, work.abort_all);
    for (auto& task : work.tasks) task(*engine_);
    if (!work.tasks.empty()) {
      absl::MutexLock lock(&mu_);
      tasks_done_ += static_cast<int64_t>(work.tasks.size());
    }
    if (!live_.empty() && healthy_.load()) {
      if (absl::Status s = StepOnce(); !s.ok()) {
        healthy_.store(false);
        FailAll(s);
      }
    }
    UpdateGauges();
  }
  ApplyAborts({}, /*all=*/true);
  FailAll(absl::UnavailableError("the server stopped before the request finished"));
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  for (const std::shared_ptr<Pending>& p : pending_) {
    p->status = absl::UnavailableError("the server is stopping");
    p->done = true;
  }
  pending_.clear();
}

void EngineLoop::Admit(std::vector<std::shared_ptr<Pending>>& pending) {
  const std::string& fingerprint = engine_->kv_cache_fingerprint();
  for (const std::shared_ptr<Pending>& p : pending) {
    if (p->prompt_source != nullptr && p->prompt_source->channel != nullptr) {
      p->request.prompt_source = p->prompt_source->channel->id();
    }
    const std::string salt = p->request.cache_salt;
    const int64_t prompt_tokens = static_cast<int64_t>(p->request.prompt_tokens.size());
    absl::StatusOr<RequestId> id =
        healthy_.load() ? engine_->AddRequest(std::move(p->request))
                        : absl::UnavailableError("the engine failed; no new requests are taken");
    std::shared_ptr<RequestChannel> channel;
    if (id.ok()) {
      channel.reset(new RequestChannel(*id));
      const Clock::time_point now = Clock::now();
      live_.emplace(*id, Live{.channel = channel, .arrival = now, .last_token = now});
      if (options_.publisher != nullptr) batcher_.NoteRoot(RootHash(salt, fingerprint));
      if (options_.metrics != nullptr) options_.metrics->CountReceived(prompt_tokens);
    }
    absl::MutexLock lock(&mu_);
    p->status = id.status();
    p->channel = std::move(channel);
    p->done = true;
    if (id.ok()) {
      ++num_live_;
      ++waiting_;  // until the next step says otherwise, it waits
    }
  }
}

void EngineLoop::ApplyAborts(const std::vector<std::pair<RequestId, AbortReason>>& aborts,
                             bool all) {
  std::vector<std::pair<RequestId, AbortReason>> todo = aborts;
  if (all) {
    for (const auto& [id, live] : live_) todo.emplace_back(id, AbortReason::kClientGone);
  }
  for (const auto& [id, reason] : todo) {
    auto it = live_.find(id);
    if (it == live_.end() || it->second.abort_reason.has_value()) continue;  // ended already
    it->second.abort_reason = reason;
    // Cannot fail: live_ holds exactly the requests the engine has not reported finished.
    engine_->AbortRequest(id).IgnoreError();
  }
}

absl::Status EngineLoop::StepOnce() {
  absl::StatusOr<StepOutput> step = engine_->Step();
  if (!step.ok()) return step.status();
  UpdateGauges();  // before the tokens go out: whoever sees them sees the new queue too
  Dispatch(*step);
  PublishEvents();
  if (!live_.empty() && !engine_->HasUnfinishedRequests() && step->finished.empty() &&
      step->tokens.empty()) {
    return absl::InternalError("the engine holds no request the server is waiting for");
  }
  return absl::OkStatus();
}

void EngineLoop::Dispatch(const StepOutput& step) {
  const Clock::time_point now = Clock::now();
  ServerMetrics* metrics = options_.metrics;
  absl::flat_hash_map<RequestId, RequestChannel::Update> updates;
  for (const TokenOutput& t : step.tokens) {
    auto it = live_.find(t.request_id);
    if (it == live_.end()) continue;
    Live& live = it->second;
    if (metrics != nullptr) {
      if (live.num_tokens == 0) {
        metrics->ObserveFirstToken(SecondsBetween(live.arrival, now));
      } else {
        metrics->ObserveInterToken(SecondsBetween(live.last_token, now));
      }
    }
    live.last_token = now;
    ++live.num_tokens;
    RequestChannel::Update& mine = updates[t.request_id];
    mine.tokens.push_back(t.token);
    if (t.logprobs.has_value()) mine.logprobs.push_back(*t.logprobs);
    if (t.prompt_logprobs.has_value()) mine.prompt_logprobs = t.prompt_logprobs;
  }
  if (metrics != nullptr) metrics->CountGenerated(static_cast<int64_t>(step.tokens.size()));
  for (const GenerationResult& r : step.finished) {
    auto it = live_.find(r.request_id);
    if (it == live_.end()) continue;
    if (metrics != nullptr) {
      metrics->ObserveEndToEnd(SecondsBetween(it->second.arrival, now));
      metrics->CountFinished(it->second.abort_reason == AbortReason::kClientGone);
    }
    RequestChannel::Update last;
    if (auto mine = updates.find(r.request_id); mine != updates.end()) {
      last = std::move(mine->second);
      updates.erase(mine);
    }
    last.result = r;
    it->second.channel->Deliver(std::move(last));
    live_.erase(it);
    absl::MutexLock lock(&mu_);
    --num_live_;
  }
  for (auto& [id, update] : updates) live_.find(id)->second.channel->Deliver(std::move(update));
}

void EngineLoop::FailAll(const absl::Status& status) {
  for (auto& [id, live] : live_) {
    GenerationResult result;
    result.request_id = id;
    result.finish_reason = FinishReason::kAborted;
    live.channel->Deliver({.result = std::move(result), .status = status});
    if (options_.metrics != nullptr) options_.metrics->CountFinished(/*aborted=*/true);
  }
  live_.clear();
  absl::MutexLock lock(&mu_);
  num_live_ = 0;
}

void EngineLoop::UpdateGauges() {
  const int32_t waiting = engine_->scheduler().num_waiting();
  const int32_t running = engine_->scheduler().num_running();
  {
    absl::MutexLock lock(&mu_);
    waiting_ = waiting;
    busy_ = !live_.empty() && healthy_.load();
  }
  // After waiting_: a reader of the gauges sees what Submit already counts.
  if (options_.metrics != nullptr) {
    options_.metrics->SetQueue(running, waiting);
    options_.metrics->SetCopiedPromptTokens(engine_->scheduler().stats().num_copied_tokens);
    options_.metrics->SetTiers(engine_->tier_stats());
  }
}

void EngineLoop::PublishEvents() {
  if (options_.publisher == nullptr || batcher_.empty()) return;
  options_.publisher->Publish(batcher_.Take(WallClockSeconds()));
}

}  // namespace pagedkv::server
