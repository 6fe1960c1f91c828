// Copyright 2026 The pagedkv Authors.
//
// The shifted-reuse study behind `pagedkv study-shift`: how exact re-rotation is, and what reusing
// a chunk at another position costs in model quality, on a real model.
//
// Texts are sampled from the model itself (temperature 1, seeded), so they are in-distribution
// for any checkpoint, including the built-in random one. For each document:
//   donor  = A (p0 tokens, BOS first) ‖ C (chunk_length tokens)   -> C registered at p0
//   target = B (p1 = p0 + shift tokens) ‖ C ‖ D (continuation sampled from the model given B ‖ C)
// The target is prefilled once fully (the reference) and once per variant, reusing C from the
// donor. Reports:
//   1. key error of re-rotated against fresh K at every layer (layer 0 must agree to the storage
//      dtype's rounding: a must-pass check, since layer-0 keys depend only on token and position;
//      deeper layers also differ because C's context changed from A to B);
//   2. R(p1) R(p0)^T against R(p1 - p0) at layer 0, and the drift of n successive shifts;
//   3. next-token quality on D against the full recompute: KL, top-1 agreement, perplexity, and
//      the fraction of prefill compute saved, per variant.
//
// Example:
//   pagedkv::ShiftStudyOptions options;
//   options.weights = weights;  // std::shared_ptr<const ModelWeights>
//   PAGEDKV_ASSIGN_OR_RETURN(pagedkv::ShiftStudyReport report, pagedkv::RunShiftStudy(options));
//   bool ok = report.AllLayerZeroChecksPass();
#ifndef PAGEDKV_ENGINE_TOOLS_STUDY_SHIFT_STUDY_H_
#define PAGEDKV_ENGINE_TOOLS_STUDY_SHIFT_STUDY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "pagedkv/dtype.h"
#include "pagedkv/export.h"
#include "pagedkv/model/backend_kind.h"
#include "pagedkv/model/model_weights.h"

namespace pagedkv {

enum class ShiftVariant {
  kReRotated,  // re-rotate every chunk token
  kNaive,      // copy keys without re-rotation (baseline)
  kFirstK,     // re-rotate, recompute the first k tokens (EPIC)
  kSelective,  // re-rotate, recompute the tokens with the largest K/V deviation (CacheBlend)
  // re-rotate from the float keys kept when the chunk was registered (one rounding of a quantized
  // or 16-bit key instead of two; ChunkReuseOptions::float_keys_memory in the engine)
  kFloatKeys,
};

// "rerotated", "naive", "rerotated+firstk", "rerotated+selective", "rerotated+floatkeys".
PAGEDKV_EXPORT const char* ShiftVariantName(ShiftVariant variant);
// Accepts the names above and "firstk", "selective", "floatkeys".
PAGEDKV_EXPORT absl::StatusOr<ShiftVariant> ParseShiftVariant(std::string_view name);

struct PAGEDKV_EXPORT ShiftStudyOptions {
  std::shared_ptr<const ModelWeights> weights;  // the model; required
  BackendKind backend = BackendKind::kCpu;      // where to compute
  int32_t block_size = 16;                      // tokens per KV block
  int32_t chunk_length = 32;                    // tokens of the reused chunk C
  int32_t chunk_position = 16;                  // p0: position C is computed at in the donor
  std::vector<int32_t> shifts = {-11, 0, 1, 5, 16, 37, 48};  // p1 = p0 + shift (p1 >= 0)
  int32_t continuation_length = 24;                          // tokens of D scored (>= 2)
  std::vector<DType> dtypes = {DType::kF32, DType::kBF16, DType::kF16};  // KV storage types
  std::vector<ShiftVariant> variants = {ShiftVariant::kReRotated, ShiftVariant::kNaive,
                                        ShiftVariant::kFirstK, ShiftVariant::kSelective};
  int32_t recompute_first = 4;       // k of the first-k variant
  double recompute_fraction = 0.15;  // fraction of the selective variant
  int32_t deviation_layer = 1;       // layer whose deviation ranks tokens (selective)
  int32_t drift_step = 3;            // shift of each step in the drift measurement
  std::vector<int32_t> drift_counts = {1, 2, 4, 8, 16, 24};  // numbers of successive shifts
  int32_t num_documents = 4;  // documents (independent samples) averaged over
  uint64_t seed = 1;          // sampling seed of the texts
};

// Report 1: re-rotated vs fresh keys of C, per layer.
struct PAGEDKV_EXPORT KeyErrorRow {
  DType dtype = DType::kF32;
  int32_t shift = 0;
  int32_t layer = 0;
  double max_abs_error = 0.0;  // max |k_reused - k_fresh|
  double rel_rms_error = 0.0;  // ||k_reused - k_fresh|| / ||k_fresh||
};

// The must-pass check: layer-0 K and V of C after re-rotation equal fresh ones within the
// dtype's rounding, per rotated pair: |diff| <= (3u + 1e-6) |pair| (u = unit roundoff: two
// roundings for the re-rotated key, one for the fresh one, fp32 trigonometry).
struct PAGEDKV_EXPORT LayerZeroCheck {
  DType dtype = DType::kF32;
  int32_t shift = 0;
  double worst_ratio = 0.0;  // max over elements of |diff| / tolerance (<= 1 passes)
  // worst_ratio <= 1; always true for a quantized dtype, whose ratio is reported only (its
  // bound is a model of the rounding, docs/study_shift.md#quantized-kv).
  bool pass = true;
};

// Report 2: rotation forms and drift, layer-0 keys against fresh ones at the final position.
struct PAGEDKV_EXPORT RotationRow {
  DType dtype = DType::kF32;
  // "compose" (R(p1) R(p0)^T), "delta" (R(p1 - p0)), or "floatkeys" (compose from the float keys
  // kept at registration: the floatkeys variant's keys)
  std::string form;
  bool drift = false;          // true: n successive shifts in place; false: one shift of a run
  int32_t shift_per_step = 0;  // shift of each step
  int32_t steps = 1;           // successive shifts applied (1: a single shift)
  double max_abs_error = 0.0;
  double rel_rms_error = 0.0;
};

// Report 3: next-token quality on D against the full recompute.
struct PAGEDKV_EXPORT QualityRow {
  DType dtype = DType::kF32;
  int32_t shift = 0;
  std::string variant;           // ShiftVariantName
  double mean_kl = 0.0;          // KL(full || variant), nats per token
  double top1_agreement = 0.0;   // fraction of rows with the same argmax
  double perplexity = 0.0;       // of D under the variant
  double full_perplexity = 0.0;  // of D under the full recompute
  double compute_saved = 0.0;    // 1 - (layer-token work / a full prefill's), mean over documents
  int64_t rows = 0;              // scored rows
};

struct PAGEDKV_EXPORT ShiftStudyReport {
  std::string model;  // one-line description of the model
  std::vector<KeyErrorRow> key_errors;
  std::vector<LayerZeroCheck> layer_zero_checks;
  std::vector<RotationRow> rotations;
  std::vector<QualityRow> quality;

  bool AllLayerZeroChecksPass() const;
};

// Runs the study. InvalidArgument for bad options (no weights, an empty chunk, p1 < 0, positions
// past the model's context, fractions outside [0, 1]); model errors are passed through.
PAGEDKV_EXPORT absl::StatusOr<ShiftStudyReport> RunShiftStudy(const ShiftStudyOptions& options);

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_TOOLS_STUDY_SHIFT_STUDY_H_
