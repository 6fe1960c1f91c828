// Copyright 2026 The pagedkv Authors.
//
// ThreadPool. Invariants: state_ = (generation << 32) | next_chunk. A job is published in two
// stores: first a new generation with next_chunk = kClosed, which no claim can pass, then, after
// the job's fields (fn_, num_items_, num_chunks_) are written and chunks_done_ reset, the next
// generation with next_chunk 0. A claim is a CAS on state_ from (gen, c) to (gen, c + 1) with
// c < num_chunks_, where the fields were read (acquire) before the CAS. Fields are written only
// after the closing store, so a claimant that read a newer job's field has the closing store
// happen before its CAS, which then fails: a claim that succeeds read the fields of generation
// gen. A worker that wakes late fails its CAS and touches nothing, and chunks_done_ counts only
// chunks of the current job (the previous job's chunks were all done before it was closed).
#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <system_error>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pagedkv::cpu {
namespace {

// Polls before sleeping: long enough to catch the next op of a forward pass, short enough not to
// burn a shared machine's cores between steps.
constexpr int kSpinIterations = 2000;
// Chunks per thread: enough that threads which start late still find work.
constexpr int64_t kChunksPerThread = 4;
// next_chunk of a job being written: no chunk is claimable (every chunk index is below it).
constexpr uint32_t kClosed = UINT32_MAX;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

inline uint32_t Generation(uint64_t state) { return static_cast<uint32_t>(state >> 32); }
inline uint32_t NextChunk(uint64_t state) { return static_cast<uint32_t>(state); }

}  // namespace

int32_t HardwareThreads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int32_t>(std::min<unsigned>(n, kMaxThreads));
}

absl::StatusOr<std::unique_ptr<ThreadPool>> ThreadPool::Create(int32_t num_threads) {
  if (num_threads < 1 || num_threads > kMaxThreads) {
    return absl::InvalidArgumentError(absl::StrCat("thread pool: num_threads must be in [1, ",
                                                   kMaxThreads, "], got ", num_threads));
  }
  std::unique_ptr<ThreadPool> pool(new ThreadPool());
  try {
    pool->workers_.reserve(static_cast<size_t>(num_threads - 1));
    for (int32_t i = 1; i < num_threads; ++i) {
      pool->workers_.emplace_back([p = pool.get()] { p->WorkerLoop(); });
    }
  } catch (const std::system_error& e) {
    return absl::ResourceExhaustedError(absl::StrCat("thread pool: cannot start ", num_threads - 1,
                                                     " worker threads (started ",
                                                     pool->workers_.size(), "): ", e.what()));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("thread pool: out of memory starting worker threads");
  }
  return pool;
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  job_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunChunks(uint32_t gen) {
  uint64_t state = state_.load(std::memory_order_acquire);
  for (;;) {
    if (Generation(state) != gen) return;
    const uint32_t chunk = NextChunk(state);
    const uint32_t num_chunks = num_chunks_.load(std::memory_order_acquire);
    const int64_t num_items = num_items_.load(std::memory_order_acquire);
    const auto* fn = fn_.load(std::memory_order_acquire);
    if (chunk >= num_chunks) return;
    if (!state_.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel)) continue;
    const int64_t base = num_items / num_chunks, extra = num_items % num_chunks;
    const int64_t begin = chunk * base + std::min<int64_t>(chunk, extra);
    (*fn)(begin, begin + base + (chunk < extra ? 1 : 0));
    if (chunks_done_.fetch_add(1, std::memory_order_acq_rel) + 1 == num_chunks) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_all();
    }
    state = state_.load(std::memory_order_acquire);
  }
}

void ThreadPool::WorkerLoop() {
  uint32_t seen = 0;
  for (;;) {
    for (int i = 0;
         i < kSpinIterations && Generation(state_.load(std::memory_order_acquire)) == seen; ++i) {
      CpuRelax();
    }
    if (Generation(state_.load(std::memory_order_acquire)) == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      job_cv_.wait(lock, [&] { return stop_ || Generation(state_.load()) != seen; });
      if (stop_) return;
    }
    seen = Generation(state_.load(std::memory_order_acquire));
    RunChunks(seen);
  }
}

void ThreadPool::ParallelFor(int64_t num_items, int64_t min_items_per_range,
                             absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (num_items <= 0) return;
  const int64_t by_size = num_items / std::max<int64_t>(min_items_per_range, 1);
  const auto chunks =
      static_cast<uint32_t>(std::clamp<int64_t>(by_size, 1, kChunksPerThread * num_threads()));
  if (chunks == 1 || workers_.empty()) return fn(0, num_items);
  uint32_t gen;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const uint32_t closed = Generation(state_.load(std::memory_order_relaxed)) + 1;
    state_.store((uint64_t{closed} << 32) | kClosed, std::memory_order_seq_cst);
    fn_.store(&fn, std::memory_order_release);
    num_items_.store(num_items, std::memory_order_release);
    num_chunks_.store(chunks, std::memory_order_release);
    chunks_done_.store(0, std::memory_order_release);
    gen = closed + 1;
    state_.store(uint64_t{gen} << 32, std::memory_order_release);
  }
  job_cv_.notify_all();
  RunChunks(gen);
  for (int i = 0; i < kSpinIterations && chunks_done_.load(std::memory_order_acquire) != chunks;
       ++i) {
    CpuRelax();
  }
  if (chunks_done_.load(std::memory_order_acquire) != chunks) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return chunks_done_.load(std::memory_order_acquire) == chunks; });
  }
}

void ParallelFor(ThreadPool* pool, int64_t num_items, int64_t min_items_per_range,
                 absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (pool == nullptr) {
    if (num_items > 0) fn(0, num_items);
    return;
  }
  pool->ParallelFor(num_items, min_items_per_range, fn);
}

}  // namespace pagedkv::cpu
