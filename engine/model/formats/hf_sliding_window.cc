// Copyright 2026 The pagedkv Authors.
#include "engine/model/formats/hf_sliding_window.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/model/formats/json_fields.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::model_internal {
namespace {

using nlohmann::json;

// `sliding_window`: nullopt when null; kHfDefaultSlidingWindow when absent; else an int >= 1.
absl::StatusOr<std::optional<int32_t>> WindowField(const json& j, const std::string& where) {
  const auto it = j.find("sliding_window");
  if (it == j.end()) return kHfDefaultSlidingWindow;
  if (it->is_null()) return std::nullopt;
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<int64_t> w, OptionalInt(j, "sliding_window", where));
  if (*w < 1 || *w > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where,
                     ": \"sliding_window\" must be an integer in [1, 2^31) or null (no "
                     "sliding window), got ",
                     *w));
  }
  return static_cast<int32_t>(*w);
}

// `layer_types` mapped to windows: "sliding_attention" -> window, "full_attention" -> 0.
absl::StatusOr<std::vector<int32_t>> FromLayerTypes(const json& types,
                                                    std::optional<int32_t> window, int32_t n_layers,
                                                    const std::string& where) {
  if (!types.is_array() || types.size() != static_cast<size_t>(n_layers)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": \"layer_types\" must be a list of ", n_layers,
        " strings (one per layer, num_hidden_layers), got ",
        types.is_array() ? absl::StrCat(types.size(), " entries") : types.type_name()));
  }
  std::vector<int32_t> windows(types.size(), 0);
  for (size_t l = 0; l < types.size(); ++l) {
    const std::string type = types[l].is_string() ? types[l].get<std::string>() : types[l].dump();
    if (type == "full_attention") continue;
    if (type != "sliding_attention") {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unsupported \"layer_types\"[", l, "] = ", types[l].dump(),
                       " (supported: \"full_attention\", \"sliding_attention\")"));
    }
    if (!window.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": \"layer_types\"[", l,
          "] is \"sliding_attention\" but there is no window (set use_sliding_window to true and "
          "sliding_window to an integer)"));
    }
    windows[l] = *window;
  }
  return windows;
}

absl::StatusOr<std::vector<int32_t>> Qwen2Windows(const json& j, int32_t n_layers,
                                                  const std::string& where) {
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> use, OptionalBool(j, "use_sliding_window", where));
  std::optional<int32_t> window;
  if (use.value_or(false)) {
    PAGEDKV_ASSIGN_OR_RETURN(window, WindowField(j, where));
  }
  if (const json* types = FindField(j, "layer_types"); types != nullptr) {
    return FromLayerTypes(*types, window, n_layers, where);
  }
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<int64_t> first,
                           OptionalInt(j, "max_window_layers", where));
  const int64_t first_windowed = first.value_or(kHfDefaultMaxWindowLayers);
  if (first_windowed < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        ": \"max_window_layers\" must be >= 0 (layers from that index on are windowed), got ",
        first_windowed));
  }
  std::vector<int32_t> windows(static_cast<size_t>(n_layers), 0);
  if (!window.has_value()) return windows;
  for (int64_t l = first_windowed; l < n_layers; ++l) windows[static_cast<size_t>(l)] = *window;
  return windows;
}

}  // namespace

absl::Status ReadHfSlidingWindow(const json& j, const std::string& arch, const std::string& where,
                                 ModelConfig* config) {
  std::vector<int32_t> windows;
  if (arch == "MistralForCausalLM") {
    PAGEDKV_ASSIGN_OR_RETURN(std::optional<int32_t> window, WindowField(j, where));
    if (window.has_value()) windows.assign(static_cast<size_t>(config->n_layers), *window);
  } else if (arch == "Qwen2ForCausalLM") {
    PAGEDKV_ASSIGN_OR_RETURN(windows, Qwen2Windows(j, config->n_layers, where));
  }
  bool any = false;
  for (int32_t w : windows) any = any || w > 0;
  config->layer_window = any ? std::move(windows) : std::vector<int32_t>{};
  return absl::OkStatus();
}

}  // namespace pagedkv::model_internal
