// Copyright 2026 The pagedkv Authors.
#include "pagedkv/tiers/disk_tier.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "cache/tiers/disk/disk_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/events/kv_events.h"
#include "tests/cache/tiers/disk_tier_test_util.h"

namespace pagedkv::testing_disk {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::unique_ptr<DiskTier> Open(const DiskTierOptions& o) {
  absl::StatusOr<std::unique_ptr<DiskTier>> tier = DiskTier::Create(o);
  EXPECT_TRUE(tier.ok()) << tier.status();
  return tier.ok() ? std::move(*tier) : nullptr;
}

std::vector<Block> Blocks(std::initializer_list<uint64_t> ids) {
  std::vector<Block> out;
  for (uint64_t id : ids) out.push_back(MakeBlock(id));
  return out;
}

void SetMtime(const std::string& path, int64_t seconds) {
  const struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

TEST(DiskTierTest, StoresFilesAndLoadsThem) {
  TempDir dir;
  std::unique_ptr<DiskTier> tier = Open(Options(dir.path(), 8));
  const std::vector<Block> blocks = Blocks({1, 2, 3});
  ASSERT_TRUE(StoreBlocks(*tier, blocks).ok());
  EXPECT_EQ(Load(*tier, blocks), 3);  // queued or written: either way the same bytes
  tier->Flush();
  EXPECT_EQ(CountFiles(*tier), 3);
  EXPECT_TRUE(fs::exists(tier->PathOf(blocks[1].hash)));
  EXPECT_EQ(fs::file_size(tier->PathOf(blocks[1].hash)), static_cast<uintmax_t>(FileBytes()));
  EXPECT_EQ(Load(*tier, blocks), 3);
  const TierStats s = tier->stats();
  EXPECT_EQ(s.stored_blocks, 3);
  EXPECT_EQ(s.hit_blocks, 6);
  EXPECT_EQ(s.resident_blocks, 3);
  EXPECT_EQ(s.resident_bytes, 3 * FileBytes());
  EXPECT_EQ(s.faults, 0);
  ASSERT_TRUE(StoreBlocks(*tier, Blocks({2})).ok());
  EXPECT_EQ(tier->stats().store_skipped, 1);
  EXPECT_EQ(Load(*tier, Blocks({1, 9, 3})), 1);  // the walk stops at the first missing block
}

TEST(DiskTierTest, ARestartFindsWhatTheLastProcessStored) {
  TempDir dir;
  const std::vector<Block> blocks = Blocks({1, 2, 3});
  {
    std::unique_ptr<DiskTier> first = Open(Options(dir.path(), 8));
    ASSERT_TRUE(StoreBlocks(*first, blocks).ok());
  }  // the destructor writes what is queued
  std::unique_ptr<DiskTier> second = Open(Options(dir.path(), 8));
  second->Flush();
  EXPECT_EQ(second->disk_stats().scanned_files, 3);
  EXPECT_TRUE(second->disk_stats().scan_done);
  EXPECT_EQ(second->stats().resident_blocks, 3);
  EXPECT_EQ(Load(*second, blocks), 3);
  EXPECT_EQ(second->disk_stats().adopted, 0);  // the scan had indexed them
}

TEST(DiskTierTest, AnotherFingerprintOrFormatNeverReadsTheFiles) {
  TempDir dir;
  const std::vector<Block> blocks = Blocks({1, 2});
  std::unique_ptr<DiskTier> a = Open(Options(dir.path(), 8, "model-a"));
  ASSERT_TRUE(StoreBlocks(*a, blocks).ok());
  a->Flush();
  std::unique_ptr<DiskTier> b = Open(Options(dir.path(), 8, "model-b"));
  DiskTierOptions other_dtype = Options(dir.path(), 8, "model-a");
  other_dtype.format.dtype = 7;
  std::unique_ptr<DiskTier> c = Open(other_dtype);
  b->Flush();
  c->Flush();
  EXPECT_NE(a->model_directory(), b->model_directory());
  EXPECT_NE(a->model_directory(), c->model_directory());
  EXPECT_EQ(b->disk_stats().scanned_files, 0);
  EXPECT_EQ(Load(*b, blocks), 0);
  EXPECT_EQ(Load(*c, blocks), 0);
  EXPECT_EQ(CountFiles(*a), 2);  // nobody touched them
  EXPECT_EQ(Load(*a, blocks), 2);
}

TEST(DiskTierTest, EvictsToTheBudgetLeastRecentlyUsedFirst) {
  TempDir dir;
  std::unique_ptr<DiskTier> tier = Open(Options(dir.path(), 3));
  EXPECT_EQ(tier->capacity_blocks(), 3);
  ASSERT_TRUE(StoreBlocks(*tier, Blocks({1, 2, 3})).ok());
  EXPECT_EQ(Load(*tier, Blocks({1})), 1);  // 1 is now the most recent
  ASSERT_TRUE(StoreBlocks(*tier, Blocks({4})).ok());
  tier->Flush();
  EXPECT_EQ(tier->stats().evictions, 1);
  EXPECT_EQ(CountFiles(*tier), 3);
  EXPECT_FALSE(fs::exists(tier->PathOf(MakeBlock(2).hash)));
  EXPECT_EQ(Load(*tier, Blocks({1})), 1);
  EXPECT_EQ(Load(*tier, Blocks({2})), 0);
  EXPECT_EQ(Load(*tier, Blocks({3, 4})), 2);
}

TEST(DiskTierTest, ARestartRebuildsRecencyFromFileTimesAndTheBudget) {
  TempDir dir;
  std::string model_dir;
  {
    std::unique_ptr<DiskTier> tier = Open(Options(dir.path(), 3));
    ASSERT_TRUE(StoreBlocks(*tier, Blocks({1, 2, 3})).ok());
    tier->Flush();
    SetMtime(tier->PathOf(MakeBlock(1).hash), 1'000'300);  // 2 oldest, then 3, then 1
    SetMtime(tier->PathOf(MakeBlock(2).hash), 1'000'100);
    SetMtime(tier->PathOf(MakeBlock(3).hash), 1'000'200);
  }
  {
    std::unique_ptr<DiskTier> tier = Open(Options(dir.path(), 3));
    tier->Flush();
    ASSERT_TRUE(StoreBlocks(*tier, Blocks({4})).ok());
    tier->Flush();
    EXPECT_FALSE(fs::exists(tier->PathOf(MakeBlock(2).hash)));
    EXPECT_EQ(CountFiles(*tier), 3);
    model_dir = tier->model_directory();
  }
  std::unique_ptr<DiskTier> smaller = Open(Options(dir.path(), 1));  // a smaller budget
  smaller->Flush();
  EXPECT_EQ(CountFiles(*smaller), 1);
  EXPECT_EQ(smaller->stats().resident_blocks, 1);
}

TEST(DiskTierTest, CorruptTruncatedAndForeignValuesAreMissesAndRemoved) {
  TempDir dir;
  std::vector<std::string> reports;
  DiskTierOptions o = Options(dir.path(), 8);
  o.report = [&](std::string_view line) { reports.emplace_back(line); };
  std::unique_ptr<DiskTier> tier = Open(o);
  ASSERT_TRUE(StoreBlocks(*tier, Blocks({1, 2, 3, 4})).ok());
  tier->Flush();
  {
    std::fstream f(tier->PathOf(MakeBlock(2).hash),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(FileBytes() - 5);
    f.put('\x7f');  // one byte of the payload: the checksum catches it
  }
  fs::resize_file(tier->PathOf(MakeBlock(3).hash), FileBytes() - 100);
  EXPECT_EQ(Load(*tier, Blocks({1, 2})), 1);
  EXPECT_EQ(Load(*tier, Blocks({3})), 0);
  Block other_tokens = MakeBlock(4);
  other_tokens.tokens[0] += 1;  // same hash, other tokens: never handed out
  EXPECT_EQ(Load(*tier, {other_tokens}), 0);
  tier->Flush();
  EXPECT_EQ(tier->disk_stats().corrupt_values, 3);
  EXPECT_EQ(tier->stats().faults, 3);
  EXPECT_FALSE(fs::exists(tier->PathOf(MakeBlock(2).hash)));
  EXPECT_FALSE(fs::exists(tier->PathOf(MakeBlock(3).hash)));
  EXPECT_EQ(tier->stats().resident_blocks, 1);
  ASSERT_EQ(reports.size(), 1u);  // one report for the run of faults
  EXPECT_THAT(reports[0], HasSubstr("checksum"));
  EXPECT_EQ(Load(*tier, Blocks({1})), 1);  // a success ends the incident
  EXPECT_EQ(reports.size(), 2u);
}

// ReadValueFile reads a file relative to an open folder in one read(2) with no stat(2): a file
// shorter or longer than expected (cut short or grown by another process) is DataLoss, a missing
// one NotFound.
TEST(DiskTierTest, ReadValueFileFindsShortAndLongFilesWithoutStat) {
  TempDir dir;
  const int dir_fd = ::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dir_fd, 0);
  const size_t bytes = 300000;
  ReadBuffer buffer;
  for (const size_t size : {bytes, bytes - 1, bytes + 1, size_t{0}}) {
    std::ofstream(dir.path() + "/v.kv", std::ios::binary | std::ios::trunc)
        << std::string(size, 'v');
    const absl::StatusOr<std::span<const std::byte>> read =
        ReadValueFile(dir_fd, "v.kv", bytes, &buffer);
    EXPECT_EQ(read.ok(), size == bytes) << size << " " << read.status();
    EXPECT_EQ(absl::IsDataLoss(read.status()), size != bytes) << read.status();
    if (!read.ok()) continue;
    EXPECT_EQ(read->size(), bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(read->data()) % 4096, 0u);  // the kernel's fast copy
    EXPECT_EQ(static_cast<char>(read->back()), 'v');
  }
  const absl::StatusOr<std::span<const std::byte>> empty =
      ReadValueFile(AT_FDCWD, dir.path() + "/v.kv", 0, &buffer);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->empty());
  EXPECT_TRUE(absl::IsNotFound(ReadValueFile(dir_fd, "w.kv", bytes, &buffer).status()));
  ::close(dir_fd);
}

// A value file with bytes appended (the right header, a longer file) is a miss and removed.
TEST(DiskTierTest, AValueFileLongerThanItsValueIsAMiss) {
  TempDir dir;
  std::unique_ptr<DiskTier> tier = Open(Options(dir.path(), 8));
  ASSERT_TRUE(StoreBlocks(*tier, Blocks({1, 2})).ok());
  tier->Flush();
  std::ofstream(tier->PathOf(MakeBlock(2).hash), std::ios::binary | std::ios::app) << "x";
  EXPECT_EQ(Load(*tier, Blocks({1, 2})), 1);
  tier->Flush();
  EXPECT_EQ(tier->disk_stats().corrupt_values, 1);
  EXPECT_FALSE(fs::exists(tier->PathOf(MakeBlock(2).hash)));
}

// A hit sets an old file's time to now (its recency after a restart), and this process touches
// a file again only a second after its last touch (no stat per read: it remembers the time).
TEST(DiskTierTest, AHitRefreshesAnOldFileTimeOncePerSecond) {
  TempDir dir;
  {
    std::unique_ptr<DiskTier> tier = Open(Options(dir.path(), 8));
    ASSERT_TRUE(StoreBlocks(*tier, Blocks({1, 2})).ok());
    tier->Flush();
    SetMtime(tier->PathOf(MakeBlock(1).hash), 1'000'000);
    SetMtime(tier->PathOf(MakeBlock(2).hash), 1'000'000);
  }
  std::unique_ptr<DiskTier> tier = Open(Options(dir.path(), 8));
  tier->Flush();  // the scan indexes both with their old times
  const auto seconds = [&](uint64_t id) {
    struct stat st;
    EXPECT_EQ(::stat(tier->PathOf(MakeBlock(id).hash).c_str(), &st), 0);
    return int64_t{st.st_mtim.tv_sec};
  };
  EXPECT_EQ(Load(*tier, Blocks({1})), 1);
  EXPECT_GT(seconds(1), 1'000'000);
  EXPECT_EQ(seconds(2), 1'000'000);  // not read
  SetMtime(tier->PathOf(MakeBlock(1).hash), 1'000'000);
  EXPECT_EQ(Load(*tier, Blocks({1})), 1);
  EXPECT_EQ(seconds(1), 1'000'000);  // touched less than a second ago
}

TEST(DiskTierTest, FailedWritesDropTheStoreAndCount) {
  TempDir dir;
  std::vector<std::string> reports;
  DiskTierOptions o = Options(dir.path(), 8);
  o.report = [&](std::string_view line) { reports.emplace_back(line); };
  std::unique_ptr<DiskTier> tier = Open(o);
  tier->Flush();
  // A file size limit makes write(2) fail with EFBIG, as a full disk fails with ENOSPC (root
  // ignores permissions, so this stands in for both).
  struct rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 64;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  ASSERT_TRUE(StoreBlocks(*tier, Blocks({1, 2})).ok());
  tier->Flush();
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old_limit), 0);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(tier->disk_stats().write_errors, 2);
  EXPECT_EQ(tier->stats().stored_blocks, 0);
  EXPECT_EQ(tier->stats().resident_blocks, 0);
  EXPECT_EQ(tier->stats().incidents, 1);
  EXPECT_EQ(CountFiles(*tier), 0);
  EXPECT_EQ(Load(*tier, Blocks({1})), 0);
  // A shard folder that is a file (an unwritable folder): the write fails, nothing breaks.
  const std::string shard = fs::path(tier->PathOf(MakeBlock(3).hash)).parent_path();
  fs::remove_all(shard);
  std::ofstream(shard) << "not a folder";
  ASSERT_TRUE(StoreBlocks(*tier, Blocks({3})).ok());
  tier->Flush();
  EXPECT_EQ(tier->disk_stats().write_errors, 3);
  fs::remove(shard);
  ASSERT_TRUE(StoreBlocks(*tier, Blocks({1, 3})).ok());  // works again
  tier->Flush();
  EXPECT_EQ(Load(*tier, Blocks({1})), 1);
  EXPECT_EQ(Load(*tier, Blocks({3})), 1);
  EXPECT_EQ(reports.size(), 2u);  // the incident, then the recovery
}

