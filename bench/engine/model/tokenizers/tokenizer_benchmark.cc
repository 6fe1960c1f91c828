// Copyright 2026 The pagedkv Authors.
//
// Tokenizer encode speed on 1 MB of text (issue #17: encoding must be linear or n log n):
//   BM_HfEncodeSentencePiece: TinyStories-656K's tokenizer.json (SentencePiece style, no
//     pre-tokenizer: the whole normalized text is one BPE word of a million symbols, merged by a
//     priority queue over a linked list). Skipped without ../shared/data.
//   BM_HfEncodeByteLevel: a byte-level tokenizer built here (GPT-2 split regex, the 256-byte
//     alphabet and 64 merges of frequent pairs).
//   BM_Llama2cEncode: aidreams260K's llama2.c tokenizer (run.c's score-ordered merges, a heap).
//   BM_Utf8Scan: the floor, decoding the same bytes as code points.
//   BM_SplitLlama3HandWritten / BM_SplitLlama3Generic: Llama-3's split regex alone, by the
//     hand-written splitter (byte_level.h) and by the generic Split engine (split_regex.h) that
//     runs every other tokenizer.json regex; the ratio is the generic engine's cost.
// Bytes/s are reported; the text doubles with state.range(0) (KB) to show the growth.
//
//   build-dev/bench/engine/model/tokenizer_benchmark --benchmark_counters_tabular=true
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"
#include "engine/model/tokenizers/byte_level.h"
#include "engine/model/tokenizers/split_regex.h"
#include "engine/model/tokenizers/unicode_categories.h"
#include "pagedkv/model/bpe_tokenizer.h"
#include "pagedkv/model/tokenizer.h"

namespace pagedkv::bench {
namespace {

// `kb` KB of story-like text, from a fixed seed.
std::string Text(int64_t kb) {
  static const char* const kWords[] = {
      "Once",    "upon",   "a",    "time,", "there", "was",  "little", "girl", "named", "Lily.",
      "She",     "loved",  "to",   "play",  "with",  "her",  "dog",    "in",   "the",   "park!",
      "\"Look,", "Mom!\"", "said", "Tom.",  "They",  "were", "happy",  "and",  "ate",   "cake.\n"};
  std::mt19937 rng(7);
  std::string text;
  while (static_cast<int64_t>(text.size()) < kb * 1024) {
    text += kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
    text += ' ';
  }
  text.resize(static_cast<size_t>(kb * 1024));
  return text;
}

void BM_HfEncodeSentencePiece(benchmark::State& state) {
  const std::filesystem::path path =
      std::filesystem::path(PAGEDKV_SHARED_DATA_DIR) / "tinystories656K" / "tokenizer.json";
  absl::StatusOr<Tokenizer> tok = Tokenizer::LoadHuggingFace(path.string());
  if (!tok.ok()) return state.SkipWithError("tinystories656K/tokenizer.json not available");
  const std::string text = Text(state.range(0));
  size_t ids = 0;
  for (auto _ : state) {
    absl::StatusOr<std::vector<TokenId>> out = tok->Encode(text);
    benchmark::DoNotOptimize(out);
    ids = out->size();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
  state.counters["tokens"] = static_cast<double>(ids);
}

BpeTokenizer ByteLevelTokenizer(const std::string& sample) {
  BpeTokenizerSpec spec;
  spec.family = BpeFamily::kByteLevel;
  for (int b = 0; b < 256; ++b) {
    spec.vocab.emplace_back(
        model_internal::ToByteLevelAlphabet(std::string(1, static_cast<char>(b))), b);
  }
  // 64 merges: the most frequent adjacent byte pairs of the sample, in order.
  std::vector<int64_t> count(65536, 0);
  for (size_t i = 0; i + 1 < sample.size(); ++i) {
    ++count[static_cast<uint8_t>(sample[i]) * 256 + static_cast<uint8_t>(sample[i + 1])];
  }
  for (int m = 0; m < 64; ++m) {
    const auto best =
        static_cast<int>(std::max_element(count.begin(), count.end()) - count.begin());
    count[static_cast<size_t>(best)] = -1;
    const std::string a =
        model_internal::ToByteLevelAlphabet(std::string(1, static_cast<char>(best / 256)));
    const std::string b =
        model_internal::ToByteLevelAlphabet(std::string(1, static_cast<char>(best % 256)));
    spec.vocab.emplace_back(a + b, 256 + m);
    spec.merges.emplace_back(a, b);
  }
  return BpeTokenizer::Create(spec).value();
}

void BM_HfEncodeByteLevel(benchmark::State& state) {
  const std::string text = Text(state.range(0));
  const BpeTokenizer tok = ByteLevelTokenizer(text.substr(0, 65536));
  size_t ids = 0;
  for (auto _ : state) {
    std::vector<TokenId> out = tok.Encode(text, /*add_special_tokens=*/false);
    benchmark::DoNotOptimize(out.data());
    ids = out.size();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
  state.counters["tokens"] = static_cast<double>(ids);
}

// aidreams260K's llama2.c tokenizer (512 pieces with scores): run.c's rule, merged by a heap of
// candidate merges over a linked list. Skipped without ../shared/data.
void BM_Llama2cEncode(benchmark::State& state) {
  const std::filesystem::path path =
      std::filesystem::path(PAGEDKV_SHARED_DATA_DIR) / "aidreams260K" / "tok512.bin";
  absl::StatusOr<Tokenizer> tok = Tokenizer::Load(path.string(), 512);
  if (!tok.ok()) {
    state.SkipWithError("../shared/data/aidreams260K/tok512.bin not found");
    return;
  }
  const std::string text = Text(state.range(0));
  for (auto _ : state) {
    absl::StatusOr<std::vector<TokenId>> ids = tok->Encode(text);
    benchmark::DoNotOptimize(ids);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}

void BM_Utf8Scan(benchmark::State& state) {
  const std::string text = Text(state.range(0));
  for (auto _ : state) {
    uint64_t sum = 0;
    for (size_t i = 0; i < text.size();) sum += model_internal::NextCodePoint(text, &i);
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}

void BM_SplitLlama3HandWritten(benchmark::State& state) {
  const std::string text = Text(state.range(0));
  size_t pieces = 0;
  for (auto _ : state) {
    std::vector<std::string_view> out =
        model_internal::SplitByteLevel(text, ByteLevelSplit::kLlama3);
    benchmark::DoNotOptimize(out.data());
    pieces = out.size();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
  state.counters["pieces"] = static_cast<double>(pieces);
}

void BM_SplitLlama3Generic(benchmark::State& state) {
  const std::string text = Text(state.range(0));
  const model_internal::SplitRegex re =
      model_internal::SplitRegex::Compile(model_internal::kLlama3SplitPattern).value();
  size_t pieces = 0;
  for (auto _ : state) {
    std::vector<char32_t> cps;  // decoding is part of the generic path's cost
    cps.reserve(text.size());
    for (size_t i = 0; i < text.size();) cps.push_back(model_internal::NextCodePoint(text, &i));
    std::vector<std::pair<size_t, size_t>> out = re.FindAll(cps);
    benchmark::DoNotOptimize(out.data());
    pieces = out.size();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
  state.counters["pieces"] = static_cast<double>(pieces);
}

BENCHMARK(BM_HfEncodeSentencePiece)
    ->RangeMultiplier(4)
    ->Range(64, 1024)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_HfEncodeByteLevel)->RangeMultiplier(4)->Range(64, 1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Llama2cEncode)->RangeMultiplier(4)->Range(64, 1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Utf8Scan)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SplitLlama3HandWritten)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SplitLlama3Generic)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pagedkv::bench
