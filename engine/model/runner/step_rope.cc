// Copyright 2026 The pagedkv Authors.
#include "engine/model/runner/step_rope.h"

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "pagedkv/kernels/rope_math.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

// Bytes of the cos/sin table of position 0 ([pairs, 2] floats), padded to a double.
size_t TableBytes(int32_t num_pairs) {
  return (static_cast<size_t>(num_pairs) * 2 * sizeof(float) + 7) / 8 * 8;
}

// Bytes of one view in StepRope's buffer: that table, then inv_freq [pairs] doubles.
size_t ViewBytes(int32_t num_pairs) {
  return TableBytes(num_pairs) + static_cast<size_t>(num_pairs) * sizeof(double);
}

}  // namespace

bool RopeDependsOnStepLength(const RopeConfig& config) {
  return config.scaling == RopeScaling::kDynamicNtk && config.dynamic_seq_len == 0;
}

RopeConfig RopeForLength(const RopeConfig& config, int64_t length) {
  RopeConfig at = config;
  at.dynamic_seq_len = length;
  return at;
}

absl::Status StepRope::Prepare(Backend& backend, const RopeConfig& config,
                               const RopeTableView& default_view,
                               absl::Span<const int32_t> kv_lens) {
  default_ = default_view;
  entry_of_seq_.clear();
  views_.clear();
  host_.clear();
  if (!RopeDependsOnStepLength(config)) return absl::OkStatus();
  const int32_t pairs = default_view.NumPairs();
  const size_t bytes = ViewBytes(pairs);
  std::vector<int64_t> lengths;  // of views_, in order
  std::vector<int32_t> entry(kv_lens.size(), -1);
  for (size_t s = 0; s < kv_lens.size(); ++s) {
    const int64_t length = kv_lens[s];
    if (length <= config.max_position_embeddings) continue;  // the base is unchanged there
    size_t e = 0;
    while (e < lengths.size() && lengths[e] != length) ++e;
    entry[s] = static_cast<int32_t>(e);
    if (e < lengths.size()) continue;
    lengths.push_back(length);
    const RopeConfig at = RopeForLength(config, length);
    const size_t offset = host_.size();
    host_.resize(offset + bytes, 0);
    const float no_turn[2] = {1.0f, 0.0f};  // position 0: cos 1, sin 0 for every pair
    for (int32_t i = 0; i < pairs; ++i) {
      std::memcpy(host_.data() + offset + i * sizeof(no_turn), no_turn, sizeof(no_turn));
      const double inv = RopeInvFreq(at, i);
      std::memcpy(host_.data() + offset + TableBytes(pairs) + i * sizeof(double), &inv,
                  sizeof(double));
    }
  }
  if (lengths.empty()) return absl::OkStatus();
  const char* base = host_.data();
  if (!backend.host_memory()) {
    if (device_.bytes() < host_.size()) {
      PAGEDKV_ASSIGN_OR_RETURN(device_, DeviceBuffer::Create(backend, 2 * host_.size()));
    }
    PAGEDKV_RETURN_IF_ERROR(backend.CopyToDevice(device_.data(), host_.data(), host_.size()));
    base = device_.as<const char>();
  }
  for (size_t e = 0; e < lengths.size(); ++e) {
    RopeTableView view = default_view;
    const char* at = base + e * bytes;
    view.cos_sin = reinterpret_cast<const float*>(at);
    view.inv_freq = reinterpret_cast<const double*>(at + TableBytes(pairs));
    view.num_positions = 1;
    views_.push_back(view);
  }
  entry_of_seq_ = std::move(entry);
  return absl::OkStatus();
}

const RopeTableView& StepRope::ForSequence(int64_t seq) const {
  if (entry_of_seq_.empty()) return default_;
  const int32_t e = entry_of_seq_[static_cast<size_t>(seq)];
  return e < 0 ? default_ : views_[static_cast<size_t>(e)];
}

}  // namespace pagedkv
