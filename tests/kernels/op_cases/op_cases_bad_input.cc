// Copyright 2026 The pagedkv Authors.
//
// Bad-input cases of every op: index arrays out of range (kContents: the CPU ops and validated
// CUDA launches report them) and arguments the host-side check refuses (kArguments: every
// backend). Each must be InvalidArgument with the CPU ops' message and leave every buffer the op
// may write as it was.
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pagedkv/dtype.h"
#include "pagedkv/kernels/op_args.h"
#include "pagedkv/rope_config.h"
#include "pagedkv/status_macros.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/op_cases/op_backend.h"
#include "tests/kernels/op_cases/op_case_util.h"
#include "tests/kernels/op_cases/op_cases.h"

namespace pagedkv::testing {
namespace {

constexpr int32_t kQHeads = 4, kHeadDim = 32;
constexpr int64_t kTokens = 3;

// The pool the page ops' bad inputs run over: bf16, 4 blocks of 4 slots, 2 KV heads of 32, K and
// V pages holding the same random words; a RoPE table for head_dim 32.
struct BadInputPool {
  std::vector<float> before;  // the contents of both page buffers
  OpBuffer<float> k_pages, v_pages;
  PagedKvLayout layout{
      .dtype = DType::kBF16, .num_blocks = 4, .block_size = 4, .num_kv_heads = 2, .head_dim = 32};
  BackendRope rope;

