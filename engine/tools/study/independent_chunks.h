// Copyright 2026 The pagedkv Authors.
//
// The independent-chunks setting of `pagedkv study-shift` (--setting independent-chunks): the
// setting of CacheBlend and EPIC. A prompt is a shared system prefix S, k retrieved chunks and a
// continuation Q:
//
//   prompt = S (system_prefix tokens) ‖ C1 ‖ C2 ‖ ... ‖ Ck (chunk_length each) ‖ Q
//
// Each chunk is computed independently, as the sequence S ‖ Ci (so from position 0 when S is
// empty; its first token then carries an attention sink), and its K/V are reused in the prompt at
// its new position (keys re-rotated, values copied). Q is sampled by the model after S ‖ C1..Ck
// and scored against a full prefill of the prompt. Per number of chunks, per variant and per
// recompute fraction the study reports KL(full || variant), top-1 agreement and perplexity on Q,
// the fraction of chunk tokens recomputed through every layer and the prefill compute saved.
//
// Variants: baselines "full" (the reference itself), "naive" (keys not re-rotated), "rerotated"
// (no recompute); selectors at a recompute fraction f of the chunk tokens (all chunks together):
//   deviation   K+V deviation at deviation_layer between reused and fresh-in-context K/V, the top
//               ceil(f L) tokens of each chunk (ShiftedPrefill's selective recompute); the probe's
//               fresh K/V are discarded, the selected tokens recomputed through every layer;
//   oracle      the top ceil(f kL) tokens by the true K/V deviation from the full prefill, squared
//               differences summed over every layer (needs the answer: an upper reference);
//   random      ceil(f kL) tokens drawn without replacement (fixed seed);
//   firstk      the first min(ceil(f L), first_k_max) tokens of each chunk (EPIC's LegoLink);
//   cacheblend  CacheBlend's public code: every chunk token runs layers 0 and 1 fresh; at layer 1
//               the values' squared deviation summed over heads picks the top ceil(f kL) tokens,
//               which alone go on through the later layers (the others keep reused K/V there);
//   engine      the Engine's selective recompute (CacheBlendHook as MakeBlendHook sets it up):
//               like deviation, but in one pass that keeps layers 0..deviation_layer fresh for
//               every chunk token (opt-in: not in the default variant list).
//
// Example:
//   pagedkv::ChunksStudyOptions options;
//   options.weights = weights;  // std::shared_ptr<const ModelWeights>
//   options.chunk_counts = {2, 4};
//   PAGEDKV_ASSIGN_OR_RETURN(pagedkv::ChunksStudyReport report,
//                            pagedkv::RunChunksStudy(options));
//   for (const pagedkv::ChunksQualityRow& row : report.rows) ... row.mean_kl ...
#ifndef PAGEDKV_ENGINE_TOOLS_STUDY_INDEPENDENT_CHUNKS_H_
#define PAGEDKV_ENGINE_TOOLS_STUDY_INDEPENDENT_CHUNKS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/runner/model_runner.h"
#include "pagedkv/dtype.h"
#include "pagedkv/export.h"
#include "pagedkv/model/backend_kind.h"
#include "pagedkv/model/model_weights.h"
#include "pagedkv/types.h"

