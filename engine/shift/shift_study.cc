// Copyright 2026 The pagedkv Authors.
#include "engine/shift/shift_study.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cache/debug_check.h"
#include "engine/model/model_runner.h"
#include "engine/shift/next_token_metrics.h"
#include "engine/shift/rerotate_slots.h"
#include "engine/shift/shifted_prefill.h"
#include "pagedkv/block_pool.h"
#include "pagedkv/chunk_index.h"
#include "pagedkv/kernels/rope_math.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv {
namespace {

constexpr TokenId kBos = 1;

double UnitRoundoff(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return std::ldexp(1.0, -24);
    case DType::kF16:
      return std::ldexp(1.0, -11);
    case DType::kBF16:
      return std::ldexp(1.0, -8);
  }
  return 1.0;
}

// Error of `got` against `ref`, accumulated over calls.
struct ErrorSum {
  double max_abs = 0.0;
  double sum_sq_err = 0.0;
  double sum_sq_ref = 0.0;
  void Add(const std::vector<float>& got, const std::vector<float>& ref) {
    for (size_t i = 0; i < ref.size(); ++i) {
      const double d = double{got[i]} - ref[i];
      max_abs = std::max(max_abs, std::abs(d));
      sum_sq_err += d * d;
      sum_sq_ref += double{ref[i]} * ref[i];
    }
  }
  double RelRms() const { return sum_sq_ref == 0.0 ? 0.0 : std::sqrt(sum_sq_err / sum_sq_ref); }
};

// Samples `n_new` tokens after `prompt` (temperature 1) on `runner`, whose blocks it uses freely
// from block 0. Returns the new tokens only.
absl::StatusOr<std::vector<TokenId>> SampleTokens(ModelRunner& runner,
                                                  const std::vector<TokenId>& prompt, int32_t n_new,
                                                  uint64_t seed) {
  const int32_t bs = runner.options().block_size;
  const auto total = static_cast<int32_t>(prompt.size()) + n_new;
  const int32_t blocks = static_cast<int32_t>(NumBlocksFor(total, bs));
  if (blocks > runner.options().num_blocks) {
    return absl::InternalError("SampleTokens: generator runner too small");
  }
  std::vector<BlockId> table(static_cast<size_t>(blocks));
  std::iota(table.begin(), table.end(), 0);
  std::vector<TokenId> all = prompt;
  std::vector<TokenId> out;
  int32_t done = 0;
  while (static_cast<int32_t>(out.size()) < n_new) {
    const auto end = static_cast<int32_t>(all.size());
    std::vector<int32_t> positions(static_cast<size_t>(end - done));
    std::iota(positions.begin(), positions.end(), done);
    std::vector<int64_t> slots(positions.begin(), positions.end());  // identity table
    const std::vector<int32_t> qsl = {0, end - done}, kv_lens = {end}, rows = {end - done - 1};
    const SamplingParams params{.temperature = 1.0f,
                                .top_p = 1.0f,
                                .seed = seed,
                                .counter = static_cast<uint64_t>(out.size())};
    ModelOutput output;
    PAGEDKV_RETURN_IF_ERROR(runner.Forward(
        {.token_ids = absl::MakeConstSpan(all.data() + done, static_cast<size_t>(end - done)),
         .positions = positions,
         .slot_mapping = slots,
         .query_start_loc = qsl,
         .kv_lens = kv_lens,
         .block_tables = table,
         .max_blocks_per_seq = blocks,
         .logits_indices = rows},
        {.sampling = absl::MakeConstSpan(&params, 1)}, &output));
    done = end;
    all.push_back(output.sampled[0]);
    out.push_back(output.sampled[0]);
  }
  return out;
}

// BOS followed by n - 1 sampled tokens (empty when n == 0).
absl::StatusOr<std::vector<TokenId>> SampleDocument(ModelRunner& runner, int32_t n, uint64_t seed) {
  if (n == 0) return std::vector<TokenId>{};
  std::vector<TokenId> out = {kBos};
  if (n == 1) return out;
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<TokenId> rest, SampleTokens(runner, out, n - 1, seed));
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

// The K/V texts of one document at one shift.
struct Texts {
  std::vector<TokenId> donor;   // A ‖ C
  std::vector<TokenId> target;  // B ‖ C ‖ D
};

