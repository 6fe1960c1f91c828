// Copyright 2026 The pagedkv Authors.
//
// Strided paged-KV layouts (tests/kernels/layout_cases.h): the helpers' offsets and extents match
// each tensor's own index formula; ReshapeAndCache, ReRotate and PagedAttention over every layout
// match one float64 reference and give bit-identical logical contents across layouts; the padding
// and the memory around the tensors are never written; bad strides are InvalidArgument with
// nothing written.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/kernels/paged_kv_layout.h"
#include "pagedkv/kernels/rope_table.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/layout_cases.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::AllLayoutCases;
using ::pagedkv::testing::CaseShape;
using ::pagedkv::testing::GuardedPages;
using ::pagedkv::testing::LayoutCase;
using ::pagedkv::testing::RandomFloats;
using ::pagedkv::testing::ReferenceAttentionFactor;
using ::pagedkv::testing::ReferenceInvFreq;
using ::pagedkv::testing::ReferenceRotate;

constexpr DType kDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};
constexpr int32_t kNumQHeads = 6;  // GQA group of 2 over 3 KV heads

double UnitRoundoff(DType dtype) {
  return dtype == DType::kF32 ? 0x1p-24 : (dtype == DType::kF16 ? 0x1p-11 : 0x1p-8);
}

TEST(PagedKvLayoutTest, OffsetsAndExtentsMatchEachTensorsIndexFormula) {
  const CaseShape s;
  for (const LayoutCase& c : AllLayoutCases()) {
    for (DType dtype : kDTypes) {
      GuardedPages pages(c, dtype);
      const PagedKvLayout& layout = pages.layout();
      const int64_t es = DTypeSize(dtype);
      const char* base = pages.Base();
      int64_t max_offset[2] = {0, 0};
      bool all_match = true;
      pages.ForEachElement([&](int kv, int64_t b, int64_t t, int64_t h, int64_t d, int64_t index) {
        const char* pointer = static_cast<const char*>(kv == 0 ? layout.k : layout.v);
        const int64_t from_pointer = (base + index * es - pointer) / es;
        const int64_t slot = b * s.block_size + t;
        all_match &= layout.ElementOffset(slot, static_cast<int32_t>(h), static_cast<int32_t>(d)) ==
                     from_pointer;
        all_match &= layout.TokenOffset(b, t) + h * layout.HeadStride() + d == from_pointer;
        max_offset[kv] = std::max(max_offset[kv], from_pointer);
      });
      EXPECT_TRUE(all_match) << c.name;
      EXPECT_EQ(layout.SpanElements(), max_offset[0] + 1) << c.name;
      EXPECT_EQ(layout.SpanElements(), max_offset[1] + 1) << c.name;
      EXPECT_EQ(layout.NumBytes(), (max_offset[0] + 1) * es) << c.name;
      EXPECT_EQ(layout.NumElements(),
                int64_t{s.num_blocks} * s.block_size * s.num_kv_heads * s.head_dim);
      EXPECT_EQ(layout.IsContiguous(), c.name == "separate_nhd_default") << c.name;
      const PagedKvLayout resolved = layout.Resolved();
      EXPECT_EQ(resolved.ElementOffset(7, 2, 5), layout.ElementOffset(7, 2, 5)) << c.name;
      EXPECT_NE(resolved.head_stride, 0);
      EXPECT_NE(resolved.token_stride, 0);
      EXPECT_NE(resolved.block_stride, 0);
    }
  }
}

TEST(PagedKvLayoutTest, RowsAlignedToMatchesEveryRowStart) {
  for (const LayoutCase& c : AllLayoutCases()) {
    GuardedPages pages(c, DType::kF32);
    const PagedKvLayout& layout = pages.layout();
    for (int32_t n : {2, 4, 8, 16, 32}) {
      bool all = layout.head_dim % n == 0;
      pages.ForEachElement([&](int, int64_t b, int64_t t, int64_t h, int64_t d, int64_t) {
        if (d == 0) all &= (layout.TokenOffset(b, t) + h * layout.HeadStride()) % n == 0;
      });
      EXPECT_EQ(RowsAlignedTo(layout, n), all) << c.name << " n=" << n;
    }
  }
}

