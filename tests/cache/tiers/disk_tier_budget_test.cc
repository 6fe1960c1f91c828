// Copyright 2026 The pagedkv Authors.
//
// The disk tier's byte budget shared by the tiers and processes of one folder
// (cache/tiers/disk/folder_usage.h): the bound it guarantees (the folder's value files never
// exceed the budget; at most one temporary per writer beside them), different budgets, files
// only another process knows, a killed process and files removed by hand (healed by the start
// scan and by lookups), a damaged, unusable or deleted usage file, and random operations on two
// tiers checked against those invariants.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cache/tiers/disk/folder_usage.h"
#include "gtest/gtest.h"
#include "pagedkv/tiers/disk_tier.h"
#include "tests/cache/tiers/disk_tier_test_util.h"

namespace pagedkv::testing_disk {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kBudget = 8;  // files, each tier's

std::unique_ptr<DiskTier> Open(const std::string& dir, int64_t capacity_blocks) {
  absl::StatusOr<std::unique_ptr<DiskTier>> tier = DiskTier::Create(Options(dir, capacity_blocks));
  EXPECT_TRUE(tier.ok()) << tier.status();
  return tier.ok() ? std::move(*tier) : nullptr;
}

// What the usage file says the folder holds (files), read under its lock; -1 when it is missing
// or damaged (reading it must not be what repairs it).
int64_t UsageFiles(const DiskTier& tier) {
  if (!fs::exists(tier.model_directory() + "/usage")) return -1;
  FolderUsage usage(tier.model_directory(), FileBytes());
  bool rebuilt = false;
  if (!usage.Lock(&rebuilt).ok()) return -1;
  const int64_t files = rebuilt ? -1 : usage.files();
  EXPECT_TRUE(usage.Unlock().ok());
  return files;
}

// Value files and temporaries in the folder, counted while the usage file is locked (no value
// file appears or goes meanwhile).
struct Snapshot {
  int64_t values = 0;
  int64_t temporaries = 0;
};
Snapshot LockedSnapshot(const std::string& model_dir) {
  Snapshot s;
  const int fd = ::open((model_dir + "/usage").c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return s;  // not made yet: nothing published
  EXPECT_EQ(::flock(fd, LOCK_EX), 0);
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(model_dir, ec)) {
    const std::string name = e.path().filename();
    if (name.ends_with(".kv")) ++s.values;
    if (name.ends_with(".tmp")) ++s.temporaries;
  }
  ::close(fd);  // unlocks
  return s;
}

TEST(DiskTierBudgetTest, TwoTiersOnOneFolderKeepToOneBudget) {
  TempDir dir;
  std::unique_ptr<DiskTier> a = Open(dir.path(), kBudget);
  std::unique_ptr<DiskTier> b = Open(dir.path(), kBudget);
  a->Flush();  // both start scans done: each tier knows only its own files
  b->Flush();
  for (uint64_t i = 0; i < 30; ++i) {
    ASSERT_TRUE(StoreBlocks(*a, {MakeBlock(i)}).ok());
    a->Flush();
    ASSERT_TRUE(StoreBlocks(*b, {MakeBlock(100 + i)}).ok());
    b->Flush();
    ASSERT_LE(CountFiles(*a), kBudget) << "after store " << i;
    ASSERT_EQ(UsageFiles(*a), CountFiles(*a)) << "after store " << i;
  }
  EXPECT_EQ(CountFiles(*a), kBudget);  // full, and not emptier: nothing evicted for nothing
  // Each tier reports its own files and the folder's, every process's (as of its last store).
  EXPECT_EQ(a->disk_stats().folder_files, kBudget);
  EXPECT_EQ(b->stats().shared_resident_bytes, kBudget * FileBytes());
  EXPECT_EQ(a->stats().resident_bytes + b->stats().resident_bytes, kBudget * FileBytes());
  EXPECT_LT(b->stats().resident_bytes, b->stats().shared_resident_bytes);
  EXPECT_EQ(Load(*a, {MakeBlock(29)}), 1);
  EXPECT_EQ(Load(*b, {MakeBlock(129)}), 1);
  EXPECT_EQ(a->stats().faults + b->stats().faults, 0);
  // Each tier evicted its own files: 60 stores, 8 files left.
  EXPECT_EQ(a->stats().evictions + b->stats().evictions, 60 - kBudget);
}

TEST(DiskTierBudgetTest, ASmallerBudgetEvictsFilesOnlyTheOtherTierKnows) {
  TempDir dir;
  std::unique_ptr<DiskTier> big = Open(dir.path(), 16);
  std::unique_ptr<DiskTier> small = Open(dir.path(), 4);
  small->Flush();  // its start scan found nothing
  for (uint64_t i = 0; i < 12; ++i) ASSERT_TRUE(StoreBlocks(*big, {MakeBlock(i)}).ok());
  big->Flush();
  ASSERT_EQ(CountFiles(*big), 12);
  for (uint64_t i = 0; i < 12; ++i) {  // distinct times, oldest first (stores share a clock tick)
    const struct timespec times[2] = {{1'000'000 + static_cast<time_t>(i), 0},
                                      {1'000'000 + static_cast<time_t>(i), 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, big->PathOf(MakeBlock(i).hash).c_str(), times, 0), 0);
  }
  // `small` knows none of them (its scan ran first): it lists the folder and evicts the oldest.
  ASSERT_TRUE(StoreBlocks(*small, {MakeBlock(100)}).ok());
  small->Flush();
  EXPECT_EQ(CountFiles(*small), 4);
  EXPECT_EQ(UsageFiles(*small), 4);
  EXPECT_EQ(Load(*small, {MakeBlock(100)}), 1);
  EXPECT_EQ(Load(*big, {MakeBlock(11)}), 1);  // the newest of big's stayed
  EXPECT_EQ(Load(*big, {MakeBlock(0)}), 0);   // the oldest went: a miss, never an error
  EXPECT_EQ(big->disk_stats().vanished, 1);
  EXPECT_EQ(big->stats().faults + small->stats().faults, 0);
  // The bigger budget fills the folder to its own size again.
  for (uint64_t i = 200; i < 230; ++i) ASSERT_TRUE(StoreBlocks(*big, {MakeBlock(i)}).ok());
  big->Flush();
  EXPECT_EQ(CountFiles(*big), 16);
  EXPECT_EQ(UsageFiles(*big), 16);
}

// A tier that stores into a folder full of an idle tier's older files evicts those, oldest
// first, rather than its own newer ones (file times order the two tiers' victims).
TEST(DiskTierBudgetTest, ATierEvictsAnIdleTiersOlderFilesBeforeItsOwnNewerOnes) {
  TempDir dir;
  std::unique_ptr<DiskTier> idle = Open(dir.path(), kBudget);
  std::unique_ptr<DiskTier> busy = Open(dir.path(), kBudget);
  idle->Flush();
  busy->Flush();  // both start scans found nothing
  for (uint64_t id = 0; id < kBudget; ++id) ASSERT_TRUE(StoreBlocks(*idle, {MakeBlock(id)}).ok());
  idle->Flush();
  for (uint64_t id = 0; id < kBudget; ++id) {  // stored long ago, oldest first
    const struct timespec times[2] = {{1'000'000 + static_cast<time_t>(id), 0},
                                      {1'000'000 + static_cast<time_t>(id), 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, idle->PathOf(MakeBlock(id).hash).c_str(), times, 0), 0);
  }
  std::vector<Block> mine;
  for (uint64_t id = 100; id < 106; ++id) {
    mine.push_back(MakeBlock(id));
    ASSERT_TRUE(StoreBlocks(*busy, {mine.back()}).ok());
    busy->Flush();
  }
  EXPECT_EQ(CountFiles(*busy), kBudget);
  EXPECT_EQ(Load(*busy, mine), 6);                          // all of its own stayed
  EXPECT_EQ(Load(*idle, {MakeBlock(6), MakeBlock(7)}), 2);  // the idle tier's two newest stayed
  EXPECT_EQ(Load(*idle, {MakeBlock(5)}), 0);
  EXPECT_EQ(busy->stats().evictions, 6);
  EXPECT_EQ(busy->stats().faults + idle->stats().faults, 0);
}

// The child: stores blocks [first, first + count) through a budget of kBudget, flushing each.
[[noreturn]] void StoreInChild(const std::string& dir, uint64_t first, uint64_t count,
                               int ready_fd) {
  absl::StatusOr<std::unique_ptr<DiskTier>> tier = DiskTier::Create(Options(dir, kBudget));
  if (!tier.ok()) ::_exit(2);
  const char go = 'g';
  if (::write(ready_fd, &go, 1) != 1) ::_exit(3);
  for (uint64_t id = first; id < first + count; ++id) {
    if (!StoreBlocks(**tier, {MakeBlock(id)}).ok()) ::_exit(4);
    (*tier)->Flush();
  }
  tier->reset();
  ::_exit(0);
}

pid_t ForkStorer(const std::string& dir, uint64_t first, uint64_t count) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const pid_t child = ::fork();  // before this process starts any thread
  if (child == 0) StoreInChild(dir, first, count, fds[1]);
  char go = 0;
  const bool ready = child > 0 && ::read(fds[0], &go, 1) == 1;
  ::close(fds[0]);
  ::close(fds[1]);
  return ready ? child : -1;
}

