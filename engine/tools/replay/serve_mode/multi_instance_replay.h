// Copyright 2026 The pagedkv Authors.
//
// Multi-instance serve replay: N simulated instances, each with its own Scheduler,
// KvCacheManager (block pool) and simulated GPU clock (the roofline cost of serve_replay.h), fed
// by one router in arrival order. Before routing a request that arrives at t, every busy instance
// is stepped until its clock reaches t, so the router sees each instance as of t.
//
// Routers (docs/kv_events.md has the cost formula and its knobs):
//   round-robin   - instance (k mod N) for the k-th request;
//   least-loaded  - the smallest load (prompt blocks of the instance's unfinished requests);
//   prefix-aware  - PickInstance over a PrefixRouterIndex fed only by the instances' real event
//                   batches, encoded to msgpack and decoded again after every step (the bytes
//                   a vLLM-event router would receive; with transport "zmq" they cross real
//                   KvEventPublisher -> KvEventSubscriber sockets);
//   oracle        - the same cost, with each instance's cached prefix read from its
//                   KvCacheManager directly (the upper reference for an event-fed router).
// Shifted reuse of marked chunks is not simulated here (chunks are ignored).
//
// KV tiers (serve.tiers): every instance has its own host tier of host_capacity_blocks blocks,
// and all instances share one remote tier of remote_capacity_blocks blocks (one simulated store,
// as one Redis server is for every engine pointed at it): a block one instance computed is a
// remote hit for the others. Each instance walks its tiers as the engine does (instance_tiers.h)
// and is charged its loads on the links. Routers see the device pools only: a block in the
// shared tier is reachable by every instance at the same cost, so it cannot make one instance a
// better pick than another for that block (routing for it is moot); host tiers are not published
// to the router either (their blocks are one PCIe copy away, a second-order term).
//
// Example:
//   MultiInstanceOptions m{.num_instances = 8, .router = "prefix-aware"};
//   PAGEDKV_ASSIGN_OR_RETURN(MultiInstanceResult r, RunMultiInstanceReplay(workload, serve, m));
//   std::printf("hit rate %.3f\n", r.aggregate.prefix_hit_rate());
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_MULTI_INSTANCE_REPLAY_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_MULTI_INSTANCE_REPLAY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tools/replay/serve_mode/instance_tiers.h"
#include "engine/tools/replay/serve_mode/serve_replay.h"
#include "engine/tools/replay/workload/workload.h"
#include "nlohmann/json.hpp"
#include "pagedkv/events/kv_event_codec.h"
#include "pagedkv/events/prefix_router_index.h"
#include "pagedkv/export.h"

namespace pagedkv::replay {

struct PAGEDKV_EXPORT MultiInstanceOptions {
  int32_t num_instances = 2;           // simulated instances; >= 1
  std::string router = "round-robin";  // round-robin, least-loaded, prefix-aware, oracle
  RouterCostOptions cost;              // prefix-aware and oracle: the cost's weights
  KvEventCodecOptions codec;           // prefix-aware: how events are encoded on the way
  PrefixRouterIndexOptions index;      // prefix-aware: per-medium weights
  // prefix-aware: "inproc" (encode and decode in process) or "zmq" (each instance publishes on
  // ipc:// sockets in a temporary directory, the router subscribes; each step's batch arrives
  // before the next request is routed, so both transports route alike).
  std::string transport = "inproc";
};

struct PAGEDKV_EXPORT InstanceSummary {
  int64_t requests = 0;  // requests routed here
  int64_t routed_prompt_tokens = 0;
  int64_t admitted_tokens = 0;    // prompt tokens at admissions (re-admissions included)
  int64_t prefix_hit_tokens = 0;  // of those, prefix-cache hits
  int64_t steps = 0;
  int64_t preemptions = 0;
  int64_t evictions = 0;
  double mean_load_blocks = 0;  // mean of this instance's load seen at routing decisions
  double busy_seconds = 0;      // simulated time spent in steps (tier loads included)
  InstanceTierCounts tiers;     // with tiers: hits per tier at first admissions, loads
  double prefix_hit_rate() const;
  // Shares of admitted_tokens served by the host and the (shared) remote tier.
  double host_hit_rate() const;
  double remote_hit_rate() const;
};

struct PAGEDKV_EXPORT MultiInstanceResult {
  std::string router;
  int32_t num_instances = 0;
  ServeReplayResult aggregate;  // counters summed, latencies over all requests
  std::vector<InstanceSummary> per_instance;
  TierStats shared_remote;    // the shared remote tier, all instances together (with one)
  int64_t event_batches = 0;  // prefix-aware: batches carried from instances to the index
  int64_t event_bytes = 0;    // their msgpack bytes
};

// Names accepted in MultiInstanceOptions::router.
PAGEDKV_EXPORT std::vector<std::string> RouterNames();

// Runs the replay. `serve` gives the per-instance settings (capacity is per instance; 0 = what
// fits one GPU). InvalidArgument for bad options (unknown router, num_instances < 1, what
// RunServeReplay rejects); Internal if an instance stalls or ends holding blocks.
PAGEDKV_EXPORT absl::StatusOr<MultiInstanceResult> RunMultiInstanceReplay(
    const Workload& workload, const ServeReplayOptions& serve, const MultiInstanceOptions& options);

// The aggregate table and one row per instance.
PAGEDKV_EXPORT std::string FormatMultiInstanceTable(const MultiInstanceResult& result);
// ServeResultJson(aggregate) plus router, num_instances, per_instance and kv_events.
PAGEDKV_EXPORT nlohmann::json MultiInstanceJson(const MultiInstanceResult& result);

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_MULTI_INSTANCE_REPLAY_H_