  // Adds "wrote to k pages" / "wrote to v pages" to run.broken as they changed.
  absl::Status ExpectUnchanged(OpRun& run) const {
    PAGEDKV_RETURN_IF_ERROR(testing::ExpectUnchanged(k_pages, before, "k pages", run));
    return testing::ExpectUnchanged(v_pages, before, "v pages", run);
  }
};

absl::StatusOr<BadInputPool> MakePool(OpBackend& b) {
  BadInputPool pool;
  pool.before = RandomFloats(pool.layout.NumElements(), 30);
  PAGEDKV_ASSIGN_OR_RETURN(pool.k_pages, Upload(b, pool.before));
  PAGEDKV_ASSIGN_OR_RETURN(pool.v_pages, Upload(b, pool.before));
  pool.layout.k = pool.k_pages.data();
  pool.layout.v = pool.v_pages.data();
  RopeConfig config;
  config.head_dim = kHeadDim;
  PAGEDKV_ASSIGN_OR_RETURN(pool.rope, UploadRope(b, config, 64));
  return pool;
}

// What is wrong with a call, applied to its host-side inputs before they are uploaded.
enum class KvWriteFault { kSlotPastThePool, kSlotMinusTwo, kNegativePosition, kShortKStride };

absl::StatusOr<OpRun> RunBadKvWrite(OpBackend& b, KvWriteFault fault) {
  PAGEDKV_ASSIGN_OR_RETURN(BadInputPool pool, MakePool(b));
  std::vector<int64_t> host_slots = {0, 5, -1};
  std::vector<int32_t> host_positions = {0, 1, 2};
  if (fault == KvWriteFault::kSlotPastThePool) host_slots[1] = pool.layout.NumSlots();
  if (fault == KvWriteFault::kSlotMinusTwo) host_slots[2] = -2;
  if (fault == KvWriteFault::kNegativePosition) host_positions[1] = -3;
  const std::vector<float> q0 = RandomFloats(kTokens * kQHeads * kHeadDim, 31);
  PAGEDKV_ASSIGN_OR_RETURN(auto q, Upload(b, q0));
  PAGEDKV_ASSIGN_OR_RETURN(auto kv, Upload(b, RandomFloats(kTokens * 2 * kHeadDim, 32)));
  PAGEDKV_ASSIGN_OR_RETURN(auto slots, Upload(b, host_slots));
  PAGEDKV_ASSIGN_OR_RETURN(auto positions, Upload(b, host_positions));
  OpRun run;
  run.status = b.Run(ReshapeAndCacheArgs{.q = q.data(),
                                         .k = kv.data(),
                                         .v = kv.data(),
                                         .positions = positions.data(),
                                         .slot_mapping = slots.data(),
                                         .num_tokens = kTokens,
                                         .num_q_heads = kQHeads,
                                         .k_stride = fault == KvWriteFault::kShortKStride ? 1 : 0,
                                         .rope = pool.rope.view,
                                         .cache = pool.layout});
  PAGEDKV_RETURN_IF_ERROR(pool.ExpectUnchanged(run));
  PAGEDKV_RETURN_IF_ERROR(ExpectUnchanged(q, q0, "q", run));
  return run;
}

enum class ReRotateFault { kNegativeSource, kDestinationPastThePool, kNegativeNewPosition, kMode };

absl::StatusOr<OpRun> RunBadReRotate(OpBackend& b, ReRotateFault fault) {
  PAGEDKV_ASSIGN_OR_RETURN(BadInputPool pool, MakePool(b));
  std::vector<int64_t> host_src = {0, 1, 2}, host_dst = {3, 4, 5};
  std::vector<int32_t> host_old = {0, 1, 2}, host_new = {4, 5, 6};
  if (fault == ReRotateFault::kNegativeSource) host_src[2] = -1;
  if (fault == ReRotateFault::kDestinationPastThePool) host_dst[0] = pool.layout.NumSlots() + 7;
  if (fault == ReRotateFault::kNegativeNewPosition) host_new[1] = -1;
  PAGEDKV_ASSIGN_OR_RETURN(auto src, Upload(b, host_src));
  PAGEDKV_ASSIGN_OR_RETURN(auto dst, Upload(b, host_dst));
  PAGEDKV_ASSIGN_OR_RETURN(auto old_pos, Upload(b, host_old));
  PAGEDKV_ASSIGN_OR_RETURN(auto new_pos, Upload(b, host_new));
  OpRun run;
  run.status = b.Run(ReRotateArgs{
      .src_slots = src.data(),
      .dst_slots = dst.data(),
      .old_positions = old_pos.data(),
      .new_positions = new_pos.data(),
      .num_tokens = kTokens,
      .mode = fault == ReRotateFault::kMode ? static_cast<ReRotateMode>(7) : ReRotateMode::kCompose,
      .rope = pool.rope.view,
      .cache = pool.layout});
  PAGEDKV_RETURN_IF_ERROR(pool.ExpectUnchanged(run));
  return run;
}

enum class AttentionFault {
  kBlockIdPastThePool,
  kKvLenOverCapacity,
  kQueryStartLocNotEndingAtNumTokens,
  kNegativePosition,
  kBadKvLenWithoutQueryTokens,  // checked all the same
  kSlidingWindowWithoutCausal,
};

absl::StatusOr<OpRun> RunBadAttention(OpBackend& b, AttentionFault fault) {
  PAGEDKV_ASSIGN_OR_RETURN(BadInputPool pool, MakePool(b));
  std::vector<int32_t> host_positions = {3, 4, 1}, host_qsl = {0, 2, 3}, host_kv_lens = {5, 2};
  std::vector<int32_t> host_tables = {2, 0, 1, -1};  // 2 sequences x 2 blocks; unused entry -1
  int64_t num_tokens = kTokens;
  if (fault == AttentionFault::kBlockIdPastThePool) host_tables[1] = pool.layout.num_blocks;
  if (fault == AttentionFault::kKvLenOverCapacity) host_kv_lens[1] = 9;
  if (fault == AttentionFault::kQueryStartLocNotEndingAtNumTokens) host_qsl[2] = 4;
  if (fault == AttentionFault::kNegativePosition) host_positions[2] = -1;
  if (fault == AttentionFault::kBadKvLenWithoutQueryTokens) {
    host_qsl = {0, 0, 0};
    host_kv_lens[1] = 9;
    num_tokens = 0;
  }
  const std::vector<float> out0(kTokens * kQHeads * kHeadDim, 5.0f);
  PAGEDKV_ASSIGN_OR_RETURN(auto q, Upload(b, RandomFloats(out0.size(), 31)));
  PAGEDKV_ASSIGN_OR_RETURN(auto out, Upload(b, out0));
  PAGEDKV_ASSIGN_OR_RETURN(auto positions, Upload(b, host_positions));
  PAGEDKV_ASSIGN_OR_RETURN(auto qsl, Upload(b, host_qsl));
  PAGEDKV_ASSIGN_OR_RETURN(auto kv_lens, Upload(b, host_kv_lens));
  PAGEDKV_ASSIGN_OR_RETURN(auto tables, Upload(b, host_tables));
  const bool windowed = fault == AttentionFault::kSlidingWindowWithoutCausal;
  OpRun run;
  run.status = b.Run(PagedAttentionArgs{.q = q.data(),
                                        .out = out.data(),
                                        .positions = positions.data(),
                                        .query_start_loc = qsl.data(),
                                        .kv_lens = kv_lens.data(),
                                        .block_tables = tables.data(),
                                        .num_tokens = num_tokens,
                                        .num_seqs = 2,
                                        .num_q_heads = kQHeads,
                                        .max_blocks_per_seq = 2,
                                        .causal = !windowed,
                                        .sliding_window = windowed ? 4 : 0,
                                        .cache = pool.layout});
  PAGEDKV_RETURN_IF_ERROR(ExpectUnchanged(out, out0, "out", run));
  PAGEDKV_RETURN_IF_ERROR(pool.ExpectUnchanged(run));
  return run;
}

enum class EmbeddingFault { kIdEqualsVocabSize, kZeroDim };

absl::StatusOr<OpRun> RunBadEmbeddingGather(OpBackend& b, EmbeddingFault fault) {
  const int64_t vocab = 10;
  const int32_t second_id = fault == EmbeddingFault::kIdEqualsVocabSize ? 10 : 9;
  const std::vector<int32_t> host_ids = {1, second_id, 2};
  const std::vector<float> out0(kTokens * kHeadDim, 0.0f);
  PAGEDKV_ASSIGN_OR_RETURN(auto table, Upload(b, RandomFloats(vocab * kHeadDim, 33)));
  PAGEDKV_ASSIGN_OR_RETURN(auto ids, Upload(b, host_ids));
  PAGEDKV_ASSIGN_OR_RETURN(auto out, Upload(b, out0));
  OpRun run;
  run.status = b.Run(EmbeddingGatherArgs{.table = table.data(),
                                         .token_ids = ids.data(),
                                         .out = out.data(),
                                         .num_tokens = kTokens,
                                         .vocab_size = vocab,
                                         .dim = fault == EmbeddingFault::kZeroDim ? 0 : kHeadDim});
  PAGEDKV_RETURN_IF_ERROR(ExpectUnchanged(out, out0, "out", run));
  return run;
}

enum class SampleFault { kTopPZero, kNanTemperature, kZeroVocabSize, kNegativeTopK, kMinPAboveOne };

absl::StatusOr<OpRun> RunBadSample(OpBackend& b, SampleFault fault) {
  std::vector<SamplingParams> host_params(2, SamplingParams{.temperature = 1.0f});
  if (fault == SampleFault::kTopPZero) host_params[1].top_p = 0.0f;
  if (fault == SampleFault::kNanTemperature) host_params[0].temperature = NAN;
  if (fault == SampleFault::kNegativeTopK) host_params[1].top_k = -1;
  if (fault == SampleFault::kMinPAboveOne) host_params[0].min_p = 1.5f;
  const std::vector<int32_t> tokens0(2, -9);
  PAGEDKV_ASSIGN_OR_RETURN(auto logits, Upload(b, RandomFloats(2 * 50, 34)));
  PAGEDKV_ASSIGN_OR_RETURN(auto params, Upload(b, host_params));
  PAGEDKV_ASSIGN_OR_RETURN(auto tokens, Upload(b, tokens0));
  OpRun run;
  run.status = b.Run(SampleArgs{.logits = logits.data(),
                                .params = params.data(),
                                .out_tokens = tokens.data(),
                                .num_seqs = 2,
                                .vocab_size = fault == SampleFault::kZeroVocabSize ? 0 : 50});
  PAGEDKV_RETURN_IF_ERROR(ExpectUnchanged(tokens, tokens0, "out_tokens", run));
  return run;
}

enum class GatherRowsFault { kRowPastTheTable, kShortStride };

absl::StatusOr<OpRun> RunBadGatherRows(OpBackend& b, GatherRowsFault fault) {
  const int64_t second_row = fault == GatherRowsFault::kRowPastTheTable ? 4 : 3;
  const std::vector<int64_t> host_rows = {0, second_row, 1};
  const std::vector<float> out0(9, -7.0f);
  PAGEDKV_ASSIGN_OR_RETURN(auto table, OpBuffer<float>::Filled(b, 12, 1.5f));
  PAGEDKV_ASSIGN_OR_RETURN(auto rows, Upload(b, host_rows));
  PAGEDKV_ASSIGN_OR_RETURN(auto out, Upload(b, out0));
  OpRun run;
  run.status = b.Run(GatherRowsArgs{.src = table.data(),
                                    .rows = rows.data(),
                                    .out = out.data(),
                                    .num_rows = 3,
                                    .num_src_rows = 4,
                                    .width = 3,
                                    .src_stride = fault == GatherRowsFault::kShortStride ? 2 : 0});
  PAGEDKV_RETURN_IF_ERROR(ExpectUnchanged(out, out0, "out", run));
  return run;
}

// Linear writing y over its own x.
absl::StatusOr<OpRun> RunLinearIntoItsInput(OpBackend& b) {
  const std::vector<float> x0 = RandomFloats(4, 35);
  PAGEDKV_ASSIGN_OR_RETURN(auto x, Upload(b, x0));
  PAGEDKV_ASSIGN_OR_RETURN(auto w, Upload(b, RandomFloats(4, 36)));
  OpRun run;
  run.status =
      b.Run(LinearArgs{.x = x.data(), .w = w.data(), .y = x.data(), .m = 1, .n = 1, .k = 2});
  PAGEDKV_RETURN_IF_ERROR(ExpectUnchanged(x, x0, "x", run));
  return run;
}

absl::StatusOr<OpRun> RunLmHeadWithZeroDModel(OpBackend& b) {
  const std::vector<float> logits0(5 * 70, 7.0f);
  PAGEDKV_ASSIGN_OR_RETURN(auto hidden, Upload(b, RandomFloats(5 * 33, 1)));
  PAGEDKV_ASSIGN_OR_RETURN(auto weight, Upload(b, RandomFloats(70 * 33, 2)));
  PAGEDKV_ASSIGN_OR_RETURN(auto logits, Upload(b, logits0));
  OpRun run;
  run.status = b.Run(LmHeadArgs{.hidden = hidden.data(),
                                .weight = weight.data(),
                                .logits = logits.data(),
                                .num_rows = 5,
                                .d_model = 0,
                                .vocab_size = 70});
  PAGEDKV_RETURN_IF_ERROR(ExpectUnchanged(logits, logits0, "logits", run));
  return run;
}

absl::StatusOr<OpRun> RunRmsNormWithNegativeEps(OpBackend& b) {
  const std::vector<float> out0(4 * 16, 7.0f);
  PAGEDKV_ASSIGN_OR_RETURN(auto x, Upload(b, RandomFloats(4 * 16, 7)));
  PAGEDKV_ASSIGN_OR_RETURN(auto weight, Upload(b, RandomFloats(16, 8)));
  PAGEDKV_ASSIGN_OR_RETURN(auto out, Upload(b, out0));
  OpRun run;
  run.status = b.Run(RmsNormArgs{.x = x.data(),
                                 .weight = weight.data(),
                                 .out = out.data(),
                                 .num_rows = 4,
                                 .dim = 16,
                                 .eps = -1.0f});
  PAGEDKV_RETURN_IF_ERROR(ExpectUnchanged(out, out0, "out", run));
  return run;
}

absl::StatusOr<OpRun> RunSwiGluWithShortGateStride(OpBackend& b) {
  const std::vector<float> out0(3 * 16, 7.0f);
  PAGEDKV_ASSIGN_OR_RETURN(auto fused, Upload(b, RandomFloats(3 * 2 * 16, 9)));
  PAGEDKV_ASSIGN_OR_RETURN(auto out, Upload(b, out0));
  OpRun run;
  run.status = b.Run(SwiGluArgs{.gate = fused.data(),
                                .up = fused.data() + 16,
                                .out = out.data(),
                                .num_rows = 3,
                                .dim = 16,
                                .gate_stride = 15,
                                .up_stride = 32});
  PAGEDKV_RETURN_IF_ERROR(ExpectUnchanged(out, out0, "out", run));
  return run;
}

template <typename Args>
BadInputCase Bad(std::string what, BadInputKind kind,
                 std::function<absl::StatusOr<OpRun>(OpBackend&)> run) {
  constexpr PluginOp op = OpFor<Args>();
  return {.name = std::string(op.name()) + "/" + what, .op = op, .kind = kind, .run = run};
}

}  // namespace

void AddBadInputCases(std::vector<BadInputCase>& cases) {
  constexpr BadInputKind kContents = BadInputKind::kContents;
  constexpr BadInputKind kArguments = BadInputKind::kArguments;
  using KvW = KvWriteFault;
  auto kv_write = [](KvW f) { return [f](OpBackend& b) { return RunBadKvWrite(b, f); }; };
  cases.push_back(
      Bad<ReshapeAndCacheArgs>("slot_past_the_pool", kContents, kv_write(KvW::kSlotPastThePool)));
  cases.push_back(
      Bad<ReshapeAndCacheArgs>("slot_minus_2", kContents, kv_write(KvW::kSlotMinusTwo)));
  cases.push_back(
      Bad<ReshapeAndCacheArgs>("negative_position", kContents, kv_write(KvW::kNegativePosition)));
  cases.push_back(Bad<ReshapeAndCacheArgs>("k_stride_shorter_than_a_row", kArguments,
                                           kv_write(KvW::kShortKStride)));
  using ReR = ReRotateFault;
  auto rerotate = [](ReR f) { return [f](OpBackend& b) { return RunBadReRotate(b, f); }; };
  cases.push_back(Bad<ReRotateArgs>("negative_source", kContents, rerotate(ReR::kNegativeSource)));
  cases.push_back(Bad<ReRotateArgs>("destination_past_the_pool", kContents,
                                    rerotate(ReR::kDestinationPastThePool)));
  cases.push_back(
      Bad<ReRotateArgs>("negative_new_position", kContents, rerotate(ReR::kNegativeNewPosition)));
  cases.push_back(Bad<ReRotateArgs>("mode_out_of_range", kArguments, rerotate(ReR::kMode)));
  using Att = AttentionFault;
  auto attention = [](Att f) { return [f](OpBackend& b) { return RunBadAttention(b, f); }; };
  cases.push_back(Bad<PagedAttentionArgs>("block_id_past_the_pool", kContents,
                                          attention(Att::kBlockIdPastThePool)));
  cases.push_back(Bad<PagedAttentionArgs>("kv_len_over_capacity", kContents,
                                          attention(Att::kKvLenOverCapacity)));
  cases.push_back(Bad<PagedAttentionArgs>("query_start_loc_not_ending_at_num_tokens", kContents,
                                          attention(Att::kQueryStartLocNotEndingAtNumTokens)));
  cases.push_back(
      Bad<PagedAttentionArgs>("negative_position", kContents, attention(Att::kNegativePosition)));
  cases.push_back(Bad<PagedAttentionArgs>("bad_kv_len_without_query_tokens", kContents,
                                          attention(Att::kBadKvLenWithoutQueryTokens)));
  cases.push_back(Bad<PagedAttentionArgs>("sliding_window_without_causal", kArguments,
                                          attention(Att::kSlidingWindowWithoutCausal)));
  cases.push_back(Bad<EmbeddingGatherArgs>("id_equals_vocab_size", kContents, [](OpBackend& b) {
    return RunBadEmbeddingGather(b, EmbeddingFault::kIdEqualsVocabSize);
  }));
  cases.push_back(Bad<EmbeddingGatherArgs>("zero_dim", kArguments, [](OpBackend& b) {
    return RunBadEmbeddingGather(b, EmbeddingFault::kZeroDim);
  }));
  cases.push_back(Bad<SampleArgs>("top_p_zero", kContents, [](OpBackend& b) {
    return RunBadSample(b, SampleFault::kTopPZero);
  }));
  cases.push_back(Bad<SampleArgs>("nan_temperature", kContents, [](OpBackend& b) {
    return RunBadSample(b, SampleFault::kNanTemperature);
  }));
  cases.push_back(Bad<SampleArgs>("negative_top_k", kContents, [](OpBackend& b) {
    return RunBadSample(b, SampleFault::kNegativeTopK);
  }));
  cases.push_back(Bad<SampleArgs>("min_p_above_one", kContents, [](OpBackend& b) {
    return RunBadSample(b, SampleFault::kMinPAboveOne);
  }));
  cases.push_back(Bad<SampleArgs>("zero_vocab_size", kArguments, [](OpBackend& b) {
    return RunBadSample(b, SampleFault::kZeroVocabSize);
  }));
  cases.push_back(Bad<GatherRowsArgs>("row_past_the_table", kContents, [](OpBackend& b) {
    return RunBadGatherRows(b, GatherRowsFault::kRowPastTheTable);
  }));
  cases.push_back(Bad<GatherRowsArgs>("stride_shorter_than_width", kArguments, [](OpBackend& b) {
    return RunBadGatherRows(b, GatherRowsFault::kShortStride);
  }));
  cases.push_back(Bad<LinearArgs>("y_aliases_x", kArguments, RunLinearIntoItsInput));
  cases.push_back(Bad<LmHeadArgs>("zero_d_model", kArguments, RunLmHeadWithZeroDModel));
  cases.push_back(Bad<RmsNormArgs>("negative_eps", kArguments, RunRmsNormWithNegativeEps));
  cases.push_back(
      Bad<SwiGluArgs>("gate_stride_shorter_than_a_row", kArguments, RunSwiGluWithShortGateStride));
}

}  // namespace pagedkv::testing
