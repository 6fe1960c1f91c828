// Copyright 2026 The pagedkv Authors.
//
// Disk tier store / load bandwidth against plain write(2) / pread(2) of the same bytes on the
// same file system (results: bench/RESULTS.md, "Disk tier"). Files go under $TMPDIR (default
// /tmp); neither side calls fsync, so both measure the page cache and the file system's
// bookkeeping, which is what a store off the engine step and a warm lookup cost; the write
// benchmarks sync(2) first, so each starts without the previous one's dirty pages.
//   build/bench/cache/disk_tier_benchmark --benchmark_counters_tabular=true
// Value sizes: 64 KiB, 256 KiB, 2 MiB (one 16-token block of llama-3-8b BF16 KV is 2 MiB).
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "bench/cache/tiers/tier_bench_chain.h"
#include "benchmark/benchmark.h"
#include "cache/tiers/disk/folder_usage.h"
#include "cache/tiers/tier_value_codec.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/tiers/disk_tier.h"

namespace pagedkv {
namespace {

// The disk tier's file names (cache/tiers/disk/disk_files.h): "<2 hex>" / "<32 hex>.kv".
std::string ValueFileShard(const BlockHash& h) {
  char out[3];
  std::snprintf(out, sizeof(out), "%02x", static_cast<unsigned>(h.high >> 56));
  return out;
}
std::string ValueFileNameOf(const BlockHash& h) {
  char out[40];
  std::snprintf(out, sizeof(out), "%016llx%016llx.kv", static_cast<unsigned long long>(h.high),
                static_cast<unsigned long long>(h.low));
  return out;
}

constexpr int64_t kBlocks = 64;  // blocks stored / loaded per iteration (a chain)
constexpr int32_t kBlockSize = 16;

std::string TempFolder() {
  std::string pattern = std::filesystem::temp_directory_path() / "pagedkv-bench-XXXXXX";
  return ::mkdtemp(pattern.data()) != nullptr ? pattern : "";
}

std::unique_ptr<DiskTier> MakeTier(const std::string& dir, int64_t value_bytes,
                                   int32_t read_threads = 1) {
  const int64_t file_bytes =
      static_cast<int64_t>(kTierValueHeaderBytes) + 4 * kBlockSize + value_bytes;
  return DiskTier::Create({.directory = dir,
                           .capacity_bytes = kBlocks * file_bytes,
                           .model_fingerprint = "bench",
                           .format = {.block_size = kBlockSize, .value_bytes = value_bytes},
                           .max_pending_bytes = 2 * kBlocks * file_bytes,
                           .read_threads = read_threads})
      .value();
}

using Chain = bench::TierBenchChain;

// Stores a fresh chain of kBlocks into a full tier and waits for the writer (each file replaces
// an evicted one: create, write, rename, and an unlink). The tier is filled before the timing,
// as the plain side's files are made before its timing: growing the page cache costs more than a
// steady replacement (on the VM we measure on, 2 MiB page-cache folios taken from free memory
// run over 10x slower: docs/tiers.md), and a 2 MiB store ran a single iteration, that fill alone.
void BM_DiskTierStore(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const std::string dir = TempFolder();
  auto tier = MakeTier(dir, bytes);
  Chain chain(kBlocks, bytes, 1, 0x5EED);
  uint64_t next = 1;
  ::sync();  // start without other runs' dirty pages (each side of the comparison does)
  for (TierStoreItem& item : chain.items) item.block.hash = BlockHash{next++, 0x5EED};
  if (!tier->Store(chain.items).ok()) state.SkipWithError("store failed");
  tier->Flush();
  for (auto _ : state) {
    for (TierStoreItem& item : chain.items) item.block.hash = BlockHash{next++, 0x5EED};
    benchmark::DoNotOptimize(tier->Store(chain.items));
    tier->Flush();
  }
  state.SetBytesProcessed(state.iterations() * kBlocks * bytes);
  tier.reset();
  std::filesystem::remove_all(dir);
}

// The floor of a store: write(2) of the same bytes (kBlocks values) into one open file.
void BM_PlainFileWrite(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const std::string dir = TempFolder();
  const std::string path = dir + "/plain";
  std::vector<std::byte> value(static_cast<size_t>(bytes), std::byte{3});
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  ::sync();
  for (auto _ : state) {
    for (int64_t i = 0; i < kBlocks; ++i) {
      if (::pwrite(fd, value.data(), value.size(), static_cast<off_t>(i * bytes)) != bytes) {
        state.SkipWithError("write failed");
      }
    }
  }
  state.SetBytesProcessed(state.iterations() * kBlocks * bytes);
  ::close(fd);
  std::filesystem::remove_all(dir);
}

// Writes kBlocks new files (open, write, close) from number `*next` on, each replacing the file
// kBlocks before it (as the tier's evictions remove them).
void WriteNewFiles(benchmark::State& state, const std::string& dir,
                   const std::vector<std::byte>& value, int64_t* next) {
  for (int64_t i = 0; i < kBlocks; ++i, ++*next) {
    if (*next >= kBlocks) ::unlink((dir + "/" + std::to_string(*next - kBlocks)).c_str());
    const int fd =
        ::open((dir + "/" + std::to_string(*next)).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ::write(fd, value.data(), value.size()) != static_cast<ssize_t>(value.size()) ||
        ::close(fd) != 0) {
      state.SkipWithError("write failed");
    }
  }
}

// The floor of a store as files: each value written to a new file (open, write, close), the
// previous iteration's files removed. A first set of files is written before the timing (as the
// tier is filled before its timing).
void BM_PlainNewFilesWrite(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const std::string dir = TempFolder();
  std::vector<std::byte> value(static_cast<size_t>(bytes), std::byte{3});
  int64_t next = 0;
  ::sync();
  WriteNewFiles(state, dir, value, &next);
  for (auto _ : state) WriteNewFiles(state, dir, value, &next);
  state.SetBytesProcessed(state.iterations() * kBlocks * bytes);
  std::filesystem::remove_all(dir);
}

// A page-aligned buffer of `bytes` bytes, as the tier reads into (disk_files.h, ReadBuffer): the
// kernel's copy into a buffer where malloc puts a large block (16 bytes off a 64-byte line) runs
// up to 2.3x slower on the AMD EPYC we measure on, so an unaligned plain side would measure malloc.
class PageAlignedBytes {
 public:
  explicit PageAlignedBytes(int64_t bytes)
      : size_(static_cast<size_t>(bytes)),
        data_(static_cast<std::byte*>(::operator new(size_, kPage))) {
    std::memset(data_, 3, size_);
  }
  ~PageAlignedBytes() { ::operator delete(data_, kPage); }
  PageAlignedBytes(const PageAlignedBytes&) = delete;
  PageAlignedBytes& operator=(const PageAlignedBytes&) = delete;
  std::byte* data() { return data_; }
  size_t size() const { return size_; }

