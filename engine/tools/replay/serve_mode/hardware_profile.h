// Copyright 2026 The pagedkv Authors.
//
// A measured device profile for `pagedkv replay --mode serve --hardware-profile FILE`: what the
// roofline cost model (cost_model.h) needs to predict a real engine on a real machine, e.g. this
// project's CPU backend, fitted from `pagedkv serve` measurements by
// bench/serve/calibrate_serve.py. A profile stands in for the GPU preset and the cost options and
// may override the model preset's bytes (fp32 KV, quantized weights). The file is JSON:
//   {"name": "cpu-2core-smollm2", "model": "smollm2-135m",
//    "peak_flops": 3.1e10, "attention_flops": 8e9, "memory_bandwidth": 1.2e10,
//    "memory_bytes": 2.4e10,
//    "step_overhead_s": 0.004, "per_sequence_s": 0.0004, "additive": true,
//    "kv_bytes_per_element": 4, "weight_bytes_per_parameter": 4,
//    "measured": {...}}                       (anything else is kept for the reader, not used)
// peak_flops (linear layers), attention_flops (0 or absent = peak_flops) and memory_bandwidth
// are achieved rates (the efficiencies become 1).
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_HARDWARE_PROFILE_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_HARDWARE_PROFILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/tools/replay/serve_mode/cost_model.h"
#include "pagedkv/export.h"

namespace pagedkv::replay {

struct PAGEDKV_EXPORT HardwareProfile {
  GpuPreset device;                       // name, achieved FLOP/s, bandwidth, memory
  CostModelOptions cost;                  // efficiencies 1, the measured overhead, additive or not
  std::string model;                      // model preset the profile was measured with ("" = any)
  int32_t kv_bytes_per_element = 0;       // 0 = the preset's
  double weight_bytes_per_parameter = 0;  // 0 = the preset's

  // `preset` with this profile's byte overrides applied.
  ModelPreset Apply(ModelPreset preset) const;
};

// Parses a profile's JSON text; InvalidArgument naming the field that is missing or out of range.
PAGEDKV_EXPORT absl::StatusOr<HardwareProfile> ParseHardwareProfile(absl::string_view json_text);
// Reads and parses `path`; NotFound when it cannot be read.
PAGEDKV_EXPORT absl::StatusOr<HardwareProfile> ReadHardwareProfile(const std::string& path);

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_HARDWARE_PROFILE_H_
