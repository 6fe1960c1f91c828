// Copyright 2026 The pagedkv Authors.
//
// Linear over weights packed once into the k-major panel layout of simd/packed_linear_simd.cc
// (y = x W^T, the same contract as cpu::Linear). Every y[i][j] is one FMA chain over k in order,
// so a row's result does not depend on m, on the thread split or on the other rows of the batch,
// and no lane sums are needed (the kernel is an outer product, fast from m = 1 to large batches).
// PackedWeightCache keeps the packed copies of the weights in memory declared constant, so the
// CPU backend can pack a model's projections and LM head on their first use.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(cpu::PackedWeights packed, cpu::PackedWeights::Pack(w, n, k));
//   PAGEDKV_RETURN_IF_ERROR(cpu::PackedLinear({.x = x, .w = w, .y = y, .m = m, .n = n, .k = k},
//                                             packed, pool));
#ifndef PAGEDKV_KERNELS_CPU_PACKED_LINEAR_H_
#define PAGEDKV_KERNELS_CPU_PACKED_LINEAR_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <tuple>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cpu/int8_tiles.h"
#include "kernels/cpu/thread_pool.h"
#include "pagedkv/export.h"
#include "pagedkv/kernels/op_args.h"

namespace pagedkv::cpu {

// One weight matrix W [n, k] in the packed layout. Movable, not copyable.
class PAGEDKV_EXPORT PackedWeights {
 public:
  // InvalidArgument for a null w or n, k <= 0 or a size that overflows; ResourceExhausted when the
  // packed copy cannot be allocated. REQUIRES: w holds n * k floats.
  static absl::StatusOr<PackedWeights> Pack(const float* w, int64_t n, int64_t k);

  const float* data() const { return data_.get(); }
  const float* source() const { return source_; }  // the W it was packed from
  int64_t n() const { return n_; }
  int64_t k() const { return k_; }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  PackedWeights(std::unique_ptr<float, Free> data, const float* source, int64_t n, int64_t k)
      : data_(std::move(data)), source_(source), n_(n), k_(k) {}

  std::unique_ptr<float, Free> data_;
  const float* source_ = nullptr;
  int64_t n_ = 0;
  int64_t k_ = 0;
};

// y = x W^T (+ y) with W = packed. InvalidArgument (y untouched) for invalid args, or when packed
// is not args.w's packed form (args.w, n and k must match it).
PAGEDKV_EXPORT absl::Status PackedLinear(const LinearArgs& args, const PackedWeights& packed,
                                         ThreadPool* pool);

// Packed copies of the weights in memory ranges declared constant: fp32 W's packed panels and
// block-format W's Int8Tiles (int8_tiles.h). Not thread-safe.
class PAGEDKV_EXPORT PackedWeightCache {
 public:
  // Declares [data, data + bytes) constant for this cache's lifetime: what lies there must not
  // change while the cache exists. InvalidArgument for a null data or a range past the address
  // space; an empty range is ignored.
  absl::Status DeclareConstant(const void* data, size_t bytes);
  // W [n, k]'s packed copy when all of it lies in declared memory (packed on the first call),
  // null when it does not. ResourceExhausted when packing cannot allocate (nothing kept).
  absl::StatusOr<const PackedWeights*> Find(const float* w, int64_t n, int64_t k);
  // W [n, k] of `type`'s Int8Tiles when Int8TilesUsable(type, n, k) and all of W lies in declared
  // memory (built on the first call), null otherwise. ResourceExhausted when building cannot
  // allocate (nothing kept).
  absl::StatusOr<const Int8Tiles*> FindInt8Tiles(const void* w, WeightType type, int64_t n,
                                                 int64_t k, ThreadPool* pool = nullptr);
  // W's Int8Tiles when FindInt8Tiles has built them, else null (never builds).
  const Int8Tiles* BuiltInt8Tiles(const void* w, WeightType type, int64_t n, int64_t k) const;
  int64_t num_packed() const { return static_cast<int64_t>(packed_.size()); }
  int64_t num_int8_tiles() const { return static_cast<int64_t>(int8_tiles_.size()); }

 private:
  // [w, w + rows * row_bytes) lies in one declared range (false on overflow).
  bool InConstantRange(const void* w, int64_t rows, int64_t row_bytes) const;

  std::map<uintptr_t, uintptr_t> ranges_;  // begin -> end; disjoint (overlapping ones merged)
  std::map<std::tuple<const float*, int64_t, int64_t>, std::unique_ptr<PackedWeights>> packed_;
  std::map<std::tuple<const void*, WeightType, int64_t, int64_t>, std::unique_ptr<Int8Tiles>>
      int8_tiles_;
};

}  // namespace pagedkv::cpu

#endif  // PAGEDKV_KERNELS_CPU_PACKED_LINEAR_H_
