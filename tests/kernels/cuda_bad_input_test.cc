// Copyright 2026 The pagedkv Authors.
//
// Bad input on the CUDA launchers: every bad-input case of tests/kernels/op_cases/op_cases.h (index
// arrays out of range, refused arguments) gives InvalidArgument with the CPU's message and leaves
// device memory untouched (ContentCheck::kValidate), as does a negative RoPE position; the trusted
// path skips bad entries; the deferred path (ContentCheck::kDeferred) records the first bad entry
// of the first bad call in a device flag, the same word FirstBadEntry computes on the host, skips
// bad entries, and works under CUDA graph capture; size validation needs no device and always runs.
// The device tests skip when no CUDA device is visible.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kernels/content_checks.h"
#include "kernels/cuda/cublas_handle.h"
#include "kernels/cuda/cuda_check.h"
#include "pagedkv/kernels/bad_entry.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/kernels/cuda_ops.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/kernels/rope_table.h"
#include "tests/kernels/cuda_array.h"
#include "tests/kernels/cuda_op_backend.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/op_cases/op_cases.h"

namespace pagedkv {
namespace {

using cuda_testing::Download;
using cuda_testing::ExpectClose;
using cuda_testing::Upload;
using ::pagedkv::testing::RandomFloats;

class CudaBadInputTest : public cuda_testing::CudaDeviceTest {};

// Every bad-input case of tests/kernels/op_cases/op_cases.h on validated launches: InvalidArgument
// with the CPU ops' message, and no device memory written.
TEST_F(CudaBadInputTest, EveryBadInputCaseIsTheCpuErrorAndWritesNothing) {
  cuda_testing::CudaLauncherBackend backend(cublas_.get(),
                                            {.check = cuda::ContentCheck::kValidate});
  testing::ExpectEveryBadInputRejected(backend);
}

// RoPE on q alone (not an op of the plugin table): a negative position is the CPU's error and q
// is left as it was.
TEST_F(CudaBadInputTest, RopeNegativePositionIsTheCpuErrorAndWritesNothing) {
  RopeConfig config;
  config.head_dim = 32;
  auto table = RopeTable::Create(config, 64);
  ASSERT_TRUE(table.ok());
  auto dtable = cuda::DeviceRopeTable::Upload(*table);
  ASSERT_TRUE(dtable.ok()) << dtable.status();
  const int32_t nq = 4;
  const int64_t n = 3;
  const auto q0 = RandomFloats(n * nq * 32, 31);
  std::vector<float> q_host = q0;
  auto dq = Upload(q0);
  const std::vector<int32_t> positions = {0, -5, 1};
  auto dpos = Upload(positions);
  RopeArgs args{.q = q_host.data(),
                .positions = positions.data(),
                .num_tokens = n,
                .num_q_heads = nq,
                .rope = table->View()};
  const absl::Status cpu_status = cpu::Rope(args);
  ASSERT_EQ(cpu_status.code(), absl::StatusCode::kInvalidArgument);
  args.q = dq.data();
  args.positions = dpos.data();
  args.rope = dtable->View();
  const absl::Status gpu_status = cuda::Rope(args);
  EXPECT_EQ(gpu_status.code(), absl::StatusCode::kInvalidArgument) << gpu_status;
  EXPECT_EQ(gpu_status.message(), cpu_status.message());
  EXPECT_EQ(Download(dq), q0);
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

// The flag's word, read with a plain copy (the test checks ReadAndClearDeferredCheck separately).
uint64_t FlagWord(const cuda::CudaArray<uint64_t>& flag) { return Download(flag)[0]; }

// kDeferred: the launcher returns OK, the bad token is skipped as with kTrusted, and the flag holds
// the first bad entry of the first bad call until it is read and cleared.
TEST_F(CudaBadInputTest, DeferredKvWriteRecordsFirstBadEntryAndSkipsIt) {
  RopeConfig config;
  config.head_dim = 64;
  auto table = RopeTable::Create(config, 64);
  ASSERT_TRUE(table.ok());
  auto dtable = cuda::DeviceRopeTable::Upload(*table);
  ASSERT_TRUE(dtable.ok()) << dtable.status();
  PagedKvLayout layout{
      .dtype = DType::kF32, .num_blocks = 2, .block_size = 4, .num_kv_heads = 1, .head_dim = 64};
  const int64_t n = 4;
  const auto k = RandomFloats(n * 64, 50);
  const auto v = RandomFloats(n * 64, 51);
  const std::vector<int32_t> positions = {0, 1, -4, 3};  // position 2 is bad too, later in order
  const std::vector<int64_t> bad_slots = {0, 1000, 2, -7};
  std::vector<float> k_pages(layout.NumElements(), 0.0f), v_pages(layout.NumElements(), 0.0f);
  PagedKvLayout host = layout;
  host.k = k_pages.data();
  host.v = v_pages.data();
  ReshapeAndCacheArgs host_args{.k = k.data(),
                                .v = v.data(),
                                .positions = positions.data(),
                                .slot_mapping = bad_slots.data(),
                                .num_tokens = n,
                                .rope = table->View(),
                                .cache = host};
  const uint64_t want = FirstBadEntry(host_args);
  ASSERT_EQ(want, EncodeBadEntry(CheckedOp::kReshapeAndCache, CheckedArray::kSlotMapping, 1));
  // The CPU reference of what is written: only token 0 is valid.
  const std::vector<int64_t> skip_slots = {0, -1, -1, -1};
  host_args.slot_mapping = skip_slots.data();
  const std::vector<int32_t> good_positions = {0, 1, 2, 3};
  host_args.positions = good_positions.data();
  ASSERT_TRUE(cpu::ReshapeAndCache(host_args).ok());

  auto dk = Upload(k);
  auto dv = Upload(v);
  auto dpos = Upload(positions);
  auto dslots = Upload(bad_slots);
  auto dk_pages = Upload(std::vector<float>(layout.NumElements(), 0.0f));
  auto dv_pages = Upload(std::vector<float>(layout.NumElements(), 0.0f));
  auto flag = Upload(std::vector<uint64_t>{kNoBadEntry});
  PagedKvLayout dev = layout;
  dev.k = dk_pages.data();
  dev.v = dv_pages.data();
  ReshapeAndCacheArgs args{.k = dk.data(),
                           .v = dv.data(),
                           .positions = dpos.data(),
                           .slot_mapping = dslots.data(),
                           .num_tokens = n,
                           .rope = dtable->View(),
                           .cache = dev};
  const cuda::LaunchOptions deferred{.check = cuda::ContentCheck::kDeferred,
                                     .deferred_flag = flag.data()};
  ASSERT_TRUE(cuda::ReshapeAndCache(args, nullptr, deferred).ok());
  Sync();
  EXPECT_EQ(FlagWord(flag), want);
  ExpectClose(Download(dk_pages), k_pages, 1e-6, 1e-6, "deferred k pages");
  EXPECT_EQ(Download(dv_pages), v_pages);
  // A later bad call (another op) does not overwrite the first entry.
  const std::vector<int64_t> src = {0, 99}, dst = {1, 2};
  const std::vector<int32_t> pos = {0, 1};
  auto dsrc = Upload(src);
  auto ddst = Upload(dst);
  auto dp = Upload(pos);
  ASSERT_TRUE(cuda::ReRotate({.src_slots = dsrc.data(),
                              .dst_slots = ddst.data(),
                              .old_positions = dp.data(),
                              .new_positions = dp.data(),
                              .num_tokens = 2,
                              .rope = dtable->View(),
                              .cache = dev},
                             nullptr, deferred)
                  .ok());
  Sync();
  EXPECT_EQ(FlagWord(flag), want);
  const absl::Status read = cuda::ReadAndClearDeferredCheck(flag.data(), nullptr);
  EXPECT_EQ(read, BadEntryStatus(want));
  EXPECT_NE(read.message().find("ReshapeAndCache: slot_mapping[1]"), std::string::npos) << read;
  EXPECT_TRUE(cuda::ReadAndClearDeferredCheck(flag.data(), nullptr).ok());  // cleared
  // After clearing, the next bad call records again.
  ASSERT_TRUE(cuda::ReRotate({.src_slots = dsrc.data(),
                              .dst_slots = ddst.data(),
                              .old_positions = dp.data(),
                              .new_positions = dp.data(),
                              .num_tokens = 2,
                              .rope = dtable->View(),
                              .cache = dev},
                             nullptr, deferred)
                  .ok());
  EXPECT_EQ(cuda::ReadAndClearDeferredCheck(flag.data(), nullptr),
            BadEntryStatus(EncodeBadEntry(CheckedOp::kReRotate, CheckedArray::kSrcSlots, 1)));
}

// Device minimum vs host FirstBadEntry over seeded random arrays with 0-3 bad entries, for each op
// with index arrays; the workspace's own flag when no deferred_flag is given.
TEST_F(CudaBadInputTest, DeferredWordMatchesHostFirstBadEntryForEveryOp) {
  RopeConfig config;
  config.head_dim = 32;
  auto table = RopeTable::Create(config, 64);
  ASSERT_TRUE(table.ok());
  auto dtable = cuda::DeviceRopeTable::Upload(*table);
  ASSERT_TRUE(dtable.ok()) << dtable.status();
  PagedKvLayout layout{
      .dtype = DType::kBF16, .num_blocks = 8, .block_size = 4, .num_kv_heads = 2, .head_dim = 32};
  auto dk_pages = Upload(std::vector<float>(layout.NumElements(), 0.0f));
  auto dv_pages = Upload(std::vector<float>(layout.NumElements(), 0.0f));
  PagedKvLayout dev = layout;
  dev.k = dk_pages.data();
  dev.v = dv_pages.data();
  cuda::Workspace workspace;
  const cuda::LaunchOptions deferred{.check = cuda::ContentCheck::kDeferred,
                                     .workspace = &workspace};
  std::mt19937 rng(60);
  const int64_t n = 40;
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<int64_t> a(n), b(n);
    std::vector<int32_t> p(n), r(n), ids(n);
    for (int64_t t = 0; t < n; ++t) {
      a[t] = rng() % layout.NumSlots();
      b[t] = rng() % layout.NumSlots();
      p[t] = static_cast<int32_t>(rng() % 60);
      r[t] = static_cast<int32_t>(rng() % 60);
      ids[t] = static_cast<int32_t>(rng() % 100);
    }
    for (int bad = static_cast<int>(rng() % 4); bad > 0; --bad) {
      const int64_t t = rng() % n;
      switch (rng() % 5) {
        case 0:
          a[t] = layout.NumSlots() + t;
          break;
        case 1:
          b[t] = -3;
          break;
        case 2:
          p[t] = -1;
          break;
        case 3:
          r[t] = -9;
          break;
        default:
          ids[t] = 100;
          break;
      }
    }
    auto da = Upload(a);
    auto db = Upload(b);
    auto dp = Upload(p);
    auto dr = Upload(r);
    auto dids = Upload(ids);
    auto dq = Upload(RandomFloats(n * 2 * 32, 61));
    auto dkv = Upload(RandomFloats(n * 2 * 32, 62));
    auto dtable_out = Upload(std::vector<float>(n * 32, 0.0f));
    auto dembedding = Upload(RandomFloats(100 * 32, 63));
    // (host-side args for FirstBadEntry, device launch) per op.
    ReRotateArgs rerotate{.src_slots = a.data(),
                          .dst_slots = b.data(),
                          .old_positions = p.data(),
                          .new_positions = r.data(),
                          .num_tokens = n,
                          .rope = table->View(),
                          .cache = layout};
    ReshapeAndCacheArgs write{.k = nullptr,
                              .v = nullptr,
                              .positions = p.data(),
                              .slot_mapping = b.data(),
                              .num_tokens = n,
                              .cache = layout};
    RopeArgs rope{.positions = r.data(), .num_tokens = n};
    EmbeddingGatherArgs gather{.token_ids = ids.data(), .num_tokens = n, .vocab_size = 100};
    const uint64_t want[4] = {FirstBadEntry(rerotate), FirstBadEntry(write), FirstBadEntry(rope),
                              FirstBadEntry(gather)};
    rerotate = {.src_slots = da.data(),
                .dst_slots = db.data(),
                .old_positions = dp.data(),
                .new_positions = dr.data(),
                .num_tokens = n,
                .rope = dtable->View(),
                .cache = dev};
    ASSERT_TRUE(cuda::ReRotate(rerotate, nullptr, deferred).ok());
    EXPECT_EQ(cuda::ReadAndClearDeferredCheck(&workspace, nullptr), BadEntryStatus(want[0]))
        << "trial " << trial;
    ASSERT_TRUE(cuda::ReshapeAndCache({.k = dkv.data(),
                                       .v = dkv.data(),
                                       .positions = dp.data(),
                                       .slot_mapping = db.data(),
                                       .num_tokens = n,
                                       .rope = dtable->View(),
                                       .cache = dev},
                                      nullptr, deferred)
                    .ok());
    EXPECT_EQ(cuda::ReadAndClearDeferredCheck(&workspace, nullptr), BadEntryStatus(want[1]));
    ASSERT_TRUE(cuda::Rope({.q = dq.data(),
                            .positions = dr.data(),
                            .num_tokens = n,
                            .num_q_heads = 2,
                            .rope = dtable->View()},
                           nullptr, deferred)
                    .ok());
    EXPECT_EQ(cuda::ReadAndClearDeferredCheck(&workspace, nullptr), BadEntryStatus(want[2]));
    ASSERT_TRUE(cuda::EmbeddingGather({.table = dembedding.data(),
                                       .token_ids = dids.data(),
                                       .out = dtable_out.data(),
                                       .num_tokens = n,
                                       .vocab_size = 100,
                                       .dim = 32},
                                      nullptr, deferred)
                    .ok());
    EXPECT_EQ(cuda::ReadAndClearDeferredCheck(&workspace, nullptr), BadEntryStatus(want[3]));
  }
}

TEST_F(CudaBadInputTest, DeferredAttentionAndSampleRecordTheirFirstBadEntry) {
  PagedKvLayout layout{
      .dtype = DType::kF32, .num_blocks = 8, .block_size = 4, .num_kv_heads = 1, .head_dim = 32};
  auto dk_pages = Upload(RandomFloats(layout.NumElements(), 70));
  auto dv_pages = Upload(RandomFloats(layout.NumElements(), 71));
  PagedKvLayout dev = layout;
  dev.k = dk_pages.data();
  dev.v = dv_pages.data();
  const std::vector<int32_t> qsl = {0, 1, 2};
  const std::vector<int32_t> kv_lens = {6, 3};
  const std::vector<int32_t> tables = {1, 9, 4, -1};  // [2, 2]: entry 1 is bad, entry 3 unused
  const std::vector<int32_t> positions = {5, -2};     // bad too, later in the check order
  PagedAttentionArgs host{.positions = positions.data(),
                          .query_start_loc = qsl.data(),
                          .kv_lens = kv_lens.data(),
                          .block_tables = tables.data(),
                          .num_tokens = 2,
                          .num_seqs = 2,
                          .num_q_heads = 2,
                          .max_blocks_per_seq = 2,
                          .cache = layout};
  const uint64_t want = FirstBadEntry(host);
  ASSERT_EQ(want, EncodeBadEntry(CheckedOp::kPagedAttention, CheckedArray::kBlockTables, 1));
  auto dq = Upload(RandomFloats(2 * 2 * 32, 72));
  auto dout = Upload(std::vector<float>(2 * 2 * 32, 0.0f));
  auto dqsl = Upload(qsl);
  auto dkv = Upload(kv_lens);
  auto dtables = Upload(tables);
  auto dpos = Upload(positions);
  cuda::Workspace workspace;
  const cuda::LaunchOptions deferred{.check = cuda::ContentCheck::kDeferred,
                                     .workspace = &workspace};
  PagedAttentionArgs args = host;
  args.q = dq.data();
  args.out = dout.data();
  args.positions = dpos.data();
  args.query_start_loc = dqsl.data();
  args.kv_lens = dkv.data();
  args.block_tables = dtables.data();
  args.cache = dev;
  ASSERT_TRUE(cuda::PagedAttention(args, nullptr, deferred).ok());
  EXPECT_EQ(cuda::ReadAndClearDeferredCheck(&workspace, nullptr), BadEntryStatus(want));
  for (float x : Download(dout)) ASSERT_TRUE(std::isfinite(x));  // bad keys skipped, not read

  std::vector<SamplingParams> params(3);
  params[1].top_p = 2.0f;
  auto dparams = Upload(params);
  auto dlogits = Upload(RandomFloats(3 * 50, 73));
  auto dtokens = Upload(std::vector<int32_t>(3, -9));
  ASSERT_TRUE(cuda::Sample({.logits = dlogits.data(),
                            .params = dparams.data(),
                            .out_tokens = dtokens.data(),
                            .num_seqs = 3,
                            .vocab_size = 50},
                           nullptr, deferred)
                  .ok());
  EXPECT_EQ(cuda::ReadAndClearDeferredCheck(&workspace, nullptr),
            BadEntryStatus(EncodeBadEntry(CheckedOp::kSample, CheckedArray::kParams, 1)));
  const std::vector<int32_t> tokens = Download(dtokens);
  EXPECT_EQ(tokens[1], -9);  // the bad row is skipped
  EXPECT_NE(tokens[0], -9);
  EXPECT_NE(tokens[2], -9);
}

// kDeferred launches can be captured into a CUDA graph (kValidate cannot: it synchronises).
TEST_F(CudaBadInputTest, DeferredKvWriteRunsInsideACapturedGraph) {
  RopeConfig config;
  config.head_dim = 32;
  auto table = RopeTable::Create(config, 16);
  ASSERT_TRUE(table.ok());
  auto dtable = cuda::DeviceRopeTable::Upload(*table);
  ASSERT_TRUE(dtable.ok()) << dtable.status();
  PagedKvLayout layout{
      .dtype = DType::kF16, .num_blocks = 2, .block_size = 4, .num_kv_heads = 1, .head_dim = 32};
  auto dk_pages = Upload(std::vector<float>(layout.NumElements(), 0.0f));
  auto dv_pages = Upload(std::vector<float>(layout.NumElements(), 0.0f));
  layout.k = dk_pages.data();
  layout.v = dv_pages.data();
  auto dkv = Upload(RandomFloats(2 * 32, 80));
  auto dpos = Upload(std::vector<int32_t>{0, 1});
  auto good = Upload(std::vector<int64_t>{0, 1});
  auto bad = Upload(std::vector<int64_t>{0, 8});
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cuda::Workspace workspace;
  const cuda::LaunchOptions deferred{.check = cuda::ContentCheck::kDeferred,
                                     .workspace = &workspace};
  ReshapeAndCacheArgs args{.k = dkv.data(),
                           .v = dkv.data(),
                           .positions = dpos.data(),
                           .slot_mapping = good.data(),
                           .num_tokens = 2,
                           .rope = dtable->View(),
                           .cache = layout};
  // Warm-up outside capture: allocates the workspace's words.
  ASSERT_TRUE(cuda::ReshapeAndCache(args, stream, deferred).ok());
  ASSERT_TRUE(cuda::ReadAndClearDeferredCheck(&workspace, stream).ok());
  args.slot_mapping = bad.data();
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  const absl::Status captured = cuda::ReshapeAndCache(args, stream, deferred);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(captured.ok()) << captured;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_TRUE(cuda::ReadAndClearDeferredCheck(&workspace, stream).ok());  // nothing ran yet
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(
      cuda::ReadAndClearDeferredCheck(&workspace, stream),
      BadEntryStatus(EncodeBadEntry(CheckedOp::kReshapeAndCache, CheckedArray::kSlotMapping, 1)));
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);  // replays record again
  EXPECT_FALSE(cuda::ReadAndClearDeferredCheck(&workspace, stream).ok());
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
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
                       .dtype = static_cast<DType>(99),
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
  EXPECT_EQ(cuda::ReadAndClearDeferredCheck(static_cast<uint64_t*>(nullptr), nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::ClearDeferredCheck(nullptr, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagedkv
