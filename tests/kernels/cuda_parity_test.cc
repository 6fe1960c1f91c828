// Copyright 2026 The pagedkv Authors.
//
// GPU parity: every pagedkv::cuda op against the CPU reference on the same inputs, including
// split-K paged attention (few long sequences) and the page ops over every strided layout of
// tests/kernels/layout_cases.h (guard bytes around and between the elements must stay intact).
// Skips when no CUDA device is visible. Bad input is in cuda_bad_input_test.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cublas_handle.h"
#include "kernels/cuda/cuda_check.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/kernels/cuda_ops.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/kernels/rope_table.h"
#include "tests/kernels/cuda_array.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/layout_cases.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::AllScalingConfigs;
using ::pagedkv::testing::RandomFloats;

using cuda_testing::Download;
using cuda_testing::ExpectClose;
using cuda_testing::Upload;

class CudaParityTest : public cuda_testing::CudaDeviceTest {};

TEST_F(CudaParityTest, LinearAndLmHead) {
  const int64_t m = 5, n = 300, k = 96;
  const auto x = RandomFloats(m * k, 1);
  const auto w = RandomFloats(n * k, 2);
  std::vector<float> y_cpu(m * n, 0.5f);
  ASSERT_TRUE(cpu::Linear({.x = x.data(),
                           .w = w.data(),
                           .y = y_cpu.data(),
                           .m = m,
                           .n = n,
                           .k = k,
                           .accumulate = true})
                  .ok());
  auto dx = Upload(x);
  auto dw = Upload(w);
  auto dy = Upload(std::vector<float>(m * n, 0.5f));
  ASSERT_TRUE(cuda::Linear({.x = dx.data(),
                            .w = dw.data(),
                            .y = dy.data(),
                            .m = m,
                            .n = n,
                            .k = k,
                            .accumulate = true},
                           cublas_.get())
                  .ok());
  Sync();
  ExpectClose(Download(dy), y_cpu, 1e-5, 1e-4, "Linear");
  std::vector<float> logits_cpu(m * n);
  ASSERT_TRUE(cpu::LmHead({.hidden = x.data(),
                           .weight = w.data(),
                           .logits = logits_cpu.data(),
                           .num_rows = m,
                           .d_model = k,
                           .vocab_size = n})
                  .ok());
  ASSERT_TRUE(cuda::LmHead({.hidden = dx.data(),
                            .weight = dw.data(),
                            .logits = dy.data(),
                            .num_rows = m,
                            .d_model = k,
                            .vocab_size = n},
                           cublas_.get())
                  .ok());
  Sync();
  ExpectClose(Download(dy), logits_cpu, 1e-5, 1e-4, "LmHead");
}

TEST_F(CudaParityTest, EmbeddingRmsNormSwiGlu) {
  const int64_t vocab = 64, dim = 36, rows = 7;
  const auto table = RandomFloats(vocab * dim, 3);
  const std::vector<int32_t> ids = {0, 63, 5, 5, 17, 40, 2};
  std::vector<float> emb_cpu(rows * dim);
  ASSERT_TRUE(cpu::EmbeddingGather({.table = table.data(),
                                    .token_ids = ids.data(),
                                    .out = emb_cpu.data(),
                                    .num_tokens = rows,
                                    .vocab_size = vocab,
                                    .dim = dim})
                  .ok());
  auto dtable = Upload(table);
  auto dids = Upload(ids);
  auto demb = Upload(std::vector<float>(rows * dim));
  ASSERT_TRUE(cuda::EmbeddingGather({.table = dtable.data(),
                                     .token_ids = dids.data(),
                                     .out = demb.data(),
                                     .num_tokens = rows,
                                     .vocab_size = vocab,
                                     .dim = dim})
                  .ok());
  Sync();
  EXPECT_EQ(Download(demb), emb_cpu);

  const auto weight = RandomFloats(dim, 4);
  std::vector<float> norm_cpu(rows * dim);
  ASSERT_TRUE(cpu::RmsNorm({.x = emb_cpu.data(),
                            .weight = weight.data(),
                            .out = norm_cpu.data(),
                            .num_rows = rows,
                            .dim = dim})
                  .ok());
  auto dweight = Upload(weight);
  auto dnorm = Upload(std::vector<float>(rows * dim));
  ASSERT_TRUE(cuda::RmsNorm({.x = demb.data(),
                             .weight = dweight.data(),
                             .out = dnorm.data(),
                             .num_rows = rows,
                             .dim = dim})
                  .ok());
  Sync();
  ExpectClose(Download(dnorm), norm_cpu, 1e-5, 1e-6, "RmsNorm");

  const auto fused = RandomFloats(rows * 2 * dim, 5, -5.0f, 5.0f);
  std::vector<float> act_cpu(rows * dim);
  ASSERT_TRUE(cpu::SwiGlu({.gate = fused.data(),
                           .up = fused.data() + dim,
                           .out = act_cpu.data(),
                           .num_rows = rows,
                           .dim = dim,
                           .gate_stride = 2 * dim,
                           .up_stride = 2 * dim})
                  .ok());
  auto dfused = Upload(fused);
  auto dact = Upload(std::vector<float>(rows * dim));
  ASSERT_TRUE(cuda::SwiGlu({.gate = dfused.data(),
                            .up = dfused.data() + dim,
                            .out = dact.data(),
                            .num_rows = rows,
                            .dim = dim,
                            .gate_stride = 2 * dim,
                            .up_stride = 2 * dim})
                  .ok());
  Sync();
  ExpectClose(Download(dact), act_cpu, 1e-5, 1e-6, "SwiGlu");
}

// Bytes of one layer's K (or V) pages for `layout`, as fp32 words (over-allocated for 2-byte
// types).
size_t Words(const PagedKvLayout& layout) { return layout.NumElements(); }

std::vector<float> ReadAll(const void* base, DType dtype, int64_t n) {
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = LoadElement(base, dtype, i);
  return out;
}

