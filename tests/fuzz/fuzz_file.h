// Copyright 2026 The pagedkv Authors.
//
// For fuzz targets whose code under test reads a file: writes each input to one temporary file
// (made once per process, removed when the process exits normally) and returns its path.
//
//   const std::string& path = WriteFuzzFile("safetensors", data, size);
//   auto opened = SafetensorsFile::Open(path);
#ifndef PAGEDKV_TESTS_FUZZ_FUZZ_FILE_H_
#define PAGEDKV_TESTS_FUZZ_FUZZ_FILE_H_

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace pagedkv::fuzz {

// The file's name, in storage that outlives static destructors (the exit handler reads it).
inline char* FuzzFileName() {
  static char name[128];
  return name;
}

// The input's bytes in /tmp/pagedkv_fuzz_<tag>_XXXXXX; empty when the file cannot be written.
inline std::string WriteFuzzFile(const char* tag, const uint8_t* data, size_t size) {
  static const std::string path = [tag] {
    std::snprintf(FuzzFileName(), 128, "/tmp/pagedkv_fuzz_%s_XXXXXX", tag);
    const int fd = mkstemp(FuzzFileName());
    if (fd >= 0) close(fd);
    std::atexit([] { std::remove(FuzzFileName()); });
    return std::string(FuzzFileName());
  }();
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return "";
  const bool written = std::fwrite(data, 1, size, file) == size;
  return std::fclose(file) == 0 && written ? path : "";
}

}  // namespace pagedkv::fuzz

#endif  // PAGEDKV_TESTS_FUZZ_FUZZ_FILE_H_
