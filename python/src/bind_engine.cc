// Copyright 2026 The pagedkv Authors.
//
// Bindings of the llama2.c Engine and its Tokenizer. step() and generate() release the GIL while
// the model runs; Engine.stream() (pagedkv/__init__.py) iterates over tokens as they come.
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/dtype.h"
#include "pagedkv/model/backend_kind.h"
#include "pagedkv/model/tokenizer.h"
#include "pagedkv/runtime/engine.h"
#include "pagedkv/tiers/disk_tier.h"

namespace pagedkv::python {
namespace {

using py::arg;

// vLLM's sampling fields of SamplingOptions, as the keyword arguments give them.
struct VllmSampling {
  int32_t top_k;
  float min_p;
  float repetition_penalty;
  float presence_penalty;
  float frequency_penalty;
  std::map<TokenId, float> logit_bias;
  int32_t min_tokens;
};

GenerationRequest MakeRequest(std::vector<TokenId> prompt_tokens, std::string prompt_text,
                              int32_t max_new_tokens, float temperature, float top_p, uint64_t seed,
                              std::string cache_salt, int32_t priority, bool stop_at_eos,
                              std::vector<TokenId> stop_tokens,
                              std::vector<std::pair<int32_t, int32_t>> chunks,
                              int32_t cache_priority,
                              const std::vector<PrioritySpanTuple>& cache_priority_spans,
                              int32_t logprobs, int32_t prompt_logprobs, const VllmSampling& v) {
  GenerationRequest r{.prompt_tokens = std::move(prompt_tokens),
                      .prompt_text = std::move(prompt_text),
                      .max_new_tokens = max_new_tokens,
                      .sampling = {.temperature = temperature,
                                   .top_p = top_p,
                                   .seed = seed,
                                   .logprobs = logprobs,
                                   .prompt_logprobs = prompt_logprobs,
                                   .top_k = v.top_k,
                                   .min_p = v.min_p,
                                   .repetition_penalty = v.repetition_penalty,
                                   .presence_penalty = v.presence_penalty,
                                   .frequency_penalty = v.frequency_penalty,
                                   .min_tokens = v.min_tokens},
                      .cache_salt = std::move(cache_salt),
                      .priority = priority,
                      .cache_priority = {.priority = cache_priority},
                      .cache_priority_spans = PrioritySpansArgument(cache_priority_spans),
                      .stop_at_eos = stop_at_eos,
                      .stop_tokens = std::move(stop_tokens)};
  r.logit_bias.assign(v.logit_bias.begin(), v.logit_bias.end());
  for (auto [offset, length] : chunks) r.chunks.push_back({.offset = offset, .length = length});
  return r;
}

// The keyword arguments of GenerationRequest(...) and Engine.add_request(...).
template <typename Def>
void RequestArgs(Def&& def) {
  def(py::kw_only(), arg("prompt_tokens") = std::vector<TokenId>{}, arg("prompt_text") = "",
      arg("max_new_tokens") = 16, arg("temperature") = 0.0f, arg("top_p") = 1.0f, arg("seed") = 0,
      arg("cache_salt") = "", arg("priority") = 0, arg("stop_at_eos") = true,
      arg("stop_tokens") = std::vector<TokenId>{},
      arg("chunks") = std::vector<std::pair<int32_t, int32_t>>{},
      arg("cache_priority") = kDefaultCachePriority,
      arg("cache_priority_spans") = std::vector<PrioritySpanTuple>{}, arg("logprobs") = -1,
      arg("prompt_logprobs") = -1, arg("top_k") = 0, arg("min_p") = 0.0f,
      arg("repetition_penalty") = 1.0f, arg("presence_penalty") = 0.0f,
      arg("frequency_penalty") = 0.0f, arg("logit_bias") = std::map<TokenId, float>{},
      arg("min_tokens") = 0);
}

// GenerationRequest(...)'s keyword arguments in order, vLLM's sampling fields gathered.
GenerationRequest MakeRequestFromArgs(std::vector<TokenId> prompt_tokens, std::string prompt_text,
                                      int32_t max_new_tokens, float temperature, float top_p,
                                      uint64_t seed, std::string cache_salt, int32_t priority,
                                      bool stop_at_eos, std::vector<TokenId> stop_tokens,
                                      std::vector<std::pair<int32_t, int32_t>> chunks,
                                      int32_t cache_priority,
                                      const std::vector<PrioritySpanTuple>& cache_priority_spans,
                                      int32_t logprobs, int32_t prompt_logprobs, int32_t top_k,
                                      float min_p, float repetition_penalty, float presence_penalty,
                                      float frequency_penalty, std::map<TokenId, float> logit_bias,
                                      int32_t min_tokens) {
  return MakeRequest(std::move(prompt_tokens), std::move(prompt_text), max_new_tokens, temperature,
                     top_p, seed, std::move(cache_salt), priority, stop_at_eos,
                     std::move(stop_tokens), std::move(chunks), cache_priority,
                     cache_priority_spans, logprobs, prompt_logprobs,
                     {.top_k = top_k,
                      .min_p = min_p,
                      .repetition_penalty = repetition_penalty,
                      .presence_penalty = presence_penalty,
                      .frequency_penalty = frequency_penalty,
                      .logit_bias = std::move(logit_bias),
                      .min_tokens = min_tokens});
}

// (logprob, [(token, logprob)] of the top tokens) for Python.
py::tuple LogprobsTuple(const TokenLogprobs& l) {
  py::list top;
  for (const TokenLogprob& e : l.top) top.append(py::make_tuple(e.token, e.logprob));
  return py::make_tuple(l.logprob, top);
}

void BindTokenizer(py::module_& m) {
  py::class_<Tokenizer, std::shared_ptr<Tokenizer>> t(
      m, "Tokenizer", "A llama2.c tokenizer, or a Hugging Face tokenizer.json (BPE).");
  t.def_static(
       "load",
       [](const std::string& path, int32_t vocab_size) {
         return std::make_shared<Tokenizer>(Unwrap(Tokenizer::Load(path, vocab_size)));
       },
       arg("path"), arg("vocab_size"),
       "Reads a llama2.c tokenizer file holding exactly `vocab_size` tokens.")
      .def_static(
          "load_huggingface",
          [](const std::string& path) {
            return std::make_shared<Tokenizer>(Unwrap(Tokenizer::LoadHuggingFace(path)));
          },
          arg("path"),
          "Reads a Hugging Face tokenizer.json: a BPE model (byte-level or SentencePiece-style)\n"
          "with the normalizers, pre-tokenizers and decoders docs/models.md lists.")
      .def(
          "encode",
          [](const Tokenizer& tok, const std::string& text, bool add_bos, bool add_eos) {
            return Unwrap(tok.Encode(text, {.add_bos = add_bos, .add_eos = add_eos}));
          },
          arg("text"), py::kw_only(), arg("add_bos") = true, arg("add_eos") = false,
          "Token ids of `text` (BOS first with add_bos, EOS last with add_eos).")
      .def(
          "decode",
          [](const Tokenizer& tok, std::vector<TokenId> tokens, TokenId prev) {
            return Unwrap(tok.Decode(tokens, prev));
          },
          arg("tokens"), py::kw_only(), arg("prev") = Tokenizer::kBosId,
          "The text of `tokens`, the first decoded after `prev` (BOS by default).")
      .def_property_readonly("vocab_size", &Tokenizer::vocab_size, "Tokens in the vocabulary.")
      .def_property_readonly("bos_id", &Tokenizer::bos_id, "The beginning-of-sequence token id.")
      .def_property_readonly("eos_id", &Tokenizer::eos_id, "The end-of-sequence token id.");
}

void BindEngineTypes(py::module_& m) {
  py::class_<GenerationRequest> req(m, "GenerationRequest", "One request for Engine.generate.");
  RequestArgs([&](auto&&... a) { req.def(py::init(&MakeRequestFromArgs), a...); });
  req.def_readwrite("prompt_tokens", &GenerationRequest::prompt_tokens,
                    "The prompt's token ids (used when not empty).")
      .def_readwrite(
          "prompt_text", &GenerationRequest::prompt_text,
          "The prompt as text, encoded by the engine's tokenizer (when prompt_tokens is empty).")
      .def_readwrite("max_new_tokens", &GenerationRequest::max_new_tokens,
                     "Most tokens to generate (>= 1).")
      .def_readwrite("cache_salt", &GenerationRequest::cache_salt,
                     "Salt: requests with different salts never share cached blocks.")
      .def_readwrite("priority", &GenerationRequest::priority,
                     "Scheduling priority: smaller values are admitted first under the priority "
                     "policy, larger ones preempted first.")
      .def_readwrite("prompt_source", &GenerationRequest::prompt_source,
                     "Another sample of the same prompt (OpenAI's n): the id of an unfinished "
                     "request with the same prompt and salt whose prompt KV this one takes (full "
                     "blocks shared, the partial last block copied); 0 = none.");
  AddDataclassMethods(req, {"prompt_tokens", "prompt_text", "max_new_tokens", "cache_salt",
                            "priority", "prompt_source"});

  py::class_<TokenOutput> tok(m, "TokenOutput", "One token produced by a step.");
  tok.def_readonly("request_id", &TokenOutput::request_id, "The request the token belongs to.")
      .def_readonly("token", &TokenOutput::token, "The sampled token id.")
      .def_readonly("index", &TokenOutput::index,
                    "Position among the request's generated tokens (0 for the first).")
      .def_property_readonly(
          "logprobs",
          [](const TokenOutput& t) -> py::object {
            if (!t.logprobs.has_value()) return py::none();
            return LogprobsTuple(*t.logprobs);
          },
          "With logprobs=N: (the token's log-probability, [(token, logprob)] of the N most "
          "probable tokens, descending); else None.")
      .def_property_readonly(
          "prompt_logprobs",
          [](const TokenOutput& t) -> py::object {
            if (!t.prompt_logprobs.has_value()) return py::none();
            py::list out;
            for (const TokenLogprobs& l : *t.prompt_logprobs) out.append(LogprobsTuple(l));
            return out;
          },
          "With prompt_logprobs=N, on the request's first token only: the prompt's "
          "log-probabilities as GenerationResult.prompt_logprobs will hold them (so a stream "
          "can show them first); else None.");
  AddDataclassMethods(tok, {"request_id", "token", "index"});

  py::class_<GenerationResult> res(m, "GenerationResult", "A finished (or aborted) request.");
  res.def_readonly("request_id", &GenerationResult::request_id, "The request's id.")
      .def_readonly("prompt_tokens", &GenerationResult::prompt_tokens, "The prompt's token ids.")
      .def_readonly("output_tokens", &GenerationResult::output_tokens, "The generated token ids.")
      .def_property_readonly(
          "finish_reason",
          [](const GenerationResult& r) { return FinishReasonName(r.finish_reason); },
          "Why it finished: \"stop\", \"length\" or \"aborted\".")
      .def_readonly("text", &GenerationResult::text,
                    "output_tokens decoded (empty without a tokenizer).")
      .def_property_readonly(
          "prompt_logprobs",
          [](const GenerationResult& r) {
            py::list out;
            for (const TokenLogprobs& l : r.prompt_logprobs) out.append(LogprobsTuple(l));
            return out;
          },
          "With prompt_logprobs=N: per prompt token after the first, (logprob, [(token, "
          "logprob)] of the N most probable); else [].")
      .def_readonly("num_prefix_hit_tokens", &GenerationResult::num_prefix_hit_tokens,
                    "Prompt tokens served from the cache (OpenAI's cached_tokens).")
      .def_readonly("num_device_hit_tokens", &GenerationResult::num_device_hit_tokens,
                    "Of num_prefix_hit_tokens, those already in the device pool.")
      .def_readonly("num_host_hit_tokens", &GenerationResult::num_host_hit_tokens,
                    "Of num_prefix_hit_tokens, those loaded from the host tier.")
      .def_readonly("num_remote_hit_tokens", &GenerationResult::num_remote_hit_tokens,
                    "Of num_prefix_hit_tokens, those loaded from the remote tier.")
      .def_readonly(
          "num_shifted_hit_tokens", &GenerationResult::num_shifted_hit_tokens,
          "Prompt tokens reused from chunks cached at another position (first admission).")
      .def_readonly("num_preemptions", &GenerationResult::num_preemptions,
                    "Times the request was preempted and recomputed.")
      // Over re-admissions after preemption, apart from num_prefix_hit_tokens (first admission).
      .def_readonly("num_readmission_hit_tokens", &GenerationResult::num_readmission_hit_tokens,
                    "Over re-admissions after preemption: tokens served from the cache instead of "
                    "recomputed.")
      .def_readonly("num_readmission_device_hit_tokens",
                    &GenerationResult::num_readmission_device_hit_tokens,
                    "Of num_readmission_hit_tokens, those found in the device pool.")
      .def_readonly("num_readmission_host_hit_tokens",
                    &GenerationResult::num_readmission_host_hit_tokens,
                    "Of num_readmission_hit_tokens, those loaded from the host tier.")
      .def_readonly("num_readmission_remote_hit_tokens",
                    &GenerationResult::num_readmission_remote_hit_tokens,
                    "Of num_readmission_hit_tokens, those loaded from the remote tier.")
      .def_readonly("num_disk_hit_tokens", &GenerationResult::num_disk_hit_tokens,
                    "Of num_prefix_hit_tokens, those loaded from the disk tier.")
      .def_readonly("num_readmission_disk_hit_tokens",
                    &GenerationResult::num_readmission_disk_hit_tokens,
                    "Of num_readmission_hit_tokens, those loaded from the disk tier.")
      .def_readonly("time_to_first_token_s", &GenerationResult::time_to_first_token_s,
                    "Seconds from add_request to the first token.")
      .def_readonly("latency_s", &GenerationResult::latency_s,
                    "Seconds from add_request to finishing.");
  AddDataclassMethods(res, {"request_id", "prompt_tokens", "output_tokens", "finish_reason", "text",
                            "num_prefix_hit_tokens", "num_device_hit_tokens", "num_host_hit_tokens",
                            "num_remote_hit_tokens", "num_preemptions",
                            "num_readmission_hit_tokens", "num_readmission_device_hit_tokens",
                            "num_readmission_host_hit_tokens", "num_readmission_remote_hit_tokens",
                            "num_disk_hit_tokens", "num_readmission_disk_hit_tokens"});

  py::class_<StepOutput, std::shared_ptr<StepOutput>> step(m, "StepOutput", "One engine step.");
  step.def_readonly("tokens", &StepOutput::tokens, "Tokens sampled in this step (TokenOutput).")
      .def_readonly("finished", &StepOutput::finished,
                    "Requests that finished in (or before) this step (GenerationResult).")
      .def_property_readonly(
          "logits",
          [](py::object self) -> py::object {
            const StepOutput& s = self.cast<StepOutput&>();
            if (s.logits.empty()) return py::none();
            const auto rows = static_cast<py::ssize_t>(s.tokens.size());
            py::array flat = ReadOnlyView(s.logits, self);
            return flat.attr("reshape")(rows, static_cast<py::ssize_t>(s.logits.size()) / rows);
          },
          "With return_logits: float32 [len(tokens), vocab_size] (a read-only view); else None.")
      .def_readonly("batch", &StepOutput::batch, "What the step computed (SchedulerStepStats).")
      .def_readonly("seconds", &StepOutput::seconds, "Wall time of the step.");

  py::class_<EngineStats> st(m, "EngineStats", "Engine totals.");
  st.def_readonly("num_steps", &EngineStats::num_steps, "Steps run.")
      .def_readonly("num_requests", &EngineStats::num_requests, "Requests added.")
      .def_readonly("num_finished", &EngineStats::num_finished, "Requests finished or aborted.")
      .def_readonly("num_prompt_tokens", &EngineStats::num_prompt_tokens,
                    "Prompt tokens over first admissions.")
      .def_readonly("num_prefix_hit_tokens", &EngineStats::num_prefix_hit_tokens,
                    "Of num_prompt_tokens, those served from the prefix cache (any tier).")
      .def_readonly("num_computed_tokens", &EngineStats::num_computed_tokens,
                    "Tokens run through the model (prefill and decode).")
      .def_readonly("num_generated_tokens", &EngineStats::num_generated_tokens, "Tokens sampled.")
      .def_readonly("num_preemptions", &EngineStats::num_preemptions, "Preemptions.")
      .def_readonly("num_host_hit_tokens", &EngineStats::num_host_hit_tokens,
                    "Of num_prefix_hit_tokens, those loaded from the host tier.")
      .def_readonly("num_remote_hit_tokens", &EngineStats::num_remote_hit_tokens,
                    "Of num_prefix_hit_tokens, those loaded from the remote tier.")
      .def_readonly("num_disk_hit_tokens", &EngineStats::num_disk_hit_tokens,
                    "Of num_prefix_hit_tokens, those loaded from the disk tier.")
      .def_readonly("num_readmissions", &EngineStats::num_readmissions,
                    "Re-admissions after preemption.")
      .def_readonly("num_readmission_tokens", &EngineStats::num_readmission_tokens,
                    "Tokens those re-admissions looked up (prompt and generated so far).")
      .def_readonly("num_readmission_hit_tokens", &EngineStats::num_readmission_hit_tokens,
                    "Of num_readmission_tokens, those served from the cache (any tier).")
      .def_readonly("num_readmission_host_hit_tokens",
                    &EngineStats::num_readmission_host_hit_tokens,
                    "Of num_readmission_hit_tokens, those loaded from the host tier.")
      .def_readonly("num_readmission_remote_hit_tokens",
                    &EngineStats::num_readmission_remote_hit_tokens,
                    "Of num_readmission_hit_tokens, those loaded from the remote tier.")
      .def_readonly("num_draft_tokens", &EngineStats::num_draft_tokens,
                    "Speculative draft tokens run through the model.")
      .def_readonly("num_accepted_draft_tokens", &EngineStats::num_accepted_draft_tokens,
                    "Of num_draft_tokens, those accepted.")
      .def_readonly("busy_seconds", &EngineStats::busy_seconds, "Wall time inside step().")
      .def_readonly("step_num_tokens", &EngineStats::step_num_tokens,
                    "Tokens in the batch of each recorded step (the first 4096 steps).")
      .def_readonly("step_num_seqs", &EngineStats::step_num_seqs,
                    "Sequences in the batch of each recorded step (the first 4096 steps).")
      .def_readonly("num_shifted_hit_tokens", &EngineStats::num_shifted_hit_tokens,
                    "Prompt tokens reused from chunks cached at another position.")
      .def_readonly("num_blend_recomputed_tokens", &EngineStats::num_blend_recomputed_tokens,
                    "CacheBlend: reused chunk tokens recomputed through every layer.")
      .def_readonly(
          "num_blend_partial_tokens", &EngineStats::num_blend_partial_tokens,
          "CacheBlend: reused chunk tokens run only through the layers up to deviation_layer.")
      .def_readonly("num_float_key_moves", &EngineStats::num_float_key_moves,
                    "Reused chunk tokens moved from their chunk's kept float keys "
                    "(ChunkReuseOptions.float_keys_memory), per KV cache group.")
      .def_readonly("max_step_num_tokens", &EngineStats::max_step_num_tokens,
                    "Most tokens in one step's batch.")
      .def_readonly("max_step_num_seqs", &EngineStats::max_step_num_seqs,
                    "Most sequences in one step's batch.")
      .def_readonly(
          "step_num_tokens_histogram", &EngineStats::step_num_tokens_histogram,
          "Steps by batch tokens: bucket 0 holds 1 token, bucket b >= 1 holds [2^b, 2^(b+1)).");
  AddDataclassMethods(st, {"num_steps",
                           "num_requests",
                           "num_finished",
                           "num_prompt_tokens",
                           "num_prefix_hit_tokens",
                           "num_computed_tokens",
                           "num_generated_tokens",
                           "num_preemptions",
                           "num_draft_tokens",
                           "num_accepted_draft_tokens",
                           "num_host_hit_tokens",
                           "num_remote_hit_tokens",
                           "num_readmissions",
                           "num_readmission_tokens",
                           "num_readmission_hit_tokens",
                           "num_readmission_host_hit_tokens",
                           "num_readmission_remote_hit_tokens",
                           "num_disk_hit_tokens",
                           "num_shifted_hit_tokens",
                           "num_blend_recomputed_tokens",
                           "num_blend_partial_tokens",
                           "num_float_key_moves"});
}

// An Engine and whether a call that released the GIL is running on it. `running` is read and
// written with the GIL held only, so a second Python thread that calls in while step() or
// generate() runs gets RuntimeError instead of racing on the engine.
struct PyEngine {
  std::unique_ptr<Engine> engine;  // never null once constructed
  bool running = false;

