// Copyright 2026 The pagedkv Authors.
//
// ModelSource: one checkpoint format behind one interface. LoadModel(path) asks each known source
// in turn whether it recognises `path` and loads with the first that does:
//   "huggingface"  a directory with config.json, model.safetensors (or a sharded
//                  model.safetensors.index.json) and tokenizer.json (optional)
//   "gguf"         a GGUF file (llama.cpp's format; `llama` architecture, see
//                  engine/model/formats/gguf_checkpoint.h) with its own tokenizer and chat
//                  template; recognised by its "GGUF" magic; weights are dequantized to fp32 at
//                  load
//   "llama2c"      a llama2.c legacy .bin file; its tokenizer .bin is options.tokenizer_path
// A new format adds a source to MakeModelSources().
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(pagedkv::LoadedModel model,
//                            pagedkv::LoadModel("../shared/data/tinystories656K"));
//   model.weights->config().rope->layout;  // RopeLayout::kHalfSplit
//   model.tokenizer->Encode("Once upon a time");
//
// Thread-safe: sources are stateless; loaded weights and tokenizers are immutable and shared.
#ifndef PAGEDKV_MODEL_MODEL_SOURCE_H_
#define PAGEDKV_MODEL_MODEL_SOURCE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pagedkv/export.h"
#include "pagedkv/model/model_weights.h"
#include "pagedkv/model/tokenizer.h"

namespace pagedkv {

struct PAGEDKV_EXPORT ModelLoadOptions {
  // A tokenizer file for formats that keep it apart (llama2.c's tokenizer .bin); empty: none
  // (llama2.c), or the model's own (Hugging Face: tokenizer.json in the directory, when present).
  std::string tokenizer_path = {};
  // kNative: GGUF block-format matrices stay in their blocks (CPU backend only); kF32 (LoadModel's
  // default; Engine::Load and the CLI default to kNative): every tensor in fp32.
  // Formats without block types load fp32 either way.
  WeightStorage weights = WeightStorage::kF32;
};

struct PAGEDKV_EXPORT LoadedModel {
  std::shared_ptr<const ModelWeights> weights;
  std::shared_ptr<const Tokenizer> tokenizer;  // null when the model has none
  std::string format;                          // the source's name, e.g. "huggingface"
  // The model's chat template (GGUF tokenizer.chat_template; see pagedkv/model/chat_template.h);
  // empty when the checkpoint has none.
  std::string chat_template = {};
};

class PAGEDKV_EXPORT ModelSource {
 public:
  virtual ~ModelSource() = default;
  // A short name, e.g. "llama2c".
  virtual const char* name() const = 0;
  // Whether `path` looks like this format (cheap: names and magic bytes, no full parse).
  virtual bool Recognizes(const std::string& path) const = 0;
  // Loads `path`. NotFound / InvalidArgument naming the file and what is wrong.
  virtual absl::StatusOr<LoadedModel> Load(const std::string& path,
                                           const ModelLoadOptions& options) const = 0;
};

// Every built-in source, in the order LoadModel tries them.
PAGEDKV_EXPORT std::vector<std::unique_ptr<ModelSource>> MakeModelSources();

// Loads `path` with the first source that recognises it. NotFound when `path` does not exist;
// InvalidArgument naming the formats when no source recognises it.
PAGEDKV_EXPORT absl::StatusOr<LoadedModel> LoadModel(const std::string& path,
                                                     const ModelLoadOptions& options = {});

}  // namespace pagedkv

#endif  // PAGEDKV_MODEL_MODEL_SOURCE_H_
