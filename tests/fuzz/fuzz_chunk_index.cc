// Copyright 2026 The pagedkv Authors.
//
// Fuzz target: random operation sequences on a ChunkIndex over a small BlockPool (register chunks
// in held blocks, find, acquire, release, erase, and pool traffic that evicts their blocks), with
// both structures' invariants checked after every step.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <vector>

#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/chunk_index.h"

namespace {

using pagedkv::BlockId;
using pagedkv::ChunkIndex;
using pagedkv::ChunkLocation;
using pagedkv::TokenId;

std::vector<TokenId> ChunkTokens(uint8_t content, int32_t length) {
  std::vector<TokenId> tokens(static_cast<size_t>(length));
  for (int32_t i = 0; i < length; ++i) tokens[static_cast<size_t>(i)] = content + i;
  return tokens;
}

struct State {
  std::vector<BlockId> held;            // blocks pinned by the fuzzer
  std::vector<ChunkLocation> acquired;  // locations pinned through the index
};

void Register(FuzzedDataProvider& in, pagedkv::BlockPool& pool, ChunkIndex& index) {
  const uint8_t content = in.ConsumeIntegralInRange<uint8_t>(0, 7);
  const int32_t length = in.ConsumeIntegralInRange(1, 12);
  const std::vector<TokenId> tokens = ChunkTokens(content, length);
  std::vector<BlockId> blocks;
  const int32_t count = in.ConsumeIntegralInRange(0, 5);
  if (!pool.Allocate(count, &blocks).ok()) return;
  const absl::StatusOr<bool> inserted =
      index.Insert({.key = pagedkv::ChunkKey(tokens, {}),
                    .tokens = tokens,
                    .position = in.ConsumeIntegralInRange(-1, 100),
                    .blocks = blocks,
                    .start_offset = in.ConsumeIntegralInRange(-1, 4)});
  const int32_t registered = index.size();
  if (!pool.Unpin(std::vector<BlockId>(blocks.rbegin(), blocks.rend())).ok()) std::abort();
  if (!inserted.ok() && index.size() != registered) std::abort();
}

void Step(FuzzedDataProvider& in, pagedkv::BlockPool& pool, ChunkIndex& index, State& state) {
  switch (in.ConsumeIntegralInRange(0, 5)) {
    case 0:
      Register(in, pool, index);
      break;
    case 1: {
      const std::vector<TokenId> tokens =
          ChunkTokens(in.ConsumeIntegralInRange<uint8_t>(0, 7), in.ConsumeIntegralInRange(1, 12));
      std::optional<ChunkLocation> found = index.Find(pagedkv::ChunkKey(tokens, {}), tokens);
      if (found && index.Acquire(*found).ok()) state.acquired.push_back(*found);
      break;
    }
    case 2:
      if (!state.acquired.empty()) {
        if (!index.Release(state.acquired.back()).ok()) std::abort();
        state.acquired.pop_back();
      }
      break;
    case 3: {  // pool traffic: allocate (maybe evicting chunk blocks) and hold
      if (auto block = pool.Allocate(); block.ok()) state.held.push_back(*block);
      break;
    }
    case 4:
      if (!state.held.empty()) {
        if (!pool.Unpin(state.held.back()).ok()) std::abort();
        state.held.pop_back();
      }
      break;
    default: {
      const std::vector<TokenId> tokens =
          ChunkTokens(in.ConsumeIntegralInRange<uint8_t>(0, 7), in.ConsumeIntegralInRange(1, 12));
      const int32_t registered = index.size();
      if (!index.Erase(pagedkv::ChunkKey(tokens, {})).ok() && index.size() != registered) {
        std::abort();
      }
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  pagedkv::BlockPoolOptions options;
  options.num_blocks = in.ConsumeIntegralInRange(1, 12);
  options.block_size = in.ConsumeIntegralInRange(1, 4);
  auto pool = pagedkv::BlockPool::Create(options);
  if (!pool.ok()) std::abort();
  auto index = ChunkIndex::Create(pool->get(), {.verify_tokens = in.ConsumeBool()});
  if (!index.ok()) std::abort();
  State state;
  while (in.remaining_bytes() > 0) {
    Step(in, **pool, **index, state);
    if (!(*pool)->ValidateInvariants().ok() || !(*index)->ValidateInvariants().ok()) std::abort();
  }
  for (auto it = state.acquired.rbegin(); it != state.acquired.rend(); ++it) {
    if (!(*index)->Release(*it).ok()) std::abort();
  }
  return 0;
}