  Engine& get() {
    if (running) {
      throw std::runtime_error(
          "pagedkv.Engine is busy: step() or generate() is running in another thread; drive an "
          "Engine from one thread at a time");
    }
    return *engine;
  }

  // Runs fn(engine) with the GIL released.
  template <typename Fn>
  auto RunWithoutGil(Fn fn) {
    Engine& e = get();
    running = true;
    struct Reset {
      bool& flag;
      ~Reset() { flag = false; }
    } reset{running};
    py::gil_scoped_release release;
    return fn(e);
  }
};

std::unique_ptr<PyEngine> LoadEngine(
    const std::string& model_path, const std::string& tokenizer_path, const std::string& backend,
    int32_t num_threads, int32_t block_size, int32_t num_kv_blocks, const std::string& kv_dtype,
    bool enable_prefix_caching, std::string eviction_policy, int32_t max_num_batched_tokens,
    int32_t max_num_seqs, bool enable_chunked_prefill, bool allow_context_overrun,
    bool return_logits, std::string model_id, int32_t num_speculative_tokens,
    bool collect_block_metrics, bool enable_cache_priorities, const std::string& weights,
    int64_t kv_cache_memory, const std::string& hybrid_kv_cache, const std::string& activations,
    const std::string& int8_kernel, const std::string& kv_cache_dtype,
    const std::string& disk_cache, int64_t disk_cache_size, const std::string& kv_cache_dtype_v,
    int32_t disk_cache_read_threads, const std::optional<ChunkReuseOptions>& chunk_reuse) {
  if (weights != "native" && weights != "f32") {
    ThrowInvalidArgument("Engine.load: weights = '" + weights + "': expected 'native' or 'f32'");
  }
  if (activations != "f32" && activations != "int8") {
    ThrowInvalidArgument("Engine.load: activations = '" + activations +
                         "': expected 'f32' or 'int8'");
  }
  if (kv_cache_memory < 0) {
    ThrowInvalidArgument("Engine.load: kv_cache_memory = " + std::to_string(kv_cache_memory) +
                         " must be >= 0 (bytes; 0: automatic)");
  }
  if (hybrid_kv_cache != "auto" && hybrid_kv_cache != "on" && hybrid_kv_cache != "off") {
    ThrowInvalidArgument("Engine.load: hybrid_kv_cache = '" + hybrid_kv_cache +
                         "': expected 'auto', 'on' or 'off'");
  }
  EngineOptions o;
  o.hybrid_kv_cache = hybrid_kv_cache == "on"    ? HybridKvCacheMode::kOn
                      : hybrid_kv_cache == "off" ? HybridKvCacheMode::kOff
                                                 : HybridKvCacheMode::kAuto;
  o.weights = weights == "f32" ? WeightStorage::kF32 : WeightStorage::kNative;
  o.activations = activations == "int8" ? ActivationType::kInt8 : ActivationType::kF32;
  o.int8_kernel = int8_kernel;
  o.kv_cache_memory = kv_cache_memory;
  o.backend = Unwrap(ParseBackendKind(backend));
  o.num_threads = num_threads;
  o.block_size = block_size;
  o.num_kv_blocks = num_kv_blocks;
  // kv_cache_dtype (vLLM's name; "auto": f32) takes precedence over kv_dtype when given.
  const std::string dtype = kv_cache_dtype.empty()     ? kv_dtype
                            : kv_cache_dtype == "auto" ? std::string("f32")
                                                       : kv_cache_dtype;
  o.kv_dtype = Unwrap(ParseDType(dtype));
  if (!kv_cache_dtype_v.empty()) {  // V's own dtype (llama.cpp's -ctv)
    const DType v = Unwrap(ParseDType(kv_cache_dtype_v == "auto" ? "f32" : kv_cache_dtype_v));
    if (v != o.kv_dtype) o.kv_dtype_v = v;
  }
  o.enable_prefix_caching = enable_prefix_caching;
  o.eviction_policy = std::move(eviction_policy);
  o.scheduler.max_num_batched_tokens = max_num_batched_tokens;
  o.scheduler.max_num_seqs = max_num_seqs;
  o.scheduler.enable_chunked_prefill = enable_chunked_prefill;
  o.allow_context_overrun = allow_context_overrun;
  o.return_logits = return_logits;
  o.model_id = std::move(model_id);
  o.speculative.num_speculative_tokens = num_speculative_tokens;
  o.collect_block_metrics = collect_block_metrics;
  o.enable_cache_priorities = enable_cache_priorities;
  o.disk_tier.directory = disk_cache;
  o.disk_tier.capacity_bytes = disk_cache_size;
  if (disk_cache_read_threads < 1 || disk_cache_read_threads > kMaxDiskReadThreads) {
    ThrowInvalidArgument(
        "Engine.load: disk_cache_read_threads = " + std::to_string(disk_cache_read_threads) +
        " must be in [1, " + std::to_string(kMaxDiskReadThreads) + "]");
  }
  o.disk_tier.read_threads = disk_cache_read_threads;
  if (chunk_reuse.has_value()) o.chunk_reuse = *chunk_reuse;
  absl::StatusOr<std::unique_ptr<Engine>> engine;
  {
    py::gil_scoped_release release;
    engine = Engine::Load(model_path, tokenizer_path, o);
  }
  auto out = std::make_unique<PyEngine>();
  out->engine = Unwrap(std::move(engine));
  return out;
}

void BindEngineRun(py::class_<PyEngine>& e) {
  e.def(
       "step",
       [](PyEngine& self) {
         absl::StatusOr<StepOutput> out = self.RunWithoutGil([](Engine& en) { return en.Step(); });
         return std::make_shared<StepOutput>(Unwrap(std::move(out)));
       },
       "Runs one scheduled batch (releases the GIL).")
      .def(
          "generate",
          [](PyEngine& self, std::vector<GenerationRequest> requests) {
            return Unwrap(
                self.RunWithoutGil([&](Engine& en) { return en.Generate(std::move(requests)); }));
          },
          arg("requests"), "Runs the requests to completion; results in order (releases the GIL).")
      .def(
          "abort_request",
          [](PyEngine& self, RequestId id) { CheckStatus(self.get().AbortRequest(id)); },
          arg("request_id"),
          "Aborts an unfinished request; the next step reports it as finished with reason "
          "\"aborted\".")
      .def(
          "has_unfinished_requests",
          [](PyEngine& self) { return self.get().HasUnfinishedRequests(); },
          "True while some request is waiting or running.");
}

void BindEngineQueries(py::class_<PyEngine>& e) {
  e.def_property_readonly(
       "context_length", [](PyEngine& self) { return self.get().context_length(); },
       "Positions within the model's trained (or RoPE-scaled) context.")
      .def_property_readonly(
          "backend_name", [](PyEngine& self) { return self.get().backend_name(); },
          "The compute backend, e.g. \"cpu\".")
      .def_property_readonly(
          "kv_cache_layout",
          [](PyEngine& self) {
            const KvCacheLayout& l = self.get().kv_cache_layout();
            py::dict d;
            d["hybrid"] = l.hybrid;
            d["num_groups"] = l.hybrid ? static_cast<int>(l.groups.size()) : 1;
            d["layers_per_block"] = l.layers_per_block;
            d["reason"] = l.reason;
            d["dtype"] = DTypeName(l.dtype);
            d["v_dtype"] = DTypeName(l.v_dtype);
            return d;
          },
          "The KV cache layout the engine chose (hybrid_kv_cache): a dict with hybrid, "
          "num_groups, layers_per_block, reason, dtype and v_dtype (the K and V pages' "
          "storage).")
      .def_property_readonly(
          "kv_pool",
          [](PyEngine& self) {
            const KvPoolSize& p = self.get().kv_pool();
            py::dict d;
            d["num_blocks"] = p.num_blocks;
            d["bytes"] = p.bytes;
            d["reason"] = p.reason;
            d["dtype"] = DTypeName(p.dtype);
            d["v_dtype"] = DTypeName(p.v_dtype);
            d["bytes_per_token"] = p.bytes_per_token;
            d["tokens"] = p.tokens;
            return d;
          },
          "The KV pool the engine allocated: a dict with num_blocks, bytes, reason, dtype "
          "and v_dtype (K's and V's storage), bytes_per_token (K and V over every layer, scales "
          "included) and tokens.")
      .def_property_readonly(
          "stats", [](PyEngine& self) { return EngineStats(self.get().stats()); },
          "A snapshot of the totals.")
      .def_property_readonly(
          "tier_stats",
          [](PyEngine& self) {
            py::dict tiers;
            for (const auto& [name, s] : self.get().tier_stats()) {
              py::dict d;
              d["lookups"] = s.lookups;
              d["queried_blocks"] = s.queried_blocks;
              d["hit_blocks"] = s.hit_blocks;
              d["loaded_bytes"] = s.loaded_bytes;
              d["stored_blocks"] = s.stored_blocks;
              d["stored_bytes"] = s.stored_bytes;
              d["evictions"] = s.evictions;
              d["faults"] = s.faults;
              d["resident_blocks"] = s.resident_blocks;
              d["resident_bytes"] = s.resident_bytes;
              d["shared_resident_bytes"] = s.shared_resident_bytes;
              tiers[py::str(name)] = d;
            }
            return tiers;
          },
          "Counters of each KV tier below the device pool, by name (\"host\", \"disk\", "
          "\"remote\"): a dict of dicts (hit_blocks, stored_blocks, faults, resident_bytes, ...).")
      .def(
          "write_prometheus",
          [](PyEngine& self, std::map<std::string, std::string> labels) {
            PrometheusOptions options;
            for (auto& [k, v] : labels) options.labels.emplace_back(k, v);
            std::string text;
            CheckStatus(self.get().WriteKvCachePrometheus(&text, options));
            return text;
          },
          py::kw_only(), arg("labels") = std::map<std::string, std::string>{},
          "The KV cache's metrics in the Prometheus text format (see KvCacheManager).")
      .def_property_readonly(
          "vocab_size", [](PyEngine& self) { return self.get().config().vocab_size; },
          "The model's vocabulary size.")
      .def_property_readonly(
          "model_config", [](PyEngine& self) { return self.get().config().ToString(); },
          "The model's configuration as one line.")
      .def_property_readonly(
          "tokenizer",
          [](PyEngine& self) -> py::object {
            const Tokenizer* tok = self.get().tokenizer();
            if (tok == nullptr) return py::none();
            // A non-owning reference; keep_alive ties it to the engine's lifetime.
            return py::cast(tok, py::return_value_policy::reference);
          },
          py::keep_alive<0, 1>(), "The engine's Tokenizer, or None when it has none.");
}

void BindEngineClass(py::module_& m) {
  py::class_<PyEngine> e(m, "Engine",
                         "A llama2.c model served on the paged KV cache (prefix caching, "
                         "continuous batching). One thread drives it at a time.");
  e.def_static(
      "load", &LoadEngine, arg("model_path"), arg("tokenizer_path") = "", py::kw_only(),
      arg("backend") = "auto", arg("num_threads") = 0, arg("block_size") = 16,
      arg("num_kv_blocks") = 0, arg("kv_dtype") = "f32", arg("enable_prefix_caching") = true,
      arg("eviction_policy") = "lru", arg("max_num_batched_tokens") = 2048,
      arg("max_num_seqs") = 256, arg("enable_chunked_prefill") = true,
      arg("allow_context_overrun") = false, arg("return_logits") = false,
      arg("model_id") = "llama2c", arg("num_speculative_tokens") = 0,
      arg("collect_block_metrics") = false, arg("enable_cache_priorities") = false,
      arg("weights") = "native", arg("kv_cache_memory") = 0, arg("hybrid_kv_cache") = "auto",
      arg("activations") = "int8", arg("int8_kernel") = "", arg("kv_cache_dtype") = "",
      arg("disk_cache") = "", arg("disk_cache_size") = int64_t{10} << 30,
      arg("kv_cache_dtype_v") = "", arg("disk_cache_read_threads") = 2,
      arg("chunk_reuse") = std::optional<ChunkReuseOptions>{},
      "Loads a model (llama2.c checkpoint, Hugging Face directory or GGUF file) and its "
      "tokenizer into a new Engine; keyword arguments are EngineOptions. weights: "
      "'native' keeps a GGUF / safetensors file's quantized or half matrices in their "
      "format (CPU backend), 'f32' converts them at load. kv_cache_memory: bytes for the "
      "KV pool when num_kv_blocks is 0 (0: automatic). hybrid_kv_cache: 'auto', 'on' or "
      "'off' (EngineOptions::hybrid_kv_cache; see kv_cache_layout). activations: 'f32' or "
      "'int8' (EngineOptions::activations: native Q4_0 / Q4_1 / Q8_0 weights times "
      "int8-quantized activations). int8_kernel: '' (leave the process's choice), "
      "'auto', 'avx512vnni', 'avx2' or 'portable' (EngineOptions::int8_kernel; the same "
      "tokens, only the speed differs; backend_name names the kernel). kv_cache_dtype: "
      "the KV pages' storage ('auto' = f32, f16, bf16, int8, fp8_e4m3, fp8_e5m2, q8_0, "
      "q4_0, q4_1; overrides kv_dtype; see kv_pool); kv_cache_dtype_v: V's own "
      "dtype when it differs (llama.cpp's -ctv; '' = K's). disk_cache: a folder for the disk "
      "KV tier ('' = none; it survives restarts, see tier_stats), disk_cache_size its "
      "byte budget (shared by every process using the folder), disk_cache_read_threads the "
      "values a lookup reads at once (1-64; helper threads sleep between lookups). "
      "chunk_reuse: a ChunkReuseOptions turning on shifted-position reuse of the spans requests "
      "mark with chunks= (None: off).");
  e.def(
      "add_request",
      [](PyEngine& self, GenerationRequest request) {
        return Unwrap(self.get().AddRequest(std::move(request)));
      },
      arg("request"), "Queues a GenerationRequest; returns its id.");
  RequestArgs([&](auto&&... a) {
    e.def(
        "add_request",
        [](PyEngine& self, std::vector<TokenId> prompt_tokens, std::string prompt_text,
           int32_t max_new_tokens, float temperature, float top_p, uint64_t seed,
           std::string cache_salt, int32_t priority, bool stop_at_eos,
           std::vector<TokenId> stop_tokens, std::vector<std::pair<int32_t, int32_t>> chunks,
           int32_t cache_priority, const std::vector<PrioritySpanTuple>& cache_priority_spans,
           int32_t logprobs, int32_t prompt_logprobs, int32_t top_k, float min_p,
           float repetition_penalty, float presence_penalty, float frequency_penalty,
           std::map<TokenId, float> logit_bias, int32_t min_tokens) {
          return Unwrap(self.get().AddRequest(MakeRequestFromArgs(
              std::move(prompt_tokens), std::move(prompt_text), max_new_tokens, temperature, top_p,
              seed, std::move(cache_salt), priority, stop_at_eos, std::move(stop_tokens),
              std::move(chunks), cache_priority, cache_priority_spans, logprobs, prompt_logprobs,
              top_k, min_p, repetition_penalty, presence_penalty, frequency_penalty,
              std::move(logit_bias), min_tokens)));
        },
        a..., "Queues a request given by keywords; returns its id.");
  });
  BindEngineRun(e);
  BindEngineQueries(e);
}

}  // namespace

void BindEngine(py::module_& m) {
  BindTokenizer(m);
  BindEngineTypes(m);
  BindEngineClass(m);
}

}  // namespace pagedkv::python