// Kills and reaps a child still running when a test ends early (a failed ASSERT), so it never
// writes into the next test's folder.
class ChildGuard {
 public:
  explicit ChildGuard(pid_t pid) : pid_(pid) {}
  ~ChildGuard() {
    if (pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  ChildGuard(const ChildGuard&) = delete;
  ChildGuard& operator=(const ChildGuard&) = delete;

 private:
  pid_t pid_;
};

// The bound the code guarantees: a value file is published (renamed in) only under the usage
// file's lock and after evicting until it fits, so at any moment the value files number at most
// the budget; each writer has at most one temporary (its value in flight) beside them.
TEST(DiskTierBudgetTest, TwoProcessesStayWithinTheBudgetPlusOneValueInFlightEach) {
  TempDir dir;
  const pid_t child = ForkStorer(dir.path(), 0, 400);
  ASSERT_GT(child, 0);
  const ChildGuard guard(child);
  std::unique_ptr<DiskTier> tier = Open(dir.path(), kBudget);
  int64_t snapshots = 0, max_values = 0;
  int status = 0;
  for (uint64_t id = 1000; ::waitpid(child, &status, WNOHANG) == 0; ++id) {
    ASSERT_TRUE(StoreBlocks(*tier, {MakeBlock(id)}).ok());
    if (id % 2 == 0) tier->Flush();  // half the time its writer is idle, half it is busy
    const Snapshot s = LockedSnapshot(tier->model_directory());
    ASSERT_LE(s.values, kBudget);
    ASSERT_LE(s.temporaries, 2);
    max_values = std::max(max_values, s.values);
    ++snapshots;
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  tier->Flush();
  const Snapshot last = LockedSnapshot(tier->model_directory());
  EXPECT_EQ(last.values, kBudget);
  EXPECT_EQ(last.temporaries, 0);
  EXPECT_EQ(UsageFiles(*tier), kBudget);
  EXPECT_EQ(tier->stats().faults, 0);
  EXPECT_GT(snapshots, 0);
  RecordProperty("snapshots", static_cast<int>(snapshots));
}

// A process killed without cleanup (mid-store, or holding the usage file's lock) and files
// removed or added by hand: the next start recounts, and the budget is exact again.
TEST(DiskTierBudgetTest, AKilledProcessAndHandEditsAreHealedAtRestart) {
  TempDir dir;
  const pid_t storer = ForkStorer(dir.path(), 0, 1'000'000);
  ASSERT_GT(storer, 0);
  const ChildGuard storer_guard(storer);
  std::string model_dir, extra;
  {
    std::unique_ptr<DiskTier> probe = Open(dir.path(), kBudget);
    model_dir = probe->model_directory();
    extra = probe->PathOf(MakeBlock(5000).hash);
    // Wait (no timing: by what is on disk) until the child has filled its budget.
    while (LockedSnapshot(model_dir).values < kBudget) {
      ASSERT_EQ(::waitpid(storer, nullptr, WNOHANG), 0) << "the storer ended early";
    }
    ASSERT_EQ(::kill(storer, SIGKILL), 0);
    ASSERT_EQ(::waitpid(storer, nullptr, 0), storer);
  }
  // A process that dies holding the lock releases it with its descriptor.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t holder = ::fork();
  ASSERT_GE(holder, 0);
  const ChildGuard holder_guard(holder);
  if (holder == 0) {
    const int fd = ::open((model_dir + "/usage").c_str(), O_RDWR);
    const char locked = 'l';
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0 || ::write(fds[1], &locked, 1) != 1) ::_exit(2);
    ::pause();
    ::_exit(0);
  }
  char locked = 0;
  ASSERT_EQ(::read(fds[0], &locked, 1), 1);
  ::close(fds[0]);
  ::close(fds[1]);
  // Hand edits: two files removed, a copy of a value added under another block's name.
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(model_dir)) {
    if (e.path().extension() == ".kv") files.push_back(e.path());
  }
  ASSERT_GE(files.size(), 3u);
  fs::create_directories(fs::path(extra).parent_path());
  fs::copy_file(files[2], extra, fs::copy_options::overwrite_existing);
  ASSERT_TRUE(fs::remove(files[0]));
  ASSERT_TRUE(fs::remove(files[1]));
  ASSERT_EQ(::kill(holder, SIGKILL), 0);
  ASSERT_EQ(::waitpid(holder, nullptr, 0), holder);
  std::unique_ptr<DiskTier> tier = Open(dir.path(), kBudget);
  tier->Flush();  // the start scan recounted every shard
  const int64_t on_disk = CountFiles(*tier);
  EXPECT_EQ(UsageFiles(*tier), on_disk);
  for (uint64_t id = 2000; id < 2020; ++id) ASSERT_TRUE(StoreBlocks(*tier, {MakeBlock(id)}).ok());
  tier->Flush();
  EXPECT_EQ(CountFiles(*tier), kBudget);  // full: a stale count would have emptied it further
  EXPECT_EQ(UsageFiles(*tier), kBudget);
  EXPECT_EQ(tier->stats().faults, 0);
}

// A file removed behind the tiers' backs is found by a lookup, which recounts its shard: the
// next stores fill the budget exactly.
TEST(DiskTierBudgetTest, AVanishedFileFoundByALookupHealsTheCount) {
  TempDir dir;
  std::unique_ptr<DiskTier> tier = Open(dir.path(), kBudget);
  for (uint64_t id = 0; id < kBudget; ++id) ASSERT_TRUE(StoreBlocks(*tier, {MakeBlock(id)}).ok());
  tier->Flush();
  ASSERT_TRUE(fs::remove(tier->PathOf(MakeBlock(3).hash)));
  ASSERT_TRUE(fs::remove(tier->PathOf(MakeBlock(4).hash)));
  EXPECT_EQ(UsageFiles(*tier), kBudget);  // not seen yet
  EXPECT_EQ(Load(*tier, {MakeBlock(3)}), 0);
  EXPECT_EQ(Load(*tier, {MakeBlock(4)}), 0);
  tier->Flush();
  EXPECT_EQ(UsageFiles(*tier), kBudget - 2);
  ASSERT_TRUE(StoreBlocks(*tier, {MakeBlock(100), MakeBlock(101)}).ok());
  tier->Flush();
  EXPECT_EQ(CountFiles(*tier), kBudget);
  EXPECT_EQ(Load(*tier, {MakeBlock(0)}), 1);  // nothing was evicted for the phantom count
}

TEST(DiskTierBudgetTest, ADamagedUsageFileIsRebuiltAndCounted) {
  TempDir dir;
  std::unique_ptr<DiskTier> tier = Open(dir.path(), kBudget);
  ASSERT_TRUE(StoreBlocks(*tier, {MakeBlock(1), MakeBlock(2), MakeBlock(3)}).ok());
  tier->Flush();
  const std::string usage = tier->model_directory() + "/usage";
  fs::resize_file(usage, 10);  // truncated
  ASSERT_TRUE(StoreBlocks(*tier, {MakeBlock(4)}).ok());
  tier->Flush();
  EXPECT_EQ(tier->disk_stats().corrupt_values, 1);
  EXPECT_EQ(UsageFiles(*tier), 4);
  {
    std::fstream f(usage, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(64 + 8 * 7);
    f.write("\x7f\x7f\x7f", 3);  // a count scribbled over: the checksum catches it
  }
  ASSERT_TRUE(StoreBlocks(*tier, {MakeBlock(5)}).ok());
  tier->Flush();
  EXPECT_EQ(tier->disk_stats().corrupt_values, 2);
  EXPECT_EQ(UsageFiles(*tier), 5);
  EXPECT_EQ(CountFiles(*tier), 5);
  EXPECT_EQ(Load(*tier, {MakeBlock(1), MakeBlock(2), MakeBlock(3), MakeBlock(4), MakeBlock(5)}), 5);
}

TEST(DiskTierBudgetTest, AnUnusableUsageFileLeavesEachTierItsOwnBudget) {
  TempDir dir;
  std::vector<std::string> reports;
  DiskTierOptions o = Options(dir.path(), kBudget);
  o.report = [&](std::string_view line) { reports.emplace_back(line); };
  std::unique_ptr<DiskTier> tier = DiskTier::Create(o).value();
  tier->Flush();
  const std::string usage = tier->model_directory() + "/usage";
  fs::remove(usage);
  fs::create_directory(usage);  // cannot be opened for writing (as root, EROFS would not show)
  for (uint64_t id = 0; id < 20; ++id) ASSERT_TRUE(StoreBlocks(*tier, {MakeBlock(id)}).ok());
  tier->Flush();
  EXPECT_EQ(CountFiles(*tier), kBudget);          // its own budget still holds
  EXPECT_EQ(tier->disk_stats().write_errors, 1);  // once for the run of failures
  EXPECT_EQ(Load(*tier, {MakeBlock(19)}), 1);
  fs::remove(usage);  // usable again: the next use rebuilds it from the files
  ASSERT_TRUE(StoreBlocks(*tier, {MakeBlock(20)}).ok());
  tier->Flush();
  EXPECT_EQ(UsageFiles(*tier), kBudget);
  EXPECT_EQ(CountFiles(*tier), kBudget);
  EXPECT_EQ(tier->disk_stats().corrupt_values, 0);  // a missing file is new, not damaged
}

TEST(DiskTierBudgetTest, AFolderDeletedUnderTheTiersGetsANewUsageFile) {
  TempDir dir;
  std::unique_ptr<DiskTier> a = Open(dir.path(), kBudget);
  std::unique_ptr<DiskTier> b = Open(dir.path(), kBudget);
  for (uint64_t id = 0; id < 6; ++id) ASSERT_TRUE(StoreBlocks(*a, {MakeBlock(id)}).ok());
  a->Flush();
  fs::remove_all(dir.path());
  ASSERT_TRUE(StoreBlocks(*b, {MakeBlock(100)}).ok());
  b->Flush();
  EXPECT_EQ(UsageFiles(*b), 1);  // b's old descriptor named a deleted file: it made a new one
  for (uint64_t id = 10; id < 30; ++id) ASSERT_TRUE(StoreBlocks(*a, {MakeBlock(id)}).ok());
  a->Flush();
  EXPECT_EQ(CountFiles(*a), kBudget);
  EXPECT_EQ(UsageFiles(*a), kBudget);
  EXPECT_EQ(a->disk_stats().write_errors + b->disk_stats().write_errors, 0);
}

// Random stores, lookups, files removed by hand and restarts on two tiers sharing a folder:
// every value read is right (Load checks), the folder never holds more than the budget, and the
// usage file agrees with the folder once the tiers are idle and have looked up what vanished.
TEST(DiskTierBudgetTest, RandomOperationsOnTwoTiersKeepTheInvariants) {
  TempDir dir;
  std::mt19937_64 rng(20261205);
  constexpr uint64_t kIds = 60;
  std::unique_ptr<DiskTier> tiers[2] = {Open(dir.path(), kBudget), Open(dir.path(), kBudget)};
  const std::string model_dir = tiers[0]->model_directory();
  int64_t hits = 0;
  for (int step = 0; step < 2000; ++step) {
    const size_t which = rng() % 2;
    DiskTier& t = *tiers[which];
    const int op = static_cast<int>(rng() % 100);
    const uint64_t first = rng() % kIds;
    std::vector<Block> chain;
    for (uint64_t id = first; id < std::min(kIds, first + 1 + rng() % 3); ++id) {
      chain.push_back(MakeBlock(id));
    }
    if (op < 50) {
      ASSERT_TRUE(StoreBlocks(t, chain).ok());
    } else if (op < 90) {
      hits += Load(t, chain);
    } else if (op < 95) {
      t.Flush();
    } else if (op < 98) {
      fs::remove(t.PathOf(chain[0].hash));
    } else {
      tiers[which].reset();
      tiers[which] = Open(dir.path(), kBudget);
    }
    ASSERT_LE(LockedSnapshot(model_dir).values, kBudget) << "step " << step;
  }
  for (auto& t : tiers) {  // look every block up (vanished files recount), then settle
    for (uint64_t id = 0; id < kIds; ++id) hits += Load(*t, {MakeBlock(id)});
    t->Flush();
  }
  EXPECT_EQ(UsageFiles(*tiers[0]), CountFiles(*tiers[0]));
  EXPECT_EQ(tiers[0]->stats().faults + tiers[1]->stats().faults, 0);
  EXPECT_GT(hits, 100);  // the lookups found something to check
}

}  // namespace
}  // namespace pagedkv::testing_disk
