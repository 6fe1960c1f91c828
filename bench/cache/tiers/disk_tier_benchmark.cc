// Copyright 2026 The pagedkv Authors.
//
// Disk tier store / load bandwidth against plain write(2) / pread(2) of the same bytes on the
// same file system (results: bench/RESULTS.md, "Disk tier"). Files go under $TMPDIR (default
// /tmp); neither side calls fsync, so both measure the page cache and the file system's
// bookkeeping, which is what a store off the engine step and a warm lookup cost.
//   build/bench/cache/disk_tier_benchmark --benchmark_counters_tabular=true
// Value sizes: 64 KiB, 256 KiB, 2 MiB (one 16-token block of llama-3-8b BF16 KV is 2 MiB).
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/tiers/disk_tier.h"

namespace pagedkv {
namespace {

constexpr int64_t kBlocks = 64;  // blocks stored / loaded per iteration (a chain)
constexpr int32_t kBlockSize = 16;

std::string TempFolder() {
  std::string pattern = std::filesystem::temp_directory_path() / "pagedkv-bench-XXXXXX";
  return ::mkdtemp(pattern.data()) != nullptr ? pattern : "";
}

std::unique_ptr<DiskTier> MakeTier(const std::string& dir, int64_t value_bytes) {
  const int64_t file_bytes = 48 + 4 * kBlockSize + value_bytes;
  return DiskTier::Create({.directory = dir,
                           .capacity_bytes = kBlocks * file_bytes,
                           .model_fingerprint = "bench",
                           .format = {.block_size = kBlockSize, .value_bytes = value_bytes},
                           .max_pending_bytes = 2 * kBlocks * file_bytes})
      .value();
}

struct Chain {
  std::vector<TokenId> tokens = std::vector<TokenId>(kBlockSize, 7);
  std::vector<std::byte> value;
  std::vector<TierStoreItem> items;
  std::vector<TierBlock> blocks;
  Chain(int64_t value_bytes, uint64_t first) : value(static_cast<size_t>(value_bytes)) {
    for (size_t i = 0; i < value.size(); ++i) value[i] = static_cast<std::byte>(i * 31);
    for (int64_t i = 0; i < kBlocks; ++i) {
      blocks.push_back(
          {.hash = BlockHash{first + static_cast<uint64_t>(i), 0x5EED}, .tokens = tokens});
      items.push_back({.block = blocks.back(), .value = value});
    }
  }
};

// Stores a fresh chain of kBlocks into a full tier and waits for the writer (each file replaces
// an evicted one: create, write, rename, and an unlink).
void BM_DiskTierStore(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const std::string dir = TempFolder();
  auto tier = MakeTier(dir, bytes);
  Chain chain(bytes, 1);
  uint64_t next = 1;
  for (auto _ : state) {
    for (TierStoreItem& item : chain.items) item.block.hash = BlockHash{next++, 0x5EED};
    benchmark::DoNotOptimize(tier->Store(chain.items));
    tier->Flush();
  }
  state.SetBytesProcessed(state.iterations() * kBlocks * bytes);
  tier.reset();
  std::filesystem::remove_all(dir);
}

// Loads a held chain of kBlocks from its files (the sink reads each value's first and last
// byte: the copy to the device is the engine's, not the tier's).
void BM_DiskTierLoad(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const std::string dir = TempFolder();
  auto tier = MakeTier(dir, bytes);
  Chain chain(bytes, 1);
  if (!tier->Store(chain.items).ok()) state.SkipWithError("store failed");
  tier->Flush();
  for (auto _ : state) {
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

// The floor of a store: write(2) of the same bytes (kBlocks values) into one open file.
void BM_PlainFileWrite(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const std::string dir = TempFolder();
  const std::string path = dir + "/plain";
  std::vector<std::byte> value(static_cast<size_t>(bytes), std::byte{3});
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
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

// The floor of a store as files: each value written to a new file (open, write, close), the
// previous iteration's files removed (as the tier's evictions remove them).
void BM_PlainNewFilesWrite(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const std::string dir = TempFolder();
  std::vector<std::byte> value(static_cast<size_t>(bytes), std::byte{3});
  int64_t next = 0;
  for (auto _ : state) {
    for (int64_t i = 0; i < kBlocks; ++i, ++next) {
      if (next >= kBlocks) ::unlink((dir + "/" + std::to_string(next - kBlocks)).c_str());
      const int fd =
          ::open((dir + "/" + std::to_string(next)).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0 || ::write(fd, value.data(), value.size()) != bytes || ::close(fd) != 0) {
        state.SkipWithError("write failed");
      }
    }
  }
  state.SetBytesProcessed(state.iterations() * kBlocks * bytes);
  std::filesystem::remove_all(dir);
}

// The floor of a load as files: each value read from its own file (open, read, close).
void BM_PlainFilesRead(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const std::string dir = TempFolder();
  std::vector<std::byte> value(static_cast<size_t>(bytes), std::byte{3});
  for (int64_t i = 0; i < kBlocks; ++i) {
    const int fd = ::open((dir + "/" + std::to_string(i)).c_str(), O_WRONLY | O_CREAT, 0644);
    if (fd < 0 || ::write(fd, value.data(), value.size()) != bytes || ::close(fd) != 0) {
      state.SkipWithError("write failed");
    }
  }
  for (auto _ : state) {
    for (int64_t i = 0; i < kBlocks; ++i) {
      const int fd = ::open((dir + "/" + std::to_string(i)).c_str(), O_RDONLY);
      if (fd < 0 || ::read(fd, value.data(), value.size()) != bytes || ::close(fd) != 0) {
        state.SkipWithError("read failed");
      }
      benchmark::ClobberMemory();
    }
  }
  state.SetBytesProcessed(state.iterations() * kBlocks * bytes);
  std::filesystem::remove_all(dir);
}

// The floor of a load: pread(2) of the same bytes from one open file into one buffer.
void BM_PlainFileRead(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const std::string dir = TempFolder();
  const std::string path = dir + "/plain";
  std::vector<std::byte> value(static_cast<size_t>(bytes), std::byte{3});
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

#define VALUE_SIZES Arg(64 << 10)->Arg(256 << 10)->Arg(2 << 20)->UseRealTime()
BENCHMARK(BM_DiskTierStore)->VALUE_SIZES;
BENCHMARK(BM_PlainFileWrite)->VALUE_SIZES;
BENCHMARK(BM_PlainNewFilesWrite)->VALUE_SIZES;
BENCHMARK(BM_DiskTierLoad)->VALUE_SIZES;
BENCHMARK(BM_PlainFileRead)->VALUE_SIZES;
BENCHMARK(BM_PlainFilesRead)->VALUE_SIZES;

}  // namespace
}  // namespace pagedkv
