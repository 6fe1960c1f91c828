// Copyright 2026 The pagedkv Authors.
#include "engine/tools/study/independent_chunks.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "engine/runtime/shift/cache_blend_hook.h"
#include "engine/runtime/shift/rerotate_slots.h"
#include "engine/tools/study/next_token_metrics.h"
#include "engine/tools/study/study_rig.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<int32_t> Iota(int32_t begin, int32_t end) {
  std::vector<int32_t> v(static_cast<size_t>(std::max(end - begin, 0)));
  std::iota(v.begin(), v.end(), begin);
  return v;
}

// The chunk tokens' prompt indices, ascending.
std::vector<int32_t> ChunkTokens(const ChunkedPrompt& prompt) {
  return Iota(prompt.ChunkBegin(0), prompt.QuestionBegin());
}

int32_t NumChunkTokens(const ChunkedPrompt& prompt) {
  return prompt.num_chunks * prompt.chunk_length;
}

}  // namespace

const char* ChunkVariantName(ChunkVariant variant) {
  switch (variant) {
    case ChunkVariant::kFull:
      return "full";
    case ChunkVariant::kNaive:
      return "naive";
    case ChunkVariant::kReRotated:
      return "rerotated";
    case ChunkVariant::kDeviation:
      return "deviation";
    case ChunkVariant::kOracle:
      return "oracle";
    case ChunkVariant::kRandom:
      return "random";
    case ChunkVariant::kFirstK:
      return "firstk";
    case ChunkVariant::kCacheBlend:
      return "cacheblend";
    case ChunkVariant::kEngine:
      return "engine";
    case ChunkVariant::kFloatKeys:
      return "floatkeys";
  }
  return "invalid";
}

absl::StatusOr<ChunkVariant> ParseChunkVariant(std::string_view name) {
  for (ChunkVariant v : {ChunkVariant::kFull, ChunkVariant::kNaive, ChunkVariant::kReRotated,
                         ChunkVariant::kDeviation, ChunkVariant::kOracle, ChunkVariant::kRandom,
                         ChunkVariant::kFirstK, ChunkVariant::kCacheBlend, ChunkVariant::kEngine,
                         ChunkVariant::kFloatKeys}) {
    if (name == ChunkVariantName(v)) return v;
  }
  if (name == "selective") return ChunkVariant::kDeviation;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown independent-chunks variant '", std::string(name),
                   "': use full, naive, rerotated, deviation, oracle, random, firstk, "
                   "cacheblend, engine or floatkeys"));
}

bool IsSelector(ChunkVariant variant) {
  return variant != ChunkVariant::kFull && variant != ChunkVariant::kNaive &&
         variant != ChunkVariant::kReRotated && variant != ChunkVariant::kFloatKeys;
}

std::vector<int32_t> FirstKTokens(const ChunkedPrompt& prompt, int32_t k) {
  std::vector<int32_t> tokens;
  const int32_t take = std::clamp(k, 0, prompt.chunk_length);
  for (int32_t c = 0; c < prompt.num_chunks; ++c) {
    for (int32_t i = 0; i < take; ++i) tokens.push_back(prompt.ChunkBegin(c) + i);
  }
  return tokens;
}

std::vector<int32_t> RandomChunkTokens(const ChunkedPrompt& prompt, int32_t count, uint64_t seed) {
  std::vector<int32_t> pool = ChunkTokens(prompt);
  uint64_t state = seed;
  const auto n = static_cast<uint64_t>(pool.size());
  const auto take = static_cast<uint64_t>(std::clamp<int64_t>(count, 0, pool.size()));
  for (uint64_t i = 0; i < take; ++i) {  // partial Fisher-Yates
    const uint64_t j = i + SplitMix64(state) % (n - i);
    std::swap(pool[i], pool[j]);
  }
  pool.resize(take);
  std::sort(pool.begin(), pool.end());
  return pool;
}

IndependentChunksRig::IndependentChunksRig(const ChunksStudyOptions& options,
                                           int32_t blocks_per_seq, int32_t max_chunks)
    : options_(options), blocks_per_seq_(blocks_per_seq), max_chunks_(max_chunks) {}

