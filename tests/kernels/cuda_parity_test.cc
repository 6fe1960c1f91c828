// Copyright 2026 The pagedkv Authors.
//
// GPU parity: every pagedkv::cuda op against the CPU reference on the same inputs, including
// split-K paged attention (few long sequences), both content-check modes and bad index arrays
// (InvalidArgument with the CPU's message, device memory untouched). Skips when no CUDA device is
// visible. Size validation of the launchers needs no device and always runs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/ops.h"
#include "kernels/dtype_convert.h"
#include "kernels/rope_table.h"
#include "tests/kernels/kernel_test_util.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::AllScalingConfigs;
using ::pagedkv::testing::RandomFloats;

template <typename T>
cuda::DeviceBuffer<T> Upload(const std::vector<T>& host) {
  auto buffer = cuda::DeviceBuffer<T>::FromHost(host);
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  return std::move(*buffer);
}

template <typename T>
std::vector<T> Download(const cuda::DeviceBuffer<T>& buffer) {
  auto host = buffer.ToHost();
  EXPECT_TRUE(host.ok()) << host.status();
  return *host;
}

void ExpectClose(const std::vector<float>& gpu, const std::vector<float>& cpu, double rel,
                 double abs_tol, const char* what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  for (size_t i = 0; i < gpu.size(); ++i) {
    ASSERT_NEAR(gpu[i], cpu[i], abs_tol + rel * std::abs(cpu[i])) << what << " at " << i;
  }
}

class CudaParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::VisibleDeviceCount() == 0) GTEST_SKIP() << "no CUDA device visible; skipping";
    auto handle = cuda::CublasHandle::Create();
    ASSERT_TRUE(handle.ok()) << handle.status();
    cublas_ = std::move(*handle);
  }
  void Sync() { ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess); }
  cuda::CublasHandle cublas_;
};

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

