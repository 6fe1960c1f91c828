// Copyright 2026 The pagedkv Authors.
//
// Where fetched real models live (scripts/fetch_models.sh): the one lookup that tests,
// benchmarks and tools use. The cache directory is
// ${PAGEDKV_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pagedkv/models}; PAGEDKV_SMOLLM2_GGUF
// names the SmolLM2 file directly and wins over the cache. (tests/python/test_gguf_smollm2.py
// has the same lookup in Python.)
//
// Example:
//   std::optional<std::string> path = FindSmolLm2Gguf();
//   if (!path) GTEST_SKIP() << kSmolLm2Missing;
#ifndef PAGEDKV_ENGINE_MODEL_FORMATS_MODEL_FILES_H_
#define PAGEDKV_ENGINE_MODEL_FORMATS_MODEL_FILES_H_

#include <optional>
#include <string>

#include "pagedkv/export.h"

namespace pagedkv::model_internal {

// What to do when the file is absent (for skip messages).
inline constexpr char kSmolLm2Missing[] =
    "SmolLM2-135M-Instruct.Q4_1.gguf is not fetched: run scripts/fetch_models.sh (or set "
    "PAGEDKV_SMOLLM2_GGUF)";

// The model cache directory (see the banner); it need not exist.
PAGEDKV_EXPORT std::string ModelCacheDir();

// $PAGEDKV_SMOLLM2_GGUF when set (nullopt if that file does not exist), else the cached
// SmolLM2-135M-Instruct.Q4_1.gguf when present.
PAGEDKV_EXPORT std::optional<std::string> FindSmolLm2Gguf();

}  // namespace pagedkv::model_internal

#endif  // PAGEDKV_ENGINE_MODEL_FORMATS_MODEL_FILES_H_
