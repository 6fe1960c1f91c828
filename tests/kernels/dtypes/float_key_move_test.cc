// Copyright 2026 The pagedkv Authors.
//
// Float keys kept until a move (issue 41): the KV write hands back each key as rotated before the
// storage rounding (ReshapeAndCacheArgs::rotated_k), and re-rotation can start from those floats
// (ReRotateArgs::src_keys) instead of the rounded cached key, so a moved key is rounded once, as
// a freshly written one is. Every 16-bit and quantized KV dtype on the CPU ops.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/dtype.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/kernels/kv_quant.h"
#include "pagedkv/kernels/rope_table.h"
#include "tests/kernels/dtypes/quant_pages.h"
#include "tests/kernels/kernel_test_util.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::Quantize;
using ::pagedkv::testing::QuantPages;
using ::pagedkv::testing::RandomFloats;
using ::pagedkv::testing::ReferenceAttentionFactor;
using ::pagedkv::testing::ReferenceInvFreq;
using ::pagedkv::testing::ReferenceRotate;

constexpr DType kRounded[] = {DType::kBF16,    DType::kF16,  DType::kInt8, DType::kFp8E4M3,
                              DType::kFp8E5M2, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1};
constexpr int32_t kHeads = 2, kHeadDim = 64;
constexpr int64_t kRow = int64_t{kHeads} * kHeadDim;

RopeTable MakeTable() {
  RopeConfig config;
  config.head_dim = kHeadDim;
  config.rotary_dim = 48;  // partial: the pass-through dims travel with the float key too
  auto table = RopeTable::Create(config, 4096);
  EXPECT_TRUE(table.ok()) << table.status();
  return *std::move(table);
}

// The KV write of `k` / `v` at `positions` into `slots`, handing the rotated keys to `rotated`.
absl::Status Write(const RopeTable& table, const PagedKvLayout& layout, const std::vector<float>& k,
                   const std::vector<float>& v, const std::vector<int32_t>& positions,
                   const std::vector<int64_t>& slots, std::vector<float>* rotated) {
  return cpu::ReshapeAndCache({.k = k.data(),
                               .v = v.data(),
                               .positions = positions.data(),
                               .slot_mapping = slots.data(),
                               .num_tokens = std::ssize(slots),
                               .rope = table.View(),
                               .cache = layout,
                               .rotated_k = rotated != nullptr ? rotated->data() : nullptr});
}

// Row `h` of token `t` of a [tokens, kHeads, kHeadDim] float array.
std::vector<float> RowOf(const std::vector<float>& keys, int64_t t, int32_t h) {
  const float* p = keys.data() + t * kRow + int64_t{h} * kHeadDim;
  return std::vector<float>(p, p + kHeadDim);
}

// The rotated keys handed back are the f32 pages' keys bit for bit, a rounded dtype stores them
// rounded once, and tokens without a slot leave their rows alone.
TEST(FloatKeyMoveTest, KvWriteHandsBackTheRotatedKeys) {
  const RopeTable table = MakeTable();
  const auto k = RandomFloats(5 * kRow, 61, -3.0f, 3.0f);
  const auto v = RandomFloats(5 * kRow, 62);
  const std::vector<int32_t> positions = {0, 7, 100, 4095, 3};
  const std::vector<int64_t> slots = {0, 9, -1, 31, 4};
  QuantPages f32(DType::kF32, 8, 4, kHeads, kHeadDim);
  ASSERT_TRUE(Write(table, f32.layout, k, v, positions, slots, nullptr).ok());
  for (DType dtype : kRounded) {
    QuantPages pages(dtype, 8, 4, kHeads, kHeadDim);
    std::vector<float> rotated(5 * kRow, std::numeric_limits<float>::quiet_NaN());
    ASSERT_TRUE(Write(table, pages.layout, k, v, positions, slots, &rotated).ok());
    for (int64_t t = 0; t < 5; ++t) {
      for (int32_t h = 0; h < kHeads; ++h) {
        const std::vector<float> row = RowOf(rotated, t, h);
        if (slots[t] < 0) {
          EXPECT_TRUE(std::isnan(row[0])) << "token " << t << " has no slot: row left alone";
          continue;
        }
        ASSERT_EQ(row, f32.Row(f32.layout.k, slots[t], h)) << DTypeName(dtype);
        if (IsQuantizedDType(dtype)) {
          ASSERT_EQ(pages.RowBytes(pages.layout.k, slots[t], h), Quantize(dtype, row));
        } else {
          std::vector<float> want(kHeadDim);  // the row rounded to the dtype and read back
          std::vector<uint16_t> bits(kHeadDim);
          StoreKvRow(bits.data(), dtype, 0, kHeadDim, row.data());
          LoadKvRow(bits.data(), dtype, 0, kHeadDim, want.data());
          ASSERT_EQ(pages.Row(pages.layout.k, slots[t], h), want) << DTypeName(dtype);
        }
      }
    }
  }
}

