// Copyright 2026 The pagedkv Authors.
//
// Op cases of the dense ops: linear, LM head, embedding gather, row gather, RMSNorm, SwiGLU and
// sampling. Outputs start as NaN (tokens as -1), so an element an op leaves unwritten differs.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/dtype.h"
#include "pagedkv/kernels/op_args.h"
#include "pagedkv/status_macros.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/op_cases/op_backend.h"
#include "tests/kernels/op_cases/op_case_util.h"
#include "tests/kernels/op_cases/op_cases.h"

namespace pagedkv::testing {
namespace {

// [m, k] x [n, k]^T in float64.
std::vector<double> Matmul(const std::vector<float>& x, const std::vector<float>& w, int64_t m,
                           int64_t n, int64_t k) {
  std::vector<double> y(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t t = 0; t < k; ++t) sum += double(x[i * k + t]) * w[j * k + t];
      y[i * n + j] = sum;
    }
  }
  return y;
}

// Linear (accumulating onto 0.5) and the LM head over the same x and W.
constexpr int64_t kRows = 5, kOut = 300, kIn = 96;
// fp32 sums of kIn products of magnitude <= 1: error <= kIn * 2^-23 (loose, deterministic).
constexpr Tolerance kMatmulVsFloat64{.abs = kIn * 1.2e-7 + 3e-7};

OpCase LinearCase() {
  return {.name = "linear/accumulate",
          .ops = {OpFor<LinearArgs>()},
          .run = [](OpBackend& b) -> absl::StatusOr<OpRun> {
            PAGEDKV_ASSIGN_OR_RETURN(auto x, Upload(b, RandomFloats(kRows * kIn, 1)));
            PAGEDKV_ASSIGN_OR_RETURN(auto w, Upload(b, RandomFloats(kOut * kIn, 2)));
            PAGEDKV_ASSIGN_OR_RETURN(auto y, OpBuffer<float>::Filled(b, kRows * kOut, 0.5f));
            OpRun run;
            run.status = b.Run(LinearArgs{.x = x.data(),
                                          .w = w.data(),
                                          .y = y.data(),
                                          .m = kRows,
                                          .n = kOut,
                                          .k = kIn,
                                          .accumulate = true});
            PAGEDKV_RETURN_IF_ERROR(AddOutput(y, "y", {1e-5, 1e-4}, run));
            return run;
          },
          .reference =
              [] {
                std::vector<double> y = Matmul(RandomFloats(kRows * kIn, 1),
                                               RandomFloats(kOut * kIn, 2), kRows, kOut, kIn);
                for (double& v : y) v += 0.5;
                return std::vector<std::vector<double>>{y};
              },
          .reference_tolerance = kMatmulVsFloat64};
}

OpCase LmHeadCase() {
  return {.name = "lm_head/plain",
          .ops = {OpFor<LmHeadArgs>()},
          .run = [](OpBackend& b) -> absl::StatusOr<OpRun> {
            PAGEDKV_ASSIGN_OR_RETURN(auto hidden, Upload(b, RandomFloats(kRows * kIn, 1)));
            PAGEDKV_ASSIGN_OR_RETURN(auto weight, Upload(b, RandomFloats(kOut * kIn, 2)));
            PAGEDKV_ASSIGN_OR_RETURN(auto logits, OpBuffer<float>::Filled(b, kRows * kOut, NAN));
            OpRun run;
            run.status = b.Run(LmHeadArgs{.hidden = hidden.data(),
                                          .weight = weight.data(),
                                          .logits = logits.data(),
                                          .num_rows = kRows,
                                          .d_model = kIn,
                                          .vocab_size = kOut});
            PAGEDKV_RETURN_IF_ERROR(AddOutput(logits, "logits", {1e-5, 1e-4}, run));
            return run;
          },
          .reference =
              [] {
                return std::vector<std::vector<double>>{Matmul(
                    RandomFloats(kRows * kIn, 1), RandomFloats(kOut * kIn, 2), kRows, kOut, kIn)};
              },
          .reference_tolerance = kMatmulVsFloat64};
}