// Bad index arrays: InvalidArgument with the CPU backend's message, and no device memory written.
TEST_F(CudaParityTest, BadIndexArraysAreInvalidArgumentAndWriteNothing) {
  RopeConfig config;
  config.head_dim = 32;
  auto table = RopeTable::Create(config, 64);
  ASSERT_TRUE(table.ok());
  auto dtable = cuda::DeviceRopeTable::Upload(*table);
  ASSERT_TRUE(dtable.ok()) << dtable.status();
  const int32_t nq = 4, nkv = 2, hd = 32;
  PagedKvLayout layout{
      .dtype = DType::kBF16, .num_blocks = 4, .block_size = 4, .num_kv_heads = nkv, .head_dim = hd};
  const std::vector<float> pages0 = RandomFloats(layout.NumElements(), 30);
  std::vector<float> k_host = pages0, v_host = pages0;
  auto dk_pages = Upload(pages0);
  auto dv_pages = Upload(pages0);
  PagedKvLayout dev = layout;
  dev.k = dk_pages.data();
  dev.v = dv_pages.data();
  PagedKvLayout host = layout;
  host.k = k_host.data();
  host.v = v_host.data();
  const int64_t n = 3;
  const auto q0 = RandomFloats(n * nq * hd, 31);
  const auto kv = RandomFloats(n * nkv * hd, 32);
  auto dq = Upload(q0);
  auto dkv = Upload(kv);
  std::vector<float> q_host = q0;
  auto pages_unchanged = [&] {
    EXPECT_EQ(Download(dk_pages), pages0);
    EXPECT_EQ(Download(dv_pages), pages0);
    EXPECT_EQ(Download(dq), q0);
  };
  auto same_error = [](const absl::Status& gpu, const absl::Status& cpu) {
    EXPECT_EQ(gpu.code(), absl::StatusCode::kInvalidArgument) << gpu;
    EXPECT_EQ(gpu.message(), cpu.message());
  };

  // KV write: slot past the pool, slot -2, negative position.
  for (int bad = 0; bad < 3; ++bad) {
    std::vector<int64_t> slots = {0, 5, -1};
    std::vector<int32_t> positions = {0, 1, 2};
    if (bad == 0) slots[1] = layout.NumSlots();
    if (bad == 1) slots[2] = -2;
    if (bad == 2) positions[1] = -3;
    auto dslots = Upload(slots);
    auto dpos = Upload(positions);
    ReshapeAndCacheArgs args{.q = q_host.data(),
                             .k = kv.data(),
                             .v = kv.data(),
                             .positions = positions.data(),
                             .slot_mapping = slots.data(),
                             .num_tokens = n,
                             .num_q_heads = nq,
                             .rope = table->View(),
                             .cache = host};
    const absl::Status cpu_status = cpu::ReshapeAndCache(args);
    args.q = dq.data();
    args.k = dkv.data();
    args.v = dkv.data();
    args.positions = dpos.data();
    args.slot_mapping = dslots.data();
    args.rope = dtable->View();
    args.cache = dev;
    same_error(cuda::ReshapeAndCache(args), cpu_status);
    pages_unchanged();
  }
  // Re-rotation: bad source, bad destination, negative new position.
  for (int bad = 0; bad < 3; ++bad) {
    std::vector<int64_t> src = {0, 1, 2}, dst = {3, 4, 5};
    std::vector<int32_t> old_pos = {0, 1, 2}, new_pos = {4, 5, 6};
    if (bad == 0) src[2] = -1;
    if (bad == 1) dst[0] = layout.NumSlots() + 7;
    if (bad == 2) new_pos[1] = -1;
    auto dsrc = Upload(src);
    auto ddst = Upload(dst);
    auto dold = Upload(old_pos);
    auto dnew = Upload(new_pos);
    ReRotateArgs args{.src_slots = src.data(),
                      .dst_slots = dst.data(),
                      .old_positions = old_pos.data(),
                      .new_positions = new_pos.data(),
                      .num_tokens = n,
                      .rope = table->View(),
                      .cache = host};
    const absl::Status cpu_status = cpu::ReRotate(args);
    args = {.src_slots = dsrc.data(),
            .dst_slots = ddst.data(),
            .old_positions = dold.data(),
            .new_positions = dnew.data(),
            .num_tokens = n,
            .rope = dtable->View(),
            .cache = dev};
    same_error(cuda::ReRotate(args), cpu_status);
    pages_unchanged();
  }
  // RoPE: negative position.
  {
    const std::vector<int32_t> positions = {0, -5, 1};
    auto dpos = Upload(positions);
    RopeArgs args{.q = q_host.data(),
                  .positions = positions.data(),
                  .num_tokens = n,
                  .num_q_heads = nq,
                  .rope = table->View()};
    const absl::Status cpu_status = cpu::Rope(args);
    args.q = dq.data();
    args.positions = dpos.data();
    args.rope = dtable->View();
    same_error(cuda::Rope(args), cpu_status);
    pages_unchanged();
  }
  // Embedding gather: id == vocab_size.
  {
    const int64_t vocab = 10;
    const auto emb = RandomFloats(vocab * hd, 33);
    const std::vector<int32_t> ids = {1, 10, 2};
    std::vector<float> out_host(n * hd, 0.0f);
    const absl::Status cpu_status = cpu::EmbeddingGather({.table = emb.data(),
                                                          .token_ids = ids.data(),
                                                          .out = out_host.data(),
                                                          .num_tokens = n,
                                                          .vocab_size = vocab,
                                                          .dim = hd});
    auto demb = Upload(emb);
    auto dids = Upload(ids);
    auto dout = Upload(std::vector<float>(n * hd, 0.0f));
    same_error(cuda::EmbeddingGather({.table = demb.data(),
                                      .token_ids = dids.data(),
                                      .out = dout.data(),
                                      .num_tokens = n,
                                      .vocab_size = vocab,
                                      .dim = hd}),
               cpu_status);
    EXPECT_EQ(Download(dout), std::vector<float>(n * hd, 0.0f));
  }
  // Paged attention: block id out of range, kv_len over capacity, query_start_loc not ending at
  // num_tokens, negative position, and a bad kv_len in a batch without query tokens (checked all
  // the same).
  for (int bad = 0; bad < 5; ++bad) {
    std::vector<int32_t> positions = {3, 4, 1};
    std::vector<int32_t> qsl = {0, 2, 3};
    std::vector<int32_t> kv_lens = {5, 2};
    std::vector<int32_t> tables = {2, 0, 1, -1};  // 2 sequences x 2 blocks; unused entry -1
    if (bad == 0) tables[1] = layout.num_blocks;
    if (bad == 1) kv_lens[1] = 9;
    if (bad == 2) qsl[2] = 4;
    if (bad == 3) positions[2] = -1;
    if (bad == 4) {
      qsl = {0, 0, 0};
      kv_lens[1] = 9;
    }
    std::vector<float> out_host(n * nq * hd, 5.0f);
    PagedAttentionArgs args{.q = q0.data(),
                            .out = out_host.data(),
                            .positions = positions.data(),
                            .query_start_loc = qsl.data(),
                            .kv_lens = kv_lens.data(),
                            .block_tables = tables.data(),
                            .num_tokens = bad == 4 ? 0 : n,
                            .num_seqs = 2,
                            .num_q_heads = nq,
                            .max_blocks_per_seq = 2,
                            .cache = host};
    const absl::Status cpu_status = cpu::PagedAttention(args);
    auto dpos = Upload(positions);
    auto dqsl = Upload(qsl);
    auto dlens = Upload(kv_lens);
    auto dtables = Upload(tables);
    auto dout = Upload(std::vector<float>(n * nq * hd, 5.0f));
    args.q = dq.data();
    args.out = dout.data();
    args.positions = dpos.data();
    args.query_start_loc = dqsl.data();
    args.kv_lens = dlens.data();
    args.block_tables = dtables.data();
    args.cache = dev;
    same_error(cuda::PagedAttention(args), cpu_status);
    EXPECT_EQ(Download(dout), std::vector<float>(n * nq * hd, 5.0f));
  }
  // Sampling: top_p 0, NaN temperature.
  for (int bad = 0; bad < 2; ++bad) {
    const std::vector<float> logits = RandomFloats(2 * 50, 34);
    std::vector<SamplingParams> params(2, SamplingParams{.temperature = 1.0f});
    if (bad == 0) params[1].top_p = 0.0f;
    if (bad == 1) params[0].temperature = NAN;
    std::vector<int32_t> tokens(2, -9);
    const absl::Status cpu_status = cpu::Sample({.logits = logits.data(),
                                                 .params = params.data(),
                                                 .out_tokens = tokens.data(),
                                                 .num_seqs = 2,
                                                 .vocab_size = 50});
    auto dlogits = Upload(logits);
    auto dparams = Upload(params);
    auto dtokens = Upload(std::vector<int32_t>(2, -9));
    same_error(cuda::Sample({.logits = dlogits.data(),
                             .params = dparams.data(),
                             .out_tokens = dtokens.data(),
                             .num_seqs = 2,
                             .vocab_size = 50}),
               cpu_status);
    EXPECT_EQ(Download(dtokens), std::vector<int32_t>(2, -9));
  }
}

