// Copyright 2026 The pagedkv Authors.
//
// ReRotateSlots from float keys (SlotMove::src_keys) over int8 pages: tokens moved to their own
// position and tokens moved elsewhere in one call (the two passes each take their slice of the
// keys), layer-0 keys equal to a fresh computation at the new positions; a key list of the wrong
// size is refused before anything moves.
#include "engine/runtime/shift/rerotate_slots.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/runner/model_runner.h"
#include "gtest/gtest.h"
#include "pagedkv/model/model_weights.h"

namespace pagedkv {
namespace {

constexpr int32_t kBlockSize = 4;

// A forward of `tokens` at positions first.. into blocks table[...], every row's keys kept.
ModelOutput Prefill(ModelRunner& runner, const std::vector<TokenId>& tokens, int32_t first,
                    const std::vector<BlockId>& table) {
  const auto n = static_cast<int32_t>(tokens.size());
  std::vector<int32_t> positions, rows;
  std::vector<int64_t> slots;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t p = first + i;
    positions.push_back(p);
    slots.push_back(int64_t{table[static_cast<size_t>(p / kBlockSize)]} * kBlockSize +
                    p % kBlockSize);
    rows.push_back(i);
  }
  const std::vector<int32_t> qsl = {0, n}, kv_lens = {first + n};
  ModelOutput out;
  EXPECT_TRUE(runner
                  .Forward({.token_ids = tokens,
                            .positions = positions,
                            .slot_mapping = slots,
                            .query_start_loc = qsl,
                            .kv_lens = kv_lens,
                            .block_tables = table,
                            .max_blocks_per_seq = static_cast<int32_t>(table.size())},
                           {.key_rows = rows}, &out)
                  .ok());
  return out;
}

TEST(ReRotateSlotsTest, FloatKeysOfBothPassesRoundOnce) {
  auto weights = std::make_shared<const ModelWeights>(ModelWeights::Random({.dim = 32,
                                                                            .hidden_dim = 48,
                                                                            .n_layers = 2,
                                                                            .n_heads = 4,
                                                                            .n_kv_heads = 2,
                                                                            .vocab_size = 64,
                                                                            .seq_len = 128},
                                                                           {.seed = 3})
                                                          .value());
  auto runner = ModelRunner::Create(weights, {.backend = BackendKind::kCpu,
                                              .num_blocks = 16,
                                              .block_size = kBlockSize,
                                              .kv_dtype = DType::kInt8})
                    .value();
  const std::vector<TokenId> tokens = {5, 17, 33, 2, 40, 9};
  // Computed at 0.. in blocks 0-1; tokens 0 and 3 stay at their positions (slots 16 and 19),
  // the others go to positions 21, 22, 24, 25 (slots in blocks 5-6). A fresh sequence with those
  // tokens at those positions (blocks 8-14) gives the true keys.
  const ModelOutput donor = Prefill(*runner, tokens, 0, {0, 1});
  const size_t width = static_cast<size_t>(runner->config().kv_dim());
  const std::vector<int64_t> src = {0, 1, 2, 3, 4, 5}, dst = {16, 21, 22, 19, 24, 25};
  const std::vector<int32_t> old_pos = {0, 1, 2, 3, 4, 5}, new_pos = {0, 21, 22, 3, 24, 25};
  std::vector<float> layer0(donor.rotated_keys.begin(),
                            donor.rotated_keys.begin() + tokens.size() * width);
  const std::vector<int32_t> layers = {0};
  EXPECT_EQ(ReRotateSlots(*runner, {.src = src,
                                    .dst = dst,
                                    .old_positions = old_pos,
                                    .new_positions = new_pos,
                                    .layers = layers,
                                    .src_keys = std::span<const float>(layer0).first(5)})
                .code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(ReRotateSlots(*runner, {.src = src,
                                      .dst = dst,
                                      .old_positions = old_pos,
                                      .new_positions = new_pos,
                                      .layers = layers,
                                      .src_keys = layer0})
                  .ok());
  std::vector<TokenId> fresh_tokens(26, 0);
  fresh_tokens[21] = 17, fresh_tokens[22] = 33, fresh_tokens[24] = 40, fresh_tokens[25] = 9;
  Prefill(*runner, fresh_tokens, 0, {8, 9, 10, 11, 12, 13, 14});
  std::vector<float> moved, fresh, unused;
  ASSERT_TRUE(runner->ReadKv(0, dst, &moved, &unused).ok());
  ASSERT_TRUE(runner->ReadKv(0, {0, 53, 54, 3, 56, 57}, &fresh, &unused).ok());
  EXPECT_EQ(moved, fresh);  // layer-0 keys depend on the token and position only
}

}  // namespace
}  // namespace pagedkv
