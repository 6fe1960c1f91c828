// Copyright 2026 The pagedkv Authors.
//
// Int8Tiles: a Q4_0 / Q4_1 / Q8_0 / Q4_K / Q6_K matrix W [n, k] repacked once into the layout the
// AVX-512 VNNI int8 kernel multiplies directly (kernels/cpu/int8_linear_vnni.cc; Q4_K / Q6_K's
// also the AVX2 kernel, int8_linear_avx2_super.cc), so that no call decodes or transposes W
// again. For the 32-value block types the same bytes as the file's
// blocks, rearranged (the same size):
//   tile t (rows 16t .. 16t + 15), block b, at (t * k / 32 + b) * Int8TileBlockBytes(type):
//   - Q4_0 / Q4_1: 4 vectors of 64 bytes; byte 4c + j of vector v is byte 4v + j of row c's
//     nibbles, so its low nibble is value 4v + j (group v) and its high nibble value 16 + 4v + j
//     (group v + 4) of row c. Q8_0: 8 vectors of 64 bytes, byte 4c + j of vector g is
//     w[c][4g + j] ^ 0x80 (w + 128 as an unsigned byte).
//   - then the 16 rows' d (f16, 32 bytes), then Q4_1's 16 m (f16, 32 bytes).
// Q4_K and Q6_K are cut into the same 32-value blocks (int8_activations.h), with their scales
// decoded once (1.33x / 1.68x the file's bytes):
//   - Q4_K: the nibbles as Q4_1's (value 4v + j low, 16 + 4v + j high), then the 16 rows' fp32
//     dw = d * sc, then their fp32 -mw = -(dmin * m) (64 bytes each);
//   - Q6_K: 8 vectors as Q8_0's holding q + 32 (0..63), then the 16 rows' int32 sc_lo, int32
//     sc_hi and fp32 d (64 bytes each).
// Group g of a block (values 4g .. 4g + 3 of the 16 rows) is thus one vpdpbusd operand after at
// most a mask and a shift. The products and the fp32 chain are those of int8_activations.h, so
// the kernel gives the same bits from the tiles as every kernel gives from the file's rows.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(cpu::Int8Tiles tiles, cpu::Int8Tiles::Build(w, kQ4_1, n, k));
//   PAGEDKV_RETURN_IF_ERROR(cpu::QuantLinear(args, pool, &tiles));
#ifndef PAGEDKV_KERNELS_CPU_INT8_TILES_H_
#define PAGEDKV_KERNELS_CPU_INT8_TILES_H_

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "absl/status/statusor.h"
#include "kernels/cpu/thread_pool.h"
#include "pagedkv/export.h"
#include "pagedkv/kernels/int8_activations.h"
#include "pagedkv/kernels/quant_blocks.h"

namespace pagedkv::cpu {

inline constexpr int64_t kInt8TileRows = 16;

// Bytes of one tile's 32-value block: 16 rows' values and scales. 0 for a type without tiles.
PAGEDKV_EXPORT int64_t Int8TileBlockBytes(WeightType type);

// Bytes of W [n, k]'s tiles. REQUIRES: n a multiple of 16, k of 32.
inline int64_t Int8TileBytes(WeightType type, int64_t n, int64_t k) {
  return n / kInt8TileRows * (k / kQuantBlockValues) * Int8TileBlockBytes(type);
}

// One matrix in the tile layout. Movable, not copyable.
class PAGEDKV_EXPORT Int8Tiles {
 public:
  // InvalidArgument unless w is non-null, type is Q4_0, Q4_1, Q8_0, Q4_K or Q6_K, n > 0 a
  // multiple of 16 and k > 0 a multiple of the type's block (32; 256 for Q4_K / Q6_K);
  // ResourceExhausted when the copy cannot be allocated.
  // REQUIRES: w holds n rows of WeightRowBytes(type, k) bytes. Tiles are split over `pool`
  // (null: the calling thread).
  static absl::StatusOr<Int8Tiles> Build(const void* w, WeightType type, int64_t n, int64_t k,
                                         ThreadPool* pool = nullptr);

  // Tile t's 32-value block b. REQUIRES: 0 <= t < n / 16, 0 <= b < k / 32.
  const unsigned char* block(int64_t t, int64_t b) const {
    return data_.get() + (t * (k_ / kQuantBlockValues) + b) * block_bytes_;
  }
  // True for Q4_0, Q4_1 and Q8_0, whose tiles hold the file's bytes exactly, so that CopyRow gives
  // W's rows back (Q4_K / Q6_K tiles hold decoded scales).
  bool holds_rows() const { return !Int8SuperBlockType(type_); }
  // Writes row j of W, the file's WeightRowBytes(type(), k()) bytes, to `out` (the embedding
  // gather of a table whose rows are no longer resident reads them this way).
  // REQUIRES: holds_rows(), 0 <= j < n().
  void CopyRow(int64_t j, unsigned char* out) const;
  const void* source() const { return source_; }  // the W it was built from
  WeightType type() const { return type_; }
  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  int64_t bytes() const { return Int8TileBytes(type_, n_, k_); }

 private:
  struct Free {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  Int8Tiles() = default;

  std::unique_ptr<unsigned char, Free> data_;
  const void* source_ = nullptr;
  WeightType type_ = WeightType::kQ8_0;
  int64_t block_bytes_ = 0;  // Int8TileBlockBytes(type_), read once per block by the kernels
  int64_t n_ = 0;
  int64_t k_ = 0;
};

// Whether the int8 kernel that runs here (or is forced) would multiply W [n, k] of `type` from
// tiles (Int8KernelReadsTiles: the VNNI kernel, or the AVX2 one for Q4_K / Q6_K), the type has
// tiles and n, k fit. Callers build tiles only when this holds.
PAGEDKV_EXPORT bool Int8TilesUsable(WeightType type, int64_t n, int64_t k);

}  // namespace pagedkv::cpu

#endif  // PAGEDKV_KERNELS_CPU_INT8_TILES_H_
