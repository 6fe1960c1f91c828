// Copyright 2026 The pagedkv Authors.
//
// ReadFileBytes: every byte of a regular file (empty, small, around the read chunk, larger), of a
// pipe (no size known in advance), and clear errors for a missing file and a directory.
#include "engine/model/formats/file_bytes.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_temp_dir.h"

namespace pagedkv::model_internal {
namespace {

using ::testing::HasSubstr;

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + i / 251) & 0xff);
  return s;
}

TEST(FileBytesTest, ReadsEveryByteOfARegularFile) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{65535}, size_t{65536}, size_t{65537},
                   size_t{1} << 20, (size_t{3} << 20) + 7}) {
    const auto path = ::pagedkv::testing::TestTempDir() / ("bytes_" + std::to_string(n));
    const std::string want = Pattern(n);
    std::ofstream(path, std::ios::binary).write(want.data(), static_cast<std::streamsize>(n));
    absl::StatusOr<std::string> got = ReadFileBytes(path.string(), "test file");
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, want) << n << " bytes";
  }
}

TEST(FileBytesTest, ReadsAPipeToItsEnd) {
  const auto path = ::pagedkv::testing::TestTempDir() / "fifo";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  const std::string want = Pattern(200000);  // more than one chunk and than a pipe's buffer
  std::thread writer(
      [&] { std::ofstream(path, std::ios::binary).write(want.data(), want.size()); });
  absl::StatusOr<std::string> got = ReadFileBytes(path.string(), "test pipe");
  writer.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, want);
}

TEST(FileBytesTest, NamesTheFileThatCannotBeRead) {
  const auto missing = ::pagedkv::testing::TestTempDir() / "missing.bin";
  absl::StatusOr<std::string> got = ReadFileBytes(missing.string(), "checkpoint");
  ASSERT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(got.status().message(), HasSubstr("cannot open checkpoint '" + missing.string()));
  EXPECT_THAT(got.status().message(), HasSubstr("No such file"));

  const auto dir = ::pagedkv::testing::TestTempDir();
  got = ReadFileBytes(dir.string(), "tokenizer");
  ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("is a directory, not a file"));
}

}  // namespace
}  // namespace pagedkv::model_internal