// Embedding gather, RMSNorm and SwiGLU over 7 rows of 36.
constexpr int64_t kVocab = 64, kDim = 36, kTokens = 7;
const std::vector<int32_t>& TokenIds() {
  static const std::vector<int32_t> ids = {0, 63, 5, 5, 17, 40, 2};
  return ids;
}

OpCase EmbeddingGatherCase() {
  return {.name = "embedding_gather/repeated_and_edge_ids",
          .ops = {OpFor<EmbeddingGatherArgs>()},
          .run = [](OpBackend& b) -> absl::StatusOr<OpRun> {
            PAGEDKV_ASSIGN_OR_RETURN(auto table, Upload(b, RandomFloats(kVocab * kDim, 3)));
            PAGEDKV_ASSIGN_OR_RETURN(auto ids, Upload(b, TokenIds()));
            PAGEDKV_ASSIGN_OR_RETURN(auto out, OpBuffer<float>::Filled(b, kTokens * kDim, NAN));
            OpRun run;
            run.status = b.Run(EmbeddingGatherArgs{.table = table.data(),
                                                   .token_ids = ids.data(),
                                                   .out = out.data(),
                                                   .num_tokens = kTokens,
                                                   .vocab_size = kVocab,
                                                   .dim = kDim});
            PAGEDKV_RETURN_IF_ERROR(AddOutput(out, "out", {}, run));
            return run;
          },
          .reference =
              [] {
                const std::vector<float> table = RandomFloats(kVocab * kDim, 3);
                std::vector<double> out;
                for (int32_t id : TokenIds()) {
                  out.insert(out.end(), table.begin() + id * kDim, table.begin() + (id + 1) * kDim);
                }
                return std::vector<std::vector<double>>{out};
              }};
}

OpCase RmsNormCase() {
  return {.name = "rms_norm/plain",
          .ops = {OpFor<RmsNormArgs>()},
          .run = [](OpBackend& b) -> absl::StatusOr<OpRun> {
            PAGEDKV_ASSIGN_OR_RETURN(auto x, Upload(b, RandomFloats(kTokens * kDim, 3)));
            PAGEDKV_ASSIGN_OR_RETURN(auto weight, Upload(b, RandomFloats(kDim, 4)));
            PAGEDKV_ASSIGN_OR_RETURN(auto out, OpBuffer<float>::Filled(b, kTokens * kDim, NAN));
            OpRun run;
            run.status = b.Run(RmsNormArgs{.x = x.data(),
                                           .weight = weight.data(),
                                           .out = out.data(),
                                           .num_rows = kTokens,
                                           .dim = kDim});
            PAGEDKV_RETURN_IF_ERROR(AddOutput(out, "out", {1e-5, 1e-6}, run));
            return run;
          },
          .reference =
              [] {
                const std::vector<float> x = RandomFloats(kTokens * kDim, 3);
                const std::vector<float> weight = RandomFloats(kDim, 4);
                std::vector<double> out(x.size());
                for (int64_t r = 0; r < kTokens; ++r) {
                  double squares = 0;
                  for (int64_t d = 0; d < kDim; ++d)
                    squares += double(x[r * kDim + d]) * x[r * kDim + d];
                  const double inv = 1.0 / std::sqrt(squares / kDim + 1e-5);
                  for (int64_t d = 0; d < kDim; ++d)
                    out[r * kDim + d] = x[r * kDim + d] * inv * weight[d];
                }
                return std::vector<std::vector<double>>{out};
              },
          .reference_tolerance = {1e-5, 1e-5}};
}

// gate and up interleaved in one [rows, 2 * dim] buffer, as a fused gate/up projection writes.
OpCase SwiGluCase() {
  return {.name = "swiglu/fused_gate_up",
          .ops = {OpFor<SwiGluArgs>()},
          .run = [](OpBackend& b) -> absl::StatusOr<OpRun> {
            PAGEDKV_ASSIGN_OR_RETURN(auto fused,
                                     Upload(b, RandomFloats(kTokens * 2 * kDim, 5, -5.0f, 5.0f)));
            PAGEDKV_ASSIGN_OR_RETURN(auto out, OpBuffer<float>::Filled(b, kTokens * kDim, NAN));
            OpRun run;
            run.status = b.Run(SwiGluArgs{.gate = fused.data(),
                                          .up = fused.data() + kDim,
                                          .out = out.data(),
                                          .num_rows = kTokens,
                                          .dim = kDim,
                                          .gate_stride = 2 * kDim,
                                          .up_stride = 2 * kDim});
            PAGEDKV_RETURN_IF_ERROR(AddOutput(out, "out", {1e-5, 1e-6}, run));
            return run;
          },
          .reference =
              [] {
                const std::vector<float> fused = RandomFloats(kTokens * 2 * kDim, 5, -5.0f, 5.0f);
                std::vector<double> out;
                for (int64_t r = 0; r < kTokens; ++r) {
                  for (int64_t d = 0; d < kDim; ++d) {
                    const double g = fused[r * 2 * kDim + d];
                    out.push_back(g / (1.0 + std::exp(-g)) * fused[r * 2 * kDim + kDim + d]);
                  }
                }
                return std::vector<std::vector<double>>{out};
              },
          .reference_tolerance = {1e-5, 1e-5}};
}

// A random table of `dtype` (contiguous or strided rows) and a random row list; seeded by `trial`.
OpCase GatherRowsCase(int trial) {
  const DType dtype = std::vector<DType>{DType::kF32, DType::kF16, DType::kBF16}[trial % 3];
  const bool strided = trial % 2 == 1;
  return {.name = absl::StrCat("gather_rows/random_", trial, "_", DTypeName(dtype),
                               strided ? "_strided" : ""),
          .ops = {OpFor<GatherRowsArgs>()},
          .run = [trial, dtype, strided](OpBackend& b) -> absl::StatusOr<OpRun> {
            std::mt19937 rng(41 + trial);
            const int64_t num_src_rows = std::uniform_int_distribution<int64_t>(1, 300)(rng);
            const int64_t width = std::uniform_int_distribution<int64_t>(1, 300)(rng);
            const int64_t stride = strided ? width + 3 : 0;
            const int64_t elements = num_src_rows * (strided ? stride : width);
            std::vector<uint16_t> words(static_cast<size_t>(elements * DTypeSize(dtype) / 2));
            // Finite values for every dtype: sign, a mid-range exponent, random mantissa bits.
            for (uint16_t& word : words) word = static_cast<uint16_t>((rng() & 0x83ff) | 0x3800);
            const int64_t num_rows = std::uniform_int_distribution<int64_t>(1, 500)(rng);
            std::vector<int64_t> rows(static_cast<size_t>(num_rows));
            for (int64_t& r : rows) {
              r = std::uniform_int_distribution<int64_t>(0, num_src_rows - 1)(rng);
            }
            PAGEDKV_ASSIGN_OR_RETURN(auto src, Upload(b, words));
            PAGEDKV_ASSIGN_OR_RETURN(auto device_rows, Upload(b, rows));
            PAGEDKV_ASSIGN_OR_RETURN(auto out, OpBuffer<float>::Filled(b, num_rows * width, NAN));
            OpRun run;
            run.status = b.Run(GatherRowsArgs{.src = src.data(),
                                              .rows = device_rows.data(),
                                              .out = out.data(),
                                              .num_rows = num_rows,
                                              .num_src_rows = num_src_rows,
                                              .width = width,
                                              .src_stride = stride,
                                              .src_dtype = dtype});
            PAGEDKV_RETURN_IF_ERROR(AddOutput(out, "out", {}, run));
            return run;
          }};
}

// Runs the sample op over `params.size()` rows of `logits` ([rows, vocab]) on `b`; output
// "tokens".
absl::StatusOr<OpRun> RunSample(OpBackend& b, const std::vector<float>& logits,
                                const std::vector<SamplingParams>& params, int64_t vocab) {
  const auto rows = static_cast<int64_t>(params.size());
  PAGEDKV_ASSIGN_OR_RETURN(auto device_logits, Upload(b, logits));
  PAGEDKV_ASSIGN_OR_RETURN(auto device_params, Upload(b, params));
  PAGEDKV_ASSIGN_OR_RETURN(auto tokens, OpBuffer<int32_t>::Filled(b, rows, -1));
  OpRun run;
  run.status = b.Run(SampleArgs{.logits = device_logits.data(),
                                .params = device_params.data(),
                                .out_tokens = tokens.data(),
                                .num_seqs = rows,
                                .vocab_size = vocab});
  PAGEDKV_RETURN_IF_ERROR(AddOutput(tokens, "tokens", {}, run));
  return run;
}

// Greedy, seeded, nucleus and tie-free rows over a 5000-token vocabulary, one clear winner.
OpCase SampleCase() {
  return {.name = "sample/mixed_params",
          .ops = {OpFor<SampleArgs>()},
          .run = [](OpBackend& b) -> absl::StatusOr<OpRun> {
            const int64_t rows = 6, vocab = 5000;
            std::vector<float> logits = RandomFloats(rows * vocab, 13, -4.0f, 4.0f);
            logits[3 * vocab + 1234] = 20.0f;
            const std::vector<SamplingParams> params = {
                {.temperature = 0.0f},
                {.temperature = 1.0f, .seed = 1},
                {.temperature = 0.7f, .top_p = 0.9f, .seed = 2},
                {.temperature = 0.0f, .top_p = 0.5f},
                {.temperature = 1.3f, .top_p = 0.5f, .seed = 3, .counter = 17},
                {.temperature = 1.0f, .top_p = 0.05f, .seed = 4}};
            return RunSample(b, logits, params, vocab);
          }};
}

// vLLM's top_k and min_p (issue 42), alone, together and with top_p, at several draws: top_k 1
// (the argmax), within the vocabulary, at and past it (off), min_p up to 1 (the maximum only).
OpCase SampleTopKMinPCase() {
  return {.name = "sample/top_k_min_p",
          .ops = {OpFor<SampleArgs>()},
          .run = [](OpBackend& b) -> absl::StatusOr<OpRun> {
            const int64_t vocab = 5000;
            const std::vector<SamplingParams> kinds = {
                {.temperature = 1.0f, .seed = 1, .top_k = 1},
                {.temperature = 1.0f, .seed = 2, .top_k = 5},
                {.temperature = 0.8f, .top_p = 0.7f, .seed = 3, .top_k = 50},
                {.temperature = 1.0f, .seed = 4, .top_k = 4999},
                {.temperature = 1.0f, .seed = 5, .top_k = 5000},
                {.temperature = 1.0f, .seed = 6, .min_p = 0.1f},
                {.temperature = 2.0f, .top_p = 0.9f, .seed = 7, .min_p = 0.5f},
                {.temperature = 1.0f, .seed = 8, .min_p = 1.0f},
                {.temperature = 1.5f, .top_p = 0.95f, .seed = 9, .top_k = 20, .min_p = 0.05f},
                {.temperature = 0.0f, .top_k = 3, .min_p = 0.9f}};
            std::vector<SamplingParams> params;
            for (uint64_t counter = 0; counter < 4; ++counter) {
              for (SamplingParams p : kinds) {
                p.counter = counter;
                params.push_back(p);
              }
            }
            std::vector<float> logits =
                RandomFloats(static_cast<int64_t>(params.size()) * vocab, 17, -4.0f, 4.0f);
            return RunSample(b, logits, params, vocab);
          }};
}

}  // namespace

void AddDenseCases(std::vector<OpCase>& cases) {
  cases.push_back(LinearCase());
  cases.push_back(LmHeadCase());
  cases.push_back(EmbeddingGatherCase());
  cases.push_back(RmsNormCase());
  cases.push_back(SwiGluCase());
  for (int trial = 0; trial < 30; ++trial) cases.push_back(GatherRowsCase(trial));
  cases.push_back(SampleCase());
  cases.push_back(SampleTopKMinPCase());
}

}  // namespace pagedkv::testing