absl::StatusOr<std::unique_ptr<IndependentChunksRig>> IndependentChunksRig::Create(
    std::shared_ptr<const ModelWeights> weights, const ChunksStudyOptions& options,
    int32_t max_tokens, int32_t max_chunks) {
  if (weights == nullptr || max_tokens < 1 || max_chunks < 1 || options.block_size < 1) {
    return absl::InvalidArgumentError(
        "IndependentChunksRig: need weights, max_tokens >= 1, max_chunks >= 1, block size >= 1");
  }
  const auto blocks = static_cast<int32_t>(NumBlocksFor(max_tokens, options.block_size));
  auto rig =
      std::unique_ptr<IndependentChunksRig>(new IndependentChunksRig(options, blocks, max_chunks));
  // Sequences: the donors 0..max_chunks-1, the reference, the variant.
  PAGEDKV_ASSIGN_OR_RETURN(
      rig->runner_,
      ModelRunner::Create(std::move(weights), {.backend = options.backend,
                                               .num_blocks = blocks * (max_chunks + 2),
                                               .block_size = options.block_size,
                                               .kv_dtype = options.kv_dtype}));
  return rig;
}

std::vector<BlockId> IndependentChunksRig::Table(int32_t sequence) const {
  std::vector<BlockId> table(static_cast<size_t>(blocks_per_seq_));
  std::iota(table.begin(), table.end(), sequence * blocks_per_seq_);
  return table;
}

int64_t IndependentChunksRig::Slot(int32_t sequence, int32_t position) const {
  return int64_t{sequence} * blocks_per_seq_ * options_.block_size + position;
}

std::vector<int64_t> IndependentChunksRig::DonorSlots(const ChunkedPrompt& prompt,
                                                      int32_t chunk) const {
  std::vector<int64_t> slots;
  for (int32_t i = 0; i < prompt.chunk_length; ++i) {
    slots.push_back(Slot(chunk, prompt.system_prefix + i));
  }
  return slots;
}

std::vector<int64_t> IndependentChunksRig::PromptSlots(Copy copy, int32_t begin,
                                                       int32_t count) const {
  const int32_t sequence = copy == Copy::kReference ? max_chunks_ : max_chunks_ + 1;
  std::vector<int64_t> slots;
  for (int32_t p = begin; p < begin + count; ++p) slots.push_back(Slot(sequence, p));
  return slots;
}

absl::Status IndependentChunksRig::Forward(const ChunkedPrompt& prompt, int32_t sequence,
                                           const std::vector<int32_t>& indices, int32_t kv_len,
                                           const std::vector<int32_t>& logits_rows, LayerHook* hook,
                                           ModelOutput* output) {
  std::vector<TokenId> ids;
  std::vector<int64_t> slots;
  for (int32_t t : indices) {
    ids.push_back(prompt.tokens[static_cast<size_t>(t)]);
    slots.push_back(Slot(sequence, t));
  }
  const std::vector<BlockId> table = Table(sequence);
  const std::vector<int32_t> qsl = {0, static_cast<int32_t>(ids.size())}, kv_lens = {kv_len};
  return runner_->Forward({.token_ids = ids,
                           .positions = indices,
                           .slot_mapping = slots,
                           .query_start_loc = qsl,
                           .kv_lens = kv_lens,
                           .block_tables = table,
                           .max_blocks_per_seq = blocks_per_seq_,
                           .logits_indices = logits_rows},
                          {.return_logits = !logits_rows.empty(), .hook = hook}, output);
}

