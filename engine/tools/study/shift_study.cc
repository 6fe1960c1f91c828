// Copyright 2026 The pagedkv Authors.
#include "engine/tools/study/shift_study.h"

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
#include "engine/model/runner/model_runner.h"
#include "engine/runtime/shift/rerotate_slots.h"
#include "engine/tools/study/next_token_metrics.h"
#include "engine/tools/study/shifted_prefill.h"
#include "engine/tools/study/study_rig.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/chunk_index.h"
#include "pagedkv/kernels/rope_math.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv {
namespace {

double UnitRoundoff(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return std::ldexp(1.0, -24);
    case DType::kF16:
      return std::ldexp(1.0, -11);
    case DType::kBF16:
      return std::ldexp(1.0, -8);
    case DType::kInt8:  // half a step of +-127, relative to the row's largest value; its bf16
    case DType::kQ8_0:  // scale is rounded up (1 / 250 covers both)
      return 1.0 / 250.0;
    case DType::kFp8E4M3:  // 3 mantissa bits
    case DType::kQ4_0:     // half a step of +-8 (relative to the block's largest value)
      return std::ldexp(1.0, -4);
    case DType::kQ4_1:  // half a step of 15 over [min, max]
      return 1.0 / 15.0;
    case DType::kFp8E5M2:  // 2 mantissa bits
      return std::ldexp(1.0, -3);
  }
  return 1.0;
}

// True when a dtype's rounding error scales with its row's (or block's) largest value rather
// than with each value (int8 and the GGUF blocks; fp8 rounds each value to its own exponent).
bool RoundsRelativeToRowMax(DType dtype) { return dtype == DType::kInt8 || IsBlockDType(dtype); }

// A bound on the largest |x| of the head at `base` at any position: the largest rotated pair's
// norm (no element of a pair exceeds it at any angle) or pass-through |x|, over `a` and `b`.
double HeadMax(const std::vector<float>& a, const std::vector<float>& b, size_t base,
               const RopeConfig& rope) {
  double max = 0.0;
  const int32_t rotary_dim = rope.RotaryDim();
  for (const std::vector<float>* x : {&a, &b}) {
    for (int32_t pair = 0; pair < rotary_dim / 2; ++pair) {
      int32_t first, second;
      RopePairDims(rope.layout, rotary_dim, pair, &first, &second);
      max = std::max(max, std::hypot(double{(*x)[base + first]}, double{(*x)[base + second]}));
    }
    for (int32_t d = rotary_dim; d < rope.head_dim; ++d) {
      max = std::max(max, std::abs(double{(*x)[base + d]}));
    }
  }
  return max;
}

// Error of `got` against `ref`, accumulated over calls.
struct ErrorSum {
  double max_abs = 0.0;
  double sum_sq_err = 0.0;
  double sum_sq_ref = 0.0;
  void Add(const std::vector<float>& got, const std::vector<float>& ref) {
    for (size_t i = 0; i < ref.size(); ++i) {
      const double diff = double{got[i]} - ref[i];
      max_abs = std::max(max_abs, std::abs(diff));
      sum_sq_err += diff * diff;
      sum_sq_ref += double{ref[i]} * ref[i];
    }
  }
  double RelRms() const { return sum_sq_ref == 0.0 ? 0.0 : std::sqrt(sum_sq_err / sum_sq_ref); }
};

