// Copyright 2026 The pagedkv Authors.
//
// The CPU backend's thread pool and its threaded, vectorised ops (kernels/cpu/threaded_ops.h):
// every item of a ParallelFor runs exactly once; results are bit-identical for any thread count
// and a row's result does not depend on the other rows of the batch (attention's tokens walked
// together over shared blocks included); extreme SwiGLU gates and
// long, odd-length rows still match float64 references.
#include "kernels/cpu/threaded_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/simd/simd_kernels.h"
#include "kernels/cpu/thread_pool.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/kernels/rope_table.h"
#include "pagedkv/rope_config.h"
#include "tests/kernels/kernel_test_util.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::RandomFloats;

std::vector<std::unique_ptr<cpu::ThreadPool>> Pools() {
  std::vector<std::unique_ptr<cpu::ThreadPool>> pools;
  pools.push_back(nullptr);  // the calling thread alone
  for (int32_t n : {1, 2, 3}) {
    auto pool = cpu::ThreadPool::Create(n);
    EXPECT_TRUE(pool.ok()) << pool.status();
    pools.push_back(std::move(pool).value());
  }
  return pools;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(ThreadPoolTest, RejectsBadCounts) {
  for (int32_t n : {0, -1, cpu::kMaxThreads + 1}) {
    auto pool = cpu::ThreadPool::Create(n);
    ASSERT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument) << n;
    EXPECT_NE(pool.status().message().find("num_threads"), std::string::npos);
  }
  EXPECT_GE(cpu::HardwareThreads(), 1);
}

TEST(ThreadPoolTest, EveryItemRunsExactlyOnceInContiguousChunks) {
  auto pools = Pools();
  for (auto& pool : pools) {
    for (int64_t items : {0, 1, 2, 7, 100, 1001}) {
      for (int64_t min_items : {1, 3, 64}) {
        std::vector<int> hits(static_cast<size_t>(items), 0);
        cpu::ParallelFor(pool.get(), items, min_items, [&](int64_t begin, int64_t end) {
          ASSERT_LE(0, begin);
          ASSERT_LT(begin, end);
          ASSERT_LE(end, items);
          for (int64_t i = begin; i < end; ++i) ++hits[static_cast<size_t>(i)];
        });
        for (int64_t i = 0; i < items; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << i;
      }
    }
  }
}

TEST(ThreadPoolTest, ManyBackToBackJobsEachRunEveryItemOnce) {
  auto pool = cpu::ThreadPool::Create(3);
  ASSERT_TRUE(pool.ok());
  std::vector<int> hits(97, 0);
  for (int job = 0; job < 3000; ++job) {
    const int64_t items = 1 + job % 97;
    (*pool)->ParallelFor(items, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) ++hits[static_cast<size_t>(i)];
    });
    for (int64_t i = 0; i < items; ++i) {
      ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << "job " << job << " item " << i;
      hits[static_cast<size_t>(i)] = 0;
    }
  }
}

// Consecutive jobs with growing chunk counts: a worker that read the previous job's state and
// then this job's chunk count must not claim a chunk (it once did, ran a stale range and counted
// it, and the caller waited forever for an exact count it had passed).
TEST(ThreadPoolTest, JobsOfChangingSizeRunEveryItemOnceAndReturn) {
  for (int32_t threads : {2, 4}) {
    auto pool = cpu::ThreadPool::Create(threads);
    ASSERT_TRUE(pool.ok());
    std::vector<int> hits(64, 0);
    for (int job = 0; job < 20000; ++job) {
      const int64_t items = job % 2 == 0 ? 1 + job % 3 : 64;
      (*pool)->ParallelFor(items, 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) ++hits[static_cast<size_t>(i)];
      });
      for (int64_t i = 0; i < items; ++i) {
        ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << "job " << job << " item " << i;
        hits[static_cast<size_t>(i)] = 0;
      }
    }
  }
}