TEST_F(CudaParityTest, RopeKvWriteAndReRotateForEveryVariantAndDtype) {
  const int32_t nq = 4, nkv = 2, num_blocks = 6, block_size = 4;
  const int64_t n = 9;
  const std::vector<int32_t> positions = {0, 1, 2, 3, 50, 51, 700, 4000, 5};
  const std::vector<int64_t> slots = {0, 1, 2, 3, 9, -1, 17, 23, 12};
  for (const RopeConfig& config : AllScalingConfigs()) {
    auto table = RopeTable::Create(config, 1024);
    ASSERT_TRUE(table.ok());
    auto dtable = cuda::DeviceRopeTable::Upload(*table);
    ASSERT_TRUE(dtable.ok()) << dtable.status();
    const int32_t hd = config.head_dim;
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      PagedKvLayout layout{.dtype = dtype,
                           .num_blocks = num_blocks,
                           .block_size = block_size,
                           .num_kv_heads = nkv,
                           .head_dim = hd};
      std::vector<float> k_pages(Words(layout), 0.0f), v_pages(Words(layout), 0.0f);
      const auto q0 = RandomFloats(n * nq * hd, 6);
      const auto k = RandomFloats(n * nkv * hd, 7);
      const auto v = RandomFloats(n * nkv * hd, 8);
      std::vector<float> q = q0;
      PagedKvLayout host_layout = layout;
      host_layout.k = k_pages.data();
      host_layout.v = v_pages.data();
      ASSERT_TRUE(cpu::ReshapeAndCache({.q = q.data(),
                                        .k = k.data(),
                                        .v = v.data(),
                                        .positions = positions.data(),
                                        .slot_mapping = slots.data(),
                                        .num_tokens = n,
                                        .num_q_heads = nq,
                                        .rope = table->View(),
                                        .cache = host_layout})
                      .ok());
      auto dq = Upload(q0);
      auto dk = Upload(k);
      auto dv = Upload(v);
      auto dpos = Upload(positions);
      auto dslots = Upload(slots);
      auto dk_pages = Upload(std::vector<float>(Words(layout), 0.0f));
      auto dv_pages = Upload(std::vector<float>(Words(layout), 0.0f));
      PagedKvLayout dev_layout = layout;
      dev_layout.k = dk_pages.data();
      dev_layout.v = dv_pages.data();
      ASSERT_TRUE(cuda::ReshapeAndCache({.q = dq.data(),
                                         .k = dk.data(),
                                         .v = dv.data(),
                                         .positions = dpos.data(),
                                         .slot_mapping = dslots.data(),
                                         .num_tokens = n,
                                         .num_q_heads = nq,
                                         .rope = dtable->View(),
                                         .cache = dev_layout})
                      .ok());
      Sync();
      // fp32 FMA contraction on the GPU can move a value by an ulp before rounding to dtype.
      const double u = dtype == DType::kF32 ? 1e-6 : (dtype == DType::kF16 ? 1e-3 : 1e-2);
      ExpectClose(Download(dq), q, 1e-6, 1e-6, "q");
      const int64_t elems = layout.NumElements();
      ExpectClose(ReadAll(Download(dk_pages).data(), dtype, elems),
                  ReadAll(k_pages.data(), dtype, elems), u, 1e-6, "k pages");
      EXPECT_EQ(ReadAll(Download(dv_pages).data(), dtype, elems),
                ReadAll(v_pages.data(), dtype, elems));

      // Re-rotation, both modes, in place and out of place.
      const std::vector<int64_t> src = {0, 9, 17, 23};
      const std::vector<int64_t> dst = {0, 4, 18, 23};
      const std::vector<int32_t> old_pos = {0, 50, 700, 4000};
      const std::vector<int32_t> new_pos = {33, 7, 3000, 1};
      auto dsrc = Upload(src);
      auto ddst = Upload(dst);
      auto dold = Upload(old_pos);
      auto dnew = Upload(new_pos);
      for (ReRotateMode mode : {ReRotateMode::kCompose, ReRotateMode::kDelta}) {
        ASSERT_TRUE(cpu::ReRotate({.src_slots = src.data(),
                                   .dst_slots = dst.data(),
                                   .old_positions = old_pos.data(),
                                   .new_positions = new_pos.data(),
                                   .num_tokens = 4,
                                   .mode = mode,
                                   .rope = table->View(),
                                   .cache = host_layout})
                        .ok());
        ASSERT_TRUE(cuda::ReRotate({.src_slots = dsrc.data(),
                                    .dst_slots = ddst.data(),
                                    .old_positions = dold.data(),
                                    .new_positions = dnew.data(),
                                    .num_tokens = 4,
                                    .mode = mode,
                                    .rope = dtable->View(),
                                    .cache = dev_layout})
                        .ok());
        Sync();
        ExpectClose(ReadAll(Download(dk_pages).data(), dtype, elems),
                    ReadAll(k_pages.data(), dtype, elems), 2 * u, 1e-6, "re-rotated k");
        EXPECT_EQ(ReadAll(Download(dv_pages).data(), dtype, elems),
                  ReadAll(v_pages.data(), dtype, elems));
      }
    }
  }
}