// One dtype's model runner, pool, chunk index and executor.
class DtypeRig {
 public:
  static absl::StatusOr<std::unique_ptr<DtypeRig>> Create(
      std::shared_ptr<const ModelWeights> weights, const ShiftStudyOptions& o, DType dtype,
      int32_t num_blocks) {
    auto rig = std::unique_ptr<DtypeRig>(new DtypeRig());
    PAGEDKV_ASSIGN_OR_RETURN(rig->runner_, ModelRunner::Create(weights, {.backend = o.backend,
                                                                         .num_blocks = num_blocks,
                                                                         .block_size = o.block_size,
                                                                         .kv_dtype = dtype}));
    PAGEDKV_ASSIGN_OR_RETURN(
        rig->pool_, BlockPool::Create({.num_blocks = num_blocks, .block_size = o.block_size}));
    PAGEDKV_ASSIGN_OR_RETURN(rig->index_, ChunkIndex::Create(rig->pool_.get()));
    PAGEDKV_ASSIGN_OR_RETURN(
        rig->prefill_,
        ShiftedPrefill::Create(rig->runner_.get(), rig->pool_.get(), rig->index_.get()));
    return rig;
  }

  // A prefill of `tokens` (chunk C at `chunk_begin`) in a newly allocated table, kept until
  // Free(table).
  absl::StatusOr<std::pair<std::vector<BlockId>, ShiftedPrefillResult>> Run(
      const std::vector<TokenId>& tokens, int32_t chunk_begin, int32_t chunk_length,
      int32_t logits_from, const ShiftedReuseOptions& options) {
    const int32_t bs = pool_->block_size();
    std::vector<BlockId> table;
    PAGEDKV_RETURN_IF_ERROR(pool_->Allocate(
        static_cast<int32_t>(NumBlocksFor(static_cast<int64_t>(tokens.size()), bs)), &table));
    const std::vector<ChunkSpan> spans = {{.begin = chunk_begin, .length = chunk_length}};
    absl::StatusOr<ShiftedPrefillResult> result = prefill_->Run(
        {.tokens = tokens, .chunks = spans, .block_table = table, .logits_from = logits_from},
        options);
    if (!result.ok()) {
      DebugCheckOk(Free(table), "the table was allocated just above");
      return result.status();
    }
    return std::make_pair(std::move(table), *std::move(result));
  }

  absl::Status Free(const std::vector<BlockId>& table) {
    std::vector<BlockId> tail_first(table.rbegin(), table.rend());
    return pool_->Unpin(tail_first);
  }

  // Slots of positions [begin, begin + n) of a sequence with `table`.
  std::vector<int64_t> Slots(const std::vector<BlockId>& table, int32_t begin, int32_t n) const {
    const int32_t bs = pool_->block_size();
    std::vector<int64_t> slots;
    for (int32_t p = begin; p < begin + n; ++p) {
      slots.push_back(int64_t{table[static_cast<size_t>(p / bs)]} * bs + p % bs);
    }
    return slots;
  }

  ModelRunner& runner() { return *runner_; }
  BlockPool& pool() { return *pool_; }
  ChunkIndex& index() { return *index_; }
  ShiftedPrefill& prefill() { return *prefill_; }

 private:
  DtypeRig() = default;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<ChunkIndex> index_;
  std::unique_ptr<ShiftedPrefill> prefill_;
};

// max over elements of |got - ref| / tolerance, tolerance per rotated pair (see LayerZeroCheck).
double WorstToleranceRatio(const std::vector<float>& got, const std::vector<float>& ref,
                           const RopeConfig& rope, [[maybe_unused]] int32_t num_kv_heads,
                           DType dtype) {
  const double u = UnitRoundoff(dtype);
  const int32_t hd = rope.head_dim;
  const int32_t rd = rope.RotaryDim();
  double worst = 0.0;
  auto check = [&](size_t e, double norm) {
    const double tol = (3.0 * u + 1e-6) * norm + 1e-30;
    worst = std::max(worst, std::abs(double{got[e]} - ref[e]) / tol);
  };
  const size_t heads = ref.size() / static_cast<size_t>(hd);
  for (size_t h = 0; h < heads; ++h) {
    const size_t base = h * static_cast<size_t>(hd);
    for (int32_t pair = 0; pair < rd / 2; ++pair) {
      int32_t a, b;
      RopePairDims(rope.layout, rd, pair, &a, &b);
      const double norm = std::hypot(double{ref[base + static_cast<size_t>(a)]},
                                     double{ref[base + static_cast<size_t>(b)]});
      check(base + static_cast<size_t>(a), norm);
      check(base + static_cast<size_t>(b), norm);
    }
    for (int32_t d = rd; d < hd; ++d) {
      check(base + static_cast<size_t>(d), std::abs(double{ref[base + static_cast<size_t>(d)]}));
    }
  }
  return worst;
}

