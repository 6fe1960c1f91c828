// Copyright 2026 The pagedkv Authors.
//
// Bad input on the CUDA launchers: index arrays out of range give InvalidArgument with the CPU's
// message and leave device memory untouched (ContentCheck::kValidate); the trusted path skips bad
// entries; size validation needs no device and always runs. The device tests skip when no CUDA
// device is visible.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/kernels/cuda_ops.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/kernels/rope_table.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/kernel_test_util.h"

namespace pagedkv {
namespace {

using cuda_testing::Download;
using cuda_testing::ExpectClose;
using cuda_testing::Upload;
using ::pagedkv::testing::RandomFloats;

class CudaBadInputTest : public cuda_testing::CudaDeviceTest {};

TEST_F(CudaBadInputTest, BadIndexArraysAreInvalidArgumentAndWriteNothing) {
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
TEST_F(CudaBadInputTest, TrustedKvWriteSkipsOutOfRangeSlots) {
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
