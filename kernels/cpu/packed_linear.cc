// Copyright 2026 The pagedkv Authors.
//
// PackedWeights, PackedLinear (work split over the pool in (column panel, row block) items) and
// PackedWeightCache.
#include "kernels/cpu/packed_linear.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/simd/simd_kernels.h"
#include "kernels/cpu/threaded_ops.h"
#include "kernels/op_validate.h"
#include "pagedkv/checked_math.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cpu {

absl::StatusOr<PackedWeights> PackedWeights::Pack(const float* w, int64_t n, int64_t k) {
  if (w == nullptr) return absl::InvalidArgumentError("PackedWeights::Pack: w is null");
  if (n <= 0 || k <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("PackedWeights::Pack: n and k must be positive, got n = ", n, ", k = ", k));
  }
  const int64_t width = simd::PackedPanelWidth();
  const int64_t panels = n / width + (n % width != 0 ? 1 : 0);
  PAGEDKV_ASSIGN_OR_RETURN(
      const int64_t bytes,
      CheckedProduct({panels, width, k, int64_t{sizeof(float)}}, "PackedWeights::Pack: W"));
  // Rounded up to a multiple of the alignment, as aligned_alloc wants (bytes <= INT64_MAX, so the
  // rounded size fits size_t).
  const size_t rounded = (static_cast<size_t>(bytes) + 63) / 64 * 64;
  std::unique_ptr<float, Free> data(static_cast<float*>(std::aligned_alloc(64, rounded)));
  if (data == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("PackedWeights::Pack: cannot allocate ", bytes,
                                                     " bytes for a ", n, " x ", k, " weight"));
  }
  simd::PackWeights(w, n, k, data.get());
  return PackedWeights(std::move(data), w, n, k);
}

absl::Status PackedLinear(const LinearArgs& args, const PackedWeights& packed, ThreadPool* pool) {
  PAGEDKV_RETURN_IF_ERROR(ValidateLinear(args));
  if (args.w != packed.source() || args.n != packed.n() || args.k != packed.k()) {
    return absl::InvalidArgumentError(absl::StrCat("PackedLinear: the packed weight (", packed.n(),
                                                   " x ", packed.k(), ") is not args.w (", args.n,
                                                   " x ", args.k, "); pack args.w first"));
  }
  if (args.m == 0) return absl::OkStatus();
  const int64_t width = simd::PackedPanelWidth();
  const int64_t panels = (args.n + width - 1) / width;
  const int64_t row_blocks = (args.m + simd::kPackedTileRows - 1) / simd::kPackedTileRows;
  // In double: the multiply-adds of one item, a shape the caller validated but did not size.
  const double work_per_item = static_cast<double>(simd::kPackedTileRows) *
                               static_cast<double>(width) * static_cast<double>(args.k);
  ParallelFor(pool, panels * row_blocks, MinItemsPerRange(work_per_item),
              [&](int64_t begin, int64_t end) {
                simd::PackedLinearTiles(args, packed.data(), begin, end);
              });
  return absl::OkStatus();
}

absl::Status PackedWeightCache::DeclareConstant(const void* data, size_t bytes) {
  if (data == nullptr) {
    return absl::InvalidArgumentError("PackedWeightCache::DeclareConstant: data is null");
  }
  const auto begin = reinterpret_cast<uintptr_t>(data);
  if (bytes > UINTPTR_MAX - begin) {
    return absl::InvalidArgumentError(
        absl::StrCat("PackedWeightCache::DeclareConstant: a range of ", bytes,
                     " bytes passes the address space"));
  }
  if (bytes == 0) return absl::OkStatus();
  // Merge with every range it overlaps or touches, so ranges_ stays disjoint and a weight inside
  // the union of declared ranges is found whichever declaration covered it.
  uintptr_t lo = begin, hi = begin + bytes;
  auto it = ranges_.upper_bound(lo);
  if (it != ranges_.begin() && std::prev(it)->second >= lo) --it;
  while (it != ranges_.end() && it->first <= hi) {
    lo = std::min(lo, it->first);
    hi = std::max(hi, it->second);
    it = ranges_.erase(it);
  }
  ranges_.emplace(lo, hi);
  return absl::OkStatus();
}

bool PackedWeightCache::InConstantRange(const void* w, int64_t rows, int64_t row_bytes) const {
  int64_t bytes = 0;
  if (w == nullptr || rows <= 0 || row_bytes <= 0 || !CheckedMul(rows, row_bytes, &bytes)) {
    return false;
  }
  const auto begin = reinterpret_cast<uintptr_t>(w);
  auto it = ranges_.upper_bound(begin);
  if (it == ranges_.begin()) return false;
  --it;
  return begin - it->first <= it->second - it->first &&
         static_cast<uintptr_t>(bytes) <= it->second - begin;
}

absl::StatusOr<const PackedWeights*> PackedWeightCache::Find(const float* w, int64_t n, int64_t k) {
  const auto key = std::make_tuple(w, n, k);
  if (auto it = packed_.find(key); it != packed_.end()) return it->second.get();
  if (k > INT64_MAX / static_cast<int64_t>(sizeof(float)) ||
      !InConstantRange(w, n, k * static_cast<int64_t>(sizeof(float)))) {
    return nullptr;
  }
  PAGEDKV_ASSIGN_OR_RETURN(PackedWeights packed, PackedWeights::Pack(w, n, k));
  auto owned = std::make_unique<PackedWeights>(std::move(packed));
  const PackedWeights* result = owned.get();
  packed_.emplace(key, std::move(owned));
  return result;
}

absl::StatusOr<const Int8Tiles*> PackedWeightCache::FindInt8Tiles(const void* w, WeightType type,
                                                                  int64_t n, int64_t k,
                                                                  ThreadPool* pool) {
  const auto key = std::make_tuple(w, type, n, k);
  if (auto it = int8_tiles_.find(key); it != int8_tiles_.end()) return it->second.get();
  if (!Int8TilesUsable(type, n, k) || !InConstantRange(w, n, WeightRowBytes(type, k))) {
    return nullptr;
  }
  PAGEDKV_ASSIGN_OR_RETURN(Int8Tiles tiles, Int8Tiles::Build(w, type, n, k, pool));
  auto owned = std::make_unique<Int8Tiles>(std::move(tiles));
  const Int8Tiles* result = owned.get();
  int8_tiles_.emplace(key, std::move(owned));
  return result;
}

const Int8Tiles* PackedWeightCache::BuiltInt8Tiles(const void* w, WeightType type, int64_t n,
                                                   int64_t k) const {
  const auto it = int8_tiles_.find(std::make_tuple(w, type, n, k));
  return it == int8_tiles_.end() ? nullptr : it->second.get();
}

}  // namespace pagedkv::cpu