// max over elements of |got - ref| / tolerance, tolerance per rotated pair (see LayerZeroCheck).
// `got` and `ref` are [heads, head_dim] rows of one layer.
double WorstToleranceRatio(const std::vector<float>& got, const std::vector<float>& ref,
                           const RopeConfig& rope, DType dtype) {
  const double roundoff = UnitRoundoff(dtype);
  const int32_t head_dim = rope.head_dim;
  const int32_t rotary_dim = rope.RotaryDim();
  double worst = 0.0;
  // fp8: a value below the row's scale times the smallest normal rounds to a fixed step.
  const double fp8_floor = dtype == DType::kFp8E4M3   ? 0x1p-9 / 448.0
                           : dtype == DType::kFp8E5M2 ? 0x1p-16 / 57344.0
                                                      : 0.0;
  double row_max = 0.0;
  // A row-max dtype's first rounding (up to u in each value of a pair) is turned by the move, so
  // up to sqrt(2) u lands on one value: 2 + sqrt(2) roundings in all.
  const double roundings = RoundsRelativeToRowMax(dtype) ? 2.0 + std::sqrt(2.0) : 3.0;
  auto check = [&](size_t element, double norm) {
    const double scale = RoundsRelativeToRowMax(dtype) ? row_max : norm;
    const double tolerance =
        (roundings * roundoff + 1e-6) * scale + 3.0 * fp8_floor * 2.0 * row_max + 1e-30;
    worst = std::max(worst, std::abs(double{got[element]} - ref[element]) / tolerance);
  };
  const size_t heads = ref.size() / static_cast<size_t>(head_dim);
  for (size_t head = 0; head < heads; ++head) {
    const size_t base = head * static_cast<size_t>(head_dim);
    row_max = HeadMax(got, ref, base, rope);
    for (int32_t pair = 0; pair < rotary_dim / 2; ++pair) {
      int32_t first_dim, second_dim;
      RopePairDims(rope.layout, rotary_dim, pair, &first_dim, &second_dim);
      const size_t first = base + static_cast<size_t>(first_dim);
      const size_t second = base + static_cast<size_t>(second_dim);
      const double norm = std::hypot(double{ref[first]}, double{ref[second]});
      check(first, norm);
      check(second, norm);
    }
    for (int32_t dim = rotary_dim; dim < head_dim; ++dim) {
      const size_t element = base + static_cast<size_t>(dim);
      check(element, std::abs(double{ref[element]}));
    }
  }
  return worst;
}

absl::Status ValidateCounts(const ShiftStudyOptions& o) {
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
  const int32_t layers = o.weights->config().n_layers;
  if (o.deviation_layer >= layers) {
    return absl::InvalidArgumentError(absl::StrCat("study-shift: deviation layer ",
                                                   o.deviation_layer, " does not exist; the ",
                                                   "model has layers 0 to ", layers - 1));
  }
  if (o.recompute_first > o.chunk_length) {
    return absl::InvalidArgumentError(absl::StrCat("study-shift: recompute-first ",
                                                   o.recompute_first, " exceeds the chunk length ",
                                                   o.chunk_length, "; give at most the chunk"));
  }
  return absl::OkStatus();
}

absl::Status ValidatePositions(const ShiftStudyOptions& o) {
  const int64_t context = o.weights->config().seq_len;
  for (int32_t shift : o.shifts) {
    const int64_t target_position = int64_t{o.chunk_position} + shift;
    if (target_position < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("study-shift: shift ", shift, " puts the chunk at position ",
                       target_position, " < 0; shifts must be >= -chunk position"));
    }
    const int64_t needed = target_position + o.chunk_length + o.continuation_length;
    if (needed > context) {
      return absl::InvalidArgumentError(
          absl::StrCat("study-shift: shift ", shift, " needs ", needed,
                       " positions, past the model's context of ", context,
                       "; use smaller shifts, chunk or continuation"));
    }
  }
  for (int32_t count : o.drift_counts) {
    if (count < 1) return absl::InvalidArgumentError("study-shift: drift counts must be >= 1");
    if (int64_t{o.chunk_position} + int64_t{count} * o.drift_step + o.chunk_length > context) {
      return absl::InvalidArgumentError(absl::StrCat(
          "study-shift: ", count, " drift steps of ", o.drift_step, " pass the model's context of ",
          context, "; lower --drift-step or --drift-counts"));
    }
  }
  return absl::OkStatus();
}

absl::Status Validate(const ShiftStudyOptions& o) {
  if (o.weights == nullptr) return absl::InvalidArgumentError("study-shift: no model weights");
  PAGEDKV_RETURN_IF_ERROR(ValidateCounts(o));
  return ValidatePositions(o);
}

