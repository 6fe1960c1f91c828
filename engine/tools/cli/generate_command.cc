// Copyright 2026 The pagedkv Authors.
//
// `pagedkv generate`: text generation with a llama2.c model, a Hugging Face model directory or a
// GGUF file on the paged engine; --chat wraps each prompt in the model's chat template.
//
//   pagedkv generate --model M.bin --tokenizer T.bin --prompt "Once" --prompt "Twice" -n 64
//   pagedkv generate --model ../shared/data/tinystories656K -n 64
//   pagedkv generate --model smollm2.gguf --chat --prompt "What is a KV cache?" -n 64
//
// Several --prompt flags are one batch (continuous batching); --sequential runs them one after
// another instead, so later prompts can hit the prefix cache filled by earlier ones.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/tools/cli/commands.h"
#include "engine/tools/cli/engine_flags.h"
#include "engine/tools/cli/flag_checks.h"
#include "engine/tools/cli/kv_events_flags.h"
#include "engine/tools/cli/tier_flags.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/events/kv_event_batch.h"
#include "pagedkv/model/chat_template.h"
#include "pagedkv/runtime/engine.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cli {
namespace {

struct GenerateFlags {
  EngineFlags engine;
  std::vector<std::string> prompts;
  std::vector<std::string> prompt_files;  // each file's text is one prompt
  float temperature = 0.0f;
  float top_p = 1.0f;
  uint64_t seed = 1;
  int32_t max_new_tokens = 0;  // 0: up to the context
  bool print_ids = false;
  bool chat =
      false;  // wrap each prompt in the model's chat template (pagedkv/model/chat_template.h)
  bool stats = false;
  bool json = false;
  bool sequential = false;
  std::string metrics_file;  // Prometheus text of the cache's metrics after the run; empty: none
  KvEventsFlags events;
  TierFlags tiers;
};

// Engine::Generate, one Step at a time, publishing each step's KV event batch (vLLM's format).
// The batcher listens to the engine's KvCacheManager; prompts carry no salt, so the one chain
// root is RootHash("", fingerprint).
absl::StatusOr<std::vector<GenerationResult>> GenerateWithEvents(
    Engine& engine, std::vector<GenerationRequest> requests, KvEventPublisher& publisher) {
  KvEventBatcher batcher;
  batcher.NoteRoot(RootHash("", engine.kv_cache_fingerprint()));
  // The device pool's events and the tiers' (each with its medium).
  const int listener = engine.AddEventListener([&batcher](const KvEvent& e) { batcher.Add(e); });
  std::vector<RequestId> ids;
  absl::Status status;
  for (GenerationRequest& r : requests) {
    absl::StatusOr<RequestId> id = engine.AddRequest(std::move(r));
    if (!id.ok()) {
      status = id.status();
      break;
    }
    ids.push_back(*id);
  }
  std::vector<GenerationResult> results(ids.size());
  size_t remaining = status.ok() ? ids.size() : 0;
  while (remaining > 0) {
    absl::StatusOr<StepOutput> step = engine.Step();
    if (!step.ok()) {
      status = step.status();
      break;
    }
    if (!batcher.empty()) publisher.Publish(batcher.Take(WallClockSeconds()));
    for (GenerationResult& r : step->finished) {
      const auto it = std::find(ids.begin(), ids.end(), r.request_id);
      if (it == ids.end()) continue;
      results[static_cast<size_t>(it - ids.begin())] = std::move(r);
      --remaining;
    }
    if (remaining > 0 && step->batch.num_scheduled_tokens == 0 && step->finished.empty()) {
      status = absl::InternalError("the engine made no progress");
      break;
    }
  }
  engine.RemoveEventListener(listener);
  if (!status.ok()) return status;
  return results;
}

// "a/b xN" run-length list of per-step (tokens, sequences).
std::string StepSizes(const EngineStats& s) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < s.step_num_tokens.size()) {
    size_t j = i;
    while (j < s.step_num_tokens.size() && s.step_num_tokens[j] == s.step_num_tokens[i] &&
           s.step_num_seqs[j] == s.step_num_seqs[i]) {
      ++j;
    }
    parts.push_back(absl::StrCat(s.step_num_tokens[i], "/", s.step_num_seqs[i],
                                 j - i > 1 ? absl::StrCat(" x", j - i) : ""));
    i = j;
  }
  return absl::StrJoin(parts, ", ");
}