TEST(ThreadedLinearTest, BitIdenticalForAnyThreadCountAndAnyBatch) {
  struct Shape {
    int64_t m, n, k;
  };
  for (Shape s : {Shape{37, 131, 172}, Shape{8, 512, 64}, Shape{3, 64, 4096}, Shape{1, 9, 5}}) {
    const auto x = RandomFloats(s.m * s.k, 11);
    const auto w = RandomFloats(s.n * s.k, 12);
    // Row by row (m = 1, one thread) is the reference for every batched, threaded run.
    std::vector<float> rows(s.m * s.n);
    for (int64_t i = 0; i < s.m; ++i) {
      ASSERT_TRUE(cpu::Linear({.x = x.data() + i * s.k,
                               .w = w.data(),
                               .y = rows.data() + i * s.n,
                               .m = 1,
                               .n = s.n,
                               .k = s.k},
                              nullptr)
                      .ok());
    }
    auto pools = Pools();
    for (auto& pool : pools) {
      std::vector<float> y(s.m * s.n, -1.0f);
      ASSERT_TRUE(
          cpu::Linear({.x = x.data(), .w = w.data(), .y = y.data(), .m = s.m, .n = s.n, .k = s.k},
                      pool.get())
              .ok());
      EXPECT_TRUE(BitEqual(y, rows)) << s.m << "x" << s.n << "x" << s.k;
    }
  }
}

TEST(ThreadedLinearTest, BadInputIsInvalidArgumentAndOutputUntouched) {
  auto pool = cpu::ThreadPool::Create(2);
  ASSERT_TRUE(pool.ok());
  const auto x = RandomFloats(8, 1);
  std::vector<float> y(8, 7.0f);
  EXPECT_EQ(cpu::Linear({.x = x.data(), .w = x.data(), .y = y.data(), .m = 1, .n = 0, .k = 8},
                        pool->get())
                .code(),
            absl::StatusCode::kInvalidArgument);
  for (float v : y) EXPECT_EQ(v, 7.0f);
}

TEST(ThreadedElementwiseTest, SwiGluMatchesFloat64ForExtremeGates) {
  const int64_t rows = 5, dim = 1000;
  const auto gate = RandomFloats(rows * dim, 21, -120.0f, 120.0f);
  const auto up = RandomFloats(rows * dim, 22, -3.0f, 3.0f);
  auto pools = Pools();
  std::vector<float> first;
  for (auto& pool : pools) {
    std::vector<float> out(rows * dim);
    ASSERT_TRUE(
        cpu::SwiGlu(
            {.gate = gate.data(), .up = up.data(), .out = out.data(), .num_rows = rows, .dim = dim},
            pool.get())
            .ok());
    for (size_t i = 0; i < out.size(); ++i) {
      const double g = gate[i];
      const double ref = g / (1.0 + std::exp(-g)) * up[i];
      ASSERT_NEAR(out[i], ref, 1e-5 * (1 + std::abs(ref))) << "gate " << g;
    }
    if (first.empty()) first = out;
    EXPECT_TRUE(BitEqual(out, first));
  }
}

TEST(ThreadedElementwiseTest, RmsNormMatchesFloat64AndThreadCountsAgree) {
  const int64_t rows = 65, dim = 4099;  // odd length: vector body plus scalar tail
  const auto x = RandomFloats(rows * dim, 31, -4.0f, 4.0f);
  const auto weight = RandomFloats(dim, 32);
  auto pools = Pools();
  std::vector<float> first;
  for (auto& pool : pools) {
    std::vector<float> out(rows * dim);
    ASSERT_TRUE(cpu::RmsNorm({.x = x.data(),
                              .weight = weight.data(),
                              .out = out.data(),
                              .num_rows = rows,
                              .dim = dim,
                              .eps = 1e-5f},
                             pool.get())
                    .ok());
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t d = 0; d < dim; ++d) ss += double(x[r * dim + d]) * x[r * dim + d];
      const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
      for (int64_t d = 0; d < dim; ++d) {
        const double ref = x[r * dim + d] * inv * weight[d];
        ASSERT_NEAR(out[r * dim + d], ref, 2e-6 * (1 + std::abs(ref)));
      }
    }
    if (first.empty()) first = out;
    EXPECT_TRUE(BitEqual(out, first));
  }
}

