// Copyright 2026 The pagedkv Authors.
//
// ThreadPool: a small fixed pool for the CPU backend's ops. ParallelFor cuts [0, num_items) into
// contiguous chunks (a few per thread); the calling thread and the workers claim chunks until none
// is left, so a worker that the OS has not scheduled yet (a busy, shared machine) delays nothing:
// the others take its chunks. Kernels give each output element to exactly one chunk and compute it
// the same way whatever the chunking and whoever runs it, so results do not depend on the thread
// count.
//
// Workers spin briefly for the next job, then sleep on a condition variable, so an idle pool costs
// no CPU.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<ThreadPool> pool, ThreadPool::Create(4));
//   pool->ParallelFor(rows, /*min_items_per_range=*/8, [&](int64_t begin, int64_t end) {
//     for (int64_t r = begin; r < end; ++r) Row(r);
//   });
//
// Thread safety: one ParallelFor at a time (the CPU backend runs ops in order on one thread);
// ParallelFor must not be called from inside a range.
#ifndef PAGEDKV_KERNELS_CPU_THREAD_POOL_H_
#define PAGEDKV_KERNELS_CPU_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "pagedkv/export.h"

namespace pagedkv::cpu {

// Most threads a pool accepts (a guard against typos such as --threads 10000).
inline constexpr int32_t kMaxThreads = 1024;

// Hardware threads of this machine (std::thread::hardware_concurrency), at least 1.
PAGEDKV_EXPORT int32_t HardwareThreads();

class PAGEDKV_EXPORT ThreadPool {
 public:
  // num_threads threads in all, the caller included (num_threads - 1 workers are started).
  // InvalidArgument unless 1 <= num_threads <= kMaxThreads; ResourceExhausted when the system
  // cannot start a thread.
  static absl::StatusOr<std::unique_ptr<ThreadPool>> Create(int32_t num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int32_t num_threads() const { return static_cast<int32_t>(workers_.size()) + 1; }

  // Runs fn(begin, end) over chunks that tile [0, num_items): at most
  // num_items / min_items_per_range chunks (at least one; a single chunk runs inline), sizes
  // differing by at most one item; returns when every chunk is done. REQUIRES: fn does not throw.
  void ParallelFor(int64_t num_items, int64_t min_items_per_range,
                   absl::FunctionRef<void(int64_t, int64_t)> fn);

 private:
  ThreadPool() = default;
  void WorkerLoop();
  // Claims and runs chunks of the job of generation `gen` until none is left.
  void RunChunks(uint32_t gen);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable job_cv_;   // a new job (state_ generation changed) or stop_
  std::condition_variable done_cv_;  // chunks_done_ reached the job's chunk count
  bool stop_ = false;                // guarded by mu_
  // The job: generation (high 32 bits) and next unclaimed chunk (low 32 bits) in one word, so a
  // claim (compare-and-swap) succeeds only for the current job. The job's fields are written
  // before its generation is published and rewritten only after all its chunks are done.
  std::atomic<uint64_t> state_{0};
  std::atomic<const absl::FunctionRef<void(int64_t, int64_t)>*> fn_{nullptr};
  std::atomic<int64_t> num_items_{0};
  std::atomic<uint32_t> num_chunks_{0};
  std::atomic<uint32_t> chunks_done_{0};
};

// Runs fn over [0, num_items) on `pool`, or inline as one range when pool is null.
PAGEDKV_EXPORT void ParallelFor(ThreadPool* pool, int64_t num_items, int64_t min_items_per_range,
                                absl::FunctionRef<void(int64_t, int64_t)> fn);

}  // namespace pagedkv::cpu

#endif  // PAGEDKV_KERNELS_CPU_THREAD_POOL_H_
