// Copyright 2026 The pagedkv Authors.
//
// `pagedkv serve`: OpenAI's HTTP API on the paged engine (engine/serve/http/).
//
//   pagedkv serve --model smollm2.gguf --port 8000
//   curl localhost:8000/v1/completions -d '{"prompt": "The capital of France is", "max_tokens": 8}'
//
// Startup: the port is bound first (/health answers 503 while the model loads), then the engine
// is loaded and its loop started. SIGTERM or SIGINT drains: /health and new requests get 503,
// live requests run on for --drain-timeout-s, the rest are aborted, and the process exits 0.
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <utility>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/serve/http/engine_loop.h"
#include "engine/serve/http/http_server.h"
#include "engine/tools/cli/commands.h"
#include "engine/tools/cli/engine_flags.h"
#include "engine/tools/cli/flag_checks.h"
#include "engine/tools/cli/kv_events_flags.h"
#include "engine/tools/cli/tier_flags.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/model/chat_template.h"
#include "pagedkv/runtime/engine.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cli {
namespace {

struct ServeFlags {
  EngineFlags engine;
  KvEventsFlags events;
  TierFlags tiers;
  server::HttpServerOptions http;
  std::string served_model_name;  // empty: the model file's or directory's name
  int32_t max_queued_requests = 256;
  int32_t max_num_seqs = 256;
  std::string scheduling_policy = "fcfs";
  double drain_timeout_s = 30.0;
  std::string metrics_file;  // the KV cache's Prometheus text at exit; empty: none
};

// Blocks SIGTERM and SIGINT in this thread and every thread started after it, so that
// WaitForStopSignal alone receives them.
sigset_t BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a write to a closed socket fails, it never kills the server
  return set;
}

int WaitForStopSignal(const sigset_t& set) {
  int signal_number = 0;
  while (sigwait(&set, &signal_number) != 0) {
  }
  return signal_number;
}

absl::StatusOr<EngineOptions> ServeEngineOptions(const ServeFlags& flags) {
  PAGEDKV_ASSIGN_OR_RETURN(EngineOptions options, EngineOptionsFrom(flags.engine));
  options.collect_block_metrics = !flags.metrics_file.empty();
  options.scheduler.max_num_seqs = flags.max_num_seqs;
  if (flags.scheduling_policy == "priority") {
    options.scheduler.policy = SchedulingPolicy::kPriority;
  } else if (flags.scheduling_policy != "fcfs") {
    return absl::InvalidArgumentError(absl::StrCat("--scheduling-policy '", flags.scheduling_policy,
                                                   "': expected fcfs or priority"));
  }
  PAGEDKV_RETURN_IF_ERROR(ApplyTierFlags(flags.tiers, &options));
  return options;
}

// What the HTTP server needs of the loaded engine.
absl::StatusOr<server::ServedModel> DescribeModel(const ServeFlags& flags, Engine& engine) {
  if (engine.tokenizer() == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "serve: the model '", flags.engine.model,
        "' has no tokenizer: pass --tokenizer (llama2.c), or add tokenizer.json to the directory"));
  }
  server::ServedModel model;
  model.name = flags.served_model_name;
  if (model.name.empty()) {
    model.name = std::filesystem::path(flags.engine.model).filename().string();
    if (model.name.empty()) model.name = flags.engine.model;
  }
  model.tokenizer = engine.tokenizer();
  absl::StatusOr<std::string> chat_template = ReadChatTemplate(flags.engine.model);
  if (chat_template.ok()) model.chat_template = std::move(*chat_template);
  model.context_length = engine.context_length();
  model.vocab_size = engine.config().vocab_size;
  model.pool_tokens = engine.kv_pool().num_blocks * engine.options().block_size;
  model.priority_scheduling = engine.options().scheduler.policy == SchedulingPolicy::kPriority;
  return model;
}

absl::Status WriteMetricsFile(const std::string& path, server::EngineLoop& loop) {
  std::string text;
  absl::Status status;
  PAGEDKV_RETURN_IF_ERROR(
      loop.RunOnLoop([&](Engine& engine) { status = engine.WriteKvCachePrometheus(&text); }));
  PAGEDKV_RETURN_IF_ERROR(status);
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) return absl::UnavailableError(absl::StrCat("cannot write --metrics-file ", path));
  return absl::OkStatus();
}

// Drains on SIGTERM / SIGINT: no new work, live requests finish within the timeout, the rest are
// aborted, then the HTTP threads stop.
void Drain(const ServeFlags& flags, int signal_number, server::HttpServer& http,
           server::EngineLoop& loop) {
  std::cerr << absl::StrFormat("pagedkv serve: %s received, draining (up to %.1f s)\n",
                               signal_number == SIGINT ? "SIGINT" : "SIGTERM",
                               flags.drain_timeout_s);
  http.SetDraining();
  loop.BeginDrain();
  if (!loop.WaitIdle(absl::Now() + absl::Seconds(flags.drain_timeout_s))) {
    std::cerr << "pagedkv serve: drain timeout, aborting the requests still running\n";
    loop.AbortAll();
    loop.WaitIdle(absl::Now() + absl::Seconds(10));
  }
  http.Stop();
}

absl::Status RunServe(const ServeFlags& flags) {
  const sigset_t stop_signals = BlockStopSignals();
  server::ServerMetrics metrics;
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<server::HttpServer> http,
                           server::HttpServer::Start(flags.http, &metrics));
  std::cerr << absl::StrFormat("pagedkv serve: listening on http://%s:%d (loading %s)\n",
                               flags.http.host, http->port(), flags.engine.model);
  PAGEDKV_ASSIGN_OR_RETURN(EngineOptions options, ServeEngineOptions(flags));
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                           Engine::Load(flags.engine.model, flags.engine.tokenizer, options));
  PAGEDKV_ASSIGN_OR_RETURN(server::ServedModel model, DescribeModel(flags, *engine));
  const KvPoolSize& pool = engine->kv_pool();
  metrics.SetKvPool(KvDTypesName(pool.dtype, pool.v_dtype), engine->options().block_size,
                    pool.num_blocks, pool.bytes_per_token, pool.tokens);
  std::cerr << absl::StrFormat(
      "pagedkv serve: kv pool: %d blocks, %.1f MiB, %s, %d bytes per token, %d tokens (%s)\n",
      pool.num_blocks, static_cast<double>(pool.bytes) / (1 << 20),
      KvDTypesName(pool.dtype, pool.v_dtype), pool.bytes_per_token, pool.tokens, pool.reason);
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<KvEventPublisher> publisher,
                           MakeKvEventPublisher(flags.events));
  const std::string backend = engine->backend_name();
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<server::EngineLoop> loop,
                           server::EngineLoop::Start(
                               std::move(engine), {.max_queued_requests = flags.max_queued_requests,
                                                   .publisher = publisher.get(),
                                                   .metrics = &metrics}));
  http->Attach(loop.get(), model);
  if (publisher != nullptr) {
    // The addresses actually bound, so a launcher that asked for tcp://127.0.0.1:* (a free port,
    // loopback only, bound as vLLM binds) can hand them to a router that connects.
    std::cerr << absl::StrFormat(
        "pagedkv serve: kv events on %s (replay %s)\n", publisher->endpoint(),
        publisher->replay_endpoint().empty() ? "none" : publisher->replay_endpoint());
  }
  std::cerr << absl::StrFormat("pagedkv serve: ready: model '%s' on %s, %d KV tokens, context %d\n",
                               model.name, backend, model.pool_tokens, model.context_length);
  Drain(flags, WaitForStopSignal(stop_signals), *http, *loop);
  if (!flags.metrics_file.empty()) {
    PAGEDKV_RETURN_IF_ERROR(WriteMetricsFile(flags.metrics_file, *loop));
  }
  loop.reset();
  if (publisher != nullptr) {
    FinishKvEventPublisher(flags.events, publisher.get());
    const KvEventPublisherStats ps = publisher->stats();
    std::cerr << absl::StrFormat("pagedkv serve: kv events: %d batches published, %d dropped\n",
                                 ps.published, ps.dropped);
  }
  std::cerr << "pagedkv serve: stopped\n";
  return absl::OkStatus();
}

void AddServerFlags(CLI::App* cmd, ServeFlags* flags) {
  cmd->add_option("--host", flags->http.host, "address to listen on (default 127.0.0.1)");
  cmd->add_option("--port", flags->http.port, "port to listen on; 0 = any free port")
      ->check(NumberIn(0, 65535));
  cmd->add_option("--served-model-name", flags->served_model_name,
                  "the model name clients send and /v1/models lists (default: the model's file "
                  "or directory name)");
  cmd->add_option("--api-key", flags->http.api_key,
                  "require 'Authorization: Bearer KEY' on /v1/*, /tokenize and /detokenize")
      ->envname("PAGEDKV_API_KEY");
  cmd->add_option("--max-queued-requests", flags->max_queued_requests,
                  "waiting requests before new ones get 429 with Retry-After")
      ->check(PositiveNumber());
  cmd->add_option("--max-request-bytes", flags->http.max_request_bytes,
                  "largest request body; larger ones get 413")
      ->check(PositiveNumber());
  cmd->add_option("--max-n", flags->http.max_n, "most choices (n) one request may ask for")
      ->check(NumberIn(1, 256));
  cmd->add_option("--http-threads", flags->http.http_threads,
                  "connections served at once (each streaming client holds one)")
      ->check(NumberIn(2, 4096));
  cmd->add_option("--drain-timeout-s", flags->drain_timeout_s,
                  "on SIGTERM, seconds live requests may run before they are aborted")
      ->check(NonNegativeNumber());
  cmd->add_option("--max-num-seqs", flags->max_num_seqs, "most sequences running at once")
      ->check(PositiveNumber());
  cmd->add_option("--scheduling-policy", flags->scheduling_policy,
                  "fcfs (default) or priority (requests' \"priority\" field, smaller first)");
  cmd->add_option("--metrics-file", flags->metrics_file,
                  "at exit, write the KV cache's metrics (Prometheus text); also turns on the "
                  "block lifetime histograms that /metrics then shows");
}

}  // namespace

void AddServeCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve a model over OpenAI's HTTP API (/v1/completions, /v1/chat/completions, /metrics)");
  AddModelFlags(cmd, &flags->engine);
  AddServerFlags(cmd, flags.get());
  AddEngineFlags(cmd, &flags->engine);
  AddKvEventsFlags(cmd, &flags->events);
  AddTierFlags(cmd, &flags->tiers);
  cmd->callback([flags, exit_code]() {
    const absl::Status status = RunServe(*flags);
    if (!status.ok()) {
      std::cerr << "pagedkv serve: " << status.message() << "\n";
      *exit_code = 1;
      return;
    }
    *exit_code = 0;
  });
}

}  // namespace pagedkv::cli