absl::Status IndependentChunksRig::PrefillDonors(const ChunkedPrompt& prompt) {
  if (prompt.num_chunks > max_chunks_) {
    return absl::InvalidArgumentError(absl::StrCat("IndependentChunksRig: ", prompt.num_chunks,
                                                   " chunks, the rig holds ", max_chunks_));
  }
  const int32_t length = prompt.system_prefix + prompt.chunk_length;
  std::vector<TokenId> ids;
  std::vector<int32_t> positions, qsl = {0}, kv_lens;
  std::vector<int64_t> slots;
  std::vector<BlockId> tables;
  std::vector<int32_t> key_rows;  // the chunk tokens, chunk by chunk (the floatkeys variant)
  const bool float_keys = std::find(options_.variants.begin(), options_.variants.end(),
                                    ChunkVariant::kFloatKeys) != options_.variants.end();
  for (int32_t c = 0; c < prompt.num_chunks; ++c) {
    for (int32_t p = 0; p < length; ++p) {
      const int32_t t =
          p < prompt.system_prefix ? p : prompt.ChunkBegin(c) + p - prompt.system_prefix;
      if (float_keys && p >= prompt.system_prefix) {
        key_rows.push_back(static_cast<int32_t>(ids.size()));
      }
      ids.push_back(prompt.tokens[static_cast<size_t>(t)]);
      positions.push_back(p);
      slots.push_back(Slot(c, p));
    }
    qsl.push_back(static_cast<int32_t>(ids.size()));
    kv_lens.push_back(length);
    const std::vector<BlockId> table = Table(c);
    tables.insert(tables.end(), table.begin(), table.end());
  }
  ModelOutput output;
  PAGEDKV_RETURN_IF_ERROR(runner_->Forward({.token_ids = ids,
                                            .positions = positions,
                                            .slot_mapping = slots,
                                            .query_start_loc = qsl,
                                            .kv_lens = kv_lens,
                                            .block_tables = tables,
                                            .max_blocks_per_seq = blocks_per_seq_},
                                           {.key_rows = key_rows}, &output));
  donor_keys_ = std::move(output.rotated_keys);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> IndependentChunksRig::PrefillReference(
    const ChunkedPrompt& prompt) {
  const int32_t q = prompt.QuestionBegin();
  ModelOutput output;
  PAGEDKV_RETURN_IF_ERROR(Forward(prompt, max_chunks_, Iota(0, prompt.size()), prompt.size(),
                                  Iota(q, prompt.size()), nullptr, &output));
  return std::move(output.logits);
}

absl::Status IndependentChunksRig::FillChunks(const ChunkedPrompt& prompt, ChunkVariant variant) {
  const bool naive = variant == ChunkVariant::kNaive;
  std::vector<int64_t> src, dst;
  std::vector<int32_t> old_positions, new_positions;
  for (int32_t c = 0; c < prompt.num_chunks; ++c) {
    const std::vector<int64_t> donor = DonorSlots(prompt, c);
    src.insert(src.end(), donor.begin(), donor.end());
    for (int32_t i = 0; i < prompt.chunk_length; ++i) {
      dst.push_back(Slot(max_chunks_ + 1, prompt.ChunkBegin(c) + i));
      old_positions.push_back(prompt.system_prefix + i);
      new_positions.push_back(naive ? prompt.system_prefix + i : prompt.ChunkBegin(c) + i);
    }
  }
  // The donors' float keys are in the moves' order: chunk by chunk, token by token.
  return ReRotateSlots(*runner_, {.src = src,
                                  .dst = dst,
                                  .old_positions = old_positions,
                                  .new_positions = new_positions,
                                  .src_keys = variant == ChunkVariant::kFloatKeys
                                                  ? std::span<const float>(donor_keys_)
                                                  : std::span<const float>()});
}

absl::StatusOr<std::vector<int32_t>> IndependentChunksRig::OracleTokens(const ChunkedPrompt& prompt,
                                                                        int32_t count) {
  const int32_t n = NumChunkTokens(prompt);
  const std::vector<int64_t> reused = PromptSlots(Copy::kVariant, prompt.ChunkBegin(0), n);
  const std::vector<int64_t> fresh = PromptSlots(Copy::kReference, prompt.ChunkBegin(0), n);
  std::vector<double> deviation(static_cast<size_t>(n), 0.0);
  for (int32_t layer = 0; layer < runner_->config().n_layers; ++layer) {
    std::vector<float> k_a, v_a, k_b, v_b;
    PAGEDKV_RETURN_IF_ERROR(runner_->ReadKv(layer, reused, &k_a, &v_a));
    PAGEDKV_RETURN_IF_ERROR(runner_->ReadKv(layer, fresh, &k_b, &v_b));
    const size_t width = k_a.size() / static_cast<size_t>(n);
    for (size_t e = 0; e < k_a.size(); ++e) {
      const double dk = double{k_a[e]} - k_b[e], dv = double{v_a[e]} - v_b[e];
      deviation[e / width] += dk * dk + dv * dv;
    }
  }
  std::vector<int32_t> order = Iota(0, n);
  std::stable_sort(order.begin(), order.end(), [&deviation](int32_t a, int32_t b) {
    return deviation[static_cast<size_t>(a)] > deviation[static_cast<size_t>(b)];
  });
  order.resize(static_cast<size_t>(std::clamp(count, 0, n)));
  for (int32_t& t : order) t += prompt.ChunkBegin(0);
  std::sort(order.begin(), order.end());
  return order;
}

// The probe pass: every chunk token through layers 0..deviation_layer in context; the top
// ceil(f L) of each chunk by K+V deviation at that layer are picked. Their K/V written by the pass
// are then replaced by the reused ones again (the caller's FillChunks).
absl::StatusOr<std::vector<int32_t>> IndependentChunksRig::DeviationTokens(
    const ChunkedPrompt& prompt, double fraction) {
  const int32_t keep = NumToRecompute(fraction, prompt.chunk_length);
  if (keep == 0) return std::vector<int32_t>{};
  std::vector<BlendGroup> groups;
  for (int32_t c = 0; c < prompt.num_chunks; ++c) {
    groups.push_back(
        {.first_row = c * prompt.chunk_length, .num_rows = prompt.chunk_length, .num_keep = keep});
  }
  CacheBlendHook hook(groups, options_.deviation_layer, BlendScore::kKeyValue);
  ModelOutput unused;
  PAGEDKV_RETURN_IF_ERROR(Forward(prompt, max_chunks_ + 1, ChunkTokens(prompt),
                                  prompt.QuestionBegin(), {}, &hook, &unused));
  std::vector<int32_t> picked = hook.kept_rows();
  for (int32_t& t : picked) t += prompt.ChunkBegin(0);
  return picked;
}

// One pass over the chunk tokens and Q through a CacheBlendHook: every chunk token runs layers
// 0..`variant`'s check layer fresh, only the picked ones go on. kCacheBlend (CacheBlend's code):
// layer 1, V only, one set over every chunk; kEngine (the Engine's path): deviation_layer, K+V,
// ceil(f L) of each chunk.
absl::StatusOr<ChunkVariantResult> IndependentChunksRig::RunBlendPass(const ChunkedPrompt& prompt,
                                                                      ChunkVariant variant,
                                                                      double fraction) {
  const int32_t n = NumChunkTokens(prompt);
  const int32_t layers = runner_->config().n_layers;
  const bool code = variant == ChunkVariant::kCacheBlend;
  const int32_t check_layer = code ? std::min(1, layers - 1) : options_.deviation_layer;
  std::vector<BlendGroup> groups;
  if (code) {
    groups.push_back({.first_row = 0, .num_rows = n, .num_keep = NumToRecompute(fraction, n)});
  } else {
    for (int32_t c = 0; c < prompt.num_chunks; ++c) {
      groups.push_back({.first_row = c * prompt.chunk_length,
                        .num_rows = prompt.chunk_length,
                        .num_keep = NumToRecompute(fraction, prompt.chunk_length)});
    }
  }
  CacheBlendHook hook(groups, check_layer, code ? BlendScore::kValue : BlendScore::kKeyValue);
  std::vector<int32_t> indices = Iota(prompt.ChunkBegin(0), prompt.size());
  const std::vector<int32_t> logits_rows = Iota(n, static_cast<int32_t>(indices.size()));
  ModelOutput output;
  PAGEDKV_RETURN_IF_ERROR(
      Forward(prompt, max_chunks_ + 1, indices, prompt.size(), logits_rows, &hook, &output));
  ChunkVariantResult result{.logits = std::move(output.logits), .recomputed = hook.kept_rows()};
  for (int32_t& t : result.recomputed) t += prompt.ChunkBegin(0);
  const double q = prompt.size() - prompt.QuestionBegin();
  const double work = (prompt.system_prefix + q) * layers +
                      static_cast<double>(n) * (check_layer + 1) +
                      static_cast<double>(result.recomputed.size()) * (layers - check_layer - 1);
  result.compute_fraction = work / (static_cast<double>(prompt.size()) * layers);
  return result;
}

absl::StatusOr<ChunkVariantResult> IndependentChunksRig::FinishWith(const ChunkedPrompt& prompt,
                                                                    std::vector<int32_t> recompute,
                                                                    double extra_work) {
  std::vector<int32_t> indices = recompute;
  const auto first_q_row = static_cast<int32_t>(indices.size());
  for (int32_t t = prompt.QuestionBegin(); t < prompt.size(); ++t) indices.push_back(t);
  ModelOutput output;
  PAGEDKV_RETURN_IF_ERROR(Forward(prompt, max_chunks_ + 1, indices, prompt.size(),
                                  Iota(first_q_row, static_cast<int32_t>(indices.size())), nullptr,
                                  &output));
  const double layers = runner_->config().n_layers;
  const double work =
      static_cast<double>(prompt.system_prefix + static_cast<int32_t>(indices.size())) * layers +
      extra_work;
  return ChunkVariantResult{
      .logits = std::move(output.logits),
      .recomputed = std::move(recompute),
      .compute_fraction = work / (static_cast<double>(prompt.size()) * layers)};
}

absl::StatusOr<ChunkVariantResult> IndependentChunksRig::RunVariant(const ChunkedPrompt& prompt,
                                                                    ChunkVariant variant,
                                                                    double fraction,
                                                                    uint64_t seed) {
  const int32_t variant_seq = max_chunks_ + 1;
  if (variant == ChunkVariant::kFull) {
    ModelOutput output;
    PAGEDKV_RETURN_IF_ERROR(Forward(prompt, variant_seq, Iota(0, prompt.size()), prompt.size(),
                                    Iota(prompt.QuestionBegin(), prompt.size()), nullptr, &output));
    return ChunkVariantResult{.logits = std::move(output.logits),
                              .recomputed = ChunkTokens(prompt),
                              .compute_fraction = 1.0};
  }
  if (prompt.system_prefix > 0) {
    ModelOutput unused;
    PAGEDKV_RETURN_IF_ERROR(Forward(prompt, variant_seq, Iota(0, prompt.system_prefix),
                                    prompt.system_prefix, {}, nullptr, &unused));
  }
  PAGEDKV_RETURN_IF_ERROR(FillChunks(prompt, variant));
  const int32_t n = NumChunkTokens(prompt);
  const int32_t count = NumToRecompute(fraction, n);
  switch (variant) {
    case ChunkVariant::kOracle: {
      PAGEDKV_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, OracleTokens(prompt, count));
      return FinishWith(prompt, std::move(tokens), 0.0);
    }
    case ChunkVariant::kRandom:
      return FinishWith(prompt, RandomChunkTokens(prompt, count, seed), 0.0);
    case ChunkVariant::kFirstK: {
      const int32_t k =
          std::min(NumToRecompute(fraction, prompt.chunk_length), options_.first_k_max);
      return FinishWith(prompt, FirstKTokens(prompt, k), 0.0);
    }
    case ChunkVariant::kDeviation: {
      PAGEDKV_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, DeviationTokens(prompt, fraction));
      if (tokens.empty()) return FinishWith(prompt, {}, 0.0);
      PAGEDKV_RETURN_IF_ERROR(FillChunks(prompt, variant));
      const double probe = static_cast<double>(n) * (options_.deviation_layer + 1);
      return FinishWith(prompt, std::move(tokens), probe);
    }
    case ChunkVariant::kCacheBlend:
    case ChunkVariant::kEngine:
      return RunBlendPass(prompt, variant, fraction);
    default:
      return FinishWith(prompt, {}, 0.0);
  }
}

namespace {

absl::Status ValidateChunksOptions(const ChunksStudyOptions& o) {
  if (o.weights == nullptr) return absl::InvalidArgumentError("study-shift: no model weights");
  if (o.chunk_counts.empty() || o.variants.empty()) {
    return absl::InvalidArgumentError("study-shift: give at least one --chunks and one variant");
  }
  if (o.chunk_length < 1 || o.system_prefix < 0 || o.continuation_length < 2 ||
      o.num_documents < 1 || o.block_size < 1 || o.first_k_max < 0) {
    return absl::InvalidArgumentError(
        "study-shift: need --chunk-len >= 1, --system-prefix >= 0, --continuation >= 2, "
        "--documents >= 1, --block-size >= 1, --first-k-max >= 0");
  }
  for (double f : o.fractions) {
    if (!(f >= 0.0 && f <= 1.0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("study-shift: --fractions ", f, " is outside [0, 1]"));
    }
  }
  const ModelConfig& config = o.weights->config();
  if (o.deviation_layer < 0 || o.deviation_layer >= config.n_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("study-shift: --deviation-layer ", o.deviation_layer,
                     " does not exist; the model has layers 0 to ", config.n_layers - 1));
  }
  for (int32_t k : o.chunk_counts) {
    const int64_t needed =
        int64_t{o.system_prefix} + int64_t{k} * o.chunk_length + o.continuation_length;
    if (k < 1 || k > 64) {
      return absl::InvalidArgumentError(
          absl::StrCat("study-shift: --chunks ", k, " must be in [1, 64]"));
    }
    if (needed > config.seq_len) {
      return absl::InvalidArgumentError(absl::StrCat(
          "study-shift: ", k, " chunks need ", needed, " positions, past the model's context of ",
          config.seq_len, "; use fewer or shorter chunks or a shorter continuation"));
    }
  }
  return absl::OkStatus();
}