// A batch whose tokens attention walks together (attention_rows.h): a prefill chunk, decode
// tokens of sequences whose tables begin with the same blocks (one sharing only its first two
// blocks, one too short to share), and a sequence of its own blocks.
struct SharedPrefixBatch {
  static constexpr int32_t kBlockSize = 16, kKvHeads = 2, kQHeads = 6, kMaxBlocks = 8;
  explicit SharedPrefixBatch(int32_t head_dim) : hd(head_dim) {
    const std::vector<std::vector<int32_t>> seq_tables = {
        {0, 1, 2, 3, 4},   // prefill: tokens at 60..79 of 80
        {0, 1, 2, 3, 10},  // decode tokens sharing 4 blocks (64 keys) and their own last one
        {0, 1, 2, 3, 11},
        {0, 1, 2, 3, 12},
        {0, 1, 2, 3, 13, 14},
        {0, 1, 20, 21, 22},            // shares 2 blocks (one chunk) with the others
        {30, 31, 32, 33, 34, 35, 36},  // its own blocks
        {0, 1, 2}};                    // 40 keys: too few to share
    kv_lens = {80, 70, 75, 79, 90, 72, 100, 40};
    tables.assign(seq_tables.size() * kMaxBlocks, -1);
    for (size_t s = 0; s < seq_tables.size(); ++s) {
      std::copy(seq_tables[s].begin(), seq_tables[s].end(), tables.begin() + s * kMaxBlocks);
    }
    qsl = {0, 20};
    for (int32_t p = 60; p < 80; ++p) positions.push_back(p);
    for (size_t s = 1; s < kv_lens.size(); ++s) {
      positions.push_back(kv_lens[s] - 1);
      qsl.push_back(qsl.back() + 1);
    }
    k = RandomFloats(int64_t{40} * kBlockSize * kKvHeads * hd, 31, -2.0f, 2.0f);
    v = RandomFloats(k.size(), 32);
    q = RandomFloats(static_cast<int64_t>(positions.size()) * kQHeads * hd, 33, -2.0f, 2.0f);
  }
  // The batch's arguments; `token` >= 0: that token alone, as the only token of its sequence.
  PagedAttentionArgs Args(float* out, int32_t token = -1) {
    PagedAttentionArgs a{.q = q.data(),
                         .out = out,
                         .positions = positions.data(),
                         .query_start_loc = qsl.data(),
                         .kv_lens = kv_lens.data(),
                         .block_tables = tables.data(),
                         .num_tokens = static_cast<int64_t>(positions.size()),
                         .num_seqs = static_cast<int32_t>(kv_lens.size()),
                         .num_q_heads = kQHeads,
                         .max_blocks_per_seq = kMaxBlocks,
                         .cache = {.k = k.data(),
                                   .v = v.data(),
                                   .dtype = DType::kF32,
                                   .num_blocks = 40,
                                   .block_size = kBlockSize,
                                   .num_kv_heads = kKvHeads,
                                   .head_dim = hd}};
    if (token < 0) return a;
    const auto s =
        static_cast<int32_t>(std::upper_bound(qsl.begin(), qsl.end(), token) - qsl.begin() - 1);
    a.q += int64_t{token} * kQHeads * hd;
    a.positions += token;
    a.query_start_loc = kOneToken;
    a.kv_lens += s;
    a.block_tables += int64_t{s} * kMaxBlocks;
    a.num_tokens = 1;
    a.num_seqs = 1;
    return a;
  }
  static constexpr int32_t kOneToken[2] = {0, 1};
  int32_t hd;
  std::vector<int32_t> kv_lens, tables, qsl, positions;
  std::vector<float> k, v, q;
};

TEST(ThreadedAttentionTest, TokensWalkedTogetherGetTheirOwnBitsForAnyThreadCount) {
  for (int32_t hd : {64, 40}) {  // whole vectors, and the general row loop
    SharedPrefixBatch batch(hd);
    const int64_t row = int64_t{SharedPrefixBatch::kQHeads} * hd;
    const auto tokens = static_cast<int32_t>(batch.positions.size());
    std::vector<float> alone(static_cast<size_t>(tokens * row), -1.0f);
    for (int32_t t = 0; t < tokens; ++t) {
      ASSERT_TRUE(cpu::PagedAttention(batch.Args(alone.data() + t * row, t), nullptr).ok());
    }
    auto plan = cpu::PlanAttentionRows(batch.Args(nullptr), batch.Args(nullptr).cache, 1);
    ASSERT_TRUE(plan.ok()) << plan.status();
    std::vector<std::pair<int32_t, int64_t>> runs;  // (tokens, shared keys)
    for (const cpu::AttentionRowRun& run : plan->runs)
      runs.emplace_back(run.count, run.shared_keys);
    EXPECT_EQ(runs, (std::vector<std::pair<int32_t, int64_t>>{
                        {8, 96}, {8, 96}, {4, 96}, {1, 0}, {4, 64}, {1, 0}, {1, 0}}))
        << "the prefill in runs of 24 / 3 heads, the four sequences on blocks 0-3 together";
    auto pools = Pools();
    pools.push_back(cpu::ThreadPool::Create(16).value());  // 32 jobs wanted: runs split in halves
    for (const auto& pool : pools) {
      std::vector<float> together(alone.size(), -1.0f);
      ASSERT_TRUE(cpu::PagedAttention(batch.Args(together.data()), pool.get()).ok());
      EXPECT_TRUE(BitEqual(together, alone))
          << "head_dim " << hd << ", " << (pool ? pool->num_threads() : 0) << " threads";
    }
  }
}