// The K/V texts of one document at one shift.
struct ShiftTexts {
  std::vector<TokenId> donor;   // A ‖ C
  std::vector<TokenId> target;  // B ‖ C ‖ D
};

// One document: its chunk C and its texts at every shift.
struct DocumentTexts {
  std::vector<TokenId> chunk;
  std::vector<ShiftTexts> by_shift;  // [shift index]
};

// Blocks of a runner that holds one sequence of the model's whole context.
int32_t SequenceBlocks(const ShiftStudyOptions& o) {
  return static_cast<int32_t>(NumBlocksFor(o.weights->config().seq_len, o.block_size)) + 1;
}

// One document's texts, sampled on `generator` with seeds derived from the document index.
absl::StatusOr<DocumentTexts> SampleDocumentTexts(const ShiftStudyOptions& o,
                                                  ModelRunner& generator, int32_t document) {
  const uint64_t seed = o.seed * 1000003 + static_cast<uint64_t>(document) * 7919;
  DocumentTexts texts;
  PAGEDKV_ASSIGN_OR_RETURN(texts.chunk,
                           SampleTokens(generator, {kStudyBos}, o.chunk_length, seed + 1));
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<TokenId> donor_prefix,
                           SampleDocument(generator, o.chunk_position, seed + 2));
  for (size_t shift_index = 0; shift_index < o.shifts.size(); ++shift_index) {
    const int32_t target_position = o.chunk_position + o.shifts[shift_index];
    PAGEDKV_ASSIGN_OR_RETURN(std::vector<TokenId> target_prefix,
                             SampleDocument(generator, target_position, seed + 3 + shift_index));
    ShiftTexts shift_texts;
    shift_texts.donor = donor_prefix;
    shift_texts.donor.insert(shift_texts.donor.end(), texts.chunk.begin(), texts.chunk.end());
    shift_texts.target = std::move(target_prefix);
    shift_texts.target.insert(shift_texts.target.end(), texts.chunk.begin(), texts.chunk.end());
    PAGEDKV_ASSIGN_OR_RETURN(std::vector<TokenId> continuation,
                             SampleTokens(generator, shift_texts.target, o.continuation_length,
                                          seed + 101 + shift_index));
    shift_texts.target.insert(shift_texts.target.end(), continuation.begin(), continuation.end());
    texts.by_shift.push_back(std::move(shift_texts));
  }
  return texts;
}

// Every document's texts, sampled once on an fp32 runner so every dtype scores the same tokens.
absl::StatusOr<std::vector<DocumentTexts>> SampleStudyTexts(const ShiftStudyOptions& o) {
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> generator,
                           ModelRunner::Create(o.weights, {.backend = o.backend,
                                                           .num_blocks = SequenceBlocks(o),
                                                           .block_size = o.block_size}));
  std::vector<DocumentTexts> documents;
  for (int32_t document = 0; document < o.num_documents; ++document) {
    PAGEDKV_ASSIGN_OR_RETURN(DocumentTexts texts, SampleDocumentTexts(o, *generator, document));
    documents.push_back(std::move(texts));
  }
  return documents;
}

bool HasVariant(const ShiftStudyOptions& o, ShiftVariant variant) {
  return std::find(o.variants.begin(), o.variants.end(), variant) != o.variants.end();
}

// The prefill options of one study variant (kReRotated is the default re-rotation).
ShiftedReuseOptions VariantOptions(const ShiftStudyOptions& o, ShiftVariant variant) {
  ShiftedReuseOptions options{.register_chunks = false};
  if (variant == ShiftVariant::kNaive) options.rerotate = false;
  if (variant == ShiftVariant::kFirstK) options.recompute_first = o.recompute_first;
  if (variant == ShiftVariant::kFloatKeys) options.from_float_keys = true;
  if (variant == ShiftVariant::kSelective) {
    options.recompute_fraction = o.recompute_fraction;
    options.deviation_layer = o.deviation_layer;
  }
  return options;
}