// One prompt: S (BOS first), k chunks each sampled after a BOS, Q sampled after S ‖ C1..Ck. The
// seeds of S and of chunk c depend on the document only, so the prompts of every k share them.
absl::StatusOr<ChunkedPrompt> SamplePrompt(const ChunksStudyOptions& o, ModelRunner& generator,
                                           int32_t num_chunks, int32_t document) {
  const uint64_t seed = o.seed * 1000003 + static_cast<uint64_t>(document) * 7919;
  ChunkedPrompt prompt{
      .system_prefix = o.system_prefix, .chunk_length = o.chunk_length, .num_chunks = num_chunks};
  PAGEDKV_ASSIGN_OR_RETURN(prompt.tokens, SampleDocument(generator, o.system_prefix, seed + 1));
  for (int32_t c = 0; c < num_chunks; ++c) {
    PAGEDKV_ASSIGN_OR_RETURN(
        std::vector<TokenId> chunk,
        SampleTokens(generator, {kStudyBos}, o.chunk_length, seed + 11 + static_cast<uint64_t>(c)));
    prompt.tokens.insert(prompt.tokens.end(), chunk.begin(), chunk.end());
  }
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<TokenId> question,
                           SampleTokens(generator, prompt.tokens, o.continuation_length,
                                        seed + 101 + static_cast<uint64_t>(num_chunks)));
  prompt.tokens.insert(prompt.tokens.end(), question.begin(), question.end());
  return prompt;
}

