// Copyright 2026 The pagedkv Authors.
//
// The bad-entry word of deferred content checks (pagedkv/kernels/bad_entry.h): encoding round trip
// and order, the status it turns into, and FirstBadEntry (what the CUDA check kernels compute)
// against a brute-force scan and the CPU content checks, over seeded random index arrays.
#include "pagedkv/kernels/bad_entry.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/content_checks.h"

namespace pagedkv {
namespace {

constexpr CheckedOp kOps[] = {CheckedOp::kRope,           CheckedOp::kReshapeAndCache,
                              CheckedOp::kReRotate,       CheckedOp::kEmbeddingGather,
                              CheckedOp::kPagedAttention, CheckedOp::kSample};

TEST(BadEntryTest, EncodingRoundTripsAndOrdersByArrayThenIndex) {
  std::mt19937_64 rng(1);
  for (CheckedOp op : kOps) {
    for (int a = 1; a <= 11; ++a) {
      const auto array = static_cast<CheckedArray>(a);
      for (int trial = 0; trial < 50; ++trial) {
        const int64_t index = static_cast<int64_t>(rng() % (uint64_t{1} << 50)) - 1000;
        const uint64_t word = EncodeBadEntry(op, array, index);
        ASSERT_NE(word, kNoBadEntry);
        const BadEntry entry = DecodeBadEntry(word);
        EXPECT_EQ(entry.op, op);
        EXPECT_EQ(entry.array, array);
        const int64_t clamped = index < 0 ? 0 : std::min(index, kMaxBadEntryIndex);
        EXPECT_EQ(entry.index, clamped);
        // Same op: lower array first, then lower index.
        const int64_t other = static_cast<int64_t>(rng() % kMaxBadEntryIndex);
        if (a < 11) {
          EXPECT_LT(word, EncodeBadEntry(op, static_cast<CheckedArray>(a + 1), 0));
        }
        EXPECT_EQ(EncodeBadEntry(op, array, other) < word, other < clamped);
      }
    }
  }
}

TEST(BadEntryTest, StatusNamesTheEntryOrRejectsAForeignWord) {
  EXPECT_TRUE(BadEntryStatus(kNoBadEntry).ok());
  const absl::Status s =
      BadEntryStatus(EncodeBadEntry(CheckedOp::kReRotate, CheckedArray::kDstSlots, 41));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ReRotate: dst_slots[41] is invalid"), std::string::npos)
      << s.message();
  for (uint64_t foreign : {uint64_t{0x1234}, ~uint64_t{0}, uint64_t{7} << 56,
                           (uint64_t{2} << 56) | (uint64_t{12} << 48)}) {
    const absl::Status f = BadEntryStatus(foreign);
    EXPECT_EQ(f.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(f.message().find("not a bad-entry word"), std::string::npos) << f.message();
  }
}

// Brute force: the (array, index) of the first bad entry of `arrays` scanned in the given order.
struct Scan {
  CheckedArray array;
  std::vector<bool> bad;
};
uint64_t FirstOf(CheckedOp op, const std::vector<Scan>& arrays) {
  for (const Scan& scan : arrays) {
    for (size_t i = 0; i < scan.bad.size(); ++i) {
      if (scan.bad[i]) return EncodeBadEntry(op, scan.array, static_cast<int64_t>(i));
    }
  }
  return kNoBadEntry;
}

TEST(BadEntryTest, FirstBadEntryOfKvWriteAndReRotateMatchesBruteForceAndCpuCheck) {
  std::mt19937 rng(2);
  constexpr int64_t kNumSlots = 64;
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 20);
    const int num_bad = static_cast<int>(rng() % 4);
    std::vector<int64_t> slots(n), src(n), dst(n);
    std::vector<int32_t> positions(n), old_positions(n), new_positions(n);
    for (int64_t t = 0; t < n; ++t) {
      slots[t] = static_cast<int64_t>(rng() % (kNumSlots + 1)) - 1;  // -1 skips
      src[t] = rng() % kNumSlots;
      dst[t] = rng() % kNumSlots;
      positions[t] = static_cast<int32_t>(rng() % 100);
      old_positions[t] = static_cast<int32_t>(rng() % 100);
      new_positions[t] = static_cast<int32_t>(rng() % 100);
    }
    for (int b = 0; b < num_bad; ++b) {
      const int64_t t = rng() % n;
      switch (rng() % 6) {
        case 0:
          slots[t] = rng() % 2 ? kNumSlots : -2;
          break;
        case 1:
          src[t] = kNumSlots + 3;
          break;
        case 2:
          dst[t] = -1;
          break;
        case 3:
          positions[t] = -5;
          break;
        case 4:
          old_positions[t] = -1;
          break;
        default:
          new_positions[t] = -7;
          break;
      }
    }
    const auto bad_slot = [](const std::vector<int64_t>& v, bool skip) {
      std::vector<bool> bad;
      for (int64_t x : v) bad.push_back(!((skip && x == -1) || (x >= 0 && x < kNumSlots)));
      return bad;
    };
    const auto bad_position = [](const std::vector<int32_t>& v) {
      std::vector<bool> bad;
      for (int32_t x : v) bad.push_back(x < 0);
      return bad;
    };
    PagedKvLayout cache{.num_blocks = 16, .block_size = 4};
    ReshapeAndCacheArgs write{.positions = positions.data(),
                              .slot_mapping = slots.data(),
                              .num_tokens = n,
                              .cache = cache};
    const uint64_t want_write =
        FirstOf(CheckedOp::kReshapeAndCache, {{CheckedArray::kSlotMapping, bad_slot(slots, true)},
                                              {CheckedArray::kPositions, bad_position(positions)}});
    EXPECT_EQ(FirstBadEntry(write), want_write) << "trial " << trial;
    EXPECT_EQ(CheckReshapeAndCacheContents(write).ok(), want_write == kNoBadEntry);
    write.rotate = false;  // positions are not read
    EXPECT_EQ(FirstBadEntry(write), FirstOf(CheckedOp::kReshapeAndCache,
                                            {{CheckedArray::kSlotMapping, bad_slot(slots, true)}}));
    ReRotateArgs rerotate{.src_slots = src.data(),
                          .dst_slots = dst.data(),
                          .old_positions = old_positions.data(),
                          .new_positions = new_positions.data(),
                          .num_tokens = n,
                          .cache = cache};
    const uint64_t want_rerotate =
        FirstOf(CheckedOp::kReRotate, {{CheckedArray::kSrcSlots, bad_slot(src, false)},
                                       {CheckedArray::kDstSlots, bad_slot(dst, false)},
                                       {CheckedArray::kOldPositions, bad_position(old_positions)},
                                       {CheckedArray::kNewPositions, bad_position(new_positions)}});
    EXPECT_EQ(FirstBadEntry(rerotate), want_rerotate) << "trial " << trial;
    const absl::Status check = CheckReRotateContents(rerotate);
    EXPECT_EQ(check.ok(), want_rerotate == kNoBadEntry);
    if (!check.ok()) {  // the CPU check reports the same first entry
      const BadEntry entry = DecodeBadEntry(want_rerotate);
      const std::string name = absl::StrCat(CheckedArrayName(entry.array), "[", entry.index, "]");
      EXPECT_NE(check.message().find(name), std::string::npos) << check.message() << " vs " << name;
    }
  }
}

// A valid two-sequence attention batch, then one bad entry at a time.
TEST(BadEntryTest, FirstBadEntryOfPagedAttentionNamesEachInjectedEntry) {
  struct Injection {
    CheckedArray array;
    int64_t index;
    std::function<void(std::vector<int32_t>&, std::vector<int32_t>&, std::vector<int32_t>&,
                       std::vector<int32_t>&)>
        apply;  // (query_start_loc, kv_lens, block_tables, positions)
  };
  using V = std::vector<int32_t>;
  const std::vector<Injection> injections = {
      {CheckedArray::kQueryStartLoc, 0, [](V& q, V&, V&, V&) { q[0] = 1; }},
      {CheckedArray::kQueryStartLoc, 2, [](V& q, V&, V&, V&) { q[2] = 3; }},
      {CheckedArray::kQueryStartLoc, 1, [](V& q, V&, V&, V&) { q[1] = -1; }},
      {CheckedArray::kKvLens, 1, [](V&, V& k, V&, V&) { k[1] = 0; }},
      {CheckedArray::kKvLens, 0, [](V&, V& k, V&, V&) { k[0] = 13; }},  // > capacity 12
      {CheckedArray::kBlockTables, 4, [](V&, V&, V& b, V&) { b[4] = 16; }},
      {CheckedArray::kPositions, 3, [](V&, V&, V&, V& p) { p[3] = -2; }},
  };
  for (const Injection& injection : injections) {
    V query_start_loc = {0, 3, 4};
    V kv_lens = {10, 5};
    V block_tables = {4, 0, 2, 3, 1, 9};  // [2, 3]; entry 5 is unused (kv_len 5 uses 2 blocks)
    V positions = {7, 8, 9, 4};
    PagedAttentionArgs args{.positions = positions.data(),
                            .query_start_loc = query_start_loc.data(),
                            .kv_lens = kv_lens.data(),
                            .block_tables = block_tables.data(),
                            .num_tokens = 4,
                            .num_seqs = 2,
                            .max_blocks_per_seq = 3,
                            .cache = PagedKvLayout{.num_blocks = 16, .block_size = 4}};
    ASSERT_EQ(FirstBadEntry(args), kNoBadEntry);
    ASSERT_TRUE(CheckPagedAttentionContents(args).ok());
    injection.apply(query_start_loc, kv_lens, block_tables, positions);
    const uint64_t word = FirstBadEntry(args);
    const BadEntry entry = DecodeBadEntry(word);
    EXPECT_EQ(entry.op, CheckedOp::kPagedAttention);
    EXPECT_EQ(entry.array, injection.array) << CheckedArrayName(injection.array);
    EXPECT_EQ(entry.index, injection.index) << CheckedArrayName(injection.array);
    const absl::Status check = CheckPagedAttentionContents(args);
    EXPECT_FALSE(check.ok());
    EXPECT_NE(check.message().find(CheckedArrayName(injection.array)), std::string::npos)
        << check.message();
  }
}

TEST(BadEntryTest, FirstBadEntryOfTokenIdsAndSamplingParams) {
  std::vector<int32_t> ids = {3, 0, 9, 10, -1};
  EmbeddingGatherArgs gather{.token_ids = ids.data(), .num_tokens = 5, .vocab_size = 10};
  EXPECT_EQ(FirstBadEntry(gather),
            EncodeBadEntry(CheckedOp::kEmbeddingGather, CheckedArray::kTokenIds, 3));
  gather.num_tokens = 3;
  EXPECT_EQ(FirstBadEntry(gather), kNoBadEntry);
  std::vector<SamplingParams> params(4);
  params[2].top_p = 0.0f;
  params[3].temperature = INFINITY;
  SampleArgs sample{.params = params.data(), .num_seqs = 4};
  EXPECT_EQ(FirstBadEntry(sample), EncodeBadEntry(CheckedOp::kSample, CheckedArray::kParams, 2));
  EXPECT_FALSE(CheckSampleContents(sample).ok());
  sample.num_seqs = 2;
  EXPECT_EQ(FirstBadEntry(sample), kNoBadEntry);
  EXPECT_TRUE(CheckSampleContents(sample).ok());
  std::vector<int32_t> positions = {0, 5, -1};
  RopeArgs rope{.positions = positions.data(), .num_tokens = 3};
  EXPECT_EQ(FirstBadEntry(rope), EncodeBadEntry(CheckedOp::kRope, CheckedArray::kPositions, 2));
}

}  // namespace
}  // namespace pagedkv
