// Copyright 2026 The pagedkv Authors.
//
// QuantLinear: validation, then output columns split over the pool: in groups of 4 (the block
// kernel's tile width) below kQuantPanelMinRows rows of x, in packed panels from there on.
#include "kernels/cpu/quant_linear.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/int8_linear.h"
#include "kernels/cpu/simd/simd_kernels.h"
#include "kernels/cpu/thread_scratch.h"
#include "kernels/cpu/threaded_ops.h"
#include "kernels/op_validate.h"
#include "pagedkv/kernels/int8_activations.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cpu {

namespace {

struct PanelScratchTag {};

// This thread's panel scratch, at least `floats` long and 64-byte aligned; null when it cannot be
// allocated. Kept between calls (a model's largest k times the panel width: well under 1 MB).
float* PanelScratch(int64_t floats) {
  return reinterpret_cast<float*>(
      ThreadScratch<PanelScratchTag>(static_cast<size_t>(floats) * sizeof(float)));
}

// Output columns in panels of the packed width, each decoded once per call and run against every
// row of x. A range whose scratch cannot be allocated runs the block kernel instead (the same
// values up to rounding, not the same bits).
void PanelLinear(const QuantLinearArgs& args, ThreadPool* pool) {
  const int64_t width = simd::PackedPanelWidth();
  const int64_t panels = (args.n + width - 1) / width;
  ParallelFor(pool, panels, 1, [&](int64_t begin, int64_t end) {
    float* scratch = PanelScratch(width * args.k);
    if (scratch != nullptr) {
      simd::QuantLinearPanels(args, begin, end, scratch);
    } else {
      simd::QuantLinearColumns(args, begin * width, std::min(args.n, end * width));
    }
  });
}

}  // namespace

absl::Status QuantLinear(const QuantLinearArgs& args, ThreadPool* pool,
                         const Int8Tiles* int8_tiles) {
  PAGEDKV_RETURN_IF_ERROR(ValidateQuantLinear(args));
  if (int8_tiles != nullptr &&
      (int8_tiles->source() != args.w || int8_tiles->type() != args.w_type ||
       int8_tiles->n() != args.n || int8_tiles->k() != args.k)) {
    return absl::InvalidArgumentError(
        "QuantLinear: int8_tiles were not built from args.w (its pointer, type, n and k)");
  }
  if (args.m == 0) return absl::OkStatus();
  if (args.activations == ActivationType::kInt8 &&
      Int8QuantLinearRuns(args.w_type, int8_tiles != nullptr)) {
    return Int8QuantLinear(args, pool, int8_tiles);
  }
  // The panel decode addresses a panel's rows by 32-bit byte offsets.
  const bool offsets_fit = simd::PackedPanelWidth() * WeightRowBytes(args.w_type, args.k) <=
                           std::numeric_limits<int32_t>::max();
  if (args.m >= kQuantPanelMinRows && offsets_fit) {
    PanelLinear(args, pool);
    return absl::OkStatus();
  }
  constexpr int64_t kGroup = 4;
  const int64_t groups = (args.n + kGroup - 1) / kGroup;
  const double work_per_group =
      static_cast<double>(kGroup) * static_cast<double>(args.m) * static_cast<double>(args.k);
  ParallelFor(pool, groups, MinItemsPerRange(work_per_group), [&](int64_t begin, int64_t end) {
    simd::QuantLinearColumns(args, begin * kGroup, std::min(args.n, end * kGroup));
  });
  return absl::OkStatus();
}

absl::Status QuantEmbeddingGather(const QuantEmbeddingGatherArgs& a, const Int8Tiles* tiles) {
  const int type = static_cast<int>(a.table_type);
  const bool block_type = a.table_type != WeightType::kF32 && type >= 0 && type < kWeightTypeCount;
  if (a.table == nullptr || a.token_ids == nullptr || a.out == nullptr || a.num_tokens < 0 ||
      a.vocab_size <= 0 || a.dim <= 0 || !block_type ||
      a.dim % QuantBlockValuesOf(a.table_type) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "QuantEmbeddingGather: needs table, token_ids and out, num_tokens >= 0, vocab_size > 0, "
        "a quantized or half table_type (got ",
        type, ") and dim a positive multiple of its block size (dim = ", a.dim, ")"));
  }
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    if (a.token_ids[t] < 0 || a.token_ids[t] >= a.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("QuantEmbeddingGather: token id ",
                                                     a.token_ids[t], " at ", t, " is outside [0, ",
                                                     a.vocab_size, ")"));
    }
  }
  if (tiles != nullptr && (tiles->source() != a.table || tiles->type() != a.table_type ||
                           tiles->n() != a.vocab_size || tiles->k() != a.dim)) {
    return absl::InvalidArgumentError(
        "QuantEmbeddingGather: tiles were not built from args.table (its pointer, type, "
        "vocab_size and dim)");
  }
  if (tiles != nullptr && !tiles->holds_rows()) tiles = nullptr;
  std::vector<unsigned char> copied(
      tiles != nullptr ? static_cast<size_t>(WeightRowBytes(a.table_type, a.dim)) : 0);
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const unsigned char* row = QuantRow(a.table, a.table_type, a.dim, a.token_ids[t]);
    if (tiles != nullptr) {
      tiles->CopyRow(a.token_ids[t], copied.data());
      row = copied.data();
    }
    float* out = a.out + t * a.dim;
    for (int64_t i = 0; i < a.dim; ++i) out[i] = QuantValue(a.table_type, row, i);
  }
  return absl::OkStatus();
}

}  // namespace pagedkv::cpu
