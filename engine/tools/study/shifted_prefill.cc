// Copyright 2026 The pagedkv Authors.
#include "engine/tools/study/shifted_prefill.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cache/debug_check.h"
#include "engine/model/runner/backend.h"
#include "engine/runtime/shift/cache_blend_hook.h"
#include "engine/runtime/shift/rerotate_slots.h"
#include "engine/tools/study/layer_prefix_weights.h"
#include "engine/tools/study/shifted_prefill_state.h"
#include "pagedkv/kernels/op_args.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv {

namespace {

// Releases every acquired chunk when it goes out of scope (each Run path).
class ReleaseGuard {
 public:
  ReleaseGuard(ChunkIndex* index, std::vector<ChunkLocation>* acquired)
      : index_(index), acquired_(acquired) {}
  ~ReleaseGuard() { DebugCheckOk(ReleaseAll(), "every location was acquired by this Run"); }
  absl::Status ReleaseAll() {
    absl::Status status;
    for (const ChunkLocation& location : *acquired_) status.Update(index_->Release(location));
    acquired_->clear();
    return status;
  }

 private:
  ChunkIndex* index_;
  std::vector<ChunkLocation>* acquired_;
};

// One forward pass over the prompt tokens `indices` (ascending) of `input`'s sequence, whose KV
// holds kv_len tokens afterwards; logits for the batch rows `logits_rows`.
absl::Status ForwardTokens(ModelRunner& runner, const ShiftedPrefillInput& input,
                           std::span<const int32_t> indices, int32_t kv_len,
                           std::span<const int32_t> logits_rows, ModelOutput* output,
                           std::span<const int32_t> key_rows = {}) {
  const int32_t bs = runner.options().block_size;
  std::vector<TokenId> ids;
  std::vector<int32_t> positions;
  std::vector<int64_t> slots;
  for (int32_t t : indices) {
    ids.push_back(input.tokens[static_cast<size_t>(t)]);
    positions.push_back(t);
    slots.push_back(SlotAt(input.block_table, bs, t));
  }
  const std::vector<int32_t> qsl = {0, static_cast<int32_t>(ids.size())}, kv_lens = {kv_len};
  const ModelInput model_input{
      .token_ids = ids,
      .positions = positions,
      .slot_mapping = slots,
      .query_start_loc = qsl,
      .kv_lens = kv_lens,
      .block_tables = absl::MakeConstSpan(input.block_table.data(), input.block_table.size()),
      .max_blocks_per_seq = static_cast<int32_t>(input.block_table.size()),
      .logits_indices = absl::MakeConstSpan(logits_rows.data(), logits_rows.size())};
  return runner.Forward(model_input,
                        {.return_logits = !logits_rows.empty(),
                         .key_rows = absl::MakeConstSpan(key_rows.data(), key_rows.size())},
                        output);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShiftedPrefill>> ShiftedPrefill::Create(ModelRunner* runner,
                                                                       BlockPool* pool,
                                                                       ChunkIndex* index) {
  if (runner == nullptr || pool == nullptr || index == nullptr) {
    return absl::InvalidArgumentError("ShiftedPrefill::Create: runner, pool and index are needed");
  }
  if (&index->pool() != pool) {
    return absl::InvalidArgumentError(
        "ShiftedPrefill::Create: the chunk index must be built over the same block pool");
  }
  if (pool->num_blocks() != runner->options().num_blocks ||
      pool->block_size() != runner->options().block_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("ShiftedPrefill::Create: the pool has ", pool->num_blocks(), " blocks of ",
                     pool->block_size(), " tokens but the model runner's KV pages have ",
                     runner->options().num_blocks, " blocks of ", runner->options().block_size));
  }
  return std::unique_ptr<ShiftedPrefill>(new ShiftedPrefill(runner, pool, index));
}

ShiftedPrefill::ShiftedPrefill(ModelRunner* runner, BlockPool* pool, ChunkIndex* index)
    : runner_(runner),
      pool_(pool),
      index_(index),
      model_fingerprint_(
          absl::StrCat(runner->config().ToString(), "/kv=", DTypeName(runner->options().kv_dtype))),
      rope_fingerprint_(runner->rope_config().Fingerprint()) {}

ShiftedPrefill::~ShiftedPrefill() = default;

BlockHash ShiftedPrefill::KeyOf(std::span<const TokenId> tokens, std::string_view cache_salt,
                                uint64_t adapter_id) const {
  return ChunkKey(tokens, {.cache_salt = cache_salt,
                           .adapter_id = adapter_id,
                           .rope_fingerprint = rope_fingerprint_,
                           .model_fingerprint = model_fingerprint_});
}

absl::Status ShiftedPrefill::Validate(const ShiftedPrefillInput& input,
                                      const ShiftedReuseOptions& options) const {
  const auto n = static_cast<int64_t>(input.tokens.size());
  const int32_t bs = pool_->block_size();
  if (n == 0) return absl::InvalidArgumentError("ShiftedPrefill: the prompt is empty");
  if (n > INT32_MAX / 2) return absl::InvalidArgumentError("ShiftedPrefill: prompt too long");
  for (int64_t t = 0; t < n; ++t) {
    const TokenId token = input.tokens[static_cast<size_t>(t)];
    if (token < 0 || token >= runner_->config().vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("ShiftedPrefill: token ", t, " = ", token,
                                                     " is outside the vocabulary [0, ",
                                                     runner_->config().vocab_size, ")"));
    }
  }
  if (static_cast<int64_t>(input.block_table.size()) * bs < n) {
    return absl::InvalidArgumentError(absl::StrCat("ShiftedPrefill: the block table covers ",
                                                   input.block_table.size() * bs,
                                                   " tokens, the prompt has ", n));
  }
  for (BlockId block : input.block_table) {
    if (block < 0 || block >= pool_->num_blocks() || pool_->RefCount(block) <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("ShiftedPrefill: block table entry ", block,
                                                     " is not a block the caller holds"));
    }
  }
  int64_t end = 0;
  for (size_t i = 0; i < input.chunks.size(); ++i) {
    const ChunkSpan& span = input.chunks[i];
    if (span.length <= 0 || span.begin < end || int64_t{span.begin} + span.length > n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ShiftedPrefill: chunk span ", i, " [", span.begin, ", +", span.length,
          ") must be non-empty, inside the prompt, sorted and not overlap the previous one"));
    }
    end = int64_t{span.begin} + span.length;
  }
  if (input.logits_from < -1 || input.logits_from >= n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShiftedPrefill: logits_from = ", input.logits_from, " must be -1 or in [0, ", n, ")"));
  }
  if (options.recompute_first < 0 || options.deviation_layer < 0 ||
      !(options.recompute_fraction >= 0.0 && options.recompute_fraction <= 1.0)) {
    return absl::InvalidArgumentError(
        "ShiftedReuseOptions: recompute_first and deviation_layer must be >= 0 and "
        "recompute_fraction in [0, 1]");
  }
  if (options.rotation != ReRotateMode::kCompose && options.rotation != ReRotateMode::kDelta) {
    return absl::InvalidArgumentError("ShiftedReuseOptions.rotation is not a ReRotateMode");
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelRunner*> ShiftedPrefill::Probe(int32_t num_layers) {
  if (probe_ != nullptr && probe_->config().n_layers == num_layers) return probe_.get();
  probe_.reset();
  PAGEDKV_ASSIGN_OR_RETURN(ModelWeights weights,
                           LayerPrefixWeights(runner_->weights(), num_layers));
  ModelRunnerOptions options = runner_->options();
  options.backend = runner_->backend().kind();
  options.rope = runner_->rope_config();
  PAGEDKV_ASSIGN_OR_RETURN(
      probe_,
      ModelRunner::Create(std::make_shared<const ModelWeights>(std::move(weights)), options));
  return probe_.get();
}

absl::Status ShiftedPrefill::CopyKvToProbe(const ShiftedPrefillInput& input, ModelRunner& probe,
                                           int32_t num_layers, int32_t num_blocks) {
  for (int32_t layer = 0; layer < num_layers; ++layer) {
    const PagedKvLayout& all_from = runner_->kv_layout(layer);
    const PagedKvLayout& all_to = probe.kv_layout(layer);
    // K's pages, then V's (each side its own dtype's block bytes).
    for (const auto& [from, to] : {std::pair{all_from.KSide(), all_to.KSide()},
                                   std::pair{all_from.VSide(), all_to.VSide()}}) {
      const auto block_bytes = static_cast<size_t>(from.BlockStride() * DTypeSize(from.dtype));
      for (int32_t b = 0; b < num_blocks; ++b) {
        const size_t offset =
            static_cast<size_t>(input.block_table[static_cast<size_t>(b)]) * block_bytes;
        PAGEDKV_RETURN_IF_ERROR(probe.backend().CopyDeviceToDevice(
            static_cast<char*>(to.k) + offset, static_cast<const char*>(from.k) + offset,
            block_bytes));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ShiftedPrefill::DropMostDeviating(RunState& run, ModelRunner& probe, int32_t layer,
                                               Hit& hit) {
  const int32_t bs = pool_->block_size();
  const ChunkSpan& span = run.input.chunks[hit.span];
  std::vector<int64_t> hit_slots;
  for (int32_t i : hit.reused) {
    hit_slots.push_back(SlotAt(run.input.block_table, bs, span.begin + i));
  }
  std::vector<float> k_main, v_main, k_probe, v_probe;
  PAGEDKV_RETURN_IF_ERROR(runner_->ReadKv(layer, hit_slots, &k_main, &v_main));
  PAGEDKV_RETURN_IF_ERROR(probe.ReadKv(layer, hit_slots, &k_probe, &v_probe));
  const auto width = static_cast<int64_t>(k_main.size() / hit_slots.size());
  const auto count = static_cast<int32_t>(hit_slots.size());
  std::vector<char> drop(hit.reused.size(), 0);
  for (int32_t j : MostDeviatingTokens(k_main, v_main, k_probe, v_probe, width,
                                       NumToRecompute(run.options.recompute_fraction, count))) {
    drop[static_cast<size_t>(j)] = 1;
  }
  std::vector<int32_t> kept;
  for (size_t j = 0; j < hit.reused.size(); ++j) {
    if (drop[j]) {
      run.computed[static_cast<size_t>(span.begin + hit.reused[j])] = 1;
    } else {
      kept.push_back(hit.reused[j]);
    }
  }
  hit.reused = std::move(kept);
  return absl::OkStatus();
}

absl::Status ShiftedPrefill::SelectByDeviation(RunState& run, int32_t start) {
  const int32_t layer = std::min(run.options.deviation_layer, runner_->config().n_layers - 1);
  PAGEDKV_ASSIGN_OR_RETURN(ModelRunner * probe, Probe(layer + 1));
  // The probe computes its layers fresh, in context, for the tokens [start, end) up to the last
  // reused one; the KV of [0, start), already computed by the main pass, is copied in.
  int32_t end = 0;
  for (const Hit& hit : run.hits) {
    if (!hit.reused.empty()) {
      end = std::max(end, run.input.chunks[hit.span].begin + hit.reused.back() + 1);
    }
  }
  if (end <= start) return absl::OkStatus();
  PAGEDKV_RETURN_IF_ERROR(
      CopyKvToProbe(run.input, *probe, layer + 1,
                    static_cast<int32_t>(NumBlocksFor(start, pool_->block_size()))));
  std::vector<int32_t> indices(static_cast<size_t>(end - start));
  std::iota(indices.begin(), indices.end(), start);
  ModelOutput unused;
  PAGEDKV_RETURN_IF_ERROR(ForwardTokens(*probe, run.input, indices, end, {}, &unused));
  run.result.num_probe_tokens = end - start;
  run.result.probe_layers = layer + 1;
  for (Hit& hit : run.hits) {
    if (!hit.reused.empty()) PAGEDKV_RETURN_IF_ERROR(DropMostDeviating(run, *probe, layer, hit));
  }
  return absl::OkStatus();
}

absl::Status ShiftedPrefill::RegisterChunk(const ShiftedPrefillInput& input, const ChunkSpan& span,
                                           ChunkReuseRecord& record) {
  const int32_t bs = pool_->block_size();
  const std::span<const TokenId> tokens =
      input.tokens.subspan(static_cast<size_t>(span.begin), static_cast<size_t>(span.length));
  const BlockHash key = KeyOf(tokens, input.cache_salt, input.adapter_id);
  if (index_->Contains(key)) return absl::OkStatus();
  std::vector<BlockId> blocks;
  if (!pool_->Allocate(static_cast<int32_t>(NumBlocksFor(span.length, bs)), &blocks).ok()) {
    return absl::OkStatus();  // no room: the chunk is simply not cached
  }
  std::vector<int64_t> src, dst;
  std::vector<int32_t> pos;
  for (int32_t i = 0; i < span.length; ++i) {
    src.push_back(SlotAt(input.block_table, bs, span.begin + i));
    dst.push_back(int64_t{blocks[static_cast<size_t>(i / bs)]} * bs + i % bs);
    pos.push_back(span.begin + i);
  }
  absl::Status status =
      ReRotateSlots(*runner_, {.src = src, .dst = dst, .old_positions = pos, .new_positions = pos});
  if (status.ok()) {
    absl::StatusOr<bool> inserted = index_->Insert({.key = key,
                                                    .tokens = tokens,
                                                    .position = span.begin,
                                                    .blocks = blocks,
                                                    .start_offset = 0});
    if (inserted.ok()) {
      record.registered = *inserted;
    } else {
      status = inserted.status();
    }
  }
  std::vector<BlockId> tail_first(blocks.rbegin(), blocks.rend());
  status.Update(pool_->Unpin(tail_first));
  return status;
}

void ShiftedPrefill::PlanHits(RunState& run) {
  const ShiftedPrefillInput& input = run.input;
  const absl::flat_hash_set<BlockId> own(input.block_table.begin(), input.block_table.end());
  for (size_t s = 0; s < input.chunks.size(); ++s) {
    const ChunkSpan& span = input.chunks[s];
    ChunkReuseRecord& record = run.result.chunks[s];
    record.begin = span.begin;
    record.length = span.length;
    if (!run.options.enable_reuse) continue;
    const std::span<const TokenId> tokens =
        input.tokens.subspan(static_cast<size_t>(span.begin), static_cast<size_t>(span.length));
    std::optional<ChunkLocation> location =
        index_->Find(KeyOf(tokens, input.cache_salt, input.adapter_id), tokens);
    if (!location) continue;
    // A cached copy inside this sequence's own blocks would be overwritten while read.
    if (std::any_of(location->blocks.begin(), location->blocks.end(),
                    [&own](BlockId b) { return own.contains(b); })) {
      continue;
    }
    if (!index_->Acquire(*location).ok()) continue;  // stale: compute instead
    run.acquired.push_back(*location);
    Hit hit{.span = s, .location = *location, .reused = {}};
    record.hit = true;
    record.cached_position = location->position;
    for (int32_t i = 0; i < span.length; ++i) {
      const int32_t t = span.begin + i;
      if (i < run.options.recompute_first || t >= run.logits_from || t == run.num_tokens - 1) {
        continue;
      }
      hit.reused.push_back(i);
      run.computed[static_cast<size_t>(t)] = 0;
    }
    run.hits.push_back(std::move(hit));
  }
}

// Re-rotates (or, naive, copies) every reused token into the sequence's slots.
absl::Status ShiftedPrefill::ReuseHits(RunState& run) {
  const int32_t bs = pool_->block_size();
  std::vector<int64_t> src, dst;
  std::vector<int32_t> old_pos, new_pos;
  for (const Hit& hit : run.hits) {
    PAGEDKV_ASSIGN_OR_RETURN(const bool moved, MoveFromFloatKeys(run, hit));
    if (moved) continue;
    const ChunkSpan& span = run.input.chunks[hit.span];
    for (int32_t i : hit.reused) {
      src.push_back(hit.location.SlotOf(i, bs));
      dst.push_back(SlotAt(run.input.block_table, bs, span.begin + i));
      old_pos.push_back(hit.location.PositionOf(i));
      new_pos.push_back(run.options.rerotate ? span.begin + i : hit.location.PositionOf(i));
    }
  }
  if (src.empty()) return absl::OkStatus();
  return ReRotateSlots(*runner_, {.src = src,
                                  .dst = dst,
                                  .old_positions = old_pos,
                                  .new_positions = new_pos,
                                  .mode = run.options.rotation});
}

// Selective recompute (CacheBlend): the tokens before the first reused chunk are computed first,
// so the probe starts from their KV.
absl::StatusOr<int32_t> ShiftedPrefill::RecomputeSelected(RunState& run) {
  if (!(run.options.recompute_fraction > 0.0)) return 0;
  int32_t first = run.num_tokens;
  for (const Hit& hit : run.hits) {
    if (!hit.reused.empty()) first = std::min(first, run.input.chunks[hit.span].begin);
  }
  if (first == run.num_tokens) return 0;
  if (first > 0) {
    std::vector<int32_t> head(static_cast<size_t>(first));
    std::iota(head.begin(), head.end(), 0);
    ModelOutput unused;
    PAGEDKV_RETURN_IF_ERROR(ForwardTokens(*runner_, run.input, head, first, {}, &unused));
  }
  PAGEDKV_RETURN_IF_ERROR(SelectByDeviation(run, first));
  return first;
}

// Computes every token from `done` on that is not reused, in one forward pass.
absl::Status ShiftedPrefill::ComputeRest(RunState& run, int32_t done) {
  std::vector<int32_t> indices, logits_rows;
  for (int32_t t = done; t < run.num_tokens; ++t) {
    if (!run.computed[static_cast<size_t>(t)]) continue;
    if (t >= run.logits_from) logits_rows.push_back(static_cast<int32_t>(indices.size()));
    indices.push_back(t);
  }
  ModelOutput output;
  const std::vector<int32_t> key_rows = KeyRows(run, indices);
  PAGEDKV_RETURN_IF_ERROR(
      ForwardTokens(*runner_, run.input, indices, run.num_tokens, logits_rows, &output, key_rows));
  run.result.num_computed_tokens = done + static_cast<int64_t>(indices.size());
  run.result.logits = std::move(output.logits);
  run.rotated_keys = std::move(output.rotated_keys);
  return absl::OkStatus();
}

absl::Status ShiftedPrefill::RegisterComputed(RunState& run) {
  if (!run.options.register_chunks) return absl::OkStatus();
  for (size_t s = 0; s < run.input.chunks.size(); ++s) {
    if (run.result.chunks[s].hit) continue;
    const ChunkSpan& span = run.input.chunks[s];
    PAGEDKV_RETURN_IF_ERROR(RegisterChunk(run.input, span, run.result.chunks[s]));
    if (!run.result.chunks[s].registered) continue;
    const std::span<const TokenId> tokens =
        run.input.tokens.subspan(static_cast<size_t>(span.begin), static_cast<size_t>(span.length));
    KeepFloatKeys(run, span, KeyOf(tokens, run.input.cache_salt, run.input.adapter_id));
  }
  return absl::OkStatus();
}

absl::StatusOr<ShiftedPrefillResult> ShiftedPrefill::Run(const ShiftedPrefillInput& input,
                                                         const ShiftedReuseOptions& options) {
  PAGEDKV_RETURN_IF_ERROR(Validate(input, options));
  const auto n = static_cast<int32_t>(input.tokens.size());
  RunState run{.input = input,
               .options = options,
               .num_tokens = n,
               .logits_from = input.logits_from < 0 ? n - 1 : input.logits_from,
               .computed = std::vector<char>(static_cast<size_t>(n), 1)};
  run.result.logits_from = run.logits_from;
  run.result.chunks.resize(input.chunks.size());
  ReleaseGuard guard(index_, &run.acquired);
  PlanHits(run);
  PAGEDKV_RETURN_IF_ERROR(ReuseHits(run));
  PAGEDKV_ASSIGN_OR_RETURN(const int32_t done, RecomputeSelected(run));
  for (const Hit& hit : run.hits) {
    ChunkReuseRecord& record = run.result.chunks[hit.span];
    record.num_reused = static_cast<int32_t>(hit.reused.size());
    record.num_recomputed = record.length - record.num_reused;
    run.result.num_reused_tokens += record.num_reused;
  }
  PAGEDKV_RETURN_IF_ERROR(ComputeRest(run, done));
  PAGEDKV_RETURN_IF_ERROR(guard.ReleaseAll());
  PAGEDKV_RETURN_IF_ERROR(RegisterComputed(run));
  ShiftedPrefillResult& result = run.result;
  const double layers = runner_->config().n_layers;
  result.compute_fraction =
      (static_cast<double>(result.num_computed_tokens) * layers +
       (result.probe_layers > 0 ? static_cast<double>(result.num_reused_tokens) : 0.0) *
           result.probe_layers) /
      (static_cast<double>(n) * layers);
  return std::move(run.result);
}

}  // namespace pagedkv
