// Copyright 2026 The pagedkv Authors.
//
// Checked reads of JSON fields (config.json, tokenizer.json, safetensors headers) that never
// throw: a missing field or one of the wrong type is InvalidArgument naming `where` and the key.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(text, "config.json"));
//   PAGEDKV_ASSIGN_OR_RETURN(int64_t layers, RequiredInt(j, "num_hidden_layers", "config.json"));
#ifndef PAGEDKV_ENGINE_MODEL_FORMATS_JSON_FIELDS_H_
#define PAGEDKV_ENGINE_MODEL_FORMATS_JSON_FIELDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace pagedkv::model_internal {

// Parses `text` (never throws). InvalidArgument naming `where` for malformed JSON.
absl::StatusOr<nlohmann::json> ParseJson(std::string_view text, const std::string& where);

// The field `key` of object `j`, or nullptr when absent or null. REQUIRES: j.is_object().
const nlohmann::json* FindField(const nlohmann::json& j, const std::string& key);

// Integer / number / bool / string fields. Required*: absent is an error; Optional*: absent or
// null gives nullopt. A present field of another type is always an error.
absl::StatusOr<int64_t> RequiredInt(const nlohmann::json& j, const std::string& key,
                                    const std::string& where);
absl::StatusOr<std::optional<int64_t>> OptionalInt(const nlohmann::json& j, const std::string& key,
                                                   const std::string& where);
absl::StatusOr<std::optional<double>> OptionalNumber(const nlohmann::json& j,
                                                     const std::string& key,
                                                     const std::string& where);
absl::StatusOr<std::optional<bool>> OptionalBool(const nlohmann::json& j, const std::string& key,
                                                 const std::string& where);
absl::StatusOr<std::optional<std::string>> OptionalString(const nlohmann::json& j,
                                                          const std::string& key,
                                                          const std::string& where);
absl::StatusOr<std::string> RequiredString(const nlohmann::json& j, const std::string& key,
                                           const std::string& where);

}  // namespace pagedkv::model_internal

#endif  // PAGEDKV_ENGINE_MODEL_FORMATS_JSON_FIELDS_H_
