// Copyright 2026 The pagedkv Authors.
//
// The built-in model sources (GGUF files, llama2.c files, Hugging Face directories) and
// LoadModel.
#include "pagedkv/model/model_source.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/formats/gguf_checkpoint.h"
#include "engine/model/formats/gguf_file.h"
#include "engine/model/formats/hf_checkpoint.h"
#include "engine/model/tokenizers/gguf_tokenizer.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

class Llama2cSource final : public ModelSource {
 public:
  const char* name() const override { return "llama2c"; }
  bool Recognizes(const std::string& path) const override {
    std::error_code ec;
    return std::filesystem::is_regular_file(path, ec);
  }
  absl::StatusOr<LoadedModel> Load(const std::string& path,
                                   const ModelLoadOptions& options) const override {
    PAGEDKV_ASSIGN_OR_RETURN(ModelWeights weights, ModelWeights::LoadLlama2c(path));
    LoadedModel model{.format = name()};
    if (!options.tokenizer_path.empty()) {
      PAGEDKV_ASSIGN_OR_RETURN(
          Tokenizer tok, Tokenizer::Load(options.tokenizer_path, weights.config().vocab_size));
      model.tokenizer = std::make_shared<const Tokenizer>(std::move(tok));
    }
    model.weights = std::make_shared<const ModelWeights>(std::move(weights));
    return model;
  }
};

class GgufSource final : public ModelSource {
 public:
  const char* name() const override { return "gguf"; }
  bool Recognizes(const std::string& path) const override {
    std::error_code ec;
    return std::filesystem::is_regular_file(path, ec) && model_internal::GgufFile::HasMagic(path);
  }
  absl::StatusOr<LoadedModel> Load(const std::string& path,
                                   const ModelLoadOptions& options) const override {
    if (!options.tokenizer_path.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model '", path,
                       "' is a GGUF file, which carries its own tokenizer: drop the "
                       "tokenizer path '",
                       options.tokenizer_path, "'"));
    }
    PAGEDKV_ASSIGN_OR_RETURN(model_internal::GgufFile file, model_internal::GgufFile::Open(path));
    PAGEDKV_ASSIGN_OR_RETURN(ModelWeights weights,
                             model_internal::LoadGgufWeights(file, options.weights));
    LoadedModel model{.format = name()};
    if (model_internal::HasGgufTokenizer(file)) {
      PAGEDKV_ASSIGN_OR_RETURN(Tokenizer tok, model_internal::LoadGgufTokenizer(file));
      model.tokenizer = std::make_shared<const Tokenizer>(std::move(tok));
    }
    if (file.Find("tokenizer.chat_template") != nullptr) {
      PAGEDKV_ASSIGN_OR_RETURN(model.chat_template, file.GetString("tokenizer.chat_template"));
    }
    model.weights = std::make_shared<const ModelWeights>(std::move(weights));
    return model;
  }
};

class HuggingFaceSource final : public ModelSource {
 public:
  const char* name() const override { return "huggingface"; }
  bool Recognizes(const std::string& path) const override {
    return model_internal::IsHfModelDir(path);
  }
  absl::StatusOr<LoadedModel> Load(const std::string& path,
                                   const ModelLoadOptions& options) const override {
    PAGEDKV_ASSIGN_OR_RETURN(ModelWeights weights,
                             model_internal::LoadHfWeights(path, options.weights));
    const ModelConfig& c = weights.config();
    LoadedModel model{.format = name()};
    std::string tok_path = options.tokenizer_path;
    std::error_code ec;
    if (tok_path.empty() &&
        std::filesystem::exists(std::filesystem::path(path) / "tokenizer.json", ec)) {
      tok_path = (std::filesystem::path(path) / "tokenizer.json").string();
    }
    if (!tok_path.empty()) {
      const std::optional<TokenId> eos =
          c.stop_token_ids.empty() ? std::nullopt : std::optional<TokenId>(c.stop_token_ids[0]);
      PAGEDKV_ASSIGN_OR_RETURN(Tokenizer tok,
                               Tokenizer::LoadHuggingFace(tok_path, c.bos_token_id, eos));
      model.tokenizer = std::make_shared<const Tokenizer>(std::move(tok));
    }
    model.weights = std::make_shared<const ModelWeights>(std::move(weights));
    return model;
  }
};

}  // namespace

std::vector<std::unique_ptr<ModelSource>> MakeModelSources() {
  std::vector<std::unique_ptr<ModelSource>> sources;
  sources.push_back(std::make_unique<HuggingFaceSource>());
  sources.push_back(std::make_unique<GgufSource>());
  sources.push_back(std::make_unique<Llama2cSource>());
  return sources;
}

absl::StatusOr<LoadedModel> LoadModel(const std::string& path, const ModelLoadOptions& options) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat("model '", path, "' does not exist"));
  }
  std::vector<std::string> names;
  for (const std::unique_ptr<ModelSource>& source : MakeModelSources()) {
    if (source->Recognizes(path)) return source->Load(path, options);
    names.push_back(source->name());
  }
  return absl::InvalidArgumentError(
      absl::StrCat("model '", path, "' is not a known format (", absl::StrJoin(names, ", "),
                   "): expected a GGUF file, a llama2.c .bin file or a Hugging Face directory with "
                   "config.json"));
}

}  // namespace pagedkv
