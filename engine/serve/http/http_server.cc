// Copyright 2026 The pagedkv Authors.
//
// HttpServer (see http_server.h): routes, authentication, limits and the generation handler.
#include "engine/serve/http/http_server.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "engine/serve/http/completion_job.h"
#include "engine/serve/http/openai_response.h"
#include "engine/serve/http/peer_socket.h"
#include "engine/serve/http/pipelining_server.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::server {
namespace {

using nlohmann::json;

void SendError(httplib::Response& res, int status, absl::string_view message,
               absl::string_view param = "") {
  res.status = status;
  res.set_content(ErrorBody(status, message, param), "application/json");
}

int HttpStatusOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

void SendJson(httplib::Response& res, const json& body) {
  res.status = 200;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

// "cmpl-" + 24 hex digits, unique in this process and unlikely to repeat across processes.
std::string NewResponseId(const char* prefix) {
  static std::atomic<uint64_t> counter{std::random_device{}()};
  static const uint64_t salt = (static_cast<uint64_t>(std::random_device{}()) << 32) ^
                               static_cast<uint64_t>(std::random_device{}());
  return absl::StrFormat("%s%016x%08x", prefix, salt ^ counter.fetch_add(1),
                         static_cast<uint32_t>(counter.load()));
}

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              ServerMetrics* metrics) {
  if (options.max_request_bytes < 1) {
    return absl::InvalidArgumentError("--max-request-bytes must be >= 1");
  }
  if (options.http_threads < 2) return absl::InvalidArgumentError("--http-threads must be >= 2");
  if (options.max_n < 1 || options.max_n > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-n ", options.max_n, " is not in [1, 256]"));
  }
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--port ", options.port, " is not in [0, 65535]"));
  }
  std::unique_ptr<HttpServer> server(new HttpServer(options, metrics));
  httplib::Server& http = *server->http_;
  if (options.port == 0) {
    server->port_ = http.bind_to_any_port(options.host);
  } else if (http.bind_to_port(options.host, options.port)) {
    server->port_ = options.port;
  }
  if (server->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.host, ":", options.port,
                                               " (in use, or not an address here)"));
  }
  server->listener_ = std::thread([raw = server.get()] {
    raw->http_->listen_after_bind();
    raw->listener_done_.store(true);
  });
  return server;
}

HttpServer::HttpServer(const HttpServerOptions& options, ServerMetrics* metrics)
    : options_(options), metrics_(metrics), http_(std::make_unique<PipeliningServer>()) {
  const size_t threads = static_cast<size_t>(options_.http_threads);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(static_cast<size_t>(options_.max_request_bytes));
  http_->set_keep_alive_max_count(100000);
  AddRoutes();
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Attach(EngineLoop* loop, const ServedModel& model) {
  model_ = model;
  loop_.store(loop);
}

void HttpServer::Stop() {
  if (stopped_.exchange(true)) return;
  // httplib's stop() does nothing before the listener's loop has begun (it would then accept
  // forever): a server stopped right after Start (a model that fails to load) waits for it.
  while (listener_.joinable() && !http_->is_running() && !listener_done_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  http_->stop();
  if (listener_.joinable()) listener_.join();
}

void HttpServer::AddRoutes() {
  AddErrorHandlers();
  AddStatusRoutes();
  AddGenerationRoutes();
  AddTokenRoutes();
  AddCacheRoutes();
}

void HttpServer::AddErrorHandlers() {
  // No compression: cpp-httplib 0.11 would gzip text/event-stream and hold streamed tokens back.
  http_->set_pre_routing_handler([](const httplib::Request& req, httplib::Response&) {
    // The request object is the server's own, non-const; only this header is dropped.
    const_cast<httplib::Request&>(req).headers.erase("Accept-Encoding");
    return httplib::Server::HandlerResponse::Unhandled;
  });
  const httplib::Server::HandlerWithResponse on_error = [this](const httplib::Request& req,
                                                               httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 413) {
      SendError(res, 413,
                absl::StrCat("the request body is larger than ", options_.max_request_bytes,
                             " bytes (--max-request-bytes)"));
    } else if (res.status == 404) {
      SendError(res, 404, absl::StrCat("no route ", req.method, " ", req.path));
    } else {
      SendError(res, res.status, "malformed HTTP request");
    }
    return httplib::Server::HandlerResponse::Handled;
  };
  http_->set_error_handler(on_error);
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
        std::string what = "unknown error";
        try {
          if (error) std::rethrow_exception(error);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        SendError(res, 500, absl::StrCat("internal error: ", what));
      });
}