// Writes `n` tokens of random K/V at distinct random slots (one skipped with -1), rotating q and k.
struct KvWrite {
  explicit KvWrite(const CaseShape& s, int64_t n, uint32_t seed) : num_tokens(n) {
    const int64_t row = int64_t{s.num_kv_heads} * s.head_dim;
    q = RandomFloats(n * kNumQHeads * s.head_dim, seed);
    k = RandomFloats(n * row, seed + 1);
    v = RandomFloats(n * row, seed + 2);
    std::mt19937 rng(seed);
    std::vector<int64_t> all(static_cast<size_t>(s.num_blocks) * s.block_size);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    slots.assign(all.begin(), all.begin() + n);
    slots[1] = -1;
    for (int64_t t = 0; t < n; ++t) positions.push_back(static_cast<int32_t>(rng() % 200));
  }
  ReshapeAndCacheArgs Args(const RopeTable& table, const PagedKvLayout& cache) {
    return ReshapeAndCacheArgs{.q = q.data(),
                               .k = k.data(),
                               .v = v.data(),
                               .positions = positions.data(),
                               .slot_mapping = slots.data(),
                               .num_tokens = num_tokens,
                               .num_q_heads = kNumQHeads,
                               .rope = table.View(),
                               .cache = cache};
  }
  int64_t num_tokens;
  std::vector<float> q, k, v;
  std::vector<int32_t> positions;
  std::vector<int64_t> slots;
};

RopeConfig TestRope() {
  RopeConfig config;
  config.head_dim = CaseShape{}.head_dim;
  config.rotary_dim = 12;  // pass-through dims too
  config.scaling = RopeScaling::kYarn;
  config.factor = 2.0;
  return config;
}

TEST(LayoutOpsTest, ReshapeAndCacheMatchesFloat64AndIsBitIdenticalAcrossLayouts) {
  const CaseShape s;
  const RopeConfig config = TestRope();
  auto table = RopeTable::Create(config, 256);
  ASSERT_TRUE(table.ok());
  const auto inv = ReferenceInvFreq(config);
  const double af = ReferenceAttentionFactor(config);
  for (DType dtype : kDTypes) {
    std::vector<float> baseline;
    for (const LayoutCase& c : AllLayoutCases()) {
      GuardedPages pages(c, dtype);
      pages.SetLogical(std::vector<float>(pages.Logical().size(), -7.0f));
      KvWrite w(s, 12, 40);
      ASSERT_TRUE(cpu::ReshapeAndCache(w.Args(*table, pages.layout())).ok()) << c.name;
      EXPECT_EQ(pages.DamagedGuardBytes(), 0) << c.name << " wrote outside its elements";
      const int64_t row = int64_t{s.num_kv_heads} * s.head_dim;
      for (int64_t t = 0; t < w.num_tokens; ++t) {
        if (w.slots[t] < 0) continue;
        for (int h = 0; h < s.num_kv_heads; ++h) {
          const float* in = &w.k[t * row + h * s.head_dim];
          const std::vector<double> head(in, in + s.head_dim);
          const auto want = ReferenceRotate(config, inv, af, w.positions[t], head.data());
          for (int d = 0; d < s.head_dim; ++d) {
            ASSERT_NEAR(pages.Get(0, w.slots[t], h, d), want[d],
                        2e-6 + UnitRoundoff(dtype) * std::abs(want[d]))
                << c.name << " t=" << t << " h=" << h << " d=" << d;
            ASSERT_EQ(pages.Get(1, w.slots[t], h, d),
                      RoundToDType(w.v[t * row + h * s.head_dim + d], dtype))
                << c.name;
          }
        }
      }
      if (baseline.empty()) {
        baseline = pages.Logical();
      } else {
        EXPECT_EQ(pages.Logical(), baseline)
            << c.name << " differs from " << AllLayoutCases()[0].name;
      }
    }
  }
}