TEST_F(CudaParityTest, PagedAttentionMixedBatch) {
  const int32_t nq = 8, nkv = 2, hd = 64, block_size = 16, num_blocks = 40, max_blocks = 8;
  const std::vector<int32_t> kv_lens = {20, 100, 7, 128};
  const std::vector<int32_t> scheduled = {20, 1, 3, 1};  // prefill, decode, chunk, decode
  std::vector<int32_t> qsl = {0}, positions, tables(kv_lens.size() * max_blocks, -1);
  std::vector<int32_t> blocks(num_blocks);
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), std::mt19937(9));
  size_t next = 0;
  for (size_t s = 0; s < kv_lens.size(); ++s) {
    for (int32_t b = 0; b * block_size < kv_lens[s]; ++b)
      tables[s * max_blocks + b] = blocks[next++];
    for (int32_t p = kv_lens[s] - scheduled[s]; p < kv_lens[s]; ++p) positions.push_back(p);
    qsl.push_back(qsl.back() + scheduled[s]);
  }
  const int64_t num_tokens = positions.size();
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    PagedKvLayout layout{.dtype = dtype,
                         .num_blocks = num_blocks,
                         .block_size = block_size,
                         .num_kv_heads = nkv,
                         .head_dim = hd};
    std::vector<float> k_pages(layout.NumElements()), v_pages(layout.NumElements());
    const auto k_values = RandomFloats(layout.NumElements(), 10, -2.0f, 2.0f);
    const auto v_values = RandomFloats(layout.NumElements(), 11);
    for (int64_t i = 0; i < layout.NumElements(); ++i) {
      StoreElement(k_pages.data(), dtype, i, k_values[i]);
      StoreElement(v_pages.data(), dtype, i, v_values[i]);
    }
    const auto q = RandomFloats(num_tokens * nq * hd, 12, -2.0f, 2.0f);
    std::vector<float> out_cpu(q.size());
    PagedAttentionArgs args{.q = q.data(),
                            .out = out_cpu.data(),
                            .positions = positions.data(),
                            .query_start_loc = qsl.data(),
                            .kv_lens = kv_lens.data(),
                            .block_tables = tables.data(),
                            .num_tokens = num_tokens,
                            .num_seqs = static_cast<int32_t>(kv_lens.size()),
                            .num_q_heads = nq,
                            .max_blocks_per_seq = max_blocks,
                            .cache = layout};
    args.cache.k = k_pages.data();
    args.cache.v = v_pages.data();
    ASSERT_TRUE(cpu::PagedAttention(args).ok());
    auto dq = Upload(q);
    auto dout = Upload(std::vector<float>(q.size()));
    auto dpos = Upload(positions);
    auto dqsl = Upload(qsl);
    auto dlens = Upload(kv_lens);
    auto dtables = Upload(tables);
    auto dk = Upload(k_pages);
    auto dv = Upload(v_pages);
    PagedAttentionArgs dargs = args;
    dargs.q = dq.data();
    dargs.out = dout.data();
    dargs.positions = dpos.data();
    dargs.query_start_loc = dqsl.data();
    dargs.kv_lens = dlens.data();
    dargs.block_tables = dtables.data();
    dargs.cache.k = dk.data();
    dargs.cache.v = dv.data();
    ASSERT_TRUE(cuda::PagedAttention(dargs).ok());
    Sync();
    ExpectClose(Download(dout), out_cpu, 1e-4, 1e-5, "PagedAttention");
  }
}

TEST_F(CudaParityTest, SampleMatchesCpu) {
  const int64_t rows = 6, vocab = 5000;
  std::vector<float> logits = RandomFloats(rows * vocab, 13, -4.0f, 4.0f);
  logits[3 * vocab + 1234] = 20.0f;  // a clear winner in one row
  std::vector<SamplingParams> params = {
      {.temperature = 0.0f},
      {.temperature = 1.0f, .seed = 1},
      {.temperature = 0.7f, .top_p = 0.9f, .seed = 2},
      {.temperature = 0.0f, .top_p = 0.5f},
      {.temperature = 1.3f, .top_p = 0.5f, .seed = 3, .counter = 17},
      {.temperature = 1.0f, .top_p = 0.05f, .seed = 4}};
  std::vector<int32_t> cpu_tokens(rows);
  ASSERT_TRUE(cpu::Sample({.logits = logits.data(),
                           .params = params.data(),
                           .out_tokens = cpu_tokens.data(),
                           .num_seqs = rows,
                           .vocab_size = vocab})
                  .ok());
  auto dlogits = Upload(logits);
  auto dparams = Upload(params);
  auto dtokens = Upload(std::vector<int32_t>(rows, -1));
  ASSERT_TRUE(cuda::Sample({.logits = dlogits.data(),
                            .params = dparams.data(),
                            .out_tokens = dtokens.data(),
                            .num_seqs = rows,
                            .vocab_size = vocab})
                  .ok());
  EXPECT_EQ(Download(dtokens), cpu_tokens);
}