// Sums of one (variant, fraction) cell over documents.
struct ChunksCell {
  NextTokenMetrics metrics;
  double saved = 0.0;
  double recomputed = 0.0;
};

// The fractions a variant runs at: the study's for a selector, 1 for full, 0 otherwise.
std::vector<double> FractionsOf(const ChunksStudyOptions& o, ChunkVariant variant) {
  if (IsSelector(variant)) return o.fractions;
  return {variant == ChunkVariant::kFull ? 1.0 : 0.0};
}

// Every variant of one document at one chunk count, added to `cells`.
absl::Status AddChunksDocument(const ChunksStudyOptions& o, IndependentChunksRig& rig,
                               const ChunkedPrompt& prompt, uint64_t seed,
                               std::map<std::pair<size_t, double>, ChunksCell>& cells) {
  PAGEDKV_RETURN_IF_ERROR(rig.PrefillDonors(prompt));
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<float> reference, rig.PrefillReference(prompt));
  const std::vector<TokenId> targets(prompt.tokens.begin() + prompt.QuestionBegin() + 1,
                                     prompt.tokens.end());
  const double chunk_tokens = static_cast<double>(prompt.num_chunks) * prompt.chunk_length;
  for (size_t v = 0; v < o.variants.size(); ++v) {
    for (double fraction : FractionsOf(o, o.variants[v])) {
      PAGEDKV_ASSIGN_OR_RETURN(ChunkVariantResult result,
                               rig.RunVariant(prompt, o.variants[v], fraction, seed));
      ChunksCell& cell = cells[{v, fraction}];
      PAGEDKV_RETURN_IF_ERROR(
          cell.metrics.Add(reference, result.logits, o.weights->config().vocab_size, targets));
      cell.saved += 1.0 - result.compute_fraction;
      cell.recomputed += static_cast<double>(result.recomputed.size()) / chunk_tokens;
    }
  }
  return absl::OkStatus();
}