TEST(DiskTierTest, AFolderDeletedUnderTheTierIsAMissAndComesBack) {
  TempDir dir;
  std::unique_ptr<DiskTier> tier = Open(Options(dir.path(), 8));
  ASSERT_TRUE(StoreBlocks(*tier, Blocks({1})).ok());
  tier->Flush();
  fs::remove_all(dir.path());
  EXPECT_EQ(Load(*tier, Blocks({1})), 0);
  EXPECT_EQ(tier->disk_stats().vanished, 1);
  EXPECT_EQ(tier->stats().resident_blocks, 0);
  ASSERT_TRUE(StoreBlocks(*tier, Blocks({2})).ok());
  tier->Flush();
  EXPECT_EQ(tier->disk_stats().write_errors, 0);  // the folders were made again
  EXPECT_TRUE(fs::exists(tier->PathOf(MakeBlock(2).hash)));
  EXPECT_EQ(Load(*tier, Blocks({2})), 1);
}

TEST(DiskTierTest, TheScanRemovesStaleTemporariesAndLeavesOtherFilesAlone) {
  TempDir dir;
  std::string temp, notes;
  {
    std::unique_ptr<DiskTier> tier = Open(Options(dir.path(), 8));
    ASSERT_TRUE(StoreBlocks(*tier, Blocks({1})).ok());
    tier->Flush();
    const fs::path shard = fs::path(tier->PathOf(MakeBlock(1).hash)).parent_path();
    temp = shard / ".abc.kv.123.0.tmp";
    notes = shard / "notes.txt";
    std::ofstream(temp) << "half a value";
    std::ofstream(notes) << "mine";
    SetMtime(temp, 1'000'000);  // long ago: its writer crashed
  }
  std::unique_ptr<DiskTier> tier = Open(Options(dir.path(), 8));
  tier->Flush();
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_TRUE(fs::exists(notes));
  EXPECT_EQ(tier->disk_stats().scanned_files, 1);
}

