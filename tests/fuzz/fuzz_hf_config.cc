// Copyright 2026 The pagedkv Authors.
//
// Fuzz target: config.json and generation_config.json. Input layout: the config text, the
// separator "\xff\xfe", then the generation config text. A config that parses must be a valid
// ModelConfig (the loader promises it is validated).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/model/formats/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t separator = input.find("\xff\xfe");
  const std::string config(input.substr(0, separator));
  const std::string generation = separator == std::string_view::npos
                                     ? std::string()
                                     : std::string(input.substr(separator + 2));
  auto parsed = pagedkv::model_internal::ParseHfConfig(config, generation, "fuzz");
  if (!parsed.ok()) return 0;
  if (!parsed->config.Validate().ok()) std::abort();
  return 0;
}
