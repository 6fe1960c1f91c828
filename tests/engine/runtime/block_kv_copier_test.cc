// Copyright 2026 The pagedkv Authors.
//
// BlockKvCopier (engine/runtime/block_kv_copier.h): a block's value holds every page array of the
// runner once (each layer's without groups; the largest group's count with KV cache groups, whose
// layers share arrays), round-trips byte for byte into another block without touching its
// neighbours, and refuses a block outside the pool or a value of the wrong size.
#include "engine/runtime/block_kv_copier.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/runner/model_runner.h"
#include "gtest/gtest.h"
#include "pagedkv/model/model_weights.h"
#include "tests/engine/model/tiny_llama2c.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::MakeTinyLlama2c;
using ::pagedkv::testing::TinyShape;
using ::pagedkv::testing::WriteTempFile;

constexpr int32_t kBlocks = 8;

std::unique_ptr<ModelRunner> MakeRunner(std::vector<int32_t> layer_kv_group) {
  TinyShape shape;
  shape.n_layers = 4;
  const auto path = WriteTempFile("copier_model.bin", MakeTinyLlama2c(shape, 3).FileBytes());
  auto weights =
      std::make_shared<const ModelWeights>(ModelWeights::LoadLlama2c(path.string()).value());
  absl::StatusOr<std::unique_ptr<ModelRunner>> runner =
      ModelRunner::Create(weights, {.backend = BackendKind::kCpu,
                                    .num_blocks = kBlocks,
                                    .block_size = 4,
                                    .layer_kv_group = std::move(layer_kv_group)});
  EXPECT_TRUE(runner.ok()) << runner.status();
  return runner.ok() ? std::move(runner).value() : nullptr;
}

int64_t PageBytes(const ModelRunner& runner) {
  const PagedKvLayout& l = runner.kv_layout(0);
  return l.PageElements() * static_cast<int64_t>(DTypeSize(l.dtype));
}

std::vector<std::byte> Pattern(int64_t bytes, int salt) {
  std::vector<std::byte> v(static_cast<size_t>(bytes));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::byte>((i * 7 + salt) & 0xff);
  return v;
}

TEST(BlockKvCopierTest, ValueHoldsEachPageArrayOnce) {
  std::unique_ptr<ModelRunner> plain = MakeRunner({});
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(BlockKvCopier(plain.get()).value_bytes(), 4 * 2 * PageBytes(*plain));
  std::unique_ptr<ModelRunner> grouped = MakeRunner({0, 1, 0, 1});  // two arrays, shared
  ASSERT_NE(grouped, nullptr);
  EXPECT_EQ(BlockKvCopier(grouped.get()).value_bytes(), 2 * 2 * PageBytes(*grouped));
}

TEST(BlockKvCopierTest, WriteThenReadRoundTripsAndLeavesOtherBlocks) {
  for (const std::vector<int32_t>& groups : {std::vector<int32_t>{}, {0, 1, 0, 1}}) {
    std::unique_ptr<ModelRunner> runner = MakeRunner(groups);
    ASSERT_NE(runner, nullptr);
    BlockKvCopier copier(runner.get());
    const std::vector<std::byte> a = Pattern(copier.value_bytes(), 1);
    const std::vector<std::byte> b = Pattern(copier.value_bytes(), 2);
    ASSERT_TRUE(copier.Write(2, a).ok());
    ASSERT_TRUE(copier.Write(3, b).ok());
    std::vector<std::byte> got(a.size());
    ASSERT_TRUE(copier.Read(2, got).ok());
    EXPECT_EQ(got, a);
    ASSERT_TRUE(copier.ReadAsync(3, got).ok());
    ASSERT_TRUE(copier.SynchronizeCopies().ok());
    EXPECT_EQ(got, b);
  }
}

TEST(BlockKvCopierTest, RefusesABlockOutsideThePoolOrAValueOfTheWrongSize) {
  std::unique_ptr<ModelRunner> runner = MakeRunner({});
  ASSERT_NE(runner, nullptr);
  BlockKvCopier copier(runner.get());
  std::vector<std::byte> value(static_cast<size_t>(copier.value_bytes()));
  EXPECT_EQ(copier.Read(kBlocks, value).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(copier.Write(-1, value).code(), absl::StatusCode::kInvalidArgument);
  value.pop_back();
  EXPECT_EQ(copier.Write(0, value).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagedkv
