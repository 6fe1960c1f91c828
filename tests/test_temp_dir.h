// Copyright 2026 The pagedkv Authors.
//
// The test process's own temporary folder: /tmp/pagedkv_test_<pid>/, made on first use and
// removed, with everything written below it, when the process that made it exits normally (a
// forked child's exit leaves it alone). Tests write their model files and folders here, so a run
// of the suite leaves nothing behind in /tmp.
//
// Example:
//   const std::filesystem::path file = pagedkv::testing::TestTempDir() / "model.bin";
#ifndef PAGEDKV_TESTS_TEST_TEMP_DIR_H_
#define PAGEDKV_TESTS_TEST_TEMP_DIR_H_

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace pagedkv::testing {

namespace test_temp_dir_internal {

struct Owned {
  std::filesystem::path dir;
  pid_t owner;
};

// Never freed: the exit handler reads it after static destructors may have run.
inline Owned* Make() {
  auto* owned = new Owned{
      std::filesystem::temp_directory_path() / ("pagedkv_test_" + std::to_string(::getpid())),
      ::getpid()};
  std::filesystem::create_directories(owned->dir);
  return owned;
}

inline Owned* Get() {
  static Owned* const owned = [] {
    Owned* o = Make();
    std::atexit([] {
      Owned* o = Get();
      std::error_code ignored;  // best effort: a test may have removed it already
      if (::getpid() == o->owner) std::filesystem::remove_all(o->dir, ignored);
    });
    return o;
  }();
  return owned;
}

}  // namespace test_temp_dir_internal

inline const std::filesystem::path& TestTempDir() { return test_temp_dir_internal::Get()->dir; }

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_TEST_TEMP_DIR_H_