absl::StatusOr<std::vector<std::string>> PromptTexts(const GenerateFlags& flags);

// An upper bound on the tokens the run's requests hold at once, for the automatic KV pool: a
// token per prompt byte (BOS and EOS besides; --chat: 512 for the template), plus the new tokens,
// the speculative drafts and a partly filled block, per prompt. 0 (unknown) without -n.
absl::StatusOr<int64_t> TokenBudget(const GenerateFlags& flags) {
  if (flags.max_new_tokens <= 0) return 0;
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<std::string> prompts, PromptTexts(flags));
  if (prompts.empty()) prompts.emplace_back();
  PAGEDKV_ASSIGN_OR_RETURN(const EngineOptions options, EngineOptionsFrom(flags.engine));
  const int64_t speculative = options.speculative.num_speculative_tokens;
  int64_t tokens = 0;
  for (const std::string& p : prompts) {
    tokens += static_cast<int64_t>(p.size()) + 2 + (flags.chat ? 512 : 0) + flags.max_new_tokens +
              speculative + flags.engine.block_size;
  }
  return tokens;
}

absl::StatusOr<std::unique_ptr<Engine>> LoadEngine(const GenerateFlags& flags) {
  PAGEDKV_ASSIGN_OR_RETURN(EngineOptions options, EngineOptionsFrom(flags.engine));
  PAGEDKV_ASSIGN_OR_RETURN(options.kv_token_budget, TokenBudget(flags));
  options.collect_block_metrics = !flags.metrics_file.empty();
  PAGEDKV_RETURN_IF_ERROR(ApplyTierFlags(flags.tiers, &options));
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                           Engine::Load(flags.engine.model, flags.engine.tokenizer, options));
  if (engine->tokenizer() == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "generate: the model '", flags.engine.model,
        "' has no tokenizer: pass --tokenizer (llama2.c), or add tokenizer.json to the directory"));
  }
  return engine;
}

// The prompts of --prompt and --prompt-file (each file is one prompt, read whole), or BOS alone.
absl::StatusOr<std::vector<std::string>> PromptTexts(const GenerateFlags& flags) {
  std::vector<std::string> prompts = flags.prompts;
  for (const std::string& path : flags.prompt_files) {
    std::ifstream file(path, std::ios::binary);
    if (!file) {
      return absl::NotFoundError(absl::StrCat("cannot read --prompt-file ", path));
    }
    prompts.emplace_back(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  }
  if (prompts.empty()) prompts.push_back("");
  if (flags.chat) {
    PAGEDKV_ASSIGN_OR_RETURN(std::string chat_template, ReadChatTemplate(flags.engine.model));
    for (std::string& p : prompts) {
      PAGEDKV_ASSIGN_OR_RETURN(p, FormatChatPrompt(chat_template, p));
    }
  }
  return prompts;
}

absl::StatusOr<std::vector<GenerationRequest>> BuildRequests(const GenerateFlags& flags,
                                                             const Engine& engine) {
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<std::string> prompts, PromptTexts(flags));
  std::vector<GenerationRequest> requests;
  for (const std::string& text : prompts) {
    GenerationRequest r;
    PAGEDKV_ASSIGN_OR_RETURN(r.prompt_tokens, engine.tokenizer()->Encode(text));
    r.max_new_tokens = flags.max_new_tokens;
    if (r.max_new_tokens == 0) {
      // Up to the end of the context: the last sampled token needs no position.
      r.max_new_tokens = static_cast<int32_t>(std::clamp<int64_t>(
          engine.context_length() + 1 - static_cast<int64_t>(r.prompt_tokens.size()), 1,
          INT32_MAX));
    }
    r.sampling = {.temperature = flags.temperature,
                  .top_p = flags.top_p,
                  .seed = flags.seed + requests.size()};
    requests.push_back(std::move(r));
  }
  return requests;
}

// Runs the requests, as one batch or --sequential, publishing KV events when asked.
absl::StatusOr<std::vector<GenerationResult>> RunRequests(const GenerateFlags& flags,
                                                          Engine& engine,
                                                          std::vector<GenerationRequest> requests,
                                                          KvEventPublisher* publisher) {
  auto run = [&](std::vector<GenerationRequest> batch) {
    return publisher != nullptr ? GenerateWithEvents(engine, std::move(batch), *publisher)
                                : engine.Generate(std::move(batch));
  };
  if (!flags.sequential) return run(std::move(requests));
  std::vector<GenerationResult> results;
  for (GenerationRequest& r : requests) {
    PAGEDKV_ASSIGN_OR_RETURN(std::vector<GenerationResult> one, run({std::move(r)}));
    results.push_back(std::move(one[0]));
  }
  return results;
}