// ContentCheck::kTrusted does not report bad entries but never writes outside the pool: a token
// with an out-of-range slot is skipped like a -1 slot.
TEST_F(CudaParityTest, TrustedKvWriteSkipsOutOfRangeSlots) {
  RopeConfig config;
  config.head_dim = 64;
  auto table = RopeTable::Create(config, 64);
  ASSERT_TRUE(table.ok());
  auto dtable = cuda::DeviceRopeTable::Upload(*table);
  ASSERT_TRUE(dtable.ok()) << dtable.status();
  PagedKvLayout layout{
      .dtype = DType::kF32, .num_blocks = 2, .block_size = 4, .num_kv_heads = 1, .head_dim = 64};
  const int64_t n = 3;
  const auto k = RandomFloats(n * 64, 40);
  const auto v = RandomFloats(n * 64, 41);
  const std::vector<int32_t> positions = {0, 1, 2};
  const std::vector<int64_t> bad_slots = {0, 1000, 2};
  const std::vector<int64_t> skip_slots = {0, -1, 2};
  std::vector<float> k_pages(layout.NumElements(), 0.0f), v_pages(layout.NumElements(), 0.0f);
  PagedKvLayout host = layout;
  host.k = k_pages.data();
  host.v = v_pages.data();
  ASSERT_TRUE(cpu::ReshapeAndCache({.k = k.data(),
                                    .v = v.data(),
                                    .positions = positions.data(),
                                    .slot_mapping = skip_slots.data(),
                                    .num_tokens = n,
                                    .rope = table->View(),
                                    .cache = host})
                  .ok());
  auto dk = Upload(k);
  auto dv = Upload(v);
  auto dpos = Upload(positions);
  auto dslots = Upload(bad_slots);
  auto dk_pages = Upload(std::vector<float>(layout.NumElements(), 0.0f));
  auto dv_pages = Upload(std::vector<float>(layout.NumElements(), 0.0f));
  PagedKvLayout dev = layout;
  dev.k = dk_pages.data();
  dev.v = dv_pages.data();
  const absl::Status status =
      cuda::ReshapeAndCache({.k = dk.data(),
                             .v = dv.data(),
                             .positions = dpos.data(),
                             .slot_mapping = dslots.data(),
                             .num_tokens = n,
                             .rope = dtable->View(),
                             .cache = dev},
                            nullptr, {.check = cuda::ContentCheck::kTrusted});
  ASSERT_TRUE(status.ok()) << status;
  Sync();
  ExpectClose(Download(dk_pages), k_pages, 1e-6, 1e-6, "trusted k pages");
  EXPECT_EQ(Download(dv_pages), v_pages);
}

// Runs with or without a device: the launchers validate before touching the GPU.
TEST(CudaValidationTest, BadArgumentsAreInvalidArgumentWithoutDevice) {
  RopeConfig config;
  auto table = RopeTable::Create(config, 8);
  ASSERT_TRUE(table.ok());
  float dummy[4] = {};
  int32_t pos[1] = {0};
  int64_t slot[1] = {0};
  RopeArgs rope{
      .q = dummy, .positions = pos, .num_tokens = 1, .num_q_heads = 1, .rope = table->View()};
  rope.rope.head_dim = 3;
  EXPECT_EQ(cuda::Rope(rope).code(), absl::StatusCode::kInvalidArgument);
  PagedKvLayout layout{.k = dummy,
                       .v = dummy,
                       .dtype = static_cast<DType>(4),
                       .num_blocks = 1,
                       .block_size = 1,
                       .num_kv_heads = 1,
                       .head_dim = 64};
  EXPECT_EQ(cuda::ReshapeAndCache({.k = dummy,
                                   .v = dummy,
                                   .positions = pos,
                                   .slot_mapping = slot,
                                   .num_tokens = 1,
                                   .rope = table->View(),
                                   .cache = layout})
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::Linear({.x = dummy, .w = dummy, .y = dummy + 1, .m = 1, .n = 1, .k = 1},
                         /*cublas=*/nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::EmbeddingGather({.table = dummy,
                                   .token_ids = pos,
                                   .out = nullptr,
                                   .num_tokens = 1,
                                   .vocab_size = 1,
                                   .dim = 1})
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagedkv
