// Copyright 2026 The pagedkv Authors.
//
// HttpServer: OpenAI's HTTP API over an EngineLoop, on cpp-httplib (Debian's libcpp-httplib-dev,
// the library llama.cpp's llama-server uses), one connection per pooled thread:
//   POST /v1/completions, /v1/chat/completions   generation, whole or streamed (SSE)
//   POST /tokenize, /detokenize                   vLLM's extensions that routers call
//   GET  /tokenizer_info                          vLLM's: special tokens, chat template
//   GET  /v1/models                               the served model
//   GET  /health                                  200 when ready, 503 while loading or draining
//   GET  /metrics                                 Prometheus text: server and KV cache metrics
// Errors are OpenAI's error object with the HTTP status: 400 bad request (the message names the
// field or the limit), 401 missing or wrong API key (with --api-key; /health and /metrics are
// open, as in vLLM), 404 unknown model or route, 413 body past max_request_bytes, 429 queue full
// (with Retry-After), 503 loading or draining, 500 engine failure.
//
// Lifecycle: Start binds and answers at once (/health is 503 until Attach gives it an engine
// loop, so load balancers see a loading server); SetDraining refuses new work (503) while the
// live requests finish; Stop closes the listener and waits for the handlers.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(auto server, HttpServer::Start({.port = 8000}, &metrics));
//   ... load the engine, start its loop ...
//   server->Attach(loop.get(), model);
//   ... until SIGTERM ...
//   server->SetDraining(); loop->WaitIdle(deadline); server->Stop();
//
// Thread-safe.
#ifndef PAGEDKV_ENGINE_SERVE_HTTP_HTTP_SERVER_H_
#define PAGEDKV_ENGINE_SERVE_HTTP_HTTP_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/serve/http/completion_job.h"
#include "engine/serve/http/engine_loop.h"
#include "engine/serve/http/generation_request.h"
#include "engine/serve/http/server_metrics.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace pagedkv::server {

struct HttpServerOptions {
  std::string host = "127.0.0.1";       // address to bind
  int32_t port = 8000;                  // 0: any free port (HttpServer::port() says which)
  std::string api_key;                  // non-empty: "Authorization: Bearer <key>" required
  int64_t max_request_bytes = 1 << 20;  // larger bodies get 413; >= 1
  int32_t http_threads = 128;           // connections served at once; >= 2
  int32_t retry_after_s = 1;            // Retry-After of a 429
  int32_t max_n = 16;                   // most choices per request (n); in [1, 256]
};

class HttpServer {
 public:
  // Binds host:port and starts answering. InvalidArgument for bad options, Unavailable when the
  // address cannot be bound. `metrics` is not owned and outlives the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           ServerMetrics* metrics);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int32_t port() const { return port_; }

  // Generation goes to `loop` from now on. REQUIRES: called once; `loop` and model.tokenizer
  // outlive Stop().
  void Attach(EngineLoop* loop, const ServedModel& model);
  // /health answers 503 and new requests get 503 from now on.
  void SetDraining() { draining_.store(true); }
  // Stops listening and waits until every handler has returned. Idempotent.
  void Stop();

 private:
  HttpServer(const HttpServerOptions& options, ServerMetrics* metrics);
  // Registers every handler: AddErrorHandlers, AddStatusRoutes, AddGenerationRoutes,
  // AddTokenRoutes and AddCacheRoutes.
  void AddRoutes();
  // No compression, and JSON errors for bad requests, unknown routes and exceptions.
  void AddErrorHandlers();
  // GET /health, /metrics and /v1/models.
  void AddStatusRoutes();
  void AddGenerationRoutes();
  void AddTokenRoutes();
  // POST /v1/cache/save: llama.cpp's slot save by name, into the disk tier (Engine::SavePrefix).
  void AddCacheRoutes();
  // False (with the 401 sent) when the API key is required and missing or wrong.
  bool Authorized(const httplib::Request& req, httplib::Response& res) const;
  // The attached loop, or null with the 503 sent (loading, draining, engine failed).
  EngineLoop* ReadyLoop(httplib::Response& res) const;
  void HandleGeneration(const httplib::Request& req, httplib::Response& res, ApiEndpoint endpoint);
  // {"name", "prompt" | "messages", ...}: runs the prompt (one token) and pins its blocks in the
  // disk tier under the name; answers {"name", "prompt_tokens", "saved_tokens"}.
  void HandleCacheSave(const httplib::Request& req, httplib::Response& res);
  // A generation request's "cache_name" (a save to load from): NotFound when no such save is
  // held; OK without the field (any other field is the parser's).
  absl::Status CheckCacheName(const std::string& body, EngineLoop* loop);
  // Submits one request of `api` and waits for its end; *prompt: the prompt's ids.
  absl::StatusOr<GenerationResult> RunToEnd(const ApiRequest& api, EngineLoop* loop,
                                            std::vector<TokenId>* prompt);
  // Submits api.n requests of the prompt, encoded once (choice i seeded with seed + i);
  // they are admitted together, so the later ones share the first one's prompt blocks. On a
  // failure the ones submitted are aborted. *prompt: the prompt's ids.
  absl::StatusOr<std::vector<std::shared_ptr<RequestChannel>>> SubmitChoices(
      const ApiRequest& api, EngineLoop* loop, std::vector<TokenId>* prompt);
  // Waits for every choice and answers one body (the usage counts the prompt once).
  void RespondWhole(const std::vector<std::shared_ptr<CompletionJob>>& jobs,
                    const ResponseMeta& meta, httplib::Response& res);
  void HandleTokenize(const httplib::Request& req, httplib::Response& res);
  // vLLM's GET /tokenizer_info (lm-evaluation-harness's remote tokenizer reads it).
  void HandleTokenizerInfo(const httplib::Request& req, httplib::Response& res);
  void HandleDetokenize(const httplib::Request& req, httplib::Response& res);

  HttpServerOptions options_;
  ServerMetrics* metrics_;
  std::unique_ptr<httplib::Server> http_;
  std::thread listener_;
  std::atomic<bool> listener_done_{false};  // the listener's listen_after_bind returned
  int32_t port_ = 0;
  std::atomic<EngineLoop*> loop_{nullptr};
  ServedModel model_;  // written once by Attach, before loop_ is published
  std::atomic<bool> draining_{false};
  std::atomic<bool> stopped_{false};
};

}  // namespace pagedkv::server

#endif  // PAGEDKV_ENGINE_SERVE_HTTP_HTTP_SERVER_H_