// The full-recompute reference of one target text, with the tokens its logits score.
struct Reference {
  StudyRun run;
  std::vector<int64_t> chunk_slots;  // slots of C in the reference
  std::vector<TokenId> targets;      // the tokens of D after the first one
};

// The measurements of one dtype, accumulated over documents, then appended to the report.
class DtypeStudy {
 public:
  DtypeStudy(const ShiftStudyOptions& options, DType dtype, StudyRig& rig)
      : o_(options),
        dtype_(dtype),
        rig_(rig),
        config_(options.weights->config()),
        key_errors_(options.shifts.size(),
                    std::vector<ErrorSum>(static_cast<size_t>(config_.n_layers))),
        worst_ratio_(options.shifts.size(), 0.0),
        compose_errors_(options.shifts.size()),
        delta_errors_(options.shifts.size()),
        float_key_errors_(options.shifts.size()),
        drift_compose_(options.drift_counts.size()),
        drift_delta_(options.drift_counts.size()) {}

  // Registers the document's chunk at p0, then measures every shift and the drift.
  absl::Status AddDocument(const DocumentTexts& texts);
  void AppendTo(ShiftStudyReport& report);

 private:
  absl::Status RegisterDonor(const ShiftTexts& texts);
  absl::Status MeasureShift(size_t shift_index, const ShiftTexts& texts);
  absl::StatusOr<Reference> RunReference(const ShiftTexts& texts, int32_t target_position);
  absl::Status MeasureRotationForm(size_t shift_index, ReRotateMode mode, const ShiftTexts& texts,
                                   const Reference& reference);
  absl::Status MeasureKeyErrors(size_t shift_index, ReRotateMode mode,
                                const std::vector<int64_t>& slots, const Reference& reference);
  absl::Status MeasureVariant(size_t shift_index, ShiftVariant variant, const ShiftTexts& texts,
                              const Reference& reference);
  absl::Status MeasureDrift(const std::vector<TokenId>& chunk);
  absl::Status MeasureDriftCount(size_t drift_index, const std::vector<int64_t>& chunk_slots,
                                 const std::vector<TokenId>& chunk);
  absl::Status DriftInPlace(int32_t steps, ReRotateMode mode,
                            const std::vector<int64_t>& chunk_slots,
                            const std::vector<int64_t>& scratch_slots);
  void AppendShiftRows(size_t shift_index, ShiftStudyReport& report);
  void AppendDriftRows(size_t drift_index, ShiftStudyReport& report) const;

  StudyChunk ChunkAt(int32_t position, int32_t logits_from) const {
    return {.chunk_begin = position, .chunk_length = o_.chunk_length, .logits_from = logits_from};
  }

  const ShiftStudyOptions& o_;
  const DType dtype_;
  StudyRig& rig_;
  const ModelConfig& config_;
  std::vector<std::vector<ErrorSum>> key_errors_;        // [shift][layer]
  std::vector<double> worst_ratio_;                      // [shift] layer-0 check
  std::vector<ErrorSum> compose_errors_, delta_errors_;  // [shift] single-shift forms
  std::vector<ErrorSum> float_key_errors_;               // [shift] the floatkeys variant's
  std::map<std::pair<size_t, ShiftVariant>, NextTokenMetrics> metrics_;
  std::map<std::pair<size_t, ShiftVariant>, double> compute_saved_;
  std::vector<ErrorSum> drift_compose_, drift_delta_;  // [drift count]
};

absl::Status DtypeStudy::AddDocument(const DocumentTexts& texts) {
  PAGEDKV_RETURN_IF_ERROR(RegisterDonor(texts.by_shift[0]));
  for (size_t shift_index = 0; shift_index < o_.shifts.size(); ++shift_index) {
    PAGEDKV_RETURN_IF_ERROR(MeasureShift(shift_index, texts.by_shift[shift_index]));
  }
  return MeasureDrift(texts.chunk);
}

// The donor computes C at p0 and registers it; its own blocks are then released.
absl::Status DtypeStudy::RegisterDonor(const ShiftTexts& texts) {
  PAGEDKV_ASSIGN_OR_RETURN(StudyRun donor,
                           rig_.Run(texts.donor, ChunkAt(o_.chunk_position, -1), {}));
  PAGEDKV_RETURN_IF_ERROR(rig_.Free(donor.table));
  // Registered now, or (the same chunk sampled for an earlier document) already at p0.
  if (!donor.result.chunks[0].registered && !donor.result.chunks[0].hit) {
    return absl::InternalError("study-shift: the chunk could not be registered");
  }
  return absl::OkStatus();
}

absl::StatusOr<Reference> DtypeStudy::RunReference(const ShiftTexts& texts,
                                                   int32_t target_position) {
  const int32_t logits_from = target_position + o_.chunk_length;
  Reference reference;
  PAGEDKV_ASSIGN_OR_RETURN(reference.run,
                           rig_.Run(texts.target, ChunkAt(target_position, logits_from),
                                    {.enable_reuse = false, .register_chunks = false}));
  reference.chunk_slots = rig_.Slots(reference.run.table, target_position, o_.chunk_length);
  reference.targets.assign(texts.target.begin() + logits_from + 1, texts.target.end());
  return reference;
}

absl::Status DtypeStudy::MeasureShift(size_t shift_index, const ShiftTexts& texts) {
  const int32_t target_position = o_.chunk_position + o_.shifts[shift_index];
  PAGEDKV_ASSIGN_OR_RETURN(Reference reference, RunReference(texts, target_position));
  for (ReRotateMode mode : {ReRotateMode::kCompose, ReRotateMode::kDelta}) {
    PAGEDKV_RETURN_IF_ERROR(MeasureRotationForm(shift_index, mode, texts, reference));
  }
  for (ShiftVariant variant : o_.variants) {
    if (variant == ShiftVariant::kReRotated) continue;  // measured with the compose form
    PAGEDKV_RETURN_IF_ERROR(MeasureVariant(shift_index, variant, texts, reference));
  }
  return rig_.Free(reference.run.table);
}

// A re-rotated reuse in one rotation form: key errors per layer and, for the compose form, the
// re-rotated variant's quality.
absl::Status DtypeStudy::MeasureRotationForm(size_t shift_index, ReRotateMode mode,
                                             const ShiftTexts& texts, const Reference& reference) {
  const int32_t target_position = o_.chunk_position + o_.shifts[shift_index];
  const int32_t logits_from = target_position + o_.chunk_length;
  PAGEDKV_ASSIGN_OR_RETURN(StudyRun run,
                           rig_.Run(texts.target, ChunkAt(target_position, logits_from),
                                    {.rotation = mode, .register_chunks = false}));
  if (!run.result.chunks[0].hit) {
    return absl::InternalError("study-shift: the registered chunk was not found");
  }
  PAGEDKV_RETURN_IF_ERROR(MeasureKeyErrors(
      shift_index, mode, rig_.Slots(run.table, target_position, o_.chunk_length), reference));
  if (mode == ReRotateMode::kCompose && HasVariant(o_, ShiftVariant::kReRotated)) {
    const auto key = std::make_pair(shift_index, ShiftVariant::kReRotated);
    PAGEDKV_RETURN_IF_ERROR(metrics_[key].Add(reference.run.result.logits, run.result.logits,
                                              config_.vocab_size, reference.targets));
    compute_saved_[key] += 1.0 - run.result.compute_fraction;
  }
  return rig_.Free(run.table);
}