// Few long sequences (the split-K path) and a short one, every dtype, several head dims (vector and
// scalar loads, a GQA group that is not a multiple of the head tile), both content-check modes,
// a caller-owned workspace and the default one.
TEST_F(CudaParityTest, PagedAttentionSplitKMatchesCpu) {
  const int32_t block_size = 16, max_blocks = 200;
  const std::vector<int32_t> kv_lens = {3000, 37, 2100};
  const std::vector<int32_t> scheduled = {1, 5, 3};  // decode, prefill chunk, chunk
  std::vector<int32_t> qsl = {0}, positions, tables(kv_lens.size() * max_blocks, -1);
  int32_t num_blocks = 0;
  for (size_t s = 0; s < kv_lens.size(); ++s) num_blocks += (kv_lens[s] + block_size - 1) / 16;
  std::vector<int32_t> blocks(num_blocks);
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), std::mt19937(19));
  size_t next = 0;
  for (size_t s = 0; s < kv_lens.size(); ++s) {
    for (int32_t b = 0; b * block_size < kv_lens[s]; ++b) {
      tables[s * max_blocks + b] = blocks[next++];
    }
    for (int32_t p = kv_lens[s] - scheduled[s]; p < kv_lens[s]; ++p) positions.push_back(p);
    qsl.push_back(qsl.back() + scheduled[s]);
  }
  const int64_t num_tokens = positions.size();
  struct Shape {
    int32_t nq, nkv, hd;
  };
  cuda::Workspace workspace;
  for (const Shape shape :
       {Shape{12, 2, 128}, Shape{4, 4, 64}, Shape{6, 1, 96}, Shape{8, 2, 130}, Shape{2, 1, 256}}) {
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      PagedKvLayout layout{.dtype = dtype,
                           .num_blocks = num_blocks,
                           .block_size = block_size,
                           .num_kv_heads = shape.nkv,
                           .head_dim = shape.hd};
      std::vector<float> k_pages(layout.NumElements()), v_pages(layout.NumElements());
      const auto k_values = RandomFloats(layout.NumElements(), 20, -2.0f, 2.0f);
      const auto v_values = RandomFloats(layout.NumElements(), 21);
      for (int64_t i = 0; i < layout.NumElements(); ++i) {
        StoreElement(k_pages.data(), dtype, i, k_values[i]);
        StoreElement(v_pages.data(), dtype, i, v_values[i]);
      }
      const auto q = RandomFloats(num_tokens * shape.nq * shape.hd, 22, -2.0f, 2.0f);
      std::vector<float> out_cpu(q.size());
      PagedAttentionArgs args{.q = q.data(),
                              .out = out_cpu.data(),
                              .positions = positions.data(),
                              .query_start_loc = qsl.data(),
                              .kv_lens = kv_lens.data(),
                              .block_tables = tables.data(),
                              .num_tokens = num_tokens,
                              .num_seqs = static_cast<int32_t>(kv_lens.size()),
                              .num_q_heads = shape.nq,
                              .max_blocks_per_seq = max_blocks,
                              .cache = layout};
      args.cache.k = k_pages.data();
      args.cache.v = v_pages.data();
      ASSERT_TRUE(cpu::PagedAttention(args).ok());
      auto dq = Upload(q);
      auto dpos = Upload(positions);
      auto dqsl = Upload(qsl);
      auto dlens = Upload(kv_lens);
      auto dtables = Upload(tables);
      auto dk = Upload(k_pages);
      auto dv = Upload(v_pages);
      for (cuda::ContentCheck check :
           {cuda::ContentCheck::kValidate, cuda::ContentCheck::kTrusted}) {
        for (cuda::Workspace* ws : {&workspace, static_cast<cuda::Workspace*>(nullptr)}) {
          auto dout = Upload(std::vector<float>(q.size(), NAN));
          PagedAttentionArgs dargs = args;
          dargs.q = dq.data();
          dargs.out = dout.data();
          dargs.positions = dpos.data();
          dargs.query_start_loc = dqsl.data();
          dargs.kv_lens = dlens.data();
          dargs.block_tables = dtables.data();
          dargs.cache.k = dk.data();
          dargs.cache.v = dv.data();
          const absl::Status status =
              cuda::PagedAttention(dargs, nullptr, {.check = check, .workspace = ws});
          ASSERT_TRUE(status.ok()) << status;
          Sync();
          ExpectClose(Download(dout), out_cpu, 1e-4, 1e-5, "PagedAttention split-K");
        }
      }
    }
  }
}