// A move from float keys stores R(new) R(old)^T of the float key rounded once: the bytes the
// f32 pages' re-rotation gives, rounded to the dtype. V moves as bytes from the source slot, in
// place V stays, and a move to the same position gives back the written key's bytes.
TEST(FloatKeyMoveTest, MoveFromFloatKeysRoundsOnce) {
  const RopeTable table = MakeTable();
  const auto k = RandomFloats(4 * kRow, 71, -2.0f, 2.0f);
  const auto v = RandomFloats(4 * kRow, 72);
  const std::vector<int32_t> positions = {3, 40, 700, 2000};
  const std::vector<int64_t> slots = {0, 5, 9, 14};
  const std::vector<int64_t> dst = {1, 5, 10, 15};                   // token 1 in place
  const std::vector<int32_t> new_positions = {1000, 41, 700, 2500};  // token 2 unshifted
  QuantPages f32(DType::kF32, 4, 4, kHeads, kHeadDim);
  std::vector<float> rotated(4 * kRow);
  ASSERT_TRUE(Write(table, f32.layout, k, v, positions, slots, &rotated).ok());
  const ReRotateArgs move{.src_slots = slots.data(),
                          .dst_slots = dst.data(),
                          .old_positions = positions.data(),
                          .new_positions = new_positions.data(),
                          .num_tokens = 4,
                          .rope = table.View()};
  ReRotateArgs f32_move = move;
  f32_move.cache = f32.layout;
  ASSERT_TRUE(cpu::ReRotate(f32_move).ok());
  for (DType dtype : kRounded) {
    QuantPages pages(dtype, 4, 4, kHeads, kHeadDim);
    ASSERT_TRUE(Write(table, pages.layout, k, v, positions, slots, nullptr).ok());
    const QuantPages written = pages;
    ReRotateArgs from_floats = move;
    from_floats.cache = pages.layout;
    from_floats.src_keys = rotated.data();
    ASSERT_TRUE(cpu::ReRotate(from_floats).ok());
    for (size_t t = 0; t < dst.size(); ++t) {
      for (int32_t h = 0; h < kHeads; ++h) {
        QuantPages want(dtype, 1, 1, 1, kHeadDim);
        const std::vector<float> moved = f32.Row(f32.layout.k, dst[t], h);
        StoreKvRow(want.layout.k, dtype, 0, kHeadDim, moved.data());
        ASSERT_EQ(pages.RowBytes(pages.layout.k, dst[t], h), want.RowBytes(want.layout.k, 0, 0))
            << DTypeName(dtype) << " token " << t;
        ASSERT_EQ(pages.RowBytes(pages.layout.v, dst[t], h),
                  written.RowBytes(written.layout.v, slots[t], h));
      }
    }
  }
}

// Relative RMS error of `moved` rows against float64 keys rotated straight to the new positions.
double MoveError(const QuantPages& pages, const std::vector<int64_t>& dst,
                 const std::vector<std::vector<double>>& want) {
  double err = 0, norm = 0;
  for (size_t t = 0; t < dst.size(); ++t) {
    for (int32_t h = 0; h < kHeads; ++h) {
      const std::vector<float> got = pages.Row(pages.layout.k, dst[t], h);
      const std::vector<double>& w = want[t * kHeads + h];
      for (int32_t d = 0; d < kHeadDim; ++d) {
        err += (got[d] - w[d]) * (got[d] - w[d]);
        norm += w[d] * w[d];
      }
    }
  }
  return std::sqrt(err / norm);
}

// Over 64 tokens, a move from the float keys is as close to the key rotated straight to its new
// position as one rounding allows, and closer than the move from the rounded key (two roundings).
TEST(FloatKeyMoveTest, FloatKeysCutTheErrorOfAMove) {
  RopeConfig config = MakeTable().config();
  const RopeTable table = MakeTable();
  const std::vector<double> inv = ReferenceInvFreq(config);
  const double factor = ReferenceAttentionFactor(config);
  const int64_t n = 64;
  const auto k = RandomFloats(n * kRow, 81, -2.0f, 2.0f);
  const auto v = RandomFloats(n * kRow, 82);
  std::vector<int32_t> positions(n), new_positions(n);
  std::vector<int64_t> slots(n), dst(n);
  std::vector<std::vector<double>> want;
  for (int64_t t = 0; t < n; ++t) {
    positions[t] = static_cast<int32_t>(5 + t);
    new_positions[t] = static_cast<int32_t>(1000 + 3 * t);
    slots[t] = t;
    dst[t] = n + t;
    for (int32_t h = 0; h < kHeads; ++h) {
      const std::vector<double> raw(k.begin() + t * kRow + h * kHeadDim,
                                    k.begin() + t * kRow + (h + 1) * kHeadDim);
      want.push_back(ReferenceRotate(config, inv, factor, new_positions[t], raw.data()));
    }
  }
  for (DType dtype : {DType::kBF16, DType::kInt8, DType::kFp8E4M3, DType::kQ8_0, DType::kQ4_0}) {
    QuantPages requantized(dtype, 2 * n / 16, 16, kHeads, kHeadDim);
    std::vector<float> rotated(n * kRow);
    ASSERT_TRUE(Write(table, requantized.layout, k, v, positions, slots, &rotated).ok());
    QuantPages from_floats = requantized;
    ReRotateArgs move{.src_slots = slots.data(),
                      .dst_slots = dst.data(),
                      .old_positions = positions.data(),
                      .new_positions = new_positions.data(),
                      .num_tokens = n,
                      .rope = table.View(),
                      .cache = requantized.layout};
    ASSERT_TRUE(cpu::ReRotate(move).ok());
    move.cache = from_floats.layout;
    move.src_keys = rotated.data();
    ASSERT_TRUE(cpu::ReRotate(move).ok());
    // Fresh keys written straight at the new positions: one rounding, the floor.
    QuantPages fresh = requantized;
    ASSERT_TRUE(Write(table, fresh.layout, k, v, new_positions, dst, nullptr).ok());
    const double twice = MoveError(requantized, dst, want);
    const double once = MoveError(from_floats, dst, want);
    const double floor = MoveError(fresh, dst, want);
    EXPECT_LT(once, 0.85 * twice) << DTypeName(dtype);
    EXPECT_NEAR(once, floor, 0.02 * floor) << DTypeName(dtype);
  }
}

}  // namespace
}  // namespace pagedkv