TEST(DiskTierTest, StoresBeyondTheWriteBacklogAreDropped) {
  TempDir dir;
  DiskTierOptions o = Options(dir.path(), 8);
  o.max_pending_bytes = FileBytes() - 1;  // not even one value may wait
  std::unique_ptr<DiskTier> tier = Open(o);
  ASSERT_TRUE(StoreBlocks(*tier, Blocks({1, 2, 3})).ok());
  tier->Flush();
  EXPECT_EQ(tier->disk_stats().dropped_backlog, 3);
  EXPECT_EQ(tier->stats().faults, 0);  // a slow disk is not a fault
  EXPECT_EQ(CountFiles(*tier), 0);
}

// Polls `tier`'s spare encode buffers until `done` holds of their bytes or 10 s pass.
bool SpareBytesReach(const DiskTier& tier, const std::function<bool(int64_t)>& done) {
  for (int i = 0; i < 1000; ++i) {
    if (done(tier.disk_stats().spare_buffer_bytes)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(DiskTierTest, SpareEncodeBuffersAreFreedOnceTheWriterIdles) {
  TempDir dir;
  DiskTierOptions o = Options(dir.path(), 8);
  o.spare_buffer_idle = std::chrono::milliseconds(1500);
  std::unique_ptr<DiskTier> tier = Open(o);
  ASSERT_TRUE(StoreBlocks(*tier, Blocks({1, 2, 3})).ok());
  tier->Flush();
  EXPECT_TRUE(SpareBytesReach(*tier, [](int64_t bytes) { return bytes >= FileBytes(); }))
      << "a written value's buffer is kept for the next store";
  EXPECT_TRUE(SpareBytesReach(*tier, [](int64_t bytes) { return bytes == 0; }))
      << "the spares are freed after spare_buffer_idle without writes";
  ASSERT_TRUE(StoreBlocks(*tier, Blocks({4})).ok());  // a store after that makes a new buffer
  tier->Flush();
  EXPECT_EQ(Load(*tier, Blocks({1, 2, 3, 4})), 4);
}

TEST(DiskTierTest, EventsCarryTheDiskMedium) {
  TempDir dir;
  std::unique_ptr<DiskTier> tier = Open(Options(dir.path(), 2));
  std::vector<KvEvent> events;
  std::vector<std::vector<TokenId>> tokens;
  tier->AddEventListener([&](const KvEvent& e) {
    events.push_back(e);
    tokens.emplace_back(e.token_ids.begin(), e.token_ids.end());
  });
  ASSERT_TRUE(StoreBlocks(*tier, Blocks({1, 2, 3})).ok());  // 3 evicts 1
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].type, KvEventType::kBlockRemoved);
  EXPECT_EQ(events[0].hash, MakeBlock(1).hash);
  for (const KvEvent& e : events) EXPECT_EQ(e.medium, "DISK");
  EXPECT_EQ(events[1].type, KvEventType::kBlockStored);
  EXPECT_EQ(tokens[1], MakeBlock(1).tokens);
  EXPECT_EQ(events[3].hash, MakeBlock(3).hash);
}

// A named save pins a chain's blocks: they outlive eviction (a lookup restores them) and restarts,
// a block the tier does not hold ends the save, and bad names are refused.
TEST(DiskTierTest, NamedSavesOutliveEvictionAndRestarts) {
  TempDir dir;
  const std::vector<Block> chain = Blocks({1, 2, 3});
  std::vector<BlockHash> hashes;
  for (const Block& b : chain) hashes.push_back(b.hash);
  hashes.push_back(MakeBlock(9).hash);  // never stored: the save stops before it
  {
    std::unique_ptr<DiskTier> tier = Open(Options(dir.path(), 4));
    ASSERT_TRUE(StoreBlocks(*tier, chain).ok());
    absl::StatusOr<int64_t> pinned = tier->Pin("system-prompt.v1", hashes);
    ASSERT_TRUE(pinned.ok()) << pinned.status();
    EXPECT_EQ(*pinned, 3);
    EXPECT_TRUE(tier->HasPin("system-prompt.v1"));
    EXPECT_FALSE(tier->HasPin("other"));
    ASSERT_TRUE(StoreBlocks(*tier, Blocks({4, 5, 6, 7})).ok());  // evicts 1, 2 and 3
    tier->Flush();
    EXPECT_FALSE(fs::exists(tier->PathOf(MakeBlock(1).hash)));
    EXPECT_EQ(Load(*tier, chain), 3);  // restored from the save
    EXPECT_EQ(tier->disk_stats().pinned_blocks, 3);
    for (const char* bad : {"", ".hidden", "a/b", "sp ace"}) {
      EXPECT_EQ(tier->Pin(bad, hashes).status().code(), absl::StatusCode::kInvalidArgument) << bad;
    }
  }
  std::unique_ptr<DiskTier> again = Open(Options(dir.path(), 1));  // a tiny budget
  again->Flush();
  EXPECT_TRUE(again->HasPin("system-prompt.v1"));
  EXPECT_EQ(again->disk_stats().pinned_blocks, 3);
  EXPECT_EQ(Load(*again, chain), 3);
  absl::StatusOr<int64_t> replaced = again->Pin("system-prompt.v1", {hashes.data(), 1});
  ASSERT_TRUE(replaced.ok());
  EXPECT_EQ(*replaced, 1);
}

// A save is there for the first lookup after a restart (no waiting for the start scan), and a
// save another process made is found once HasPin names it, its value files gone meanwhile.
TEST(DiskTierTest, ASaveServesTheFirstLookupAndOneFromAnotherProcess) {
  TempDir dir;
  const std::vector<Block> chain = Blocks({1, 2, 3});
  std::vector<BlockHash> hashes;
  for (const Block& b : chain) hashes.push_back(b.hash);
  std::unique_ptr<DiskTier> reader = Open(Options(dir.path(), 8));
  reader->Flush();  // its start scan is done: it cannot learn of the save from there
  {
    std::unique_ptr<DiskTier> saver = Open(Options(dir.path(), 8));
    ASSERT_TRUE(StoreBlocks(*saver, chain).ok());
    ASSERT_TRUE(saver->Pin("shared", hashes).ok());
    for (const BlockHash& h : hashes) ASSERT_TRUE(fs::remove(saver->PathOf(h)));
  }
  EXPECT_EQ(Load(*reader, chain), 0);  // not indexed, the value files gone
  EXPECT_TRUE(reader->HasPin("shared"));
  EXPECT_EQ(Load(*reader, chain), 3);
  std::unique_ptr<DiskTier> restarted = Open(Options(dir.path(), 8));
  EXPECT_EQ(Load(*restarted, chain), 3);  // no Flush: the saves are indexed by Create
}

TEST(DiskTierTest, BadOptionsAndValuesAreRefused) {
  TempDir dir;
  DiskTierOptions o = Options(dir.path(), 8);
  o.directory = "";
  EXPECT_THAT(DiskTier::Create(o).status().message(), HasSubstr("directory"));
  o = Options(dir.path(), 8);
  o.capacity_bytes = FileBytes() - 1;
  EXPECT_THAT(DiskTier::Create(o).status().message(), HasSubstr("holds no block"));
  o = Options(dir.path(), 8);
  o.policy = "mru";
  EXPECT_EQ(DiskTier::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(dir.path(), 8);
  o.format.value_bytes = 0;
  EXPECT_EQ(DiskTier::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(dir.path(), 8);
  o.spare_buffer_idle = std::chrono::milliseconds(0);
  EXPECT_THAT(DiskTier::Create(o).status().message(), HasSubstr("spare_buffer_idle"));
  std::unique_ptr<DiskTier> tier = Open(Options(dir.path(), 8));
  Block good = MakeBlock(1), bad = MakeBlock(2);
  bad.value.pop_back();
  const std::vector<TierStoreItem> items = {good.item(), bad.item()};
  EXPECT_THAT(tier->Store(items).message(), HasSubstr("999 bytes"));
  tier->Flush();
  EXPECT_EQ(tier->stats().resident_blocks, 0);  // nothing stored, not even the good one
}

}  // namespace
}  // namespace pagedkv::testing_disk