// Keys of C against the reference's: every layer for the compose form, layer 0 for delta.
absl::Status DtypeStudy::MeasureKeyErrors(size_t shift_index, ReRotateMode mode,
                                          const std::vector<int64_t>& slots,
                                          const Reference& reference) {
  ModelRunner& runner = rig_.runner();
  const int32_t layers = mode == ReRotateMode::kDelta ? 1 : config_.n_layers;
  for (int32_t layer = 0; layer < layers; ++layer) {
    std::vector<float> keys, values, ref_keys, ref_values;
    PAGEDKV_RETURN_IF_ERROR(runner.ReadKv(layer, slots, &keys, &values));
    PAGEDKV_RETURN_IF_ERROR(runner.ReadKv(layer, reference.chunk_slots, &ref_keys, &ref_values));
    if (mode == ReRotateMode::kDelta) {
      delta_errors_[shift_index].Add(keys, ref_keys);
      continue;
    }
    key_errors_[shift_index][static_cast<size_t>(layer)].Add(keys, ref_keys);
    if (layer > 0) continue;
    compose_errors_[shift_index].Add(keys, ref_keys);
    const RopeConfig no_rotation{.head_dim = config_.head_dim(), .rotary_dim = 0};
    worst_ratio_[shift_index] =
        std::max({worst_ratio_[shift_index],
                  WorstToleranceRatio(keys, ref_keys, runner.rope_config(), dtype_),
                  WorstToleranceRatio(values, ref_values, no_rotation, dtype_)});
  }
  return absl::OkStatus();
}

absl::Status DtypeStudy::MeasureVariant(size_t shift_index, ShiftVariant variant,
                                        const ShiftTexts& texts, const Reference& reference) {
  const int32_t target_position = o_.chunk_position + o_.shifts[shift_index];
  const int32_t logits_from = target_position + o_.chunk_length;
  PAGEDKV_ASSIGN_OR_RETURN(
      StudyRun run,
      rig_.Run(texts.target, ChunkAt(target_position, logits_from), VariantOptions(o_, variant)));
  const auto key = std::make_pair(shift_index, variant);
  PAGEDKV_RETURN_IF_ERROR(metrics_[key].Add(reference.run.result.logits, run.result.logits,
                                            config_.vocab_size, reference.targets));
  compute_saved_[key] += 1.0 - run.result.compute_fraction;
  if (variant == ShiftVariant::kFloatKeys) {  // layer-0 keys moved from the float keys
    std::vector<float> keys, values, ref_keys, ref_values;
    const std::vector<int64_t> slots = rig_.Slots(run.table, target_position, o_.chunk_length);
    PAGEDKV_RETURN_IF_ERROR(rig_.runner().ReadKv(0, slots, &keys, &values));
    PAGEDKV_RETURN_IF_ERROR(rig_.runner().ReadKv(0, reference.chunk_slots, &ref_keys, &ref_values));
    float_key_errors_[shift_index].Add(keys, ref_keys);
  }
  return rig_.Free(run.table);
}

// Drift: n successive shifts of drift_step applied in place to a copy of C's layer-0 K.
absl::Status DtypeStudy::MeasureDrift(const std::vector<TokenId>& chunk) {
  const BlockHash key = rig_.prefill().KeyOf(chunk, "", 0);
  std::optional<ChunkLocation> location = rig_.index().Find(key, chunk);
  if (!location) return absl::InternalError("study-shift: the chunk left the cache");
  PAGEDKV_RETURN_IF_ERROR(rig_.index().Acquire(*location));
  std::vector<int64_t> chunk_slots;
  for (int32_t i = 0; i < o_.chunk_length; ++i) {
    chunk_slots.push_back(location->SlotOf(i, o_.block_size));
  }
  for (size_t drift_index = 0; drift_index < o_.drift_counts.size(); ++drift_index) {
    PAGEDKV_RETURN_IF_ERROR(MeasureDriftCount(drift_index, chunk_slots, chunk));
  }
  return rig_.index().Release(*location);
}

