// Copyright 2026 The pagedkv Authors.
//
// Multi-instance serve replay (engine/tools/replay/serve_mode/multi_instance_replay.h). Each
// SimInstance is the single-instance serve loop cut into steps (Add a request, Step once), so the
// driver can interleave instances in simulated time; the router runs between arrivals.
#include "engine/tools/replay/serve_mode/multi_instance_replay.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/tools/replay/serve_mode/cost_model.h"
#include "engine/tools/replay/serve_mode/instance_tiers.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/events/kv_event_publisher.h"
#include "pagedkv/events/kv_event_subscriber.h"
#include "pagedkv/runtime/scheduler.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/tiers/host_tier.h"

namespace pagedkv::replay {
namespace {

// Latencies of every finished request, over all instances.
struct Latencies {
  std::vector<double> ttft, e2e, tpot;
};

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

// Nearest-rank percentile of sorted values (0 when empty), as serve mode reports them.
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

class SimInstance {
 public:
  // `shared_remote`: the remote tier every instance shares (null: none).
  static absl::StatusOr<std::unique_ptr<SimInstance>> Create(const ServeReplayOptions& o,
                                                             int64_t capacity, bool events,
                                                             HostTier* shared_remote) {
    KvCacheManagerOptions mo;
    mo.num_blocks = static_cast<int32_t>(capacity);
    mo.block_size = o.block_size;
    mo.eviction_policy = o.policy;
    mo.vocab_size = o.vocab_size;
    mo.model_fingerprint = o.model.name;
    mo.collect_event_batches = events;
    auto inst = std::unique_ptr<SimInstance>(new SimInstance(o));
    PAGEDKV_ASSIGN_OR_RETURN(inst->manager_, KvCacheManager::Create(std::move(mo)));
    PAGEDKV_ASSIGN_OR_RETURN(inst->scheduler_, Scheduler::Create(o.scheduler, *inst->manager_));
    if (o.tiers.enabled()) {
      PAGEDKV_ASSIGN_OR_RETURN(
          inst->tiers_,
          InstanceTiers::Create(
              o.tiers, inst->manager_.get(),
              static_cast<double>(o.block_size) * static_cast<double>(o.model.KvBytesPerToken()),
              2 * int64_t{std::max(1, o.scheduler.max_num_batched_tokens)}, shared_remote));
    }
    return inst;
  }

  // Queues request `id` arriving at `arrival_s`; false when the scheduler rejects it.
  absl::StatusOr<bool> Add(RequestId id, const ReplayRequest& r, std::vector<TokenId> prompt,
                           double arrival_s) {
    SchedulerRequest sr;
    sr.id = id;
    std::vector<TokenId> tier_prompt = tiers_ != nullptr ? prompt : std::vector<TokenId>{};
    sr.prompt = std::move(prompt);
    sr.max_new_tokens = static_cast<int32_t>(std::clamp<int64_t>(r.output_length, 1, 1 << 30));
    sr.arrival_time = arrival_s;
    ++summary_.requests;
    summary_.routed_prompt_tokens += r.input_length;
    if (absl::Status s = scheduler_->AddRequest(std::move(sr)); !s.ok()) {
      if (s.code() != absl::StatusCode::kInvalidArgument) return s;
      return false;  // e.g. a prompt longer than the whole KV pool
    }
    if (tiers_ != nullptr) tiers_->AddWaiting(id, std::move(tier_prompt));
    now_ = std::max(now_, arrival_s);  // a busy instance was already stepped up to the arrival
    live_[id] = Tracked{.arrival_s = arrival_s, .prompt_tokens = r.input_length};
    load_tokens_ += r.input_length;
    return true;
  }

  // Runs one scheduler step and advances the clock by its simulated cost.
  absl::Status Step(const RooflineCostModel& cost, Latencies& lat, ServeReplayResult& agg);

  bool Busy() const { return scheduler_->HasUnfinishedRequests(); }
  double now() const { return now_; }
  // Prompt blocks of the unfinished requests routed here.
  double LoadBlocks() const {
    return static_cast<double>(load_tokens_) / static_cast<double>(options_.block_size);
  }
  void NoteLoadSeen(double load) {
    load_sum_ += load;
    ++load_samples_;
  }
  KvCacheManager& manager() { return *manager_; }
  absl::Status Finish(InstanceSummary* out);

