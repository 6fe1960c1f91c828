// Copyright 2026 The pagedkv Authors.
//
// `pagedkv kv-events listen ENDPOINT`: subscribes to a vLLM-style KV event stream (a pagedkv
// publisher or vLLM) and prints each decoded batch as one JSON line, recovering gaps through the
// replay socket when one is given. For debugging a deployment.
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "engine/tools/cli/commands.h"
#include "nlohmann/json.hpp"
#include "pagedkv/events/kv_event_subscriber.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cli {
namespace {

struct ListenFlags {
  std::string endpoint;
  std::string replay_endpoint;
  std::string topic;
  int64_t from_seq = -1;
  int64_t max_batches = 0;
  double idle_timeout_s = 0;
};

nlohmann::json EventJson(const KvBatchEvent& e) {
  nlohmann::json j = {{"type", e.type == KvEventType::kBlockStored    ? "BlockStored"
                               : e.type == KvEventType::kBlockRemoved ? "BlockRemoved"
                                                                      : "AllBlocksCleared"}};
  if (e.type == KvEventType::kAllBlocksCleared) return j;
  j["block_hashes"] = nlohmann::json::array();
  for (const BlockHash& h : e.block_hashes) j["block_hashes"].push_back(h.ToString());
  j["medium"] = e.medium.has_value() ? nlohmann::json(*e.medium) : nlohmann::json();
  if (e.group_idx.has_value()) j["group_idx"] = *e.group_idx;
  if (e.type == KvEventType::kBlockStored) {
    j["parent_block_hash"] =
        e.parent_block_hash ? nlohmann::json(e.parent_block_hash->ToString()) : nlohmann::json();
    j["num_token_ids"] = e.token_ids.size();
    j["block_size"] = e.block_size;
  }
  return j;
}

absl::Status Listen(const ListenFlags& f) {
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<KvEventSubscriber> sub,
                           KvEventSubscriber::Create({.endpoint = f.endpoint,
                                                      .replay_endpoint = f.replay_endpoint,
                                                      .topic = f.topic,
                                                      .start_seq = f.from_seq}));
  int64_t printed = 0;
  double idle = 0;
  constexpr int32_t kPollMs = 100;
  while (f.max_batches == 0 || printed < f.max_batches) {
    PAGEDKV_ASSIGN_OR_RETURN(std::vector<ReceivedKvEventBatch> got, sub->Poll(kPollMs));
    if (got.empty()) {
      idle += kPollMs / 1000.0;
      if (f.idle_timeout_s > 0 && idle >= f.idle_timeout_s) break;
      continue;
    }
    idle = 0;
    for (const ReceivedKvEventBatch& r : got) {
      if (f.max_batches > 0 && printed >= f.max_batches) break;  // one poll can bring many
      nlohmann::json j = {{"seq", r.seq}, {"replayed", r.replayed}, {"ts", r.batch.timestamp}};
      if (r.batch.data_parallel_rank) j["data_parallel_rank"] = *r.batch.data_parallel_rank;
      j["events"] = nlohmann::json::array();
      for (const KvBatchEvent& e : r.batch.events) j["events"].push_back(EventJson(e));
      std::cout << j.dump() << "\n";
      ++printed;
    }
    std::cout.flush();
  }
  const KvEventSubscriberStats s = sub->stats();
  std::cerr << absl::StrFormat(
      "kv-events listen: %d batches (%d replayed), %d gaps, %d lost, %d malformed\n", s.received,
      s.replayed, s.gaps, s.lost, s.decode_errors);
  return absl::OkStatus();
}

}  // namespace

void AddKvEventsCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand("kv-events", "Tools for KV event streams (vLLM format)");
  cmd->require_subcommand(1);
  auto flags = std::make_shared<ListenFlags>();
  CLI::App* listen = cmd->add_subcommand(
      "listen", "Subscribe to ENDPOINT and print each decoded batch as a JSON line");
  listen->add_option("endpoint", flags->endpoint, "PUB address, e.g. tcp://host:5557")->required();
  listen->add_option("--replay-endpoint", flags->replay_endpoint,
                     "ROUTER replay address, e.g. tcp://host:5558 (gaps are recovered)");
  listen->add_option("--topic", flags->topic, "Subscription prefix");
  listen->add_option("--from-seq", flags->from_seq,
                     "Ask the replay socket for every batch from this sequence number first");
  listen->add_option("--max-batches", flags->max_batches, "Stop after this many (0 = never)");
  listen->add_option("--idle-timeout-s", flags->idle_timeout_s,
                     "Stop after this long without a batch (0 = never)");
  listen->callback([flags, exit_code] {
    const absl::Status status = Listen(*flags);
    if (!status.ok()) {
      std::cerr << "pagedkv kv-events listen: error: " << status.message() << "\n";
      *exit_code = 1;
      return;
    }
    *exit_code = 0;
  });
}

}  // namespace pagedkv::cli