TEST(ThreadedSampleTest, SameTokensForAnyThreadCount) {
  const int64_t rows = 24, vocab = 5000;
  const auto logits = RandomFloats(rows * vocab, 41, -4.0f, 4.0f);
  std::vector<SamplingParams> params(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {  // greedy, temperature, top-p, top-k and min-p rows
    params[r] = {.temperature = r % 5 == 0 ? 0.0f : 0.7f,
                 .top_p = r % 5 == 2 ? 0.9f : 1.0f,
                 .seed = static_cast<uint64_t>(100 + r),
                 .counter = static_cast<uint64_t>(r),
                 .top_k = r % 5 == 3 ? 40 : 0,
                 .min_p = r % 5 == 4 ? 0.05f : 0.0f};
  }
  auto sample = [&](cpu::ThreadPool* pool) {
    std::vector<int32_t> tokens(static_cast<size_t>(rows), -1);
    EXPECT_TRUE(cpu::Sample({.logits = logits.data(),
                             .params = params.data(),
                             .out_tokens = tokens.data(),
                             .num_seqs = rows,
                             .vocab_size = vocab},
                            pool)
                    .ok());
    return tokens;
  };
  const std::vector<int32_t> alone = sample(nullptr);
  EXPECT_EQ(alone, [&] {  // the one-row-at-a-time entry point
    std::vector<int32_t> tokens(static_cast<size_t>(rows), -1);
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_TRUE(cpu::Sample({.logits = logits.data() + r * vocab,
                               .params = params.data() + r,
                               .out_tokens = tokens.data() + r,
                               .num_seqs = 1,
                               .vocab_size = vocab})
                      .ok());
    }
    return tokens;
  }());
  for (const auto& pool : Pools()) {
    EXPECT_EQ(sample(pool.get()), alone) << (pool ? pool->num_threads() : 0) << " threads";
  }
}

TEST(SimdRopeTest, VectorRotationIsBitIdenticalToTheScalarOne) {
  for (RopeConfig config : pagedkv::testing::AllScalingConfigs()) {
    for (int32_t head_dim : {config.head_dim, 18}) {  // 18: 9 pairs, vector body plus tail
      config.head_dim = head_dim;
      if (config.rotary_dim > head_dim) config.rotary_dim = 10;  // partial, 5 pairs
      auto table = RopeTable::Create(config, 64);
      ASSERT_TRUE(table.ok()) << table.status();
      const RopeTableView rope = table->View();
      for (int64_t position : {0, 5, 63, 64, 1000, -7}) {  // in the table, past it, negative
        const auto x = RandomFloats(3 * head_dim, static_cast<uint32_t>(position + 100));
        std::vector<float> scalar = x;
        for (int h = 0; h < 3; ++h) RopeRotateHead(rope, position, scalar.data() + h * head_dim);
        std::vector<float> vec = x;
        cpu::simd::RotationCoefficients r;
        cpu::simd::RopeCoefficients(rope, position, &r);
        cpu::simd::RotateHeads(r, vec.data(), 3, head_dim);
        EXPECT_TRUE(BitEqual(vec, scalar)) << "head_dim " << head_dim << " position " << position;
      }
    }
  }
}

TEST(SimdDispatchTest, NamesTheChosenTarget) {
  const std::string name = cpu::simd::TargetName();
  EXPECT_FALSE(name.empty());
}

}  // namespace
}  // namespace pagedkv
