// Copyright 2026 The pagedkv Authors.
//
// FrequencySketch: TinyLFU's approximate access counter (Einziger, Friedman and Manes, "TinyLFU: A
// Highly Efficient Cache Admission Policy", ACM TOS 2017): a count-min sketch of 4 rows of 4-bit
// counters (held in bytes, saturating at 15) with the "reset" aging step: after 10 x width
// increments every counter is halved, so old popularity fades. Estimates never undercount an
// item's increments since the last reset (halved by each reset); collisions can only overcount.
//
// Example:
//   internal::FrequencySketch sketch;
//   sketch.Init(/*expected_items=*/4096);
//   sketch.Increment(hash);
//   if (sketch.Estimate(candidate) > sketch.Estimate(victim)) { ... admit the candidate ... }
#ifndef PAGEDKV_CACHE_POLICIES_FREQUENCY_SKETCH_H_
#define PAGEDKV_CACHE_POLICIES_FREQUENCY_SKETCH_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "pagedkv/cache/block_hash.h"

namespace pagedkv::internal {

class FrequencySketch {
 public:
  static constexpr int kRows = 4;
  static constexpr uint8_t kMaxCount = 15;

  // Empties the sketch; the width is the power of two >= max(16, expected_items).
  void Init(int64_t expected_items) {
    width_ = 16;
    while (width_ < expected_items) width_ *= 2;
    counters_.assign(static_cast<size_t>(kRows * width_), 0);
    increments_ = 0;
    reset_after_ = 10 * width_;
  }

  void Increment(const BlockHash& hash) {
    for (int row = 0; row < kRows; ++row) {
      uint8_t& c = counters_[Slot(hash, row)];
      if (c < kMaxCount) ++c;
    }
    if (++increments_ >= reset_after_) Halve();
  }

  int Estimate(const BlockHash& hash) const {
    int estimate = kMaxCount;
    for (int row = 0; row < kRows; ++row)
      estimate = std::min<int>(estimate, counters_[Slot(hash, row)]);
    return estimate;
  }

 private:
  size_t Slot(const BlockHash& hash, int row) const {
    static constexpr uint64_t kSeeds[kRows] = {0x9E3779B97F4A7C15ull, 0xC2B2AE3D27D4EB4Full,
                                               0x165667B19E3779F9ull, 0xD6E8FEB86659FD93ull};
    uint64_t x = (hash.low ^ (hash.high * 0xFF51AFD7ED558CCDull)) * kSeeds[row];
    x ^= x >> 29;
    return static_cast<size_t>(row * width_) +
           static_cast<size_t>(x & static_cast<uint64_t>(width_ - 1));
  }

  void Halve() {
    for (uint8_t& c : counters_) c = static_cast<uint8_t>(c >> 1);
    increments_ /= 2;
  }

  int64_t width_ = 16;
  std::vector<uint8_t> counters_;  // [kRows, width_]
  int64_t increments_ = 0;         // since the last reset (halved by it, as in the paper)
  int64_t reset_after_ = 160;
};

}  // namespace pagedkv::internal

#endif  // PAGEDKV_CACHE_POLICIES_FREQUENCY_SKETCH_H_
