// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/serve_mode/hardware_profile.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace pagedkv::replay {
namespace {

// The number `key` of `j`, required or not; InvalidArgument unless finite and > 0 (>= 0 when
// `zero_ok`).
absl::StatusOr<double> PositiveField(const nlohmann::json& j, const char* key, bool required,
                                     bool zero_ok = false) {
  if (!j.contains(key)) {
    if (required)
      return absl::InvalidArgumentError(absl::StrCat("hardware profile: \"", key, "\" is missing"));
    return 0.0;
  }
  const nlohmann::json& v = j.at(key);
  if (!v.is_number()) {
    return absl::InvalidArgumentError(
        absl::StrCat("hardware profile: \"", key, "\" must be a number"));
  }
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < 0 || (x == 0 && !zero_ok && required)) {
    return absl::InvalidArgumentError(absl::StrCat("hardware profile: \"", key, "\" must be ",
                                                   zero_ok ? ">= 0" : "> 0", " (got ", x, ")"));
  }
  return x;
}

}  // namespace

ModelPreset HardwareProfile::Apply(ModelPreset preset) const {
  if (kv_bytes_per_element > 0) preset.bytes_per_element = kv_bytes_per_element;
  if (weight_bytes_per_parameter > 0)
    preset.weight_bytes_per_parameter = weight_bytes_per_parameter;
  return preset;
}

absl::StatusOr<HardwareProfile> ParseHardwareProfile(absl::string_view json_text) {
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("hardware profile: not a JSON object");
  }
  HardwareProfile p;
  p.device.name = j.value("name", std::string("measured"));
  p.model = j.contains("model") && j["model"].is_string() ? j["model"].get<std::string>() : "";
  auto flops = PositiveField(j, "peak_flops", true);
  auto bandwidth = PositiveField(j, "memory_bandwidth", true);
  auto memory = PositiveField(j, "memory_bytes", true);
  auto attention = PositiveField(j, "attention_flops", false);
  auto overhead = PositiveField(j, "step_overhead_s", false, /*zero_ok=*/true);
  auto per_sequence = PositiveField(j, "per_sequence_s", false, /*zero_ok=*/true);
  auto kv_bytes = PositiveField(j, "kv_bytes_per_element", false);
  auto weight_bytes = PositiveField(j, "weight_bytes_per_parameter", false);
  for (const auto* s : {&flops, &attention, &bandwidth, &memory, &overhead, &per_sequence,
                        &kv_bytes, &weight_bytes}) {
    if (!s->ok()) return s->status();
  }
  if (*kv_bytes != std::floor(*kv_bytes) || *kv_bytes > 16) {
    return absl::InvalidArgumentError(
        "hardware profile: \"kv_bytes_per_element\" must be a whole number of bytes up to 16");
  }
  if (j.contains("additive") && !j["additive"].is_boolean()) {
    return absl::InvalidArgumentError("hardware profile: \"additive\" must be true or false");
  }
  p.device.peak_flops = *flops;
  p.device.memory_bandwidth = *bandwidth;
  p.device.memory_bytes = *memory;
  p.device.attention_flops = *attention;
  p.cost = {.compute_efficiency = 1.0,
            .memory_efficiency = 1.0,
            .step_overhead_s = *overhead,
            .additive = j.value("additive", false),
            .per_sequence_s = *per_sequence};
  p.kv_bytes_per_element = static_cast<int32_t>(*kv_bytes);
  p.weight_bytes_per_parameter = *weight_bytes;
  return p;
}

absl::StatusOr<HardwareProfile> ReadHardwareProfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read hardware profile ", path));
  std::stringstream text;
  text << in.rdbuf();
  auto profile = ParseHardwareProfile(text.str());
  if (!profile.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", profile.status().message()));
  }
  return profile;
}

}  // namespace pagedkv::replay