TEST(LayoutOpsTest, ReRotateMatchesFloat64AndIsBitIdenticalAcrossLayouts) {
  const CaseShape s;
  const RopeConfig config = TestRope();
  auto table = RopeTable::Create(config, 512);
  ASSERT_TRUE(table.ok());
  const auto inv = ReferenceInvFreq(config);
  const double af = ReferenceAttentionFactor(config);
  const int64_t num_slots = int64_t{s.num_blocks} * s.block_size;
  // Slots 0..5 are re-rotated: 0..2 out of place to 10..12, 3..5 in place.
  const std::vector<int64_t> src = {0, 1, 2, 3, 4, 5};
  const std::vector<int64_t> dst = {10, 11, 12, 3, 4, 5};
  const std::vector<int32_t> old_positions = {3, 40, 7, 100, 0, 19};
  const std::vector<int32_t> new_positions = {300, 2, 7, 101, 450, 5};
  for (DType dtype : kDTypes) {
    for (ReRotateMode mode : {ReRotateMode::kCompose, ReRotateMode::kDelta}) {
      std::vector<float> baseline;
      for (const LayoutCase& c : AllLayoutCases()) {
        GuardedPages pages(c, dtype);
        // Keys cached at old_positions: raw keys rotated by the float64 reference, then stored.
        const auto raw =
            RandomFloats(static_cast<size_t>(num_slots) * s.num_kv_heads * s.head_dim, 50);
        const auto values = RandomFloats(raw.size(), 51);
        std::vector<float> logical(2 * raw.size());
        for (int64_t slot = 0; slot < num_slots; ++slot) {
          const int32_t p = slot < 6 ? old_positions[slot] : 0;
          for (int h = 0; h < s.num_kv_heads; ++h) {
            const int64_t row = (slot * s.num_kv_heads + h) * s.head_dim;
            const std::vector<double> head(&raw[row], &raw[row] + s.head_dim);
            const auto rotated = ReferenceRotate(config, inv, af, p, head.data());
            for (int d = 0; d < s.head_dim; ++d) {
              logical[row + d] = static_cast<float>(rotated[d]);
              logical[raw.size() + row + d] = values[row + d];
            }
          }
        }
        pages.SetLogical(logical);
        const std::vector<float> before = pages.Logical();
        ReRotateArgs args{.src_slots = src.data(),
                          .dst_slots = dst.data(),
                          .old_positions = old_positions.data(),
                          .new_positions = new_positions.data(),
                          .num_tokens = static_cast<int64_t>(src.size()),
                          .mode = mode,
                          .rope = table->View(),
                          .cache = pages.layout()};
        ASSERT_TRUE(cpu::ReRotate(args).ok()) << c.name;
        EXPECT_EQ(pages.DamagedGuardBytes(), 0) << c.name << " wrote outside its elements";
        for (size_t i = 0; i < src.size(); ++i) {
          for (int h = 0; h < s.num_kv_heads; ++h) {
            const int64_t row = (src[i] * s.num_kv_heads + h) * s.head_dim;
            const std::vector<double> head(&raw[row], &raw[row] + s.head_dim);
            const auto want = ReferenceRotate(config, inv, af, new_positions[i], head.data());
            double scale = 0;
            for (double x : want) scale = std::max(scale, std::abs(x));
            for (int d = 0; d < s.head_dim; ++d) {
              ASSERT_NEAR(pages.Get(0, dst[i], h, d), want[d],
                          1e-5 + 3 * UnitRoundoff(dtype) * scale)
                  << c.name << " token " << i << " d=" << d;
              ASSERT_EQ(pages.Get(1, dst[i], h, d), before[before.size() / 2 + row + d]);
            }
          }
        }
        if (baseline.empty()) {
          baseline = pages.Logical();
        } else {
          EXPECT_EQ(pages.Logical(), baseline) << c.name;
        }
      }
    }
  }
}

// Float64 attention of query row `q` (head_dim) over keys [0, last] of one sequence.
std::vector<double> ReferenceAttention(const GuardedPages& pages, const float* q,
                                       const int32_t* table, int kv_head, int64_t last,
                                       const CaseShape& s) {
  const double scale = 1.0 / std::sqrt(double(s.head_dim));
  std::vector<double> scores(last + 1);
  double max_score = -INFINITY;
  for (int64_t j = 0; j <= last; ++j) {
    const int64_t slot = int64_t{table[j / s.block_size]} * s.block_size + j % s.block_size;
    double dot = 0;
    for (int d = 0; d < s.head_dim; ++d) dot += double(q[d]) * pages.Get(0, slot, kv_head, d);
    scores[j] = dot * scale;
    max_score = std::max(max_score, scores[j]);
  }
  double total = 0;
  for (double& x : scores) total += (x = std::exp(x - max_score));
  std::vector<double> out(s.head_dim, 0.0);
  for (int64_t j = 0; j <= last; ++j) {
    const int64_t slot = int64_t{table[j / s.block_size]} * s.block_size + j % s.block_size;
    for (int d = 0; d < s.head_dim; ++d)
      out[d] += scores[j] / total * pages.Get(1, slot, kv_head, d);
  }
  return out;
}