 private:
  struct Tracked {
    double arrival_s = 0;
    double first_token_s = -1;
    int64_t prompt_tokens = 0;
  };
  explicit SimInstance(const ServeReplayOptions& o) : options_(o) {}

  const ServeReplayOptions& options_;
  std::unique_ptr<KvCacheManager> manager_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<InstanceTiers> tiers_;  // null without tiers
  absl::flat_hash_map<RequestId, Tracked> live_;
  ScheduledBatch batch_;
  std::vector<SampledToken> sampled_;
  double now_ = 0;
  int64_t load_tokens_ = 0;
  double load_sum_ = 0;
  int64_t load_samples_ = 0;
  InstanceSummary summary_;
};

absl::Status SimInstance::Step(const RooflineCostModel& cost, Latencies& lat,
                               ServeReplayResult& agg) {
  if (tiers_ != nullptr) PAGEDKV_RETURN_IF_ERROR(tiers_->BeforeSchedule());
  PAGEDKV_RETURN_IF_ERROR(scheduler_->Schedule(&batch_));
  if (tiers_ != nullptr) {
    PAGEDKV_RETURN_IF_ERROR(tiers_->AfterSchedule());
    // The tier walk pins what it loaded for several waiting requests; in a small pool that can
    // leave the first of them no room. Its blocks stay cached: schedule again with them unpinned.
    if (batch_.empty()) PAGEDKV_RETURN_IF_ERROR(scheduler_->Schedule(&batch_));
  }
  if (batch_.empty()) {
    return absl::InternalError(absl::StrFormat(
        "an instance made no progress with %d requests waiting and %d running at t=%.3f s",
        scheduler_->num_waiting(), scheduler_->num_running(), now_));
  }
  StepWork work;
  sampled_.clear();
  const auto vocab = static_cast<uint64_t>(options_.vocab_size);
  for (const ScheduledSequence& seq : batch_.sequences) {
    work.AddSequence(seq.num_computed_tokens, seq.num_scheduled_tokens);
    if (seq.samples) {
      sampled_.push_back(
          {.request_id = seq.request_id,
           .token = static_cast<TokenId>((seq.request_id * 7919 + seq.seq_len()) % vocab)});
    }
  }
  double dt = cost.StepSeconds(work);
  if (tiers_ != nullptr) {
    PAGEDKV_ASSIGN_OR_RETURN(const double load_s, tiers_->AfterBatch(batch_));
    dt += load_s;
  }
  now_ += dt;
  summary_.busy_seconds += dt;
  agg.computed_tokens += work.num_tokens;
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<RequestOutput> outputs,
                           scheduler_->UpdateFromOutput(sampled_));
  for (const RequestOutput& out : outputs) {
    auto it = live_.find(out.request_id);
    if (it == live_.end()) continue;
    Tracked& t = it->second;
    if (t.first_token_s < 0) {
      t.first_token_s = now_;
      lat.ttft.push_back(now_ - t.arrival_s);
    }
    if (!out.finished()) continue;
    ++agg.finished;
    agg.prompt_tokens += t.prompt_tokens;
    agg.output_tokens += out.num_output_tokens;
    lat.e2e.push_back(now_ - t.arrival_s);
    if (out.num_output_tokens > 1) {
      lat.tpot.push_back((now_ - t.first_token_s) / (out.num_output_tokens - 1));
    }
    load_tokens_ -= t.prompt_tokens;
    live_.erase(it);
  }
  return absl::OkStatus();
}

absl::Status SimInstance::Finish(InstanceSummary* out) {
  PAGEDKV_RETURN_IF_ERROR(manager_->ValidateInvariants());
  if (manager_->pool().NumUsedBlocks() != 0) {
    return absl::InternalError(absl::StrFormat("an instance ended with %d blocks still held",
                                               manager_->pool().NumUsedBlocks()));
  }
  const SchedulerStats& s = scheduler_->stats();
  summary_.admitted_tokens = s.num_admitted_tokens;
  summary_.prefix_hit_tokens = s.num_prefix_hit_tokens;
  summary_.steps = s.num_steps;
  summary_.preemptions = s.num_preemptions;
  summary_.evictions = manager_->stats().evictions;
  summary_.mean_load_blocks =
      load_samples_ > 0 ? load_sum_ / static_cast<double>(load_samples_) : 0;
  if (tiers_ != nullptr) summary_.tiers = tiers_->counts();
  *out = summary_;
  return absl::OkStatus();
}

enum class Router { kRoundRobin, kLeastLoaded, kPrefixAware, kOracle };

absl::StatusOr<Router> ParseRouter(const std::string& name) {
  if (name == "round-robin") return Router::kRoundRobin;
  if (name == "least-loaded") return Router::kLeastLoaded;
  if (name == "prefix-aware") return Router::kPrefixAware;
  if (name == "oracle") return Router::kOracle;
  return absl::InvalidArgumentError(absl::StrFormat("unknown router \"%s\"; expected one of: %s",
                                                    name, absl::StrJoin(RouterNames(), ", ")));
}

// Routes requests over the instances and steps them in simulated time.
class Driver {
 public:
  Driver(const ServeReplayOptions& serve, const MultiInstanceOptions& options, Router router)
      : serve_(serve),
        options_(options),
        router_(router),
        cost_(serve.gpu, serve.model, serve.cost) {}
  ~Driver() {
    publishers_.clear();
    subscribers_.clear();
    if (!socket_dir_.empty()) {
      std::error_code ignored;  // best effort: a leftover temporary directory harms nothing
      std::filesystem::remove_all(socket_dir_, ignored);
    }
  }

  absl::Status Init(int64_t capacity);
  // Steps every busy instance until its clock reaches `t`.
  absl::Status AdvanceTo(double t);
  absl::Status Route(RequestId id, const ReplayRequest& r, double arrival_s);
  absl::Status Drain() { return AdvanceTo(std::numeric_limits<double>::infinity()); }
  absl::StatusOr<MultiInstanceResult> Finish(double t0);

 private:
  absl::StatusOr<size_t> Pick(const std::vector<TokenId>& prompt, RequestId id);
  // prefix-aware: carries the instance's step events through the codec into the index.
  absl::Status ForwardEvents(size_t i);
  // transport "zmq": one publisher and one subscriber per instance on ipc:// sockets.
  absl::Status OpenSockets();
  // Publishes `batch` for instance i and applies what its subscriber receives, up to that batch.
  absl::Status ForwardOverZmq(size_t i, KvEventBatch batch);

  const ServeReplayOptions& serve_;
  const MultiInstanceOptions& options_;
  const Router router_;
  const RooflineCostModel cost_;
  std::vector<std::unique_ptr<SimInstance>> instances_;
  std::unique_ptr<PrefixRouterIndex> index_;
  std::unique_ptr<HostTier> shared_remote_;  // the remote tier every instance shares (or null)
  int64_t routed_ = 0;
  Latencies lat_;
  ServeReplayResult agg_;
  int64_t event_batches_ = 0, event_bytes_ = 0;
  std::string socket_dir_;
  std::vector<std::unique_ptr<KvEventPublisher>> publishers_;
  std::vector<std::unique_ptr<KvEventSubscriber>> subscribers_;
};

absl::Status Driver::OpenSockets() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "pagedkv-replay-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    return absl::UnavailableError("cannot create a temporary directory for the event sockets");
  }
  socket_dir_ = tmpl;
  for (size_t i = 0; i < instances_.size(); ++i) {
    const std::string base = "ipc://" + socket_dir_ + "/instance-" + std::to_string(i);
    PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<KvEventPublisher> pub,
                             KvEventPublisher::Create({.endpoint = base + "-pub",
                                                       .replay_endpoint = base + "-replay",
                                                       .buffer_steps = 1000,
                                                       .codec = options_.codec}));
    PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<KvEventSubscriber> sub,
                             KvEventSubscriber::Create({.endpoint = pub->endpoint(),
                                                        .replay_endpoint = pub->replay_endpoint(),
                                                        .start_seq = 0}));
    publishers_.push_back(std::move(pub));
    subscribers_.push_back(std::move(sub));
  }
  return absl::OkStatus();
}

