// Copyright 2026 The pagedkv Authors.
//
// The fetched-model lookup (see model_files.h).
#include "engine/model/formats/model_files.h"

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

namespace pagedkv::model_internal {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

bool IsFile(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

}  // namespace

std::string ModelCacheDir() {
  if (std::string dir = Env("PAGEDKV_MODEL_CACHE"); !dir.empty()) return dir;
  std::string base = Env("XDG_CACHE_HOME");
  if (base.empty()) base = (std::filesystem::path(Env("HOME")) / ".cache").string();
  return (std::filesystem::path(base) / "pagedkv" / "models").string();
}

std::optional<std::string> FindSmolLm2Gguf() {
  if (std::string path = Env("PAGEDKV_SMOLLM2_GGUF"); !path.empty()) {
    return IsFile(path) ? std::optional<std::string>(path) : std::nullopt;
  }
  const std::string path =
      (std::filesystem::path(ModelCacheDir()) / "SmolLM2-135M-Instruct.Q4_1.gguf").string();
  return IsFile(path) ? std::optional<std::string>(path) : std::nullopt;
}

}  // namespace pagedkv::model_internal