// Sliding windows on the split-K path: long sequences (partitions wholly before the window are
// empty, one is cut by it) and a short one, windows of 1, inside a partition, across several
// partitions and longer than any sequence, against the CPU backend (which tests/kernels/
// sliding_window_attention_test.cc checks against a masked float64 reference).
TEST_F(CudaParityTest, PagedAttentionSlidingWindowSplitKMatchesCpu) {
  const int32_t block_size = 16, max_blocks = 200, nq = 8, nkv = 2, hd = 64;
  const std::vector<int32_t> kv_lens = {3000, 37, 2100};
  const std::vector<int32_t> scheduled = {1, 5, 3};
  std::vector<int32_t> qsl = {0}, positions, tables(kv_lens.size() * max_blocks, -1);
  int32_t num_blocks = 0;
  for (int32_t len : kv_lens) num_blocks += (len + block_size - 1) / block_size;
  std::vector<int32_t> blocks(num_blocks);
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), std::mt19937(23));
  size_t next = 0;
  for (size_t s = 0; s < kv_lens.size(); ++s) {
    for (int32_t b = 0; b * block_size < kv_lens[s]; ++b)
      tables[s * max_blocks + b] = blocks[next++];
    for (int32_t p = kv_lens[s] - scheduled[s]; p < kv_lens[s]; ++p) positions.push_back(p);
    qsl.push_back(qsl.back() + scheduled[s]);
  }
  const int64_t num_tokens = positions.size();
  PagedKvLayout layout{.dtype = DType::kBF16,
                       .num_blocks = num_blocks,
                       .block_size = block_size,
                       .num_kv_heads = nkv,
                       .head_dim = hd};
  std::vector<float> k_pages(layout.NumElements()), v_pages(layout.NumElements());
  const auto k_values = RandomFloats(layout.NumElements(), 24, -2.0f, 2.0f);
  const auto v_values = RandomFloats(layout.NumElements(), 25);
  for (int64_t i = 0; i < layout.NumElements(); ++i) {
    StoreElement(k_pages.data(), layout.dtype, i, k_values[i]);
    StoreElement(v_pages.data(), layout.dtype, i, v_values[i]);
  }
  const auto q = RandomFloats(num_tokens * nq * hd, 26, -2.0f, 2.0f);
  auto dq = Upload(q);
  auto dpos = Upload(positions);
  auto dqsl = Upload(qsl);
  auto dlens = Upload(kv_lens);
  auto dtables = Upload(tables);
  auto dk = Upload(k_pages);
  auto dv = Upload(v_pages);
  for (int32_t window : {1, 7, 300, 1500, 4096}) {
    std::vector<float> out_cpu(q.size());
    PagedAttentionArgs args{.q = q.data(),
                            .out = out_cpu.data(),
                            .positions = positions.data(),
                            .query_start_loc = qsl.data(),
                            .kv_lens = kv_lens.data(),
                            .block_tables = tables.data(),
                            .num_tokens = num_tokens,
                            .num_seqs = static_cast<int32_t>(kv_lens.size()),
                            .num_q_heads = nq,
                            .max_blocks_per_seq = max_blocks,
                            .sliding_window = window,
                            .cache = layout};
    args.cache.k = k_pages.data();
    args.cache.v = v_pages.data();
    ASSERT_TRUE(cpu::PagedAttention(args).ok());
    auto dout = Upload(std::vector<float>(q.size(), NAN));
    PagedAttentionArgs dargs = args;
    dargs.q = dq.data();
    dargs.out = dout.data();
    dargs.positions = dpos.data();
    dargs.query_start_loc = dqsl.data();
    dargs.kv_lens = dlens.data();
    dargs.block_tables = dtables.data();
    dargs.cache.k = dk.data();
    dargs.cache.v = dv.data();
    const absl::Status status = cuda::PagedAttention(dargs);
    ASSERT_TRUE(status.ok()) << status;
    Sync();
    ExpectClose(Download(dout), out_cpu, 1e-4, 1e-5, "PagedAttention sliding window");
  }
}