absl::Status Driver::ForwardOverZmq(size_t i, KvEventBatch batch) {
  event_bytes_ += static_cast<int64_t>(EncodeKvEventBatch(batch, options_.codec).size());
  const int64_t seq = publishers_[i]->Publish(std::move(batch));
  if (seq < 0 || !publishers_[i]->Flush(10000)) {
    return absl::InternalError("the event publisher dropped or did not send a batch");
  }
  KvEventSubscriber& sub = *subscribers_[i];
  for (int idle = 0; sub.next_seq() <= seq;) {
    PAGEDKV_ASSIGN_OR_RETURN(std::vector<ReceivedKvEventBatch> got, sub.Poll(20));
    if (got.empty()) {
      // Not (yet) live, e.g. before the subscription reached the PUB socket: fetch it from the
      // replay buffer, which holds it since Flush returned.
      PAGEDKV_ASSIGN_OR_RETURN(got, sub.Recover());
    }
    for (const ReceivedKvEventBatch& r : got) index_->Apply(static_cast<InstanceId>(i), r.batch);
    if (!got.empty()) continue;
    if (++idle == 100) {
      return absl::InternalError(
          absl::StrFormat("instance %d's event batch %d did not arrive over ZeroMQ", i, seq));
    }
  }
  if (subscribers_[i]->stats().lost > 0) {
    return absl::InternalError(absl::StrFormat("instance %d lost event batches", i));
  }
  ++event_batches_;
  return absl::OkStatus();
}

absl::Status Driver::Init(int64_t capacity) {
  const bool events = router_ == Router::kPrefixAware;
  if (events) {
    PAGEDKV_ASSIGN_OR_RETURN(index_, PrefixRouterIndex::Create(options_.index));
  }
  if (serve_.tiers.enabled() && serve_.tiers.remote_capacity_blocks > 0) {
    PAGEDKV_ASSIGN_OR_RETURN(
        shared_remote_, HostTier::Create({.capacity_blocks = serve_.tiers.remote_capacity_blocks,
                                          .policy = serve_.tiers.policy,
                                          .name = "remote"}));
  }
  for (int32_t i = 0; i < options_.num_instances; ++i) {
    PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<SimInstance> inst,
                             SimInstance::Create(serve_, capacity, events, shared_remote_.get()));
    instances_.push_back(std::move(inst));
    if (events) index_->AddInstance(i);
  }
  if (events && options_.transport == "zmq") return OpenSockets();
  if (options_.transport != "inproc" && options_.transport != "zmq") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "unknown --kv-events-transport \"%s\"; expected inproc or zmq", options_.transport));
  }
  return absl::OkStatus();
}

absl::Status Driver::ForwardEvents(size_t i) {
  KvEventBatch batch = instances_[i]->manager().TakeEventBatch(instances_[i]->now());
  if (batch.events.empty()) return absl::OkStatus();
  if (!publishers_.empty()) return ForwardOverZmq(i, std::move(batch));
  const std::string bytes = EncodeKvEventBatch(batch, options_.codec);
  PAGEDKV_ASSIGN_OR_RETURN(KvEventBatch decoded, DecodeKvEventBatch(bytes));
  index_->Apply(static_cast<InstanceId>(i), decoded);
  ++event_batches_;
  event_bytes_ += static_cast<int64_t>(bytes.size());
  return absl::OkStatus();
}

