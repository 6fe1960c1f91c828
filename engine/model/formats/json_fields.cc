// Copyright 2026 The pagedkv Authors.
#include "engine/model/formats/json_fields.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace pagedkv::model_internal {
namespace {

absl::Status WrongType(const std::string& key, const std::string& where, std::string_view want,
                       const nlohmann::json& got) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: field \"%s\" must be %s, got %s", where, key, want, got.type_name()));
}

}  // namespace

absl::StatusOr<nlohmann::json> ParseJson(std::string_view text, const std::string& where) {
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr,
                                           /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: not valid JSON", where));
  }
  return j;
}

const nlohmann::json* FindField(const nlohmann::json& j, const std::string& key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::StatusOr<std::optional<int64_t>> OptionalInt(const nlohmann::json& j, const std::string& key,
                                                   const std::string& where) {
  const nlohmann::json* f = FindField(j, key);
  if (f == nullptr) return std::nullopt;
  if (f->is_number_unsigned()) {
    const uint64_t u = f->get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return WrongType(key, where, "an int64", *f);
    return static_cast<int64_t>(u);
  }
  if (!f->is_number_integer()) return WrongType(key, where, "an integer", *f);
  return f->get<int64_t>();
}

absl::StatusOr<int64_t> RequiredInt(const nlohmann::json& j, const std::string& key,
                                    const std::string& where) {
  absl::StatusOr<std::optional<int64_t>> v = OptionalInt(j, key, where);
  if (!v.ok()) return v.status();
  if (!v->has_value()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: missing required field \"%s\"", where, key));
  }
  return **v;
}

absl::StatusOr<std::optional<double>> OptionalNumber(const nlohmann::json& j,
                                                     const std::string& key,
                                                     const std::string& where) {
  const nlohmann::json* f = FindField(j, key);
  if (f == nullptr) return std::nullopt;
  if (!f->is_number()) return WrongType(key, where, "a number", *f);
  return f->get<double>();
}

absl::StatusOr<std::optional<bool>> OptionalBool(const nlohmann::json& j, const std::string& key,
                                                 const std::string& where) {
  const nlohmann::json* f = FindField(j, key);
  if (f == nullptr) return std::nullopt;
  if (!f->is_boolean()) return WrongType(key, where, "true or false", *f);
  return f->get<bool>();
}

absl::StatusOr<std::optional<std::string>> OptionalString(const nlohmann::json& j,
                                                          const std::string& key,
                                                          const std::string& where) {
  const nlohmann::json* f = FindField(j, key);
  if (f == nullptr) return std::nullopt;
  if (!f->is_string()) return WrongType(key, where, "a string", *f);
  return f->get<std::string>();
}

absl::StatusOr<std::string> RequiredString(const nlohmann::json& j, const std::string& key,
                                           const std::string& where) {
  absl::StatusOr<std::optional<std::string>> v = OptionalString(j, key, where);
  if (!v.ok()) return v.status();
  if (!v->has_value()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: missing required field \"%s\"", where, key));
  }
  return **v;
}

}  // namespace pagedkv::model_internal