// Bad index arrays: InvalidArgument with the CPU backend's message, and no device memory written.
// The page ops over every layout of layout_cases.h: the device buffer is a copy of the guarded host
// buffer, so both backends see the same bytes, and the device's padding must stay untouched.
struct DevicePages {
  DevicePages(const testing::LayoutCase& c, const testing::GuardedPages& host, DType dtype)
      : buffer(Upload(host.bytes())) {
    layout = c.make(reinterpret_cast<char*>(buffer.data()) + testing::kGuardBytes, dtype);
  }
  std::vector<uint8_t> Bytes() const { return Download(buffer); }
  cuda::CudaArray<uint8_t> buffer;
  PagedKvLayout layout;
};

TEST_F(CudaParityTest, KvWriteAndReRotateOverEveryLayout) {
  const testing::CaseShape shape;
  RopeConfig config;
  config.head_dim = shape.head_dim;
  config.rotary_dim = 12;
  auto table = RopeTable::Create(config, 256);
  ASSERT_TRUE(table.ok());
  auto dtable = cuda::DeviceRopeTable::Upload(*table);
  ASSERT_TRUE(dtable.ok()) << dtable.status();
  const int32_t nq = 6;
  const int64_t n = 7;
  const int64_t row = int64_t{shape.num_kv_heads} * shape.head_dim;
  const std::vector<int32_t> positions = {0, 3, 77, 12, 200, 5, 9};
  const std::vector<int64_t> slots = {0, 19, -1, 7, 4, 12, 3};
  const std::vector<int64_t> src = {0, 19, 7};
  const std::vector<int64_t> dst = {1, 19, 8};
  const std::vector<int32_t> old_pos = {0, 3, 12};
  const std::vector<int32_t> new_pos = {90, 4, 250};
  const auto q0 = RandomFloats(n * nq * shape.head_dim, 80);
  const auto k = RandomFloats(n * row, 81);
  const auto v = RandomFloats(n * row, 82);
  auto dq = Upload(q0);
  auto dk = Upload(k);
  auto dv = Upload(v);
  auto dpos = Upload(positions);
  auto dslots = Upload(slots);
  auto dsrc = Upload(src);
  auto ddst = Upload(dst);
  auto dold = Upload(old_pos);
  auto dnew = Upload(new_pos);
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    const double u = dtype == DType::kF32 ? 1e-6 : (dtype == DType::kF16 ? 1e-3 : 1e-2);
    for (const testing::LayoutCase& c : testing::AllLayoutCases(shape)) {
      testing::GuardedPages host(c, dtype, shape);
      DevicePages device(c, host, dtype);
      std::vector<float> q = q0;
      ASSERT_TRUE(cpu::ReshapeAndCache({.q = q.data(),
                                        .k = k.data(),
                                        .v = v.data(),
                                        .positions = positions.data(),
                                        .slot_mapping = slots.data(),
                                        .num_tokens = n,
                                        .num_q_heads = nq,
                                        .rope = table->View(),
                                        .cache = host.layout()})
                      .ok());
      ASSERT_TRUE(cuda::ReshapeAndCache({.q = dq.data(),
                                         .k = dk.data(),
                                         .v = dv.data(),
                                         .positions = dpos.data(),
                                         .slot_mapping = dslots.data(),
                                         .num_tokens = n,
                                         .num_q_heads = nq,
                                         .rope = dtable->View(),
                                         .cache = device.layout})
                      .ok())
          << c.name;
      ASSERT_TRUE(dq.CopyFromHost(q0).ok());  // the next layout starts from the same q
      ASSERT_TRUE(cpu::ReRotate({.src_slots = src.data(),
                                 .dst_slots = dst.data(),
                                 .old_positions = old_pos.data(),
                                 .new_positions = new_pos.data(),
                                 .num_tokens = 3,
                                 .rope = table->View(),
                                 .cache = host.layout()})
                      .ok());
      ASSERT_TRUE(cuda::ReRotate({.src_slots = dsrc.data(),
                                  .dst_slots = ddst.data(),
                                  .old_positions = dold.data(),
                                  .new_positions = dnew.data(),
                                  .num_tokens = 3,
                                  .rope = dtable->View(),
                                  .cache = device.layout})
                      .ok())
          << c.name;
      Sync();
      const std::vector<uint8_t> bytes = device.Bytes();
      EXPECT_EQ(host.DamagedGuardBytes(bytes), 0) << c.name << ": device wrote into padding";
      const std::vector<float> got = host.Logical(bytes);
      const std::vector<float> want = host.Logical();
      const size_t half = want.size() / 2;  // K then V
      ExpectClose(std::vector<float>(got.begin(), got.begin() + half),
                  std::vector<float>(want.begin(), want.begin() + half), 2 * u, 1e-6,
                  c.name.c_str());
      EXPECT_TRUE(std::equal(got.begin() + half, got.end(), want.begin() + half)) << c.name;
    }
  }
}