absl::Status Driver::AdvanceTo(double t) {
  for (size_t i = 0; i < instances_.size(); ++i) {
    SimInstance& inst = *instances_[i];
    while (inst.Busy() && inst.now() < t) {
      PAGEDKV_RETURN_IF_ERROR(inst.Step(cost_, lat_, agg_));
      if (index_ != nullptr) PAGEDKV_RETURN_IF_ERROR(ForwardEvents(i));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> Driver::Pick(const std::vector<TokenId>& prompt, RequestId id) {
  const size_t n = instances_.size();
  std::vector<double> loads(n);
  for (size_t i = 0; i < n; ++i) {
    loads[i] = instances_[i]->LoadBlocks();
    instances_[i]->NoteLoadSeen(loads[i]);
  }
  if (router_ == Router::kRoundRobin) return static_cast<size_t>(routed_ % static_cast<int64_t>(n));
  if (router_ == Router::kLeastLoaded) {
    return static_cast<size_t>(std::min_element(loads.begin(), loads.end()) - loads.begin());
  }
  PAGEDKV_ASSIGN_OR_RETURN(CacheRequest req, instances_[0]->manager().NewRequest(id, prompt));
  const int64_t request_blocks = (req.num_tokens() + serve_.block_size - 1) / serve_.block_size;
  std::vector<InstancePrefixMatch> matches;
  if (router_ == Router::kPrefixAware) {
    std::vector<BlockHash> wire(req.block_hashes().begin(), req.block_hashes().end());
    for (BlockHash& h : wire) h = WireBlockHash(h, options_.codec.hash_format);
    matches = index_->Match(wire);
  } else {
    for (size_t i = 0; i < n; ++i) {
      PAGEDKV_ASSIGN_OR_RETURN(ComputedBlocks hit, instances_[i]->manager().GetComputedBlocks(req));
      const auto blocks = static_cast<int64_t>(hit.blocks.size());
      matches.push_back({.instance = static_cast<InstanceId>(i),
                         .matched_blocks = blocks,
                         .weighted_blocks = static_cast<double>(blocks),
                         .held_blocks = instances_[i]->manager().pool().NumCachedBlocks()});
    }
  }
  return static_cast<size_t>(PickInstance(matches, loads, request_blocks, options_.cost));
}

absl::Status Driver::Route(RequestId id, const ReplayRequest& r, double arrival_s) {
  PAGEDKV_RETURN_IF_ERROR(AdvanceTo(arrival_s));
  std::vector<TokenId> prompt = MaterializePrompt(r, serve_.vocab_size);
  PAGEDKV_ASSIGN_OR_RETURN(size_t pick, Pick(prompt, id));
  ++routed_;
  PAGEDKV_ASSIGN_OR_RETURN(bool added, instances_[pick]->Add(id, r, std::move(prompt), arrival_s));
  if (!added) ++agg_.rejected;
  return absl::OkStatus();
}

absl::StatusOr<MultiInstanceResult> Driver::Finish(double t0) {
  MultiInstanceResult res{.router = options_.router, .num_instances = options_.num_instances};
  res.aggregate = agg_;
  ServeReplayResult& a = res.aggregate;
  double end = t0;
  for (auto& inst : instances_) {
    InstanceSummary s;
    PAGEDKV_RETURN_IF_ERROR(inst->Finish(&s));
    a.admitted_tokens += s.admitted_tokens;
    a.prefix_hit_tokens += s.prefix_hit_tokens;
    a.steps += s.steps;
    a.preemptions += s.preemptions;
    a.evictions += s.evictions;
    a.stored_blocks += inst->manager().stats().stored_blocks;
    a.host_hit_tokens += s.tiers.host_hit_tokens;
    a.remote_hit_tokens += s.tiers.remote_hit_tokens;
    a.host_loaded_blocks += s.tiers.host_loaded_blocks;
    a.remote_loaded_blocks += s.tiers.remote_loaded_blocks;
    a.disk_hit_tokens += s.tiers.disk_hit_tokens;
    a.disk_loaded_blocks += s.tiers.disk_loaded_blocks;
    a.tier_load_seconds += s.tiers.load_seconds;
    end = std::max(end, inst->now());
    res.per_instance.push_back(s);
  }
  a.simulated_seconds = end - t0;
  std::sort(lat_.ttft.begin(), lat_.ttft.end());
  std::sort(lat_.e2e.begin(), lat_.e2e.end());
  a.ttft_mean_s = Mean(lat_.ttft);
  a.ttft_p50_s = Percentile(lat_.ttft, 50);
  a.ttft_p99_s = Percentile(lat_.ttft, 99);
  a.tpot_mean_s = Mean(lat_.tpot);
  a.e2e_mean_s = Mean(lat_.e2e);
  a.e2e_p99_s = Percentile(lat_.e2e, 99);
  a.tiers_enabled = serve_.tiers.enabled();
  a.host_capacity_blocks = serve_.tiers.host_capacity_blocks;
  a.remote_capacity_blocks = serve_.tiers.remote_capacity_blocks;
  a.disk_capacity_blocks = serve_.tiers.disk_capacity_blocks;
  a.host_store = {.rule = serve_.tiers.host_store, .threshold = serve_.tiers.host_store_threshold};
  if (shared_remote_ != nullptr) res.shared_remote = shared_remote_->stats();
  res.event_batches = event_batches_;
  res.event_bytes = event_bytes_;
  return res;
}

}  // namespace

double InstanceSummary::prefix_hit_rate() const {
  return admitted_tokens > 0
             ? static_cast<double>(prefix_hit_tokens) / static_cast<double>(admitted_tokens)
             : 0.0;
}

double InstanceSummary::host_hit_rate() const {
  return admitted_tokens > 0
             ? static_cast<double>(tiers.host_hit_tokens) / static_cast<double>(admitted_tokens)
             : 0.0;
}

double InstanceSummary::remote_hit_rate() const {
  return admitted_tokens > 0
             ? static_cast<double>(tiers.remote_hit_tokens) / static_cast<double>(admitted_tokens)
             : 0.0;
}

std::vector<std::string> RouterNames() {
  return {"round-robin", "least-loaded", "prefix-aware", "oracle"};
}

absl::StatusOr<MultiInstanceResult> RunMultiInstanceReplay(const Workload& workload,
                                                           const ServeReplayOptions& serve,
                                                           const MultiInstanceOptions& options) {
  PAGEDKV_ASSIGN_OR_RETURN(Router router, ParseRouter(options.router));
  if (options.num_instances < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--instances must be >= 1 (got %d)", options.num_instances));
  }
  if (serve.policy == "belady" || serve.gpu.peak_flops <= 0 || serve.model.num_parameters <= 0 ||
      serve.vocab_size <= 0) {
    return absl::InvalidArgumentError(
        "multi-instance replay needs a GPU and a model preset, a vocabulary and an online policy");
  }
  PAGEDKV_RETURN_IF_ERROR(ValidateWorkload(workload));
  PAGEDKV_RETURN_IF_ERROR(serve.scheduler.Validate());
  int64_t capacity = serve.capacity_blocks;
  if (capacity == 0) {
    PAGEDKV_ASSIGN_OR_RETURN(
        capacity,
        KvCapacityBlocks(serve.gpu, serve.model, serve.gpu_memory_utilization, serve.block_size));
  }
  if (capacity <= 0 || capacity >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("KV capacity must be between 1 and 2^31 - 1 blocks (got %d)", capacity));
  }
  const auto wall_start = std::chrono::steady_clock::now();
  Driver driver(serve, options, router);
  PAGEDKV_RETURN_IF_ERROR(driver.Init(capacity));
  for (size_t k = 0; k < workload.requests.size(); ++k) {
    const ReplayRequest& r = workload.requests[k];
    PAGEDKV_RETURN_IF_ERROR(driver.Route(k, r, r.arrival_ms / 1000.0));
    if ((k & 255) == 0 && serve.progress) serve.progress(static_cast<int64_t>(k));
  }
  PAGEDKV_RETURN_IF_ERROR(driver.Drain());
  const double t0 = workload.requests.empty() ? 0 : workload.requests[0].arrival_ms / 1000.0;
  PAGEDKV_ASSIGN_OR_RETURN(MultiInstanceResult res, driver.Finish(t0));
  res.aggregate.requests = static_cast<int64_t>(workload.requests.size());
  res.aggregate.capacity_blocks = capacity;
  res.aggregate.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  if (serve.progress) serve.progress(res.aggregate.requests);
  return res;
}

std::string FormatMultiInstanceTable(const MultiInstanceResult& r) {
  std::string out = absl::StrFormat("router %s, %d instances (KV capacity is per instance)\n",
                                    r.router, r.num_instances);
  out += FormatServeTable(r.aggregate);
  const bool tiers = r.aggregate.tiers_enabled;
  out +=
      "  instance  requests  prompt tokens  hit rate   mean load (blocks)  busy (s)  "
      "preempt  evictions";
  out += tiers ? "  host hit  remote hit\n" : "\n";
  for (size_t i = 0; i < r.per_instance.size(); ++i) {
    const InstanceSummary& s = r.per_instance[i];
    absl::StrAppendFormat(&out, "  %8d  %8d  %13d  %7.2f%%  %18.0f  %8.1f  %7d  %9d", i, s.requests,
                          s.routed_prompt_tokens, 100 * s.prefix_hit_rate(), s.mean_load_blocks,
                          s.busy_seconds, s.preemptions, s.evictions);
    if (tiers) {
      absl::StrAppendFormat(&out, "  %7.2f%%  %9.2f%%", 100 * s.host_hit_rate(),
                            100 * s.remote_hit_rate());
    }
    out += "\n";
  }
  if (tiers && r.aggregate.remote_capacity_blocks > 0) {
    absl::StrAppendFormat(&out,
                          "  shared remote tier (%d blocks, one for all instances): %d resident, "
                          "%d stored, %d loaded, %d evicted\n",
                          r.aggregate.remote_capacity_blocks, r.shared_remote.resident_blocks,
                          r.shared_remote.stored_blocks, r.shared_remote.hit_blocks,
                          r.shared_remote.evictions);
  }
  if (r.event_batches > 0) {
    absl::StrAppendFormat(&out, "  KV events to the router index: %d batches, %.1f MB msgpack\n",
                          r.event_batches, r.event_bytes / 1e6);
  }
  return out;
}

nlohmann::json MultiInstanceJson(const MultiInstanceResult& r) {
  nlohmann::json j = ServeResultJson(r.aggregate);
  j["router"] = r.router;
  j["num_instances"] = r.num_instances;
  j["per_instance"] = nlohmann::json::array();
  for (size_t i = 0; i < r.per_instance.size(); ++i) {
    const InstanceSummary& s = r.per_instance[i];
    j["per_instance"].push_back({{"instance", i},
                                 {"requests", s.requests},
                                 {"routed_prompt_tokens", s.routed_prompt_tokens},
                                 {"admitted_tokens", s.admitted_tokens},
                                 {"prefix_hit_tokens", s.prefix_hit_tokens},
                                 {"prefix_hit_rate", s.prefix_hit_rate()},
                                 {"mean_load_blocks", s.mean_load_blocks},
                                 {"busy_seconds", s.busy_seconds},
                                 {"steps", s.steps},
                                 {"preemptions", s.preemptions},
                                 {"evictions", s.evictions}});
    if (r.aggregate.tiers_enabled) {
      j["per_instance"].back()["tiers"] = {{"host_hit_tokens", s.tiers.host_hit_tokens},
                                           {"remote_hit_tokens", s.tiers.remote_hit_tokens},
                                           {"host_hit_rate", s.host_hit_rate()},
                                           {"remote_hit_rate", s.remote_hit_rate()},
                                           {"host_loaded_blocks", s.tiers.host_loaded_blocks},
                                           {"remote_loaded_blocks", s.tiers.remote_loaded_blocks},
                                           {"load_seconds", s.tiers.load_seconds}};
    }
  }
  if (r.aggregate.tiers_enabled && r.aggregate.remote_capacity_blocks > 0) {
    j["tiers"]["remote_shared"] = true;
    j["tiers"]["shared_remote"] = {{"resident_blocks", r.shared_remote.resident_blocks},
                                   {"stored_blocks", r.shared_remote.stored_blocks},
                                   {"store_skipped", r.shared_remote.store_skipped},
                                   {"hit_blocks", r.shared_remote.hit_blocks},
                                   {"evictions", r.shared_remote.evictions}};
  }
  j["kv_events"] = {{"batches", r.event_batches}, {"bytes", r.event_bytes}};
  return j;
}

}  // namespace pagedkv::replay
