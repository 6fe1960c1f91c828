// Copyright 2026 The pagedkv Authors.
//
// Fuzz target: safetensors files. The input is written to a file and opened (memory-mapped, the
// header validated); every tensor it accepts must lie inside the file and convert to fp32 without
// reading out of bounds (ASan checks the reads).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/model/formats/safetensors.h"
#include "tests/fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = pagedkv::fuzz::WriteFuzzFile("safetensors", data, size);
  if (path.empty()) return 0;
  auto opened = pagedkv::model_internal::SafetensorsFile::Open(path);
  if (!opened.ok()) return 0;
  std::vector<float> values;
  for (const auto& [name, tensor] : opened->tensors()) {
    if (tensor.begin < 0 || tensor.bytes < 0 ||
        tensor.begin + tensor.bytes > static_cast<int64_t>(size)) {
      std::abort();  // accepted a tensor outside the file
    }
    if (tensor.num_elements > (1 << 20)) continue;
    values.resize(static_cast<size_t>(tensor.num_elements));
    // Every dtype the header check accepts for floats must convert.
    const absl::Status read = opened->ReadF32(name, tensor, values.data());
    const bool float_dtype =
        tensor.dtype == "F32" || tensor.dtype == "F16" || tensor.dtype == "BF16";
    if (!read.ok() && float_dtype) std::abort();
  }
  return 0;
}