absl::Status Validate(const ShiftStudyOptions& o) {
  if (o.weights == nullptr) return absl::InvalidArgumentError("study-shift: no model weights");
  if (o.chunk_length < 1 || o.chunk_position < 0 || o.continuation_length < 2 ||
      o.num_documents < 1 || o.block_size < 1 || o.drift_step < 0 || o.recompute_first < 0 ||
      o.deviation_layer < 0 || !(o.recompute_fraction >= 0.0 && o.recompute_fraction <= 1.0)) {
    return absl::InvalidArgumentError(
        "study-shift: need chunk length >= 1, chunk position >= 0, continuation >= 2, documents "
        ">= 1, block size >= 1, drift step >= 0, recompute-first >= 0, a recompute fraction in "
        "[0, 1]");
  }
  if (o.shifts.empty() || o.dtypes.empty()) {
    return absl::InvalidArgumentError("study-shift: give at least one shift and one dtype");
  }
  const int64_t context = o.weights->config().seq_len;
  for (int32_t s : o.shifts) {
    const int64_t p1 = int64_t{o.chunk_position} + s;
    if (p1 < 0) {
      return absl::InvalidArgumentError(absl::StrCat("study-shift: shift ", s,
                                                     " puts the chunk at position ", p1,
                                                     " < 0; shifts must be >= -chunk position"));
    }
    if (p1 + o.chunk_length + o.continuation_length > context) {
      return absl::InvalidArgumentError(absl::StrCat(
          "study-shift: shift ", s, " needs ", p1 + o.chunk_length + o.continuation_length,
          " positions, past the model's context of ", context,
          "; use smaller shifts, chunk or continuation"));
    }
  }
  for (int32_t n : o.drift_counts) {
    if (n < 1) return absl::InvalidArgumentError("study-shift: drift counts must be >= 1");
    if (int64_t{o.chunk_position} + int64_t{n} * o.drift_step + o.chunk_length > context) {
      return absl::InvalidArgumentError(absl::StrCat(
          "study-shift: ", n, " drift steps of ", o.drift_step, " pass the model's context of ",
          context, "; lower --drift-step or --drift-counts"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

const char* ShiftVariantName(ShiftVariant variant) {
  switch (variant) {
    case ShiftVariant::kReRotated:
      return "rerotated";
    case ShiftVariant::kNaive:
      return "naive";
    case ShiftVariant::kFirstK:
      return "rerotated+firstk";
    case ShiftVariant::kSelective:
      return "rerotated+selective";
  }
  return "invalid";
}

absl::StatusOr<ShiftVariant> ParseShiftVariant(std::string_view name) {
  if (name == "rerotated") return ShiftVariant::kReRotated;
  if (name == "naive") return ShiftVariant::kNaive;
  if (name == "firstk" || name == "rerotated+firstk") return ShiftVariant::kFirstK;
  if (name == "selective" || name == "rerotated+selective") return ShiftVariant::kSelective;
  return absl::InvalidArgumentError(absl::StrCat("unknown variant '", std::string(name),
                                                 "': use rerotated, naive, firstk or selective"));
}

bool ShiftStudyReport::AllLayerZeroChecksPass() const {
  return std::all_of(layer_zero_checks.begin(), layer_zero_checks.end(),
                     [](const LayerZeroCheck& c) { return c.pass; });
}

absl::StatusOr<ShiftStudyReport> RunShiftStudy(const ShiftStudyOptions& o) {
  PAGEDKV_RETURN_IF_ERROR(Validate(o));
  const ModelConfig& config = o.weights->config();
  const int32_t n = o.chunk_length, p0 = o.chunk_position, m = o.continuation_length;
  const int32_t bs = o.block_size;
  ShiftStudyReport report;
  report.model = config.ToString();

  // Texts, sampled once on an fp32 runner so every dtype scores the same tokens.
  const int32_t seq_blocks = static_cast<int32_t>(NumBlocksFor(config.seq_len, bs)) + 1;
  PAGEDKV_ASSIGN_OR_RETURN(
      std::unique_ptr<ModelRunner> generator,
      ModelRunner::Create(o.weights,
                          {.backend = o.backend, .num_blocks = seq_blocks, .block_size = bs}));
  std::vector<std::vector<Texts>> texts(static_cast<size_t>(o.num_documents));  // [doc][shift]
  std::vector<std::vector<TokenId>> chunks(static_cast<size_t>(o.num_documents));
  for (int32_t d = 0; d < o.num_documents; ++d) {
    const uint64_t seed = o.seed * 1000003 + static_cast<uint64_t>(d) * 7919;
    PAGEDKV_ASSIGN_OR_RETURN(std::vector<TokenId> c, SampleTokens(*generator, {kBos}, n, seed + 1));
    PAGEDKV_ASSIGN_OR_RETURN(std::vector<TokenId> a, SampleDocument(*generator, p0, seed + 2));
    chunks[static_cast<size_t>(d)] = c;
    for (size_t s = 0; s < o.shifts.size(); ++s) {
      const int32_t p1 = p0 + o.shifts[s];
      PAGEDKV_ASSIGN_OR_RETURN(std::vector<TokenId> b,
                               SampleDocument(*generator, p1, seed + 3 + s));
      std::vector<TokenId> bc = b;
      bc.insert(bc.end(), c.begin(), c.end());
      PAGEDKV_ASSIGN_OR_RETURN(std::vector<TokenId> dd,
                               SampleTokens(*generator, bc, m, seed + 101 + s));
      Texts t;
      t.donor = a;
      t.donor.insert(t.donor.end(), c.begin(), c.end());
      t.target = bc;
      t.target.insert(t.target.end(), dd.begin(), dd.end());
      texts[static_cast<size_t>(d)].push_back(std::move(t));
    }
  }

  const int32_t num_blocks = 8 * seq_blocks + 2 * static_cast<int32_t>(NumBlocksFor(n, bs)) + 8;
  for (DType dtype : o.dtypes) {
    PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<DtypeRig> rig,
                             DtypeRig::Create(o.weights, o, dtype, num_blocks));
    ModelRunner& runner = rig->runner();
    const int32_t layers = config.n_layers;
    // [shift][layer] key errors, [shift] layer-0 check, [shift][form] single-shift errors.
    std::vector<std::vector<ErrorSum>> key_err(o.shifts.size(),
                                               std::vector<ErrorSum>(static_cast<size_t>(layers)));
    std::vector<double> worst(o.shifts.size(), 0.0);
    std::vector<ErrorSum> compose_err(o.shifts.size()), delta_err(o.shifts.size());
    std::map<std::pair<size_t, ShiftVariant>, NextTokenMetrics> metrics;
    std::map<std::pair<size_t, ShiftVariant>, double> saved;
    std::vector<ErrorSum> drift_compose(o.drift_counts.size()), drift_delta(o.drift_counts.size());

    for (int32_t d = 0; d < o.num_documents; ++d) {
      const std::vector<TokenId>& c = chunks[static_cast<size_t>(d)];
      // Donor: C computed at p0 and registered; its own blocks are then released.
      PAGEDKV_ASSIGN_OR_RETURN(auto donor,
                               rig->Run(texts[static_cast<size_t>(d)][0].donor, p0, n, -1, {}));
      PAGEDKV_RETURN_IF_ERROR(rig->Free(donor.first));
      // Registered now, or (the same chunk sampled for an earlier document) already at p0.
      if (!donor.second.chunks[0].registered && !donor.second.chunks[0].hit) {
        return absl::InternalError("study-shift: the chunk could not be registered");
      }

      for (size_t s = 0; s < o.shifts.size(); ++s) {
        const Texts& t = texts[static_cast<size_t>(d)][s];
        const int32_t p1 = p0 + o.shifts[s];
        const int32_t logits_from = p1 + n;
        PAGEDKV_ASSIGN_OR_RETURN(auto full,
                                 rig->Run(t.target, p1, n, logits_from,
                                          {.enable_reuse = false, .register_chunks = false}));
        const std::vector<int64_t> full_slots = rig->Slots(full.first, p1, n);
        std::vector<TokenId> targets(t.target.begin() + logits_from + 1, t.target.end());

        // Re-rotated (compose) and delta-form runs: key errors per layer.
        for (ReRotateMode mode : {ReRotateMode::kCompose, ReRotateMode::kDelta}) {
          PAGEDKV_ASSIGN_OR_RETURN(
              auto run,
              rig->Run(t.target, p1, n, logits_from, {.rotation = mode, .register_chunks = false}));
          if (!run.second.chunks[0].hit) {
            return absl::InternalError("study-shift: the registered chunk was not found");
          }
          const std::vector<int64_t> slots = rig->Slots(run.first, p1, n);
          for (int32_t l = 0; l < layers; ++l) {
            if (mode == ReRotateMode::kDelta && l > 0) break;
            std::vector<float> k, v, k_ref, v_ref;
            PAGEDKV_RETURN_IF_ERROR(runner.ReadKv(l, slots, &k, &v));
            PAGEDKV_RETURN_IF_ERROR(runner.ReadKv(l, full_slots, &k_ref, &v_ref));
            if (mode == ReRotateMode::kDelta) {
              delta_err[s].Add(k, k_ref);
              continue;
            }
            key_err[s][static_cast<size_t>(l)].Add(k, k_ref);
            if (l == 0) {
              compose_err[s].Add(k, k_ref);
              worst[s] = std::max(
                  {worst[s],
                   WorstToleranceRatio(k, k_ref, runner.rope_config(), config.n_kv_heads, dtype),
                   WorstToleranceRatio(v, v_ref,
                                       RopeConfig{.head_dim = config.head_dim(), .rotary_dim = 0},
                                       config.n_kv_heads, dtype)});
            }
          }
          if (mode == ReRotateMode::kCompose &&
              std::find(o.variants.begin(), o.variants.end(), ShiftVariant::kReRotated) !=
                  o.variants.end()) {
            auto key = std::make_pair(s, ShiftVariant::kReRotated);
            PAGEDKV_RETURN_IF_ERROR(metrics[key].Add(full.second.logits, run.second.logits,
                                                     config.vocab_size, targets));
            saved[key] += 1.0 - run.second.compute_fraction;
          }
          PAGEDKV_RETURN_IF_ERROR(rig->Free(run.first));
        }

        for (ShiftVariant variant : o.variants) {
          if (variant == ShiftVariant::kReRotated) continue;
          ShiftedReuseOptions options{.register_chunks = false};
          if (variant == ShiftVariant::kNaive) options.rerotate = false;
          if (variant == ShiftVariant::kFirstK) options.recompute_first = o.recompute_first;
          if (variant == ShiftVariant::kSelective) {
            options.recompute_fraction = o.recompute_fraction;
            options.deviation_layer = o.deviation_layer;
          }
          PAGEDKV_ASSIGN_OR_RETURN(auto run, rig->Run(t.target, p1, n, logits_from, options));
          auto key = std::make_pair(s, variant);
          PAGEDKV_RETURN_IF_ERROR(
              metrics[key].Add(full.second.logits, run.second.logits, config.vocab_size, targets));
          saved[key] += 1.0 - run.second.compute_fraction;
          PAGEDKV_RETURN_IF_ERROR(rig->Free(run.first));
        }
        PAGEDKV_RETURN_IF_ERROR(rig->Free(full.first));
      }

      // Drift: n successive shifts of drift_step applied in place to a copy of C's layer-0 K.
      const BlockHash key = rig->prefill().KeyOf(c, "", 0);
      std::optional<ChunkLocation> location = rig->index().Find(key, c);
      if (!location) return absl::InternalError("study-shift: the chunk left the cache");
      PAGEDKV_RETURN_IF_ERROR(rig->index().Acquire(*location));
      std::vector<int64_t> src;
      for (int32_t i = 0; i < n; ++i) src.push_back(location->SlotOf(i, bs));
      for (size_t di = 0; di < o.drift_counts.size(); ++di) {
        const int32_t steps = o.drift_counts[di];
        const int32_t final_pos = p0 + steps * o.drift_step;
        std::vector<TokenId> fresh_tokens(static_cast<size_t>(final_pos), kBos);
        fresh_tokens.insert(fresh_tokens.end(), c.begin(), c.end());
        PAGEDKV_ASSIGN_OR_RETURN(auto fresh,
                                 rig->Run(fresh_tokens, final_pos, n, -1,
                                          {.enable_reuse = false, .register_chunks = false}));
        std::vector<float> k_ref, v_ref;
        PAGEDKV_RETURN_IF_ERROR(
            runner.ReadKv(0, rig->Slots(fresh.first, final_pos, n), &k_ref, &v_ref));
        for (ReRotateMode mode : {ReRotateMode::kCompose, ReRotateMode::kDelta}) {
          std::vector<BlockId> scratch;
          PAGEDKV_RETURN_IF_ERROR(
              rig->pool().Allocate(static_cast<int32_t>(NumBlocksFor(n, bs)), &scratch));
          const std::vector<int64_t> dst = rig->Slots(scratch, 0, n);
          for (int32_t step = 0; step < steps; ++step) {
            std::vector<int32_t> old_pos(static_cast<size_t>(n)), new_pos(static_cast<size_t>(n));
            for (int32_t i = 0; i < n; ++i) {
              old_pos[static_cast<size_t>(i)] = p0 + step * o.drift_step + i;
              new_pos[static_cast<size_t>(i)] = old_pos[static_cast<size_t>(i)] + o.drift_step;
            }
            PAGEDKV_RETURN_IF_ERROR(ReRotateSlots(runner, {.src = step == 0 ? src : dst,
                                                           .dst = dst,
                                                           .old_positions = old_pos,
                                                           .new_positions = new_pos,
                                                           .mode = mode,
                                                           .first_layer = 0,
                                                           .num_layers = 1}));
          }
          std::vector<float> k, v;
          PAGEDKV_RETURN_IF_ERROR(runner.ReadKv(0, dst, &k, &v));
          (mode == ReRotateMode::kCompose ? drift_compose : drift_delta)[di].Add(k, k_ref);
          PAGEDKV_RETURN_IF_ERROR(rig->Free(scratch));
        }
        PAGEDKV_RETURN_IF_ERROR(rig->Free(fresh.first));
      }
      PAGEDKV_RETURN_IF_ERROR(rig->index().Release(*location));
    }

    for (size_t s = 0; s < o.shifts.size(); ++s) {
      for (int32_t l = 0; l < layers; ++l) {
        const ErrorSum& e = key_err[s][static_cast<size_t>(l)];
        report.key_errors.push_back({.dtype = dtype,
                                     .shift = o.shifts[s],
                                     .layer = l,
                                     .max_abs_error = e.max_abs,
                                     .rel_rms_error = e.RelRms()});
      }
      report.layer_zero_checks.push_back(
          {.dtype = dtype, .shift = o.shifts[s], .worst_ratio = worst[s], .pass = worst[s] <= 1.0});
      report.rotations.push_back({.dtype = dtype,
                                  .form = "compose",
                                  .shift_per_step = o.shifts[s],
                                  .steps = 1,
                                  .max_abs_error = compose_err[s].max_abs,
                                  .rel_rms_error = compose_err[s].RelRms()});
      report.rotations.push_back({.dtype = dtype,
                                  .form = "delta",
                                  .shift_per_step = o.shifts[s],
                                  .steps = 1,
                                  .max_abs_error = delta_err[s].max_abs,
                                  .rel_rms_error = delta_err[s].RelRms()});
      for (ShiftVariant variant : o.variants) {
        const auto key = std::make_pair(s, variant);
        const NextTokenMetrics& mt = metrics[key];
        report.quality.push_back({.dtype = dtype,
                                  .shift = o.shifts[s],
                                  .variant = ShiftVariantName(variant),
                                  .mean_kl = mt.MeanKl(),
                                  .top1_agreement = mt.Top1Agreement(),
                                  .perplexity = mt.ApproxPerplexity(),
                                  .full_perplexity = mt.ExactPerplexity(),
                                  .compute_saved = saved[key] / o.num_documents,
                                  .rows = mt.rows()});
      }
    }
    for (size_t di = 0; di < o.drift_counts.size(); ++di) {
      for (int form = 0; form < 2; ++form) {
        const ErrorSum& e = form == 0 ? drift_compose[di] : drift_delta[di];
        report.rotations.push_back({.dtype = dtype,
                                    .form = form == 0 ? "compose" : "delta",
                                    .drift = true,
                                    .shift_per_step = o.drift_step,
                                    .steps = o.drift_counts[di],
                                    .max_abs_error = e.max_abs,
                                    .rel_rms_error = e.RelRms()});
      }
    }
  }
  return report;
}

}  // namespace pagedkv