absl::Status DtypeStudy::MeasureDriftCount(size_t drift_index,
                                           const std::vector<int64_t>& chunk_slots,
                                           const std::vector<TokenId>& chunk) {
  const int32_t steps = o_.drift_counts[drift_index];
  const int32_t final_position = o_.chunk_position + steps * o_.drift_step;
  std::vector<TokenId> fresh_tokens(static_cast<size_t>(final_position), kStudyBos);
  fresh_tokens.insert(fresh_tokens.end(), chunk.begin(), chunk.end());
  PAGEDKV_ASSIGN_OR_RETURN(StudyRun fresh,
                           rig_.Run(fresh_tokens, ChunkAt(final_position, -1),
                                    {.enable_reuse = false, .register_chunks = false}));
  std::vector<float> ref_keys, ref_values;
  PAGEDKV_RETURN_IF_ERROR(rig_.runner().ReadKv(
      0, rig_.Slots(fresh.table, final_position, o_.chunk_length), &ref_keys, &ref_values));
  for (ReRotateMode mode : {ReRotateMode::kCompose, ReRotateMode::kDelta}) {
    std::vector<BlockId> scratch;
    PAGEDKV_RETURN_IF_ERROR(rig_.pool().Allocate(
        static_cast<int32_t>(NumBlocksFor(o_.chunk_length, o_.block_size)), &scratch));
    const std::vector<int64_t> scratch_slots = rig_.Slots(scratch, 0, o_.chunk_length);
    PAGEDKV_RETURN_IF_ERROR(DriftInPlace(steps, mode, chunk_slots, scratch_slots));
    std::vector<float> keys, values;
    PAGEDKV_RETURN_IF_ERROR(rig_.runner().ReadKv(0, scratch_slots, &keys, &values));
    (mode == ReRotateMode::kCompose ? drift_compose_ : drift_delta_)[drift_index].Add(keys,
                                                                                      ref_keys);
    PAGEDKV_RETURN_IF_ERROR(rig_.Free(scratch));
  }
  return rig_.Free(fresh.table);
}

// Re-rotates C's layer 0 from `chunk_slots` into `scratch_slots`, then `steps` - 1 more times in
// place, each by drift_step positions.
absl::Status DtypeStudy::DriftInPlace(int32_t steps, ReRotateMode mode,
                                      const std::vector<int64_t>& chunk_slots,
                                      const std::vector<int64_t>& scratch_slots) {
  const auto length = static_cast<size_t>(o_.chunk_length);
  std::vector<int32_t> old_positions(length), new_positions(length);
  for (int32_t step = 0; step < steps; ++step) {
    for (size_t i = 0; i < length; ++i) {
      old_positions[i] = o_.chunk_position + step * o_.drift_step + static_cast<int32_t>(i);
      new_positions[i] = old_positions[i] + o_.drift_step;
    }
    PAGEDKV_RETURN_IF_ERROR(
        ReRotateSlots(rig_.runner(), {.src = step == 0 ? chunk_slots : scratch_slots,
                                      .dst = scratch_slots,
                                      .old_positions = old_positions,
                                      .new_positions = new_positions,
                                      .mode = mode,
                                      .first_layer = 0,
                                      .num_layers = 1}));
  }
  return absl::OkStatus();
}

void DtypeStudy::AppendTo(ShiftStudyReport& report) {
  for (size_t shift_index = 0; shift_index < o_.shifts.size(); ++shift_index) {
    AppendShiftRows(shift_index, report);
  }
  for (size_t drift_index = 0; drift_index < o_.drift_counts.size(); ++drift_index) {
    AppendDriftRows(drift_index, report);
  }
}

