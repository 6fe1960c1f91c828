// Copyright 2026 The pagedkv Authors.
//
// Int8Tiles::Build: the file's blocks rearranged into the VNNI kernel's tiles (int8_tiles.h),
// once per matrix, byte by byte.
#include "kernels/cpu/int8_tiles.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/int8_linear.h"
#include "pagedkv/kernels/int8_activations.h"

namespace pagedkv::cpu {

namespace {

// Offset of a block's values in the file: Q4_1 has d and m (4 bytes), the others d (2 bytes).
int64_t ValuesOffset(WeightType type) { return type == WeightType::kQ4_1 ? 4 : 2; }

// Writes tile t's block b from the file's rows (see the layout in int8_tiles.h).
void TileBlock(const unsigned char* w, WeightType type, int64_t k, int64_t t, int64_t b,
               unsigned char* out) {
  const int64_t bb = QuantBlockBytes(type);
  const int64_t values_bytes = type == WeightType::kQ8_0 ? 512 : 256;
  for (int c = 0; c < kInt8TileRows; ++c) {
    const unsigned char* block = QuantRow(w, type, k, kInt8TileRows * t + c) + b * bb;
    const unsigned char* values = block + ValuesOffset(type);
    const int vectors = type == WeightType::kQ8_0 ? 8 : 4;
    const uint32_t flip = type == WeightType::kQ8_0 ? 0x80808080u : 0u;
    for (int v = 0; v < vectors; ++v) {  // 4 bytes of row c per vector
      uint32_t word;
      std::memcpy(&word, values + 4 * v, 4);
      word ^= flip;
      std::memcpy(out + 64 * v + 4 * c, &word, 4);
    }
    std::memcpy(out + values_bytes + 2 * c, block, 2);  // d
    if (type == WeightType::kQ4_1) std::memcpy(out + values_bytes + 32 + 2 * c, block + 2, 2);
  }
}

// Stores 4 bytes at out (the host's order is little-endian on every CPU these kernels run on).
void Put32(unsigned char* out, const void* value) { std::memcpy(out, value, 4); }

// Writes row c of a Q4_K / Q6_K tile block b (see the layout in int8_tiles.h).
void SuperTileRow(const unsigned char* row, WeightType type, int64_t b, int c, unsigned char* out) {
  const unsigned char* sb = row + (b / 8) * QuantBlockBytes(type);
  const auto s = static_cast<int32_t>(b % 8);
  if (type == WeightType::kQ4_K) {
    for (int v = 0; v < 4; ++v) {
      for (int j = 0; j < 4; ++j) {
        out[64 * v + 4 * c + j] = static_cast<unsigned char>(
            Int8Q4KValue(sb, s, 4 * v + j) | (Int8Q4KValue(sb, s, 16 + 4 * v + j) << 4));
      }
    }
    float dw = 0.0f, mw = 0.0f;
    Int8Q4KScales(sb, s, &dw, &mw);
    const float neg_mw = -mw;
    Put32(out + 256 + 4 * c, &dw);
    Put32(out + 256 + 64 + 4 * c, &neg_mw);
    return;
  }
  for (int g = 0; g < 8; ++g) {
    for (int j = 0; j < 4; ++j) {
      out[64 * g + 4 * c + j] = static_cast<unsigned char>(Int8Q6KValue(sb, s, 4 * g + j) + 32);
    }
  }
  int32_t lo = 0, hi = 0;
  Int8Q6KScales(sb, s, &lo, &hi);
  const float d = QuantF16At(sb + 208);
  Put32(out + 512 + 4 * c, &lo);
  Put32(out + 512 + 64 + 4 * c, &hi);
  Put32(out + 512 + 128 + 4 * c, &d);
}

// Writes tile t's block b of any int8 type.
void AnyTileBlock(const unsigned char* w, WeightType type, int64_t k, int64_t t, int64_t b,
                  unsigned char* out) {
  if (!Int8SuperBlockType(type)) return TileBlock(w, type, k, t, b, out);
  for (int c = 0; c < kInt8TileRows; ++c) {
    SuperTileRow(QuantRow(w, type, k, kInt8TileRows * t + c), type, b, c, out);
  }
}

}  // namespace

void Int8Tiles::CopyRow(int64_t j, unsigned char* out) const {
  const int64_t bb = QuantBlockBytes(type_);
  const int64_t values_bytes = type_ == WeightType::kQ8_0 ? 512 : 256;
  const int vectors = type_ == WeightType::kQ8_0 ? 8 : 4;
  const uint32_t flip = type_ == WeightType::kQ8_0 ? 0x80808080u : 0u;
  const int64_t c = j % kInt8TileRows;
  for (int64_t b = 0; b < k_ / kQuantBlockValues; ++b) {  // TileBlock, backwards
    const unsigned char* at = block(j / kInt8TileRows, b);
    unsigned char* dst = out + b * bb;
    std::memcpy(dst, at + values_bytes + 2 * c, 2);  // d
    if (type_ == WeightType::kQ4_1) std::memcpy(dst + 2, at + values_bytes + 32 + 2 * c, 2);
    for (int v = 0; v < vectors; ++v) {
      uint32_t word;
      std::memcpy(&word, at + 64 * v + 4 * c, 4);
      word ^= flip;
      std::memcpy(dst + ValuesOffset(type_) + 4 * v, &word, 4);
    }
  }
}

int64_t Int8TileBlockBytes(WeightType type) {
  switch (type) {
    case WeightType::kQ4_0:
      return 256 + 32;
    case WeightType::kQ4_1:
      return 256 + 64;
    case WeightType::kQ8_0:
      return 512 + 32;
    case WeightType::kQ4_K:
      return 256 + 128;
    case WeightType::kQ6_K:
      return 512 + 192;
    default:
      return 0;
  }
}

absl::StatusOr<Int8Tiles> Int8Tiles::Build(const void* w, WeightType type, int64_t n, int64_t k,
                                           ThreadPool* pool) {
  if (w == nullptr || !Int8ActivationsSupport(type) || n <= 0 || n % kInt8TileRows != 0 || k <= 0 ||
      k % QuantBlockValuesOf(type) != 0 || n > (int64_t{1} << 40) || k > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Int8Tiles::Build: needs Q4_0, Q4_1, Q8_0, Q4_K or Q6_K weights, n a positive multiple "
        "of ",
        kInt8TileRows, " and k of the type's block (32; 256 for Q4_K / Q6_K) (got type ",
        static_cast<int>(type), ", n ", n, ", k ", k, ")"));
  }
  Int8Tiles tiles;
  const auto bytes = static_cast<size_t>(Int8TileBytes(type, n, k));
  tiles.data_.reset(static_cast<unsigned char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
  if (tiles.data_ == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("Int8Tiles::Build: cannot allocate ", bytes, " bytes"));
  }
  tiles.source_ = w;
  tiles.type_ = type;
  tiles.block_bytes_ = Int8TileBlockBytes(type);
  tiles.n_ = n;
  tiles.k_ = k;
  const auto* rows = static_cast<const unsigned char*>(w);
  const int64_t blocks = k / kQuantBlockValues;
  ParallelFor(pool, n / kInt8TileRows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t b = 0; b < blocks; ++b) {
        AnyTileBlock(rows, type, k, t, b, const_cast<unsigned char*>(tiles.block(t, b)));
      }
    }
  });
  return tiles;
}

bool Int8TilesUsable(WeightType type, int64_t n, int64_t k) {
  return Int8ActivationsSupport(type) && n > 0 && n % kInt8TileRows == 0 && k > 0 &&
         k % QuantBlockValuesOf(type) == 0 && Int8KernelReadsTiles(type);
}

}  // namespace pagedkv::cpu