void HttpServer::AddStatusRoutes() {
  http_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    EngineLoop* loop = loop_.load();
    if (loop != nullptr && loop->healthy() && !draining_.load()) {
      res.status = 200;
      return;
    }
    SendError(res, 503,
              draining_.load()  ? "the server is draining"
              : loop == nullptr ? "the model is loading"
                                : "the engine failed");
  });
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    std::string text;
    if (metrics_ != nullptr) metrics_->WritePrometheus(&text);
    EngineLoop* loop = loop_.load();
    absl::Status cache_status;
    if (loop != nullptr) {
      absl::Status run = loop->RunOnLoop(
          [&](Engine& engine) { cache_status = engine.WriteKvCachePrometheus(&text); });
      if (cache_status.ok()) cache_status = run;
    }
    if (!cache_status.ok() && !absl::IsUnavailable(cache_status)) {
      return SendError(res, 500, cache_status.message());
    }
    res.set_content(text, "text/plain; version=0.0.4");
  });
  http_->Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authorized(req, res) || ReadyLoop(res) == nullptr) return;
    const json model = {{"id", model_.name},
                        {"object", "model"},
                        {"created", UnixSeconds()},
                        {"owned_by", "pagedkv"},
                        {"root", model_.name},
                        {"parent", nullptr},
                        {"max_model_len", model_.context_length}};
    SendJson(res, {{"object", "list"}, {"data", json::array({model})}});
  });
}

bool HttpServer::Authorized(const httplib::Request& req, httplib::Response& res) const {
  if (options_.api_key.empty() ||
      req.get_header_value("Authorization") == "Bearer " + options_.api_key) {
    return true;
  }
  if (metrics_ != nullptr) metrics_->CountRejected();
  SendError(res, 401, "a valid API key is required: send Authorization: Bearer <key>");
  return false;
}

EngineLoop* HttpServer::ReadyLoop(httplib::Response& res) const {
  EngineLoop* loop = loop_.load();
  const char* why = loop == nullptr    ? "the model is still loading; retry when /health is 200"
                    : draining_.load() ? "the server is shutting down"
                    : !loop->healthy() ? "the engine failed; restart the server"
                                       : nullptr;
  if (why == nullptr) return loop;
  if (metrics_ != nullptr) metrics_->CountRejected();
  SendError(res, 503, why);
  return nullptr;
}

void HttpServer::AddGenerationRoutes() {
  http_->Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    HandleGeneration(req, res, ApiEndpoint::kCompletions);
  });
  http_->Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    HandleGeneration(req, res, ApiEndpoint::kChatCompletions);
  });
}

void HttpServer::HandleGeneration(const httplib::Request& req, httplib::Response& res,
                                  ApiEndpoint endpoint) {
  if (!Authorized(req, res)) return;
  EngineLoop* loop = ReadyLoop(res);
  if (loop == nullptr) return;
  auto reject = [&](const absl::Status& status) {
    if (metrics_ != nullptr) metrics_->CountRejected();
    const int code = HttpStatusOf(status);
    if (code == 429) res.set_header("Retry-After", std::to_string(options_.retry_after_s));
    SendError(res, code, status.message(), ErrorParam(status));
  };
  absl::StatusOr<ApiRequest> api = ParseApiRequest(req.body, endpoint, {.max_n = options_.max_n});
  if (!api.ok()) return reject(api.status());
  if (const absl::Status named = CheckCacheName(req.body, loop); !named.ok()) {
    return reject(named);
  }
  if (!api->model.empty() && api->model != model_.name) {
    return reject(absl::NotFoundError(absl::StrCat(
        "the model '", api->model, "' does not exist; this server serves '", model_.name, "'")));
  }
  std::vector<TokenId> prompt;
  absl::StatusOr<std::vector<std::shared_ptr<RequestChannel>>> channels =
      SubmitChoices(*api, loop, &prompt);
  if (!channels.ok()) return reject(channels.status());
  const bool chat = endpoint == ApiEndpoint::kChatCompletions;
  ResponseMeta meta = {.id = NewResponseId(chat ? "chatcmpl-" : "cmpl-"),
                       .created = UnixSeconds(),
                       .model = model_.name,
                       .endpoint = endpoint,
                       .return_token_ids = api->return_token_ids,
                       .prompt_token_ids = prompt};
  const int fd = FindPeerSocket(req.local_port, req.remote_addr, req.remote_port);
  std::vector<std::shared_ptr<CompletionJob>> jobs;
  for (size_t i = 0; i < channels->size(); ++i) {
    jobs.push_back(std::make_shared<CompletionJob>(loop, std::move((*channels)[i]), *api, meta,
                                                   *model_.tokenizer, meta.prompt_token_ids.back(),
                                                   fd, static_cast<int32_t>(i)));
  }
  if (!api->stream) return RespondWhole(jobs, meta, res);
  res.set_header("Cache-Control", "no-cache");
  const bool include_usage = api->include_usage;
  res.set_chunked_content_provider(
      "text/event-stream", [jobs, include_usage](size_t, httplib::DataSink& sink) {
        std::vector<CompletionJob*> all;
        for (const auto& job : jobs) all.push_back(job.get());
        const bool ok = StreamChoices(all, include_usage, [&sink](absl::string_view bytes) {
          return sink.write(bytes.data(), bytes.size());
        });
        if (ok) sink.done();
        return ok;
      });
}

absl::StatusOr<std::vector<std::shared_ptr<RequestChannel>>> HttpServer::SubmitChoices(
    const ApiRequest& api, EngineLoop* loop, std::vector<TokenId>* prompt) {
  // The prompt is encoded once; choice i draws from the request's seed (given or random) + i, so
  // each is reproducible and they differ. Added together, choices 1.. take the prompt's KV from
  // choice 0 (the engine's prompt_source: full blocks shared, the partial last block copied).
  PAGEDKV_ASSIGN_OR_RETURN(const GenerationRequest generation, ToGenerationRequest(api, model_));
  *prompt = generation.prompt_tokens;
  std::vector<GenerationRequest> choices;
  for (int32_t i = 0; i < api.n; ++i) {
    choices.push_back(generation);
    choices.back().sampling.seed += static_cast<uint64_t>(i);
  }
  return loop->SubmitSamples(std::move(choices));
}

void HttpServer::RespondWhole(const std::vector<std::shared_ptr<CompletionJob>>& jobs,
                              const ResponseMeta& meta, httplib::Response& res) {
  std::vector<ChoiceDelta> choices(jobs.size());
  Usage total;
  for (size_t i = 0; i < jobs.size(); ++i) {
    Usage usage;
    std::string error;
    const int status = jobs[i]->Finish(&choices[i], &usage, &error);
    if (status == 0) return;  // the client has gone; the requests are aborted
    if (status != 200) {
      res.status = status;
      res.set_content(error, "application/json");
      return;
    }
    if (i == 0) total = usage;  // the prompt once, every choice's completion tokens
    if (i > 0) total.completion_tokens += usage.completion_tokens;
  }
  res.status = 200;
  res.set_content(ChoicesBody(meta, choices, total), "application/json");
}

void HttpServer::AddCacheRoutes() {
  http_->Post("/v1/cache/save", [this](const httplib::Request& req, httplib::Response& res) {
    HandleCacheSave(req, res);
  });
}

absl::Status HttpServer::CheckCacheName(const std::string& body, EngineLoop* loop) {
  const json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  const auto it = parsed.is_object() ? parsed.find("cache_name") : parsed.end();
  if (!parsed.is_object() || it == parsed.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) return FieldError("cache_name", "must be a string (a save's name)");
  const std::string name = it->get<std::string>();
  bool held = false;
  PAGEDKV_RETURN_IF_ERROR(loop->RunOnLoop([&](Engine& e) { held = e.HasSavedPrefix(name); }));
  if (held) return absl::OkStatus();  // its blocks load through the tier walk, by content
  return absl::NotFoundError(absl::StrCat("no KV cache save named '", name,
                                          "' (POST /v1/cache/save first; needs --disk-cache)"));
}

absl::StatusOr<GenerationResult> HttpServer::RunToEnd(const ApiRequest& api, EngineLoop* loop,
                                                      std::vector<TokenId>* prompt) {
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<RequestChannel>> channels,
                           SubmitChoices(api, loop, prompt));
  for (;;) {
    RequestChannel::Update u = channels[0]->Wait(absl::Milliseconds(100));
    if (!u.status.ok()) return u.status;
    if (u.result.has_value()) return *std::move(u.result);
  }
}

