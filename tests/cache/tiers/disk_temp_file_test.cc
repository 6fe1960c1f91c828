// Copyright 2026 The pagedkv Authors.
//
// WriteTemporary / PublishTemporary (cache/tiers/disk/disk_files.h): values are written to an
// unnamed file and linked to their name, or written to a temporary name and renamed where unnamed
// files are off; either way nothing but the published file is ever left in the folder.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cache/tiers/disk/disk_files.h"
#include "gtest/gtest.h"
#include "pagedkv/tiers/disk_tier.h"
#include "tests/cache/tiers/disk_tier_test_util.h"

namespace pagedkv::testing_disk {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  return out;
}

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Restores the default (unnamed files on) when a test ends.
class DiskTempFileTest : public ::testing::TestWithParam<bool> {
 protected:
  DiskTempFileTest() { SetUnnamedTemporaries(GetParam()); }
  ~DiskTempFileTest() override { SetUnnamedTemporaries(true); }
  TempDir dir_;
};

std::span<const std::byte> Bytes(const std::string& s) { return std::as_bytes(std::span(s)); }

TEST_P(DiskTempFileTest, PublishesOnceAndLeavesNothingElse) {
  const std::string path = dir_.path() + "/a.kv";
  absl::StatusOr<TempFile> temp = WriteTemporary(dir_.path(), "a.kv", Bytes("first"));
  ASSERT_TRUE(temp.ok()) << temp.status();
  if (GetParam() && !temp->unnamed()) GTEST_SKIP() << "this file system has no unnamed files";
  EXPECT_EQ(temp->unnamed(), GetParam());
  EXPECT_EQ(Names(dir_.path()).size(), GetParam() ? 0u : 1u);  // no name until published
  absl::StatusOr<bool> created = PublishTemporary(*temp, path);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE(*created);
  EXPECT_EQ(Contents(path), "first");
  absl::StatusOr<TempFile> again = WriteTemporary(dir_.path(), "a.kv", Bytes("second"));
  ASSERT_TRUE(again.ok());
  created = PublishTemporary(*again, path);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_FALSE(*created);  // the name was taken: the first value stays
  EXPECT_EQ(Contents(path), "first");
  EXPECT_EQ(Names(dir_.path()), std::vector<std::string>{"a.kv"});
}

TEST_P(DiskTempFileTest, AnUnpublishedValueIsRemoved) {
  {
    absl::StatusOr<TempFile> temp = WriteTemporary(dir_.path(), "b.kv", Bytes("x"));
    ASSERT_TRUE(temp.ok());
    TempFile moved = *std::move(temp);
    moved.Remove();
    moved.Remove();  // holds nothing now
  }
  { ASSERT_TRUE(WriteTemporary(dir_.path(), "c.kv", Bytes("y")).ok()); }  // dropped at once
  EXPECT_TRUE(Names(dir_.path()).empty());
}

TEST_P(DiskTempFileTest, AMissingFolderIsNotFound) {
  EXPECT_TRUE(absl::IsNotFound(WriteTemporary(dir_.path() + "/gone", "a.kv", Bytes("x")).status()));
}

// The whole tier either way: stores land as value files only.
TEST_P(DiskTempFileTest, TheTierStoresAndLoads) {
  std::unique_ptr<DiskTier> tier = DiskTier::Create(Options(dir_.path(), 8)).value();
  std::vector<Block> blocks = {MakeBlock(1), MakeBlock(2), MakeBlock(3)};
  ASSERT_TRUE(StoreBlocks(*tier, blocks).ok());
  tier->Flush();
  EXPECT_EQ(CountFiles(*tier), 3);
  EXPECT_EQ(Load(*tier, blocks), 3);
  for (const auto& e : fs::recursive_directory_iterator(tier->model_directory())) {
    EXPECT_NE(e.path().extension(), ".tmp") << e.path();
  }
  EXPECT_EQ(tier->stats().faults, 0);
}

INSTANTIATE_TEST_SUITE_P(Temporaries, DiskTempFileTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? std::string("Unnamed") : std::string("Named");
                         });

}  // namespace
}  // namespace pagedkv::testing_disk
