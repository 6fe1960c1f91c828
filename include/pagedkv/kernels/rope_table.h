// Copyright 2026 The pagedkv Authors.
//
// The fp32 cos/sin table of a RopeConfig and a plain view of it that kernels take by value.
// Table entries hold the UNSCALED cos/sin (YaRN's attention factor is kept apart in
// `attention_factor`), so the KV write applies the factor once and re-rotation, which only turns
// already-scaled keys, never applies it again. Positions at or beyond num_positions (and negative
// ones, for deltas) are computed directly with the same float64 formula, giving the same values a
// larger table would hold.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(pagedkv::RopeTable table,
//                            pagedkv::RopeTable::Create(config, /*num_positions=*/4096));
//   pagedkv::RopeTableView view = table.View();   // host pointers, for pagedkv::cpu ops
//   float c, s;
//   view.CosSin(/*position=*/10, /*pair=*/0, &c, &s);
#ifndef PAGEDKV_KERNELS_ROPE_TABLE_H_
#define PAGEDKV_KERNELS_ROPE_TABLE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "pagedkv/export.h"
#include "pagedkv/hd.h"
#include "pagedkv/kernels/rope_math.h"
#include "pagedkv/rope_config.h"

namespace pagedkv {

// Non-owning view (host or device pointers) of a RopeTable.
struct PAGEDKV_EXPORT RopeTableView {
  const float* cos_sin = nullptr;    // [num_positions, rotary_dim / 2, 2] (cos, sin), unscaled
  const double* inv_freq = nullptr;  // [rotary_dim / 2]
  int64_t num_positions = 0;         // positions held by cos_sin
  int32_t head_dim = 0;              // head size the table is for
  int32_t rotary_dim = 0;            // rotated dims (even, <= head_dim)
  RopeLayout layout = RopeLayout::kHalfSplit;  // pair layout
  float attention_factor = 1.0f;  // multiplies rotated q and k (YaRN mscale), 1 otherwise

  PAGEDKV_HD int32_t NumPairs() const { return rotary_dim / 2; }

  // cos/sin of `position` for pair `pair`; from the table when 0 <= position < num_positions,
  // computed directly otherwise (negative positions rotate backwards).
  PAGEDKV_HD void CosSin(int64_t position, int32_t pair, float* c, float* s) const {
    if (position >= 0 && position < num_positions) {
      const float* entry = cos_sin + (position * NumPairs() + pair) * 2;
      *c = entry[0];
      *s = entry[1];
      return;
    }
    if (position < 0 && -position < num_positions) {
      const float* entry = cos_sin + (-position * NumPairs() + pair) * 2;
      *c = entry[0];
      *s = -entry[1];
      return;
    }
    RopeCosSin(position, inv_freq[pair], c, s);
  }
};

// How ReRotate turns a key cached at old_pos into one at new_pos.
enum class ReRotateMode : int32_t {
  kCompose = 0,  // R(new) R(old)^T from the table entries of new and old (matches the KV write)
  kDelta = 1,    // R(new - old) from the table entry of the difference
};

// cos/sin of pair `pair` that turn a key cached at `old_position` into one at `new_position`:
// kCompose combines the table entries of both positions, kDelta uses the entry of the difference.
// No attention factor: the cached key already carries it.
PAGEDKV_HD void ReRotateCosSin(const RopeTableView& rope, ReRotateMode mode, int64_t old_position,
                               int64_t new_position, int32_t pair, float* c, float* s) {
  if (mode == ReRotateMode::kDelta) {
    rope.CosSin(new_position - old_position, pair, c, s);
    return;
  }
  float c_new, s_new, c_old, s_old;
  rope.CosSin(new_position, pair, &c_new, &s_new);
  rope.CosSin(old_position, pair, &c_old, &s_old);
  RopeComposeDelta(c_new, s_new, c_old, s_old, c, s);
}

// Rotates pair `pair` of one head `x` (head_dim contiguous floats) to `position`, multiplying it
// by rope.attention_factor. The unit of work of the CUDA kernels; RopeRotateHead loops over it.
PAGEDKV_HD void RopeRotatePair(const RopeTableView& rope, int64_t position, int32_t pair,
                               float* x) {
  float c, s;
  rope.CosSin(position, pair, &c, &s);
  int32_t a, b;
  RopePairDims(rope.layout, rope.rotary_dim, pair, &a, &b);
  RotatePair(&x[a], &x[b], c * rope.attention_factor, s * rope.attention_factor);
}

// Rotates one head `x` (head_dim contiguous floats) to `position`, multiplying the rotated dims by
// rope.attention_factor (dims >= rotary_dim pass through unchanged, as in Hugging Face).
PAGEDKV_HD void RopeRotateHead(const RopeTableView& rope, int64_t position, float* x) {
  for (int32_t i = 0; i < rope.NumPairs(); ++i) RopeRotatePair(rope, position, i, x);
}

// Host-owned cos/sin table and inverse frequencies of one RopeConfig. Movable, not copyable.
class PAGEDKV_EXPORT RopeTable {
 public:
  // Builds the table for positions [0, num_positions). InvalidArgument when config.Validate()
  // fails or num_positions < 1.
  static absl::StatusOr<RopeTable> Create(const RopeConfig& config, int64_t num_positions);

  RopeTable(RopeTable&&) = default;
  RopeTable& operator=(RopeTable&&) = default;
  RopeTable(const RopeTable&) = delete;
  RopeTable& operator=(const RopeTable&) = delete;

  // View over this object's host memory; valid while it lives and is not moved from.
  RopeTableView View() const;

  const RopeConfig& config() const { return config_; }
  const std::vector<float>& cos_sin() const { return cos_sin_; }     // [positions, pairs, 2]
  const std::vector<double>& inv_freq() const { return inv_freq_; }  // [pairs]
  int64_t num_positions() const { return num_positions_; }
  float attention_factor() const { return attention_factor_; }

 private:
  RopeTable() = default;

  RopeConfig config_;
  std::vector<float> cos_sin_;
  std::vector<double> inv_freq_;
  int64_t num_positions_ = 0;
  float attention_factor_ = 1.0f;
};

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_ROPE_TABLE_H_
