// Copyright 2026 The pagedkv Authors.
//
// K and V in different dtypes (PagedKvLayout::v_dtype, llama.cpp's -ctk / -ctv): the KV write
// stores each side as a one-dtype layout of that dtype would, bit for bit; attention reads each
// side in its own dtype (float64 over the values the pages hold); re-rotation rotates K and moves
// V's bytes; layouts that mix dtypes in one tensor, or name no dtype, are refused.
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/dtype.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/kernels/kv_quant.h"
#include "pagedkv/kernels/paged_kv_layout.h"
#include "pagedkv/kernels/rope_table.h"
#include "tests/kernels/kernel_test_util.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::RandomFloats;
using ::pagedkv::testing::ReferenceDenseAttention;
using ::testing::HasSubstr;

constexpr int32_t kBlocks = 6, kBlockSize = 16, kHeads = 2, kHeadDim = 64;

// (K dtype, V dtype) pairs: quantized and plain on either side, and two quantized ones.
const std::pair<DType, DType> kPairs[] = {{DType::kQ8_0, DType::kQ4_0},
                                          {DType::kF16, DType::kQ4_0},
                                          {DType::kBF16, DType::kInt8},
                                          {DType::kQ4_1, DType::kF32},
                                          {DType::kF32, DType::kFp8E4M3}};

std::string Name(DType k, DType v) { return std::string(DTypeName(k)) + "/" + DTypeName(v); }

// Separate K and V pages of their own dtypes (or one, when k == v), filled with 0x5a.
struct Pages {
  Pages(DType k_dtype, DType v_dtype, KvPageOrder order = KvPageOrder::kNHD) {
    const PagedKvShape shape{.dtype = k_dtype,
                             .v_dtype = v_dtype,
                             .num_blocks = kBlocks,
                             .block_size = kBlockSize,
                             .num_kv_heads = kHeads,
                             .head_dim = kHeadDim};
    layout = SeparateKvLayout(nullptr, nullptr, shape, order);
    k.assign(static_cast<size_t>(layout.KSide().NumBytes()), 0x5a);
    v.assign(static_cast<size_t>(layout.VSide().NumBytes()), 0x5a);
    layout.k = k.data();
    layout.v = v.data();
  }
  // The bytes of (slot, head) of one side.
  static std::vector<unsigned char> RowBytes(const PagedKvLayout& side, int64_t slot, int32_t h) {
    const int64_t unit = DTypeSize(side.dtype);
    const auto* p = static_cast<const unsigned char*>(side.k) +
                    (side.SlotOffset(slot) + h * side.HeadStride()) * unit;
    return {p, p + side.RowUnits() * unit};
  }
  // The values (slot, head) of one side holds.
  static std::vector<float> Row(const PagedKvLayout& side, int64_t slot, int32_t h) {
    std::vector<float> out(kHeadDim);
    LoadKvRow(side.k, side.dtype, side.SlotOffset(slot) + h * side.HeadStride(), kHeadDim,
              out.data());
    return out;
  }
  std::vector<unsigned char> k, v;
  PagedKvLayout layout;
};

absl::Status Write(const PagedKvLayout& layout, const std::vector<float>& k,
                   const std::vector<float>& v, const std::vector<int64_t>& slots,
                   const std::vector<int32_t>& positions, const RopeTable& table) {
  return cpu::ReshapeAndCache({.k = k.data(),
                               .v = v.data(),
                               .positions = positions.data(),
                               .slot_mapping = slots.data(),
                               .num_tokens = std::ssize(slots),
                               .rope = table.View(),
                               .cache = layout});
}

RopeTable Table() {
  RopeConfig config;
  config.head_dim = kHeadDim;
  absl::StatusOr<RopeTable> table = RopeTable::Create(config, 4096);
  EXPECT_TRUE(table.ok()) << table.status();
  return std::move(*table);
}

TEST(MixedKvDTypeTest, KvWriteStoresEachSideAsItsOwnDTypeWould) {
  const RopeTable table = Table();
  const int64_t n = 7, row = kHeads * kHeadDim;
  const auto k = RandomFloats(n * row, 11, -3.0f, 3.0f);
  const auto v = RandomFloats(n * row, 12);
  const std::vector<int32_t> positions = {0, 5, 100, 2000, 17, 3, 4095};
  const std::vector<int64_t> slots = {0, 9, -1, 95, 40, 17, 63};
  for (const auto& [kd, vd] : kPairs) {
    for (KvPageOrder order : {KvPageOrder::kNHD, KvPageOrder::kHND}) {
      Pages mixed(kd, vd, order), k_only(kd, kd, order), v_only(vd, vd, order);
      ASSERT_TRUE(mixed.layout.MixedDTypes());
      for (Pages* p : {&mixed, &k_only, &v_only}) {
        ASSERT_TRUE(Write(p->layout, k, v, slots, positions, table).ok()) << Name(kd, vd);
      }
      EXPECT_EQ(mixed.k, k_only.k) << Name(kd, vd);
      EXPECT_EQ(mixed.v, v_only.v) << Name(kd, vd);
    }
  }
}

