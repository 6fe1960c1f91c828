// Copyright 2026 The pagedkv Authors.
//
// cuda::GatherRows against cpu::GatherRows on random tables of every dtype, validated and trusted,
// and its bad-input behaviour: an out-of-range row is the CPU backend's InvalidArgument and
// nothing is written. Skips without a visible device.
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "pagedkv/dtype.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/kernels/cuda_ops.h"
#include "pagedkv/kernels/op_args.h"
#include "tests/kernels/cuda_test_util.h"

namespace pagedkv {
namespace {

using cuda_testing::CudaDeviceTest;
using cuda_testing::Download;
using cuda_testing::Upload;

class CudaGatherRowsTest : public CudaDeviceTest {};

TEST_F(CudaGatherRowsTest, MatchesTheCpuOpOnRandomTables) {
  std::mt19937 rng(41);
  for (int trial = 0; trial < 30; ++trial) {
    const DType dtype = std::vector<DType>{DType::kF32, DType::kF16, DType::kBF16}[trial % 3];
    const int64_t num_src_rows = std::uniform_int_distribution<int64_t>(1, 300)(rng);
    const int64_t width = std::uniform_int_distribution<int64_t>(1, 300)(rng);
    const int64_t stride = trial % 2 == 0 ? 0 : width + 3;
    const int64_t elements = num_src_rows * (stride == 0 ? width : stride);
    std::vector<uint16_t> words(static_cast<size_t>(elements * DTypeSize(dtype) / 2));
    // Finite values for every dtype: sign, a mid-range exponent, random mantissa bits.
    for (size_t i = 0; i < words.size(); ++i) {
      words[i] = static_cast<uint16_t>((rng() & 0x83ff) | 0x3800);
    }
    const int64_t num_rows = std::uniform_int_distribution<int64_t>(1, 500)(rng);
    std::vector<int64_t> rows(static_cast<size_t>(num_rows));
    for (int64_t& r : rows) r = std::uniform_int_distribution<int64_t>(0, num_src_rows - 1)(rng);
    std::vector<float> want(static_cast<size_t>(num_rows * width));
    GatherRowsArgs args{.src = words.data(),
                        .rows = rows.data(),
                        .out = want.data(),
                        .num_rows = num_rows,
                        .num_src_rows = num_src_rows,
                        .width = width,
                        .src_stride = stride,
                        .src_dtype = dtype};
    ASSERT_TRUE(cpu::GatherRows(args).ok());
    auto src = Upload(words);
    auto device_rows = Upload(rows);
    for (cuda::ContentCheck check : {cuda::ContentCheck::kValidate, cuda::ContentCheck::kTrusted}) {
      auto out = Upload(std::vector<float>(want.size(), -7.0f));
      args.src = src.data();
      args.rows = device_rows.data();
      args.out = out.data();
      ASSERT_TRUE(cuda::GatherRows(args, nullptr, {.check = check}).ok());
      Sync();
      EXPECT_EQ(Download(out), want) << "trial " << trial;
    }
  }
}

TEST_F(CudaGatherRowsTest, OutOfRangeRowIsTheCpuErrorAndWritesNothing) {
  const std::vector<float> table(12, 1.5f);
  const std::vector<int64_t> rows = {0, 4, 1};
  std::vector<float> cpu_out(9, -7.0f);
  GatherRowsArgs args{.src = table.data(),
                      .rows = rows.data(),
                      .out = cpu_out.data(),
                      .num_rows = 3,
                      .num_src_rows = 4,
                      .width = 3};
  const absl::Status cpu_status = cpu::GatherRows(args);
  ASSERT_EQ(cpu_status.code(), absl::StatusCode::kInvalidArgument);
  auto src = Upload(table);
  auto device_rows = Upload(rows);
  auto out = Upload(std::vector<float>(9, -7.0f));
  args.src = src.data();
  args.rows = device_rows.data();
  args.out = out.data();
  EXPECT_EQ(cuda::GatherRows(args), cpu_status);
  Sync();
  EXPECT_EQ(Download(out), std::vector<float>(9, -7.0f));
}

}  // namespace
}  // namespace pagedkv