void HttpServer::HandleCacheSave(const httplib::Request& req, httplib::Response& res) {
  if (!Authorized(req, res)) return;
  EngineLoop* loop = ReadyLoop(res);
  if (loop == nullptr) return;
  auto reject = [&](const absl::Status& status) {
    SendError(res, HttpStatusOf(status), status.message(), ErrorParam(status));
  };
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object() || !body.contains("name") || !body["name"].is_string()) {
    return reject(FieldError("name", "is required: the save's name (a string)"));
  }
  const std::string name = body["name"].get<std::string>();
  const ApiEndpoint endpoint =
      body.contains("messages") ? ApiEndpoint::kChatCompletions : ApiEndpoint::kCompletions;
  body.erase("name");
  body["max_tokens"] = 1;  // the prompt is what is saved; one token runs it
  body["temperature"] = 0;
  body["stream"] = false;
  body["n"] = 1;
  absl::StatusOr<ApiRequest> api = ParseApiRequest(body.dump(), endpoint, {.max_n = 1});
  if (!api.ok()) return reject(api.status());
  std::vector<TokenId> prompt;
  absl::StatusOr<GenerationResult> ran = RunToEnd(*api, loop, &prompt);
  if (!ran.ok()) return reject(ran.status());
  absl::StatusOr<int64_t> saved = absl::UnknownError("not run");
  const absl::Status ran_on_loop =
      loop->RunOnLoop([&](Engine& e) { saved = e.SavePrefix(name, prompt, api->cache_salt); });
  if (!ran_on_loop.ok()) return reject(ran_on_loop);
  if (absl::IsFailedPrecondition(saved.status())) {
    return SendError(res, 400, saved.status().message());
  }
  if (!saved.ok()) return reject(saved.status());
  SendJson(res, {{"name", name},
                 {"prompt_tokens", prompt.size()},
                 {"saved_tokens", *saved},
                 {"cached_tokens", ran->num_prefix_hit_tokens}});
}

void HttpServer::AddTokenRoutes() {
  http_->Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    HandleTokenize(req, res);
  });
  http_->Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    HandleDetokenize(req, res);
  });
  http_->Get("/tokenizer_info", [this](const httplib::Request& req, httplib::Response& res) {
    HandleTokenizerInfo(req, res);
  });
}

void HttpServer::HandleTokenize(const httplib::Request& req, httplib::Response& res) {
  if (!Authorized(req, res) || ReadyLoop(res) == nullptr) return;
  absl::StatusOr<TokenizeRequest> r = ParseTokenizeRequest(req.body);
  if (!r.ok()) return SendError(res, 400, r.status().message(), ErrorParam(r.status()));
  std::string text = r->prompt.value_or("");
  if (!r->messages.empty()) {
    absl::StatusOr<std::string> chat = FormatChatMessages(model_.chat_template, r->messages);
    if (!chat.ok()) return SendError(res, 400, chat.status().message(), "messages");
    text = std::move(*chat);
  }
  absl::StatusOr<std::vector<TokenId>> ids =
      model_.tokenizer->Encode(text, {.add_bos = r->add_special_tokens});
  if (!ids.ok()) return SendError(res, 400, ids.status().message(), "prompt");
  SendJson(res, {{"count", ids->size()},
                 {"max_model_len", model_.context_length},
                 {"tokens", *ids},
                 {"token_strs", nullptr}});
}

void HttpServer::HandleTokenizerInfo(const httplib::Request& req, httplib::Response& res) {
  if (!Authorized(req, res) || ReadyLoop(res) == nullptr) return;
  const Tokenizer& t = *model_.tokenizer;
  auto special = [&t](TokenId id) -> nlohmann::json {
    if (id < 0 || id >= t.vocab_size()) return nullptr;
    return t.piece(id);
  };
  SendJson(res,
           {{"tokenizer_class", t.bpe() != nullptr ? "huggingface_bpe" : "llama2c"},
            {"bos_token", special(t.bos_id())},
            {"eos_token", special(t.eos_id())},
            {"pad_token", nullptr},
            {"chat_template", model_.chat_template.empty() ? nlohmann::json()
                                                           : nlohmann::json(model_.chat_template)},
            {"model_max_length", model_.context_length},
            {"vocab_size", t.vocab_size()}});
}

void HttpServer::HandleDetokenize(const httplib::Request& req, httplib::Response& res) {
  if (!Authorized(req, res) || ReadyLoop(res) == nullptr) return;
  absl::StatusOr<std::vector<TokenId>> ids = ParseDetokenizeRequest(req.body);
  if (!ids.ok()) return SendError(res, 400, ids.status().message(), ErrorParam(ids.status()));
  absl::StatusOr<std::string> text = model_.tokenizer->Decode(*ids);
  if (!text.ok()) return SendError(res, 400, text.status().message(), "tokens");
  SendJson(res, {{"prompt", *text}});
}

}  // namespace pagedkv::server