// One decode token (GQA 4:2) over 90 keys in shuffled blocks: within 2e-6 of float64 attention
// over the keys the K pages hold and the values the V pages hold.
TEST(MixedKvDTypeTest, AttentionReadsEachSideInItsDType) {
  const RopeTable table = Table();
  const int32_t len = 90, nq = 4;
  const std::vector<int32_t> block_table = {3, 0, 5, 1, 4, 2};
  std::vector<int64_t> slots(len);
  std::vector<int32_t> positions(len);
  for (int32_t j = 0; j < len; ++j) {
    slots[j] = int64_t{block_table[j / kBlockSize]} * kBlockSize + j % kBlockSize;
    positions[j] = j;
  }
  const auto k = RandomFloats(len * kHeads * kHeadDim, 21, -2.0f, 2.0f);
  const auto v = RandomFloats(len * kHeads * kHeadDim, 22);
  const auto q = RandomFloats(nq * kHeadDim, 23, -2.0f, 2.0f);
  for (const auto& [kd, vd] : kPairs) {
    Pages pages(kd, vd, KvPageOrder::kHND);
    ASSERT_TRUE(Write(pages.layout, k, v, slots, positions, table).ok());
    const std::vector<int32_t> at = {len - 1}, qsl = {0, 1}, kv_lens = {len};
    std::vector<float> out(q.size(), NAN);
    ASSERT_TRUE(cpu::PagedAttention({.q = q.data(),
                                     .out = out.data(),
                                     .positions = at.data(),
                                     .query_start_loc = qsl.data(),
                                     .kv_lens = kv_lens.data(),
                                     .block_tables = block_table.data(),
                                     .num_tokens = 1,
                                     .num_seqs = 1,
                                     .num_q_heads = nq,
                                     .max_blocks_per_seq = 6,
                                     .cache = pages.layout})
                    .ok());
    for (int32_t h = 0; h < nq; ++h) {
      const int32_t kvh = h / (nq / kHeads);
      std::vector<std::vector<float>> held_k, held_v;
      for (int32_t j = 0; j < len; ++j) {
        held_k.push_back(Pages::Row(pages.layout.KSide(), slots[j], kvh));
        held_v.push_back(Pages::Row(pages.layout.VSide(), slots[j], kvh));
      }
      const std::vector<double> want =
          ReferenceDenseAttention(&q[h * kHeadDim], held_k, held_v, kHeadDim);
      for (int32_t d = 0; d < kHeadDim; ++d) {
        ASSERT_NEAR(out[h * kHeadDim + d], want[d], 2e-6) << Name(kd, vd) << " head " << h;
      }
    }
  }
}

// K rows re-rotated as K's one-dtype pages are (bytes equal); V rows moved as bytes.
TEST(MixedKvDTypeTest, ReRotationRotatesKAndMovesV) {
  const RopeTable table = Table();
  const std::vector<int64_t> slots = {0, 5, 9, 14};
  const std::vector<int32_t> positions = {3, 40, 700, 2000};
  const std::vector<int64_t> dst = {1, 5, 30, 15};
  const std::vector<int32_t> new_positions = {1000, 41, 3, 2500};
  const auto k = RandomFloats(4 * kHeads * kHeadDim, 31, -2.0f, 2.0f);
  const auto v = RandomFloats(4 * kHeads * kHeadDim, 32);
  for (const auto& [kd, vd] : kPairs) {
    Pages mixed(kd, vd), k_only(kd, kd);
    for (Pages* p : {&mixed, &k_only}) {
      ASSERT_TRUE(Write(p->layout, k, v, slots, positions, table).ok());
      ASSERT_TRUE(cpu::ReRotate({.src_slots = slots.data(),
                                 .dst_slots = dst.data(),
                                 .old_positions = positions.data(),
                                 .new_positions = new_positions.data(),
                                 .num_tokens = 4,
                                 .rope = table.View(),
                                 .cache = p->layout})
                      .ok());
    }
    EXPECT_EQ(mixed.k, k_only.k) << Name(kd, vd);
    const PagedKvLayout v_side = mixed.layout.VSide();
    for (size_t t = 0; t < dst.size(); ++t) {
      for (int32_t h = 0; h < kHeads; ++h) {
        ASSERT_EQ(Pages::RowBytes(v_side, dst[t], h), Pages::RowBytes(v_side, slots[t], h))
            << Name(kd, vd) << " token " << t;
      }
    }
  }
}

TEST(MixedKvDTypeTest, BadMixedLayoutsAreRefusedAndTouchNothing) {
  const RopeTable table = Table();
  const auto k = RandomFloats(kHeads * kHeadDim, 41);
  const std::vector<int64_t> slots = {0};
  const std::vector<int32_t> positions = {0};
  Pages pages(DType::kQ8_0, DType::kQ4_0);
  const Pages before = pages;
  auto refused = [&](const PagedKvLayout& layout) {
    const absl::Status status = Write(layout, k, k, slots, positions, table);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(pages.k, before.k);
    EXPECT_EQ(pages.v, before.v);
    return std::string(status.message());
  };
  PagedKvLayout joint = pages.layout;  // V inside K's tensor
  joint.v = pages.k.data() + 100;
  EXPECT_THAT(refused(joint), HasSubstr("separate tensors"));
  PagedKvLayout unknown = pages.layout;
  unknown.v_dtype = static_cast<DType>(42);
  EXPECT_THAT(refused(unknown), HasSubstr("cache.v_dtype"));
  PagedKvLayout odd = pages.layout;  // q4_0 V rows need head_dim a multiple of 32
  odd.dtype = DType::kF32;
  odd.head_dim = 48;
  odd.v_block_stride = odd.v_token_stride = odd.v_head_stride = 0;
  odd.block_stride = odd.token_stride = odd.head_stride = 0;
  EXPECT_THAT(refused(odd), HasSubstr("cache.v_dtype q4_0 stores blocks of 32"));
}

}  // namespace
}  // namespace pagedkv