TEST(LayoutOpsTest, PagedAttentionMatchesFloat64AndIsBitIdenticalAcrossLayouts) {
  const CaseShape s;
  // Sequence 0: 10 cached tokens, 3 query tokens (chunked prefill); sequence 1: decode at 4.
  const std::vector<int32_t> query_start_loc = {0, 3, 4};
  const std::vector<int32_t> kv_lens = {10, 5};
  const std::vector<int32_t> positions = {7, 8, 9, 4};
  const std::vector<int32_t> block_tables = {4, 0, 2, 3, 1, 0};  // [2, 3], shuffled blocks
  const int64_t num_tokens = 4;
  const auto q = RandomFloats(num_tokens * kNumQHeads * s.head_dim, 60);
  const int64_t elements = 2 * int64_t{s.num_blocks} * s.block_size * s.num_kv_heads * s.head_dim;
  const auto contents = RandomFloats(static_cast<size_t>(elements), 61, -2.0f, 2.0f);
  for (DType dtype : kDTypes) {
    std::vector<float> baseline;
    for (const LayoutCase& c : AllLayoutCases()) {
      GuardedPages pages(c, dtype);
      pages.SetLogical(contents);
      const std::vector<uint8_t> before = pages.bytes();
      std::vector<float> out(q.size(), 0.0f);
      PagedAttentionArgs args{.q = q.data(),
                              .out = out.data(),
                              .positions = positions.data(),
                              .query_start_loc = query_start_loc.data(),
                              .kv_lens = kv_lens.data(),
                              .block_tables = block_tables.data(),
                              .num_tokens = num_tokens,
                              .num_seqs = 2,
                              .num_q_heads = kNumQHeads,
                              .max_blocks_per_seq = 3,
                              .cache = pages.layout()};
      ASSERT_TRUE(cpu::PagedAttention(args).ok()) << c.name;
      EXPECT_EQ(pages.bytes(), before) << c.name << ": attention wrote to the pages";
      for (int64_t t = 0; t < num_tokens; ++t) {
        const int seq = t < 3 ? 0 : 1;
        for (int h = 0; h < kNumQHeads; ++h) {
          const float* qh = &q[(t * kNumQHeads + h) * s.head_dim];
          const auto want = ReferenceAttention(pages, qh, &block_tables[seq * 3],
                                               h / (kNumQHeads / s.num_kv_heads), positions[t], s);
          for (int d = 0; d < s.head_dim; ++d) {
            ASSERT_NEAR(out[(t * kNumQHeads + h) * s.head_dim + d], want[d], 2e-5)
                << c.name << " t=" << t << " h=" << h;
          }
        }
      }
      if (baseline.empty()) {
        baseline = out;
      } else {
        EXPECT_EQ(out, baseline) << c.name;
      }
    }
  }
}

// One bad layout: what to change and the field the error must name.
struct BadLayout {
  std::string what;
  std::string field;  // substring of the message
  std::function<void(PagedKvLayout&)> mutate;
};

std::vector<BadLayout> BadLayouts() {
  const CaseShape s;
  return {
      {"negative head stride", "cache.head_stride", [](PagedKvLayout& l) { l.head_stride = -16; }},
      {"negative token stride", "cache.token_stride",
       [](PagedKvLayout& l) { l.token_stride = -1; }},
      {"negative block stride", "cache.block_stride",
       [](PagedKvLayout& l) { l.block_stride = -200; }},
      {"heads overlap", "cache.head_stride",
       [=](PagedKvLayout& l) { l.head_stride = s.head_dim - 2; }},
      {"tokens overlap heads", "cache.token_stride",
       [=](PagedKvLayout& l) {
         l.head_stride = s.head_dim;
         l.token_stride = 2 * s.head_dim;
         l.block_stride = 0;
       }},
      {"blocks overlap", "cache.block_stride",
       [=](PagedKvLayout& l) { l.block_stride = s.Page() - s.head_dim; }},
      {"huge stride", "2^56", [](PagedKvLayout& l) { l.block_stride = int64_t{1} << 60; }},
      {"v on a k element", "overlap",
       [=](PagedKvLayout& l) {
         l.v = static_cast<char*>(l.k) + s.head_dim * s.num_kv_heads * DTypeSize(l.dtype);
       }},
      {"v between elements", "multiple of the element size",
       [](PagedKvLayout& l) { l.v = static_cast<char*>(l.k) + 1; }},
  };
}

TEST(LayoutOpsTest, BadStridesAreInvalidArgumentAndWriteNothing) {
  const CaseShape s;
  const RopeConfig config = TestRope();
  auto table = RopeTable::Create(config, 256);
  ASSERT_TRUE(table.ok());
  const std::vector<int64_t> src = {0, 1};
  const std::vector<int64_t> dst = {5, 6};
  const std::vector<int32_t> pos = {1, 2};
  const std::vector<int32_t> qsl = {0, 1};
  const std::vector<int32_t> kv_len = {3};
  const std::vector<int32_t> tables = {1};
  for (const LayoutCase& c : AllLayoutCases()) {
    GuardedPages pages(c, DType::kF32);
    const std::vector<uint8_t> before = pages.bytes();
    for (const BadLayout& bad : BadLayouts()) {
      PagedKvLayout layout = pages.layout();
      bad.mutate(layout);
      KvWrite w(s, 4, 70);
      const std::vector<float> q0 = w.q;
      const absl::Status write = cpu::ReshapeAndCache(w.Args(*table, layout));
      EXPECT_EQ(write.code(), absl::StatusCode::kInvalidArgument) << c.name << ": " << bad.what;
      EXPECT_NE(write.message().find(bad.field), std::string::npos)
          << c.name << ": " << bad.what << ": " << write.message();
      EXPECT_EQ(w.q, q0) << c.name << ": " << bad.what;
      ReRotateArgs rerotate{.src_slots = src.data(),
                            .dst_slots = dst.data(),
                            .old_positions = pos.data(),
                            .new_positions = pos.data(),
                            .num_tokens = 2,
                            .rope = table->View(),
                            .cache = layout};
      EXPECT_EQ(cpu::ReRotate(rerotate).code(), absl::StatusCode::kInvalidArgument)
          << c.name << ": " << bad.what;
      std::vector<float> out(kNumQHeads * s.head_dim, 5.0f);
      const std::vector<float> q(out.size(), 0.5f);
      PagedAttentionArgs attention{.q = q.data(),
                                   .out = out.data(),
                                   .positions = pos.data(),
                                   .query_start_loc = qsl.data(),
                                   .kv_lens = kv_len.data(),
                                   .block_tables = tables.data(),
                                   .num_tokens = 1,
                                   .num_seqs = 1,
                                   .num_q_heads = kNumQHeads,
                                   .max_blocks_per_seq = 1,
                                   .cache = layout};
      EXPECT_EQ(cpu::PagedAttention(attention).code(), absl::StatusCode::kInvalidArgument)
          << c.name << ": " << bad.what;
      EXPECT_EQ(out, std::vector<float>(out.size(), 5.0f)) << c.name << ": " << bad.what;
      EXPECT_EQ(pages.bytes(), before) << c.name << ": " << bad.what;
    }
  }
}

TEST(LayoutOpsTest, InterleavedKAndVWithoutOverlapAreAccepted) {
  // [num_blocks, block_size, heads, 2, head_dim]: K and V of each head side by side, v = k + hd.
  const CaseShape s;
  std::vector<float> storage(static_cast<size_t>(s.Page()) * 2 * s.num_blocks, -1.0f);
  PagedKvLayout layout{.k = storage.data(),
                       .v = storage.data() + s.head_dim,
                       .dtype = DType::kF32,
                       .num_blocks = s.num_blocks,
                       .block_size = s.block_size,
                       .num_kv_heads = s.num_kv_heads,
                       .head_dim = s.head_dim,
                       .block_stride = 2 * s.Page(),  // the tight page would end before V
                       .head_stride = 2 * s.head_dim};
  const RopeConfig config = TestRope();
  auto table = RopeTable::Create(config, 256);
  ASSERT_TRUE(table.ok());
  KvWrite w(s, 6, 80);
  ASSERT_TRUE(cpu::ReshapeAndCache(w.Args(*table, layout)).ok());
  const int64_t row = int64_t{s.num_kv_heads} * s.head_dim;
  for (int64_t t = 0; t < w.num_tokens; ++t) {
    if (w.slots[t] < 0) continue;
    for (int h = 0; h < s.num_kv_heads; ++h) {
      for (int d = 0; d < s.head_dim; ++d) {
        const int64_t index = ((w.slots[t] * s.num_kv_heads + h) * 2 + 1) * s.head_dim + d;
        ASSERT_EQ(storage[index], w.v[t * row + h * s.head_dim + d]);
      }
    }
  }
  layout.block_stride = 0;  // the tight page: V's last row would land on the next block's K
  EXPECT_EQ(cpu::ReshapeAndCache(w.Args(*table, layout)).code(),
            absl::StatusCode::kInvalidArgument);
  layout.block_stride = 2 * s.Page();
  layout.v = storage.data() + s.head_dim - 2;  // V rows now overlap K rows
  EXPECT_EQ(cpu::ReshapeAndCache(w.Args(*table, layout)).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagedkv
