// Copyright 2026 The pagedkv Authors.
//
// Bindings of the replay tool (engine/tools/replay, library pagedkv_replay) as the submodule
// pagedkv._pagedkv.replay: the whole `pagedkv replay --json` run, a capacity sweep without files
// unless asked, cache-mode replay of a Workload built in Python, and the workload generators.
// Results are JSON text (the CLI's fields); pagedkv/replay.py parses them into dicts. Every
// replay releases the GIL while it runs.
#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common.h"
#include "engine/tools/replay/cache_mode/cache_replay.h"
#include "engine/tools/replay/replay_runner.h"
#include "engine/tools/replay/report.h"
#include "engine/tools/replay/workload/block_expansion.h"
#include "engine/tools/replay/workload/generators.h"
#include "engine/tools/replay/workload/mooncake_trace.h"
#include "engine/tools/replay/workload/workload.h"
#include "nlohmann/json.hpp"
#include "pagedkv/status_macros.h"

namespace pagedkv::python {
namespace {

using py::arg;
using replay::ReplayConfig;

template <typename T>
void Assign(T& field, py::handle value) {
  field = value.cast<T>();
}
void Assign(replay::TokenRange& field, py::handle value) {
  auto [lo, hi] = value.cast<std::pair<int32_t, int32_t>>();
  field = {.min = lo, .max = hi};
}

// Field setters of an options struct, by keyword name.
template <typename T>
using Setters = std::map<std::string, std::function<void(T&, py::handle)>>;

#define PAGEDKV_SETTER(T, f)                        \
  {                                                 \
#f, [](T & t, py::handle v) { Assign(t.f, v); } \
  }

// `target` with every keyword of `kwargs` applied. InvalidArgument naming the accepted keywords
// for an unknown one or a value of the wrong type.
template <typename T>
T ApplyKwargs(T target, const py::dict& kwargs, const Setters<T>& setters, const char* what) {
  for (auto [key, value] : kwargs) {
    const std::string name = py::str(key).cast<std::string>();
    auto it = setters.find(name);
    if (it == setters.end()) {
      std::string known;
      for (const auto& [k, s] : setters) known += (known.empty() ? "" : ", ") + k;
      ThrowInvalidArgument(std::string(what) + ": unknown option \"" + name +
                           "\"; expected one of: " + known);
    }
    try {
      it->second(target, value);
    } catch (const py::cast_error&) {
      ThrowInvalidArgument(std::string(what) + ": option \"" + name + "\" has the wrong type (" +
                           py::str(value.get_type().attr("__name__")).cast<std::string>() +
                           "); see default_config() for the expected ones");
    }
  }
  return target;
}

const Setters<ReplayConfig>& ConfigSetters() {
  static const auto* setters = new Setters<ReplayConfig>{
      PAGEDKV_SETTER(ReplayConfig, trace),
      PAGEDKV_SETTER(ReplayConfig, workload),
      PAGEDKV_SETTER(ReplayConfig, requests),
      PAGEDKV_SETTER(ReplayConfig, seed),
      PAGEDKV_SETTER(ReplayConfig, mode),
      PAGEDKV_SETTER(ReplayConfig, block_size),
      PAGEDKV_SETTER(ReplayConfig, trace_block_size),
      PAGEDKV_SETTER(ReplayConfig, skip_bad_lines),
      PAGEDKV_SETTER(ReplayConfig, cache_partial_tail),
      PAGEDKV_SETTER(ReplayConfig, capacity_blocks),
      PAGEDKV_SETTER(ReplayConfig, capacity_gib),
      PAGEDKV_SETTER(ReplayConfig, sweep),
      PAGEDKV_SETTER(ReplayConfig, policies),
      PAGEDKV_SETTER(ReplayConfig, count_shifted),
      PAGEDKV_SETTER(ReplayConfig, model),
      PAGEDKV_SETTER(ReplayConfig, gpu),
      PAGEDKV_SETTER(ReplayConfig, gpu_memory_utilization),
      PAGEDKV_SETTER(ReplayConfig, max_num_seqs),
      PAGEDKV_SETTER(ReplayConfig, max_num_batched_tokens),
      PAGEDKV_SETTER(ReplayConfig, cache_aware),
      PAGEDKV_SETTER(ReplayConfig, out_dir),
      PAGEDKV_SETTER(ReplayConfig, csv),
      PAGEDKV_SETTER(ReplayConfig, plot),
      PAGEDKV_SETTER(ReplayConfig, max_memory_gib),
  };
  return *setters;
}

py::dict DefaultConfig() {
  const ReplayConfig c;
  py::dict d;
  d["trace"] = c.trace;
  d["workload"] = c.workload;
  d["requests"] = c.requests;
  d["seed"] = c.seed;
  d["max_memory_gib"] = c.max_memory_gib;
  d["mode"] = c.mode;
  d["block_size"] = c.block_size;
  d["trace_block_size"] = c.trace_block_size;
  d["skip_bad_lines"] = c.skip_bad_lines;
  d["cache_partial_tail"] = c.cache_partial_tail;
  d["capacity_blocks"] = c.capacity_blocks;
  d["capacity_gib"] = c.capacity_gib;
  d["sweep"] = c.sweep;
  d["policies"] = c.policies;
  d["count_shifted"] = c.count_shifted;
  d["model"] = c.model;
  d["gpu"] = c.gpu;
  d["gpu_memory_utilization"] = c.gpu_memory_utilization;
  d["max_num_seqs"] = c.max_num_seqs;
  d["max_num_batched_tokens"] = c.max_num_batched_tokens;
  d["cache_aware"] = c.cache_aware;
  d["out_dir"] = c.out_dir;
  d["csv"] = c.csv;
  d["plot"] = c.plot;
  return d;
}

// `pagedkv replay --json` with these options: the JSON object it prints.
std::string RunJson(const py::dict& kwargs) {
  ReplayConfig config = ApplyKwargs(ReplayConfig{}, kwargs, ConfigSetters(), "replay.run");
  config.json = true;
  config.progress = false;
  std::ostringstream out, err;
  absl::Status status;
  {
    py::gil_scoped_release release;
    status = replay::RunReplay(config, out, err);
  }
  CheckStatus(status);
  return out.str();
}

absl::StatusOr<replay::Workload> LoadWorkload(const ReplayConfig& c) {
  if (!c.trace.empty()) {
    return replay::LoadMooncakeTrace(
        c.trace, {.trace_block_size = c.trace_block_size, .skip_bad_lines = c.skip_bad_lines});
  }
  return replay::MakeBuiltinWorkload(c.workload, {.num_requests = c.requests, .seed = c.seed});
}

// The cache-mode runs of every (capacity, policy) pair, as `pagedkv replay --sweep --json`
// reports them; writes the CSV / plot only when their paths are given.
absl::StatusOr<nlohmann::json> Sweep(const ReplayConfig& c, const std::vector<int64_t>& capacities,
                                     const std::vector<std::string>& policies) {
  if (capacities.empty()) return absl::InvalidArgumentError("sweep: give at least one capacity");
  PAGEDKV_ASSIGN_OR_RETURN(replay::Workload workload, LoadWorkload(c));
  const bool need_future = std::find(policies.begin(), policies.end(), "belady") != policies.end();
  const auto start = std::chrono::steady_clock::now();
  PAGEDKV_ASSIGN_OR_RETURN(
      replay::ExpandedWorkload expanded,
      replay::ExpandWorkload(workload, {.block_size = c.block_size,
                                        .compute_next_use = need_future,
                                        .cache_partial_tail = c.cache_partial_tail}));
  const double expansion_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<replay::CacheReplayResult> results;
  for (int64_t cap : capacities) {
    for (const std::string& policy : policies) {
      PAGEDKV_ASSIGN_OR_RETURN(
          replay::CacheReplayResult r,
          replay::RunCacheReplay(
              expanded,
              {.capacity_blocks = cap, .policy = policy, .count_shifted = c.count_shifted}));
      results.push_back(std::move(r));
    }
  }
  nlohmann::json j = {{"workload", workload.name},
                      {"block_size", c.block_size},
                      {"trace_block_size", workload.trace_block_size},
                      {"block_rules", c.cache_partial_tail ? "cache-partial-tail" : "engine"},
                      {"skipped_lines", workload.skipped_lines},
                      {"mode", "cache"},
                      {"distinct_blocks", expanded.distinct_blocks},
                      {"expansion_seconds", expansion_seconds},
                      {"requests", results[0].requests},
                      {"blocks", results[0].blocks},
                      {"infinite_cache_block_hit_rate", results[0].infinite_cache_block_hit_rate()},
                      {"infinite_cache_token_hit_rate", results[0].infinite_cache_token_hit_rate()},
                      {"runs", nlohmann::json::array()}};
  for (const replay::CacheReplayResult& r : results)
    j["runs"].push_back(replay::CacheResultJson(r));
  if (!c.csv.empty()) {
    PAGEDKV_RETURN_IF_ERROR(replay::WriteSweepCsv(c.csv, results));
    j["csv"] = c.csv;
  }
  if (!c.plot.empty()) {
    PAGEDKV_RETURN_IF_ERROR(
        replay::WriteHitRatePlot(c.plot, results, "pagedkv replay: " + workload.name).status());
    j["plot"] = c.plot;
  }
  return j;
}

std::string SweepJson(std::vector<int64_t> capacities, std::vector<std::string> policies,
                      const py::dict& kwargs) {
  ReplayConfig config = ApplyKwargs(ReplayConfig{}, kwargs, ConfigSetters(), "replay.sweep");
  if (policies.empty()) policies = replay::CacheReplayPolicyNames();
  absl::StatusOr<nlohmann::json> j;
  {
    py::gil_scoped_release release;
    j = Sweep(config, capacities, policies);
  }
  return Unwrap(std::move(j)).dump(2);
}

// One cache-mode run over a Workload object (e.g. one built or edited in Python).
std::string RunCacheJson(const replay::Workload& workload, int64_t capacity_blocks,
                         const std::string& policy, int32_t block_size, bool count_shifted,
                         bool cache_partial_tail) {
  absl::StatusOr<replay::CacheReplayResult> r;
  {
    py::gil_scoped_release release;
    r = [&]() -> absl::StatusOr<replay::CacheReplayResult> {
      PAGEDKV_RETURN_IF_ERROR(replay::ValidateWorkload(workload));
      PAGEDKV_ASSIGN_OR_RETURN(
          replay::ExpandedWorkload e,
          replay::ExpandWorkload(workload, {.block_size = block_size,
                                            .compute_next_use = policy == "belady",
                                            .cache_partial_tail = cache_partial_tail}));
      return replay::RunCacheReplay(
          e,
          {.capacity_blocks = capacity_blocks, .policy = policy, .count_shifted = count_shifted});
    }();
  }
  return replay::CacheResultJson(Unwrap(std::move(r))).dump(2);
}

void BindWorkloadTypes(py::module_& r) {
  py::class_<replay::Segment> seg(r, "Segment", "`length` tokens of content `content_id`.");
  seg.def(py::init([](uint64_t content_id, int32_t length) {
            return replay::Segment{.content_id = content_id, .length = length};
          }),
          arg("content_id"), arg("length"))
      .def_readwrite("content_id", &replay::Segment::content_id,
                     "Content id: equal ids are equal tokens.")
      .def_readwrite("length", &replay::Segment::length, "Tokens of the segment.");
  AddDataclassMethods(seg, {"content_id", "length"});

  py::class_<replay::ChunkSpan> chunk(r, "ChunkSpan", "A prompt span marked as a reusable chunk.");
  chunk
      .def(py::init([](uint64_t content_id, int64_t token_offset, int64_t length) {
             return replay::ChunkSpan{
                 .content_id = content_id, .token_offset = token_offset, .length = length};
           }),
           arg("content_id"), arg("token_offset"), arg("length"))
      .def_readwrite("content_id", &replay::ChunkSpan::content_id, "Content id of the chunk.")
      .def_readwrite("token_offset", &replay::ChunkSpan::token_offset,
                     "Offset of the chunk's first token in the prompt.")
      .def_readwrite("length", &replay::ChunkSpan::length, "Tokens of the chunk.");
  AddDataclassMethods(chunk, {"content_id", "token_offset", "length"});

  using replay::ReplayRequest;
  py::class_<ReplayRequest> req(r, "ReplayRequest", "One request of a workload.");
  req.def(
         py::init([](double arrival_ms, int64_t input_length, int64_t output_length,
                     std::vector<replay::Segment> segments, std::vector<replay::ChunkSpan> chunks) {
           return ReplayRequest{.arrival_ms = arrival_ms,
                                .input_length = input_length,
                                .output_length = output_length,
                                .segments = std::move(segments),
                                .chunks = std::move(chunks)};
         }),
         py::kw_only(), arg("arrival_ms") = 0.0, arg("input_length") = 0, arg("output_length") = 0,
         arg("segments") = std::vector<replay::Segment>{},
         arg("chunks") = std::vector<replay::ChunkSpan>{})
      .def_readwrite("arrival_ms", &ReplayRequest::arrival_ms, "Arrival time in milliseconds.")
      .def_readwrite("input_length", &ReplayRequest::input_length, "Prompt tokens.")
      .def_readwrite("output_length", &ReplayRequest::output_length, "Tokens to generate.")
      .def_readwrite("segments", &ReplayRequest::segments,
                     "The prompt as content segments (Segment).")
      .def_readwrite("chunks", &ReplayRequest::chunks,
                     "Prompt spans marked as reusable chunks (ChunkSpan).");
  AddDataclassMethods(req, {"arrival_ms", "input_length", "output_length", "segments", "chunks"});

  py::class_<replay::Workload> w(r, "Workload", "A named list of requests in arrival order.");
  w.def(py::init(
            [](std::string name, std::vector<ReplayRequest> requests, int32_t trace_block_size) {
              replay::Workload out;
              out.name = std::move(name);
              out.requests = std::move(requests);
              out.trace_block_size = trace_block_size;
              return out;
            }),
        arg("name"), arg("requests"), py::kw_only(), arg("trace_block_size") = 0)
      .def_readwrite("name", &replay::Workload::name, "The workload's name.")
      .def_readwrite("requests", &replay::Workload::requests, "The requests in arrival order.")
      .def_readwrite("trace_block_size", &replay::Workload::trace_block_size,
                     "Tokens per hash id of a trace's hash ids (0: not from a trace).")
      .def_readonly("skipped_lines", &replay::Workload::skipped_lines,
                    "Trace lines skipped as malformed (with skip_bad_lines=True).")
      .def("total_input_tokens", &replay::Workload::TotalInputTokens,
           "Prompt tokens over all requests.")
      .def(
          "validate", [](const replay::Workload& x) { CheckStatus(replay::ValidateWorkload(x)); },
          "Raises InvalidArgumentError when a request is malformed.")
      .def("__len__", [](const replay::Workload& x) { return x.requests.size(); })
      .def("__repr__", [](const replay::Workload& x) {
        return "Workload(name=" + py::repr(py::str(x.name)).cast<std::string>() +
               ", requests=" + std::to_string(x.requests.size()) + ")";
      });
}

void BindGenerators(py::module_& r) {
  using replay::ConversationOptions;
  using replay::RagOptions;
  using replay::SystemPromptOptions;
  r.def("builtin_workload_names", &replay::BuiltinWorkloadNames,
        "Names of the built-in workload generators (for generate()).");
  r.def(
      "generate",
      [](const std::string& name, int32_t num_requests, uint64_t seed) {
        return Unwrap(
            replay::MakeBuiltinWorkload(name, {.num_requests = num_requests, .seed = seed}));
      },
      arg("name"), py::kw_only(), arg("num_requests") = 0, arg("seed") = 1,
      "The built-in workload `name` (system-prompt, conversation, rag, mixed).");
  r.def(
      "system_prompt_workload",
      [](const py::kwargs& kw) {
        static const Setters<SystemPromptOptions> s = {
            PAGEDKV_SETTER(SystemPromptOptions, num_requests),
            PAGEDKV_SETTER(SystemPromptOptions, num_system_prompts),
            PAGEDKV_SETTER(SystemPromptOptions, zipf_alpha),
            PAGEDKV_SETTER(SystemPromptOptions, system_tokens),
            PAGEDKV_SETTER(SystemPromptOptions, user_tokens),
            PAGEDKV_SETTER(SystemPromptOptions, output_tokens),
            PAGEDKV_SETTER(SystemPromptOptions, requests_per_s),
            PAGEDKV_SETTER(SystemPromptOptions, seed)};
        return replay::GenerateSystemPromptWorkload(
            ApplyKwargs(SystemPromptOptions{}, kw, s, "system_prompt_workload"));
      },
      "Shared system prompts with Zipf popularity; options as in SystemPromptOptions "
      "(ranges as (min, max)).");
  r.def(
      "conversation_workload",
      [](const py::kwargs& kw) {
        static const Setters<ConversationOptions> s = {
            PAGEDKV_SETTER(ConversationOptions, num_conversations),
            PAGEDKV_SETTER(ConversationOptions, turns),
            PAGEDKV_SETTER(ConversationOptions, num_system_prompts),
            PAGEDKV_SETTER(ConversationOptions, system_tokens),
            PAGEDKV_SETTER(ConversationOptions, user_tokens),
            PAGEDKV_SETTER(ConversationOptions, output_tokens),
            PAGEDKV_SETTER(ConversationOptions, conversations_per_s),
            PAGEDKV_SETTER(ConversationOptions, mean_think_ms),
            PAGEDKV_SETTER(ConversationOptions, seed)};
        return replay::GenerateConversationWorkload(
            ApplyKwargs(ConversationOptions{}, kw, s, "conversation_workload"));
      },
      "Multi-turn chats; options as in ConversationOptions.");
  r.def(
      "rag_workload",
      [](const py::kwargs& kw) {
        static const Setters<RagOptions> s = {PAGEDKV_SETTER(RagOptions, num_requests),
                                              PAGEDKV_SETTER(RagOptions, num_documents),
                                              PAGEDKV_SETTER(RagOptions, zipf_alpha),
                                              PAGEDKV_SETTER(RagOptions, document_tokens),
                                              PAGEDKV_SETTER(RagOptions, documents_per_request),
                                              PAGEDKV_SETTER(RagOptions, instruction_tokens),
                                              PAGEDKV_SETTER(RagOptions, question_tokens),
                                              PAGEDKV_SETTER(RagOptions, output_tokens),
                                              PAGEDKV_SETTER(RagOptions, requests_per_s),
                                              PAGEDKV_SETTER(RagOptions, seed)};
        return replay::GenerateRagWorkload(ApplyKwargs(RagOptions{}, kw, s, "rag_workload"));
      },
      "Shared documents at varying positions (marked as chunks); options as in RagOptions.");
  r.def(
      "load_trace",
      [](const std::string& path, int32_t trace_block_size, bool skip_bad_lines) {
        py::gil_scoped_release release;
        return Unwrap(replay::LoadMooncakeTrace(
            path, {.trace_block_size = trace_block_size, .skip_bad_lines = skip_bad_lines}));
      },
      arg("path"), py::kw_only(), arg("trace_block_size") = 512, arg("skip_bad_lines") = false,
      "A Mooncake JSON Lines trace (plain or gzipped).");
  r.def(
      "materialize_prompt",
      [](const replay::ReplayRequest& request, int32_t vocab_size) {
        if (vocab_size <= 0) ThrowInvalidArgument("materialize_prompt: vocab_size must be > 0");
        std::vector<TokenId> p = replay::MaterializePrompt(request, vocab_size);
        return ReadOnlyCopy(p.data(), p.size());
      },
      arg("request"), arg("vocab_size"), "The request's prompt tokens (int32).");
}

}  // namespace

void BindReplay(py::module_& m) {
  py::module_ r = m.def_submodule("replay", "The replay tool (engine/tools/replay) as functions.");
  r.def("default_config", &DefaultConfig, "The options of run() and their C++ defaults.");
  r.def("run_json", &RunJson, arg("options"), "pagedkv.replay.run, returning the JSON text.");
  r.def("sweep_json", &SweepJson, arg("capacities"), arg("policies"), arg("options"),
        "pagedkv.replay.sweep, returning the JSON text.");
  r.def("run_cache_json", &RunCacheJson, arg("workload"), py::kw_only(), arg("capacity_blocks"),
        arg("policy") = "lru", arg("block_size") = 16, arg("count_shifted") = true,
        arg("cache_partial_tail") = false, "pagedkv.replay.run_cache, returning the JSON text.");
  r.def("policy_names", &replay::CacheReplayPolicyNames,
        "Names of the cache-mode replay policies.");
  BindWorkloadTypes(r);
  BindGenerators(r);
}

}  // namespace pagedkv::python