namespace pagedkv {

enum class ChunkVariant {
  kFull,        // full prefill (the reference): KL 0, nothing saved
  kNaive,       // reuse, keys keep their old rotation
  kReRotated,   // reuse, keys re-rotated, no recompute
  kDeviation,   // selector: K+V deviation at deviation_layer, per chunk
  kOracle,      // selector: true K/V deviation from the full prefill, every layer summed
  kRandom,      // selector: random tokens, fixed seed
  kFirstK,      // selector: the first tokens of each chunk (EPIC)
  kCacheBlend,  // selector: CacheBlend's code (V deviation at layer 1, layers 0-1 fresh)
  kEngine,      // selector: the Engine's CacheBlendHook path (K+V at deviation_layer, per chunk,
                // layers 0..deviation_layer fresh); not in the default list
  kFloatKeys,   // reuse, keys re-rotated from the donors' float keys (rounded once, as fresh keys
                // are), no recompute; not in the default list
};

// "full", "naive", "rerotated", "deviation", "oracle", "random", "firstk", "cacheblend", "engine",
// "floatkeys".
PAGEDKV_EXPORT const char* ChunkVariantName(ChunkVariant variant);
PAGEDKV_EXPORT absl::StatusOr<ChunkVariant> ParseChunkVariant(std::string_view name);
// True for the selectors (the variants run once per recompute fraction).
PAGEDKV_EXPORT bool IsSelector(ChunkVariant variant);

struct PAGEDKV_EXPORT ChunksStudyOptions {
  std::shared_ptr<const ModelWeights> weights;    // the model; required
  BackendKind backend = BackendKind::kCpu;        // where to compute
  int32_t block_size = 16;                        // tokens per KV block
  DType kv_dtype = DType::kF32;                   // KV storage type
  std::vector<int32_t> chunk_counts = {2, 4, 6};  // k: chunks per prompt, each >= 1
  int32_t chunk_length = 32;                      // tokens of each chunk
  int32_t system_prefix = 1;         // tokens of S (BOS first); 0: each chunk from position 0
  int32_t continuation_length = 16;  // tokens of Q scored (>= 2)
  std::vector<double> fractions = {0.05, 0.15, 0.3, 0.5};  // recompute fractions, in [0, 1]
  std::vector<ChunkVariant> variants = {ChunkVariant::kFull,      ChunkVariant::kNaive,
                                        ChunkVariant::kReRotated, ChunkVariant::kDeviation,
                                        ChunkVariant::kOracle,    ChunkVariant::kRandom,
                                        ChunkVariant::kFirstK,    ChunkVariant::kCacheBlend};
  int32_t deviation_layer = 1;  // layer of the deviation selector, in [0, n_layers)
  int32_t first_k_max = 32;     // cap of the first-k selector's tokens per chunk (EPIC: <= 32)
  int32_t num_documents = 2;    // prompts per chunk count, averaged over
  uint64_t seed = 1;            // seed of the sampled texts and of the random selector
};

// One variant at one fraction and one chunk count, over every document.
struct PAGEDKV_EXPORT ChunksQualityRow {
  int32_t num_chunks = 0;
  std::string variant;           // ChunkVariantName
  double fraction = 0.0;         // recompute fraction asked (0 for the baselines but full: 1)
  double recomputed = 0.0;       // chunk tokens recomputed through every layer / chunk tokens
  double mean_kl = 0.0;          // KL(full || variant), nats per token
  double top1_agreement = 0.0;   // fraction of rows with the same argmax
  double perplexity = 0.0;       // of Q under the variant
  double full_perplexity = 0.0;  // of Q under the full prefill
  double compute_saved = 0.0;    // 1 - layer-token work / a full prefill's, mean over documents
  // 1 - mean_kl / the rerotated variant's mean_kl at this chunk count: the share of re-rotated
  // reuse's KL gap that the variant closes; NaN without a rerotated row or when its KL is 0.
  double gap_closed = 0.0;
  int64_t rows = 0;  // scored rows
};

struct PAGEDKV_EXPORT ChunksStudyReport {
  std::string model;  // one-line description of the model
  std::vector<ChunksQualityRow> rows;
};

// Runs the study. InvalidArgument, saying which option to fix, for bad options (no weights, a
// chunk count < 1, an empty chunk, a prompt past the model's context, a fraction outside [0, 1],
// a deviation layer the model lacks, no variant); model errors are passed through.
PAGEDKV_EXPORT absl::StatusOr<ChunksStudyReport> RunChunksStudy(const ChunksStudyOptions& options);

// The layout of one prompt: S ‖ C1..Ck ‖ Q.
struct PAGEDKV_EXPORT ChunkedPrompt {
  std::vector<TokenId> tokens;  // the whole prompt
  int32_t system_prefix = 0;    // tokens of S
  int32_t chunk_length = 0;     // tokens of each chunk
  int32_t num_chunks = 0;       // k
  int32_t ChunkBegin(int32_t chunk) const { return system_prefix + chunk * chunk_length; }
  int32_t QuestionBegin() const { return ChunkBegin(num_chunks); }
  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
};

// The prompt indices of the first min(k, chunk_length) tokens of every chunk, ascending.
PAGEDKV_EXPORT std::vector<int32_t> FirstKTokens(const ChunkedPrompt& prompt, int32_t k);

// `count` distinct prompt indices of chunk tokens drawn with `seed` (SplitMix64, the same on every
// platform), ascending. REQUIRES: 0 <= count <= num_chunks * chunk_length.
PAGEDKV_EXPORT std::vector<int32_t> RandomChunkTokens(const ChunkedPrompt& prompt, int32_t count,
                                                      uint64_t seed);

// What one variant's prefill produced.
struct PAGEDKV_EXPORT ChunkVariantResult {
  std::vector<float> logits;        // [Q tokens, vocab]: rows QuestionBegin()..end
  std::vector<int32_t> recomputed;  // chunk tokens run through every layer, ascending
  double compute_fraction = 1.0;    // layer-token work / a full prefill's
};

// One model runner holding, in fixed block ranges, the independently computed chunks (the
// donors), the full prefill (the reference) and one variant's prefill of a prompt. Not
// thread-safe.
class PAGEDKV_EXPORT IndependentChunksRig {
 public:
  // A runner for prompts of up to `max_tokens` tokens and up to `max_chunks` chunks.
  // InvalidArgument for no weights or a count < 1; the runner's errors are passed through.
  static absl::StatusOr<std::unique_ptr<IndependentChunksRig>> Create(
      std::shared_ptr<const ModelWeights> weights, const ChunksStudyOptions& options,
      int32_t max_tokens, int32_t max_chunks);