TEST_F(CudaParityTest, PagedAttentionOverEveryLayoutWithAndWithoutSplitK) {
  // head_dim 128 makes the padded layouts' rows unaligned for 4-wide loads (scalar path); 64 keeps
  // every layout on the vector path. kv_len 1200 with one decode token splits the keys.
  for (int32_t hd : {64, 128}) {
    const testing::CaseShape shape{
        .num_blocks = 80, .block_size = 16, .num_kv_heads = 2, .head_dim = hd};
    const int32_t nq = 8, max_blocks = 76;
    const std::vector<int32_t> kv_lens = {1200, 30};
    const std::vector<int32_t> qsl = {0, 1, 5};
    const std::vector<int32_t> positions = {1199, 26, 27, 28, 29};
    std::vector<int32_t> tables(kv_lens.size() * max_blocks, -1);
    std::vector<int32_t> blocks(shape.num_blocks);
    std::iota(blocks.begin(), blocks.end(), 0);
    std::shuffle(blocks.begin(), blocks.end(), std::mt19937(90));
    for (int32_t b = 0; b < 75; ++b) tables[b] = blocks[b];
    tables[max_blocks] = blocks[75];
    tables[max_blocks + 1] = blocks[76];
    const int64_t num_tokens = 5;
    const auto q = RandomFloats(num_tokens * nq * hd, 91, -2.0f, 2.0f);
    auto dq = Upload(q);
    auto dpos = Upload(positions);
    auto dqsl = Upload(qsl);
    auto dkv_lens = Upload(kv_lens);
    auto dtables = Upload(tables);
    const int64_t elements = 2 * int64_t{shape.num_blocks} * shape.block_size * 2 * hd;
    const auto contents = RandomFloats(static_cast<size_t>(elements), 92, -2.0f, 2.0f);
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      for (const testing::LayoutCase& c : testing::AllLayoutCases(shape)) {
        testing::GuardedPages host(c, dtype, shape);
        host.SetLogical(contents);
        DevicePages device(c, host, dtype);
        std::vector<float> out_cpu(q.size());
        PagedAttentionArgs args{.q = q.data(),
                                .out = out_cpu.data(),
                                .positions = positions.data(),
                                .query_start_loc = qsl.data(),
                                .kv_lens = kv_lens.data(),
                                .block_tables = tables.data(),
                                .num_tokens = num_tokens,
                                .num_seqs = 2,
                                .num_q_heads = nq,
                                .max_blocks_per_seq = max_blocks,
                                .cache = host.layout()};
        ASSERT_TRUE(cpu::PagedAttention(args).ok());
        auto dout = Upload(std::vector<float>(q.size(), 0.0f));
        args.q = dq.data();
        args.out = dout.data();
        args.positions = dpos.data();
        args.query_start_loc = dqsl.data();
        args.kv_lens = dkv_lens.data();
        args.block_tables = dtables.data();
        args.cache = device.layout;
        ASSERT_TRUE(cuda::PagedAttention(args).ok()) << c.name;
        Sync();
        ExpectClose(Download(dout), out_cpu, 1e-4, 1e-5, c.name.c_str());
        EXPECT_EQ(device.Bytes(), host.bytes()) << c.name << ": attention wrote to the pages";
      }
    }
  }
}

}  // namespace
}  // namespace pagedkv