 private:
  static constexpr std::align_val_t kPage{4096};
  size_t size_;
  std::byte* data_;
};

// Drops the file's pages from the page cache (clean ones: the caller synced), so that its next
// read goes to the device, as after a reboot.
void DropFromPageCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// Loads a held chain of kBlocks from its files (the sink reads each value's first and last
// byte: the copy to the device is the engine's, not the tier's), reading range(1) values at once
// (DiskTierOptions::read_threads). `from_device`: the files are dropped from the page cache
// before each iteration (untimed).
void TierLoads(benchmark::State& state, bool from_device) {
  const int64_t bytes = state.range(0);
  const std::string dir = TempFolder();
  auto tier = MakeTier(dir, bytes, static_cast<int32_t>(state.range(1)));
  Chain chain(kBlocks, bytes, 1, 0x5EED);
  if (!tier->Store(chain.items).ok()) state.SkipWithError("store failed");
  tier->Flush();
  ::sync();
  for (auto _ : state) {
    if (from_device) {
      state.PauseTiming();
      for (const TierBlock& b : chain.blocks) DropFromPageCache(tier->PathOf(b.hash));
      state.ResumeTiming();
    }
    auto n = tier->LoadPrefix(chain.blocks, [&](int64_t, std::span<const std::byte> v) {
      benchmark::DoNotOptimize(v.front());
      benchmark::DoNotOptimize(v.back());
      return true;
    });
    if (!n.ok() || *n != kBlocks) state.SkipWithError("lookup missed");
  }
  state.SetBytesProcessed(state.iterations() * kBlocks * bytes);
  tier.reset();
  std::filesystem::remove_all(dir);
}
void BM_DiskTierLoad(benchmark::State& state) { TierLoads(state, /*from_device=*/false); }
void BM_DiskTierLoadCold(benchmark::State& state) { TierLoads(state, /*from_device=*/true); }

// The floor of a load as files: each value read from its own file (open, read, close). With
// several threads (->Threads), each reads a folder of its own: the floor of a tier that reads
// that many values at once. `from_device` as in TierLoads.
void PlainFileReads(benchmark::State& state, bool from_device) {
  const int64_t bytes = state.range(0);
  const std::string dir = TempFolder();
  PageAlignedBytes value(bytes);
  const auto path = [&](int64_t i) { return dir + "/" + std::to_string(i); };
  for (int64_t i = 0; i < kBlocks; ++i) {
    const int fd = ::open(path(i).c_str(), O_WRONLY | O_CREAT, 0644);
    if (fd < 0 || ::write(fd, value.data(), value.size()) != bytes || ::close(fd) != 0) {
      state.SkipWithError("write failed");
    }
  }
  ::sync();
  for (auto _ : state) {
    if (from_device) {
      state.PauseTiming();
      for (int64_t i = 0; i < kBlocks; ++i) DropFromPageCache(path(i));
      state.ResumeTiming();
    }
    for (int64_t i = 0; i < kBlocks; ++i) {
      const int fd = ::open(path(i).c_str(), O_RDONLY);
      if (fd < 0 || ::read(fd, value.data(), value.size()) != bytes || ::close(fd) != 0) {
        state.SkipWithError("read failed");
      }
      benchmark::ClobberMemory();
    }
  }
  state.SetBytesProcessed(state.iterations() * kBlocks * bytes);
  std::filesystem::remove_all(dir);
}
void BM_PlainFilesRead(benchmark::State& state) { PlainFileReads(state, /*from_device=*/false); }
void BM_PlainFilesReadCold(benchmark::State& state) { PlainFileReads(state, /*from_device=*/true); }

// The floor of a load: pread(2) of the same bytes from one open file into one buffer.
void BM_PlainFileRead(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const std::string dir = TempFolder();
  const std::string path = dir + "/plain";
  PageAlignedBytes value(bytes);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  for (int64_t i = 0; i < kBlocks; ++i) {
    if (::pwrite(fd, value.data(), value.size(), static_cast<off_t>(i * bytes)) != bytes) {
      state.SkipWithError("write failed");
    }
  }
  for (auto _ : state) {
    for (int64_t i = 0; i < kBlocks; ++i) {
      if (::pread(fd, value.data(), value.size(), static_cast<off_t>(i * bytes)) != bytes) {
        state.SkipWithError("read failed");
      }
      benchmark::ClobberMemory();
    }
  }
  state.SetBytesProcessed(state.iterations() * kBlocks * bytes);
  ::close(fd);
  std::filesystem::remove_all(dir);
}

// The start scan (rebuilding the index from the folder) over `files` value files of 1 KiB: from
// Create to the scan's end. Files are created once, outside the timing; the page cache holds the
// folders (a restart without a cold cache).
void BM_DiskTierStartScan(benchmark::State& state) {
  const int64_t files = state.range(0);
  const int64_t value_bytes = 1024 - 48 - 4 * kBlockSize;
  const std::string dir = TempFolder();
  std::string model_dir;
  {
    auto tier = MakeTier(dir, value_bytes);
    model_dir = tier->model_directory();
  }
  std::vector<char> bytes(1024, 'x');
  for (uint64_t shard = 0; shard < 256; ++shard) {
    std::filesystem::create_directories(model_dir + "/" + ValueFileShard({0, shard << 56}));
  }
  for (int64_t i = 0; i < files; ++i) {
    const BlockHash h{static_cast<uint64_t>(i), static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ULL};
    const std::string shard = model_dir + "/" + ValueFileShard(h);
    const int fd = ::open((shard + "/" + ValueFileNameOf(h)).c_str(), O_WRONLY | O_CREAT, 0644);
    if (fd < 0 || ::write(fd, bytes.data(), bytes.size()) != 1024 || ::close(fd) != 0) {
      state.SkipWithError("setup failed");
      return;
    }
  }
  for (auto _ : state) {
    auto tier = DiskTier::Create({.directory = dir,
                                  .capacity_bytes = 2 * files * 1024,
                                  .model_fingerprint = "bench",
                                  .format = {.block_size = kBlockSize, .value_bytes = value_bytes}})
                    .value();
    tier->Flush();
    state.counters["indexed"] = static_cast<double>(tier->disk_stats().scanned_files);
  }
  state.counters["us_per_file"] =
      benchmark::Counter(static_cast<double>(files), benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
  std::filesystem::remove_all(dir);
}
// What the budget shared by a folder's processes adds to every store (and to every eviction
// made outside a store): one locked section of the usage file (flock, fstat, read and check the
// 2 KiB table, write it back, unlock).
void BM_FolderUsageUpdate(benchmark::State& state) {
  const std::string dir = TempFolder();
  FolderUsage usage(dir, static_cast<int64_t>(kTierValueHeaderBytes) + 4 * kBlockSize + (64 << 10));
  int shard = 0;
  for (auto _ : state) {
    bool rebuilt = false;
    if (!usage.Lock(&rebuilt).ok()) state.SkipWithError("lock failed");
    usage.Add(shard, 1);
    shard = (shard + 1) % FolderUsage::kShards;
    if (!usage.Unlock().ok()) state.SkipWithError("write failed");
  }
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_FolderUsageUpdate);

BENCHMARK(BM_DiskTierStartScan)
    ->Arg(100000)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2)
    ->UseRealTime();

#define VALUE_SIZES Arg(64 << 10)->Arg(256 << 10)->Arg(2 << 20)->UseRealTime()
BENCHMARK(BM_DiskTierStore)->VALUE_SIZES;
BENCHMARK(BM_PlainFileWrite)->VALUE_SIZES;
BENCHMARK(BM_PlainNewFilesWrite)->VALUE_SIZES;
BENCHMARK(BM_DiskTierLoad)->ArgsProduct({{64 << 10, 256 << 10, 2 << 20}, {1, 2}})->UseRealTime();
BENCHMARK(BM_PlainFileRead)->VALUE_SIZES;
BENCHMARK(BM_PlainFilesRead)->VALUE_SIZES->Threads(1)->Threads(2);
BENCHMARK(BM_DiskTierLoadCold)
    ->ArgsProduct({{256 << 10, 2 << 20}, {1, 2, 4}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlainFilesReadCold)
    ->Arg(256 << 10)
    ->Arg(2 << 20)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pagedkv