  // Computes every chunk independently: the k sequences S ‖ Ci in one batched forward pass (with
  // the floatkeys variant asked for, keeping the chunk tokens' float keys).
  absl::Status PrefillDonors(const ChunkedPrompt& prompt);
  // The full prefill of the prompt (the reference); logits of the Q rows.
  absl::StatusOr<std::vector<float>> PrefillReference(const ChunkedPrompt& prompt);
  // One variant's prefill (selectors at `fraction`). REQUIRES: PrefillDonors and, for the
  // oracle, PrefillReference of the same prompt before.
  absl::StatusOr<ChunkVariantResult> RunVariant(const ChunkedPrompt& prompt, ChunkVariant variant,
                                                double fraction, uint64_t seed);

  // Slots of chunk `chunk`'s tokens in its donor sequence S ‖ Ci (positions S.. of it).
  std::vector<int64_t> DonorSlots(const ChunkedPrompt& prompt, int32_t chunk) const;
  // Which prefill of the prompt a slot belongs to.
  enum class Copy { kReference, kVariant };
  // Slots of prompt positions [begin, begin + count) in the `copy` sequence.
  std::vector<int64_t> PromptSlots(Copy copy, int32_t begin, int32_t count) const;
  ModelRunner& runner() { return *runner_; }

 private:
  IndependentChunksRig(const ChunksStudyOptions& options, int32_t blocks_per_seq,
                       int32_t max_chunks);
  std::vector<BlockId> Table(int32_t sequence) const;
  int64_t Slot(int32_t sequence, int32_t position) const;
  // Forward of prompt indices `indices` of sequence `sequence` (KV holds kv_len tokens after it),
  // logits for the batch rows `logits_rows`, with an optional hook.
  absl::Status Forward(const ChunkedPrompt& prompt, int32_t sequence,
                       const std::vector<int32_t>& indices, int32_t kv_len,
                       const std::vector<int32_t>& logits_rows, LayerHook* hook,
                       ModelOutput* output);
  // The donors' chunk K/V moved into the variant sequence on every layer (keys re-rotated to the
  // new positions, except for the naive variant, whose keys keep their old rotation).
  absl::Status FillChunks(const ChunkedPrompt& prompt, ChunkVariant variant);
  // The `count` chunk tokens whose reused K/V (in the variant sequence) deviate most from the
  // reference's, summed over every layer; ascending prompt indices.
  absl::StatusOr<std::vector<int32_t>> OracleTokens(const ChunkedPrompt& prompt, int32_t count);
  absl::StatusOr<std::vector<int32_t>> DeviationTokens(const ChunkedPrompt& prompt,
                                                       double fraction);
  absl::StatusOr<ChunkVariantResult> RunBlendPass(const ChunkedPrompt& prompt, ChunkVariant variant,
                                                  double fraction);
  // Computes `recompute` ∪ Q in one pass (S and the chunk K/V in place); `extra_work`:
  // layer-token work done before it beyond S.
  absl::StatusOr<ChunkVariantResult> FinishWith(const ChunkedPrompt& prompt,
                                                std::vector<int32_t> recompute, double extra_work);

  ChunksStudyOptions options_;
  int32_t blocks_per_seq_ = 0;
  int32_t max_chunks_ = 0;
  std::unique_ptr<ModelRunner> runner_;
  // With the floatkeys variant: the donors' chunk keys as the KV write rotated them,
  // [n_layers, chunks x chunk tokens, kv_dim] (ModelOutput::rotated_keys of PrefillDonors).
  std::vector<float> donor_keys_;
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_TOOLS_STUDY_INDEPENDENT_CHUNKS_H_