void DtypeStudy::AppendShiftRows(size_t shift_index, ShiftStudyReport& report) {
  const int32_t shift = o_.shifts[shift_index];
  for (int32_t layer = 0; layer < config_.n_layers; ++layer) {
    const ErrorSum& error = key_errors_[shift_index][static_cast<size_t>(layer)];
    report.key_errors.push_back({.dtype = dtype_,
                                 .shift = shift,
                                 .layer = layer,
                                 .max_abs_error = error.max_abs,
                                 .rel_rms_error = error.RelRms()});
  }
  const double worst = worst_ratio_[shift_index];
  report.layer_zero_checks.push_back({.dtype = dtype_,
                                      .shift = shift,
                                      .worst_ratio = worst,
                                      .pass = worst <= 1.0 || IsQuantizedDType(dtype_)});
  for (const auto& [form, error] : {std::pair{"compose", &compose_errors_[shift_index]},
                                    std::pair{"delta", &delta_errors_[shift_index]},
                                    std::pair{"floatkeys", &float_key_errors_[shift_index]}}) {
    if (error == &float_key_errors_[shift_index] && !HasVariant(o_, ShiftVariant::kFloatKeys)) {
      continue;
    }
    report.rotations.push_back({.dtype = dtype_,
                                .form = form,
                                .shift_per_step = shift,
                                .steps = 1,
                                .max_abs_error = error->max_abs,
                                .rel_rms_error = error->RelRms()});
  }
  for (ShiftVariant variant : o_.variants) {
    const auto key = std::make_pair(shift_index, variant);
    const NextTokenMetrics& metrics = metrics_[key];
    report.quality.push_back({.dtype = dtype_,
                              .shift = shift,
                              .variant = ShiftVariantName(variant),
                              .mean_kl = metrics.MeanKl(),
                              .top1_agreement = metrics.Top1Agreement(),
                              .perplexity = metrics.ApproxPerplexity(),
                              .full_perplexity = metrics.ExactPerplexity(),
                              .compute_saved = compute_saved_[key] / o_.num_documents,
                              .rows = metrics.rows()});
  }
}

void DtypeStudy::AppendDriftRows(size_t drift_index, ShiftStudyReport& report) const {
  for (const auto& [form, error] : {std::pair{"compose", &drift_compose_[drift_index]},
                                    std::pair{"delta", &drift_delta_[drift_index]}}) {
    report.rotations.push_back({.dtype = dtype_,
                                .form = form,
                                .drift = true,
                                .shift_per_step = o_.drift_step,
                                .steps = o_.drift_counts[drift_index],
                                .max_abs_error = error->max_abs,
                                .rel_rms_error = error->RelRms()});
  }
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
    case ShiftVariant::kFloatKeys:
      return "rerotated+floatkeys";
  }
  return "invalid";
}

absl::StatusOr<ShiftVariant> ParseShiftVariant(std::string_view name) {
  if (name == "rerotated") return ShiftVariant::kReRotated;
  if (name == "naive") return ShiftVariant::kNaive;
  if (name == "firstk" || name == "rerotated+firstk") return ShiftVariant::kFirstK;
  if (name == "selective" || name == "rerotated+selective") return ShiftVariant::kSelective;
  if (name == "floatkeys" || name == "rerotated+floatkeys") return ShiftVariant::kFloatKeys;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown variant '", std::string(name),
                   "': use rerotated, naive, firstk, selective or floatkeys"));
}

bool ShiftStudyReport::AllLayerZeroChecksPass() const {
  return std::all_of(layer_zero_checks.begin(), layer_zero_checks.end(),
                     [](const LayerZeroCheck& c) { return c.pass; });
}

absl::StatusOr<ShiftStudyReport> RunShiftStudy(const ShiftStudyOptions& options) {
  PAGEDKV_RETURN_IF_ERROR(Validate(options));
  ShiftStudyReport report;
  report.model = options.weights->config().ToString();
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<DocumentTexts> documents, SampleStudyTexts(options));
  const int32_t num_blocks =
      8 * SequenceBlocks(options) +
      2 * static_cast<int32_t>(NumBlocksFor(options.chunk_length, options.block_size)) + 8;
  for (DType dtype : options.dtypes) {
    PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<StudyRig> rig,
                             StudyRig::Create(options.weights, {.backend = options.backend,
                                                                .block_size = options.block_size,
                                                                .kv_dtype = dtype,
                                                                .num_blocks = num_blocks}));
    DtypeStudy study(options, dtype, *rig);
    for (const DocumentTexts& texts : documents) {
      PAGEDKV_RETURN_IF_ERROR(study.AddDocument(texts));
    }
    study.AppendTo(report);
  }
  return report;
}

}  // namespace pagedkv
