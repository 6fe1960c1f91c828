// Copyright 2026 The pagedkv Authors.
//
// For fuzz targets whose code under test reads a file: writes each input to one temporary file
// (made once per process) and returns its path.
//
//   const std::string& path = WriteFuzzFile("safetensors", data, size);
//   auto opened = SafetensorsFile::Open(path);
#ifndef PAGEDKV_TESTS_FUZZ_FUZZ_FILE_H_
#define PAGEDKV_TESTS_FUZZ_FUZZ_FILE_H_

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace pagedkv::fuzz {

// The input's bytes in /tmp/pagedkv_fuzz_<tag>_XXXXXX; empty when the file cannot be written.
inline std::string WriteFuzzFile(const char* tag, const uint8_t* data, size_t size) {
  static const std::string path = [tag] {
    std::string name = std::string("/tmp/pagedkv_fuzz_") + tag + "_XXXXXX";
    const int fd = mkstemp(name.data());
    if (fd >= 0) close(fd);
    return name;
  }();
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return "";
  const bool written = std::fwrite(data, 1, size, file) == size;
  return std::fclose(file) == 0 && written ? path : "";
}

}  // namespace pagedkv::fuzz

#endif  // PAGEDKV_TESTS_FUZZ_FUZZ_FILE_H_