absl::Status PrintResults(const GenerateFlags& flags, const Engine& engine,
                          const std::vector<GenerationResult>& results) {
  for (size_t i = 0; i < results.size(); ++i) {
    const GenerationResult& r = results[i];
    if (results.size() > 1) std::cout << "--- prompt " << i + 1 << " ---\n";
    PAGEDKV_ASSIGN_OR_RETURN(std::string prompt_text, engine.tokenizer()->Decode(r.prompt_tokens));
    std::cout << prompt_text << r.text << "\n";
    if (flags.print_ids) {
      std::cout << "prompt ids: " << absl::StrJoin(r.prompt_tokens, " ") << "\n";
      std::cout << "output ids: " << absl::StrJoin(r.output_tokens, " ") << "\n";
    }
  }
  return absl::OkStatus();
}

void PrintStats(const Engine& engine) {
  const EngineStats& s = engine.stats();
  const double hit_pct =
      s.num_prompt_tokens > 0 ? 100.0 * s.num_prefix_hit_tokens / s.num_prompt_tokens : 0.0;
  std::cout << "--- stats ---\n";
  std::cout << "backend: " << engine.backend_name() << ", model: " << engine.config().ToString()
            << "\n";
  std::cout << absl::StrCat("requests: ", s.num_requests, ", steps: ", s.num_steps,
                            ", preemptions: ", s.num_preemptions, "\n");
  std::cout << absl::StrCat("prompt tokens: ", s.num_prompt_tokens,
                            ", prefix-cache hits: ", s.num_prefix_hit_tokens, " tokens (",
                            absl::StrFormat("%.1f", hit_pct), "%)",
                            ", tokens computed: ", s.num_computed_tokens, "\n");
  const double tps = s.busy_seconds > 0 ? s.num_generated_tokens / s.busy_seconds : 0.0;
  const double cps = s.busy_seconds > 0 ? s.num_computed_tokens / s.busy_seconds : 0.0;
  std::cout << absl::StrFormat(
      "generated tokens: %d in %.3f s: %.1f tokens/s generated, %.1f tokens/s computed\n",
      s.num_generated_tokens, s.busy_seconds, tps, cps);
  if (engine.options().speculative.num_speculative_tokens > 0) {
    const double rate =
        s.num_draft_tokens > 0 ? 100.0 * s.num_accepted_draft_tokens / s.num_draft_tokens : 0.0;
    std::cout << absl::StrFormat(
        "speculative (ngram:%d): %d draft tokens, %d accepted (acceptance rate %.1f%%)\n",
        engine.options().speculative.num_speculative_tokens, s.num_draft_tokens,
        s.num_accepted_draft_tokens, rate);
  }
  std::cout << "batch per step (tokens/sequences): " << StepSizes(s) << "\n";
  const KvPoolSize& pool = engine.kv_pool();
  std::cout << absl::StrFormat(
      "kv pool: %d blocks, %.1f MiB, %s, %d bytes per token, %d tokens (%s)\n", pool.num_blocks,
      static_cast<double>(pool.bytes) / (1 << 20), KvDTypesName(pool.dtype, pool.v_dtype),
      pool.bytes_per_token, pool.tokens, pool.reason);
  const KvCacheLayout& layout = engine.kv_cache_layout();
  std::cout << "kv cache: " << (layout.hybrid ? "hybrid" : "plain") << ", "
            << layout.layers_per_block << " layers per block, "
            << KvDTypesName(layout.dtype, layout.v_dtype) << " (" << layout.reason << ")\n";
  for (const auto& [name, tier] : engine.tier_stats()) {
    std::cout << "tier " << name << ": " << tier.Summary() << "\n";
  }
}

// --metrics-file: the KV cache manager's Prometheus text (counters, usage, block histograms).
absl::Status WriteMetricsFile(const std::string& path, Engine& engine) {
  std::string text;
  PAGEDKV_RETURN_IF_ERROR(engine.WriteKvCachePrometheus(&text));
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) return absl::UnavailableError(absl::StrCat("cannot write --metrics-file ", path));
  return absl::OkStatus();
}