// Fills gap_closed of the rows from `first` on (one chunk count) against their rerotated row.
void FillGapClosed(std::vector<ChunksQualityRow>& rows, size_t first) {
  double rerotated_kl = 0.0;
  for (size_t i = first; i < rows.size(); ++i) {
    if (rows[i].variant == ChunkVariantName(ChunkVariant::kReRotated)) {
      rerotated_kl = rows[i].mean_kl;
    }
  }
  for (size_t i = first; i < rows.size(); ++i) {
    rows[i].gap_closed = rerotated_kl > 0.0 ? 1.0 - rows[i].mean_kl / rerotated_kl
                                            : std::numeric_limits<double>::quiet_NaN();
  }
}

}  // namespace

absl::StatusOr<ChunksStudyReport> RunChunksStudy(const ChunksStudyOptions& o) {
  PAGEDKV_RETURN_IF_ERROR(ValidateChunksOptions(o));
  const ModelConfig& config = o.weights->config();
  ChunksStudyReport report{.model = config.ToString()};
  PAGEDKV_ASSIGN_OR_RETURN(
      std::unique_ptr<ModelRunner> generator,
      ModelRunner::Create(
          o.weights,
          {.backend = o.backend,
           .num_blocks = static_cast<int32_t>(NumBlocksFor(config.seq_len, o.block_size)) + 1,
           .block_size = o.block_size}));
  const int32_t max_k = *std::max_element(o.chunk_counts.begin(), o.chunk_counts.end());
  PAGEDKV_ASSIGN_OR_RETURN(
      std::unique_ptr<IndependentChunksRig> rig,
      IndependentChunksRig::Create(
          o.weights, o, o.system_prefix + max_k * o.chunk_length + o.continuation_length, max_k));
  for (int32_t k : o.chunk_counts) {
    const size_t first_row = report.rows.size();
    std::map<std::pair<size_t, double>, ChunksCell> cells;
    for (int32_t d = 0; d < o.num_documents; ++d) {
      PAGEDKV_ASSIGN_OR_RETURN(ChunkedPrompt prompt, SamplePrompt(o, *generator, k, d));
      const uint64_t seed = o.seed * 31 + static_cast<uint64_t>(k) * 131 + static_cast<uint64_t>(d);
      PAGEDKV_RETURN_IF_ERROR(AddChunksDocument(o, *rig, prompt, seed, cells));
    }
    for (size_t v = 0; v < o.variants.size(); ++v) {
      for (double fraction : FractionsOf(o, o.variants[v])) {
        const ChunksCell& cell = cells[{v, fraction}];
        report.rows.push_back({.num_chunks = k,
                               .variant = ChunkVariantName(o.variants[v]),
                               .fraction = fraction,
                               .recomputed = cell.recomputed / o.num_documents,
                               .mean_kl = cell.metrics.MeanKl(),
                               .top1_agreement = cell.metrics.Top1Agreement(),
                               .perplexity = cell.metrics.ApproxPerplexity(),
                               .full_perplexity = cell.metrics.ExactPerplexity(),
                               .compute_saved = cell.saved / o.num_documents,
                               .rows = cell.metrics.rows()});
      }
    }
    FillGapClosed(report.rows, first_row);
  }
  return report;
}

}  // namespace pagedkv