absl::Status RunGenerate(const GenerateFlags& flags) {
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, LoadEngine(flags));
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<GenerationRequest> requests, BuildRequests(flags, *engine));
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<KvEventPublisher> publisher,
                           MakeKvEventPublisher(flags.events));
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<GenerationResult> results,
                           RunRequests(flags, *engine, std::move(requests), publisher.get()));
  if (!flags.metrics_file.empty()) {
    PAGEDKV_RETURN_IF_ERROR(WriteMetricsFile(flags.metrics_file, *engine));
  }
  if (flags.json) {
    std::cout << GenerateJson(*engine, results).dump() << "\n";
  } else {
    PAGEDKV_RETURN_IF_ERROR(PrintResults(flags, *engine, results));
    if (flags.stats) PrintStats(*engine);
  }
  if (publisher != nullptr) {
    std::cout.flush();
    FinishKvEventPublisher(flags.events, publisher.get());
    const KvEventPublisherStats ps = publisher->stats();
    std::cerr << absl::StrFormat("kv events: %d batches published, %d dropped\n", ps.published,
                                 ps.dropped);
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

void AddPromptFlags(CLI::App* cmd, GenerateFlags* flags) {
  cmd->add_option("--prompt", flags->prompts,
                  "prompt text; repeat for several prompts, run as one batch (none: BOS alone)");
  cmd->add_option("--prompt-file", flags->prompt_files,
                  "a file whose whole text is one prompt (for prompts past a command line's "
                  "limit); repeatable, after the --prompt ones");
}

void AddSamplingFlags(CLI::App* cmd, GenerateFlags* flags) {
  cmd->add_option("--temperature", flags->temperature,
                  "0 = greedy (default); >= 0, values below 1e-5 are greedy too (as in vLLM)")
      ->check(NonNegativeNumber());
  cmd->add_option("--top-p", flags->top_p, "nucleus sampling mass in (0, 1]")->check(Fraction());
  cmd->add_option("--seed", flags->seed, "sampling seed (prompt i uses seed + i)");
  cmd->add_option("-n,--max-new-tokens", flags->max_new_tokens,
                  "tokens to generate per prompt (0 = up to the model's context)")
      ->check(NonNegativeNumber());
}

void AddOutputFlags(CLI::App* cmd, GenerateFlags* flags) {
  cmd->add_flag("--print-ids", flags->print_ids, "also print prompt and output token ids");
  cmd->add_flag("--chat", flags->chat,
                "wrap each prompt in the model's chat template as one user turn (GGUF models "
                "with a ChatML template, e.g. SmolLM2-Instruct; others are refused)");
  cmd->add_flag("--stats", flags->stats,
                "print prefix-cache hits, tokens/s and per-step batch sizes");
  cmd->add_option("--metrics-file", flags->metrics_file,
                  "after the run, write the KV cache's metrics in the Prometheus text format "
                  "(pagedkv_ prefix: query/hit/store/evict counters, usage, block lifetime, "
                  "idle-before-evict and reuse-gap histograms)");
  cmd->add_flag("--json", flags->json,
                "print one JSON object: the outputs and the statistics (prompt_tokens, "
                "prefix_cache_hit_tokens, tier_hit_tokens, per-tier counters)");
}

void AddRunFlags(CLI::App* cmd, GenerateFlags* flags) {
  cmd->add_flag("--sequential", flags->sequential,
                "run the prompts one after another (later ones can hit the prefix cache)");
}

}  // namespace

void AddGenerateCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Generate text with a llama2.c, Hugging Face or GGUF model on the paged engine "
      "(prefix caching on)");
  AddModelFlags(cmd, &flags->engine);
  AddPromptFlags(cmd, flags.get());
  AddSamplingFlags(cmd, flags.get());
  AddOutputFlags(cmd, flags.get());
  AddRunFlags(cmd, flags.get());
  AddEngineFlags(cmd, &flags->engine);
  AddKvEventsFlags(cmd, &flags->events);
  AddTierFlags(cmd, &flags->tiers);
  cmd->callback([flags, exit_code]() {
    absl::Status status = RunGenerate(*flags);
    if (!status.ok()) {
      std::cerr << "pagedkv generate: " << status.message() << "\n";
      if (absl::StrContains(status.message(), "allow_context_overrun")) {
        std::cerr << "(use -n to generate fewer tokens, or --allow-context-overrun)\n";
      }
      *exit_code = 1;
      return;
    }
    *exit_code = 0;
  });
}

}  // namespace pagedkv::cli
