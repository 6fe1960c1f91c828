// Copyright 2026 The pagedkv Authors.
//
// ReadHelpers: the threads with which DiskTier::LoadPrefix reads and checks several values at
// once (DiskTierOptions::read_threads). Run(n, job) runs job(0), ..., job(n - 1) on the calling
// thread and the helper threads together and returns once every one has finished. Jobs are claimed
// one at a time, so a helper that the OS has not scheduled yet delays nothing: the caller takes its
// job. Every job must be safe on any of the threads.
//
// A helper polls for a while after a batch (LoadPrefix's next batch follows within microseconds)
// and then sleeps until the next Run, so an idle tier costs no CPU; after Rest() (a lookup's last
// batch) it sleeps at once, leaving the core to the engine's next step.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<ReadHelpers> helpers, ReadHelpers::Create(1));
//   helpers->Run(2, [&](size_t i) { Read(values[i]); });  // both read, maybe at once
//
// Run is not thread-safe (one caller at a time: the engine thread).
#ifndef PAGEDKV_CACHE_TIERS_DISK_READ_HELPERS_H_
#define PAGEDKV_CACHE_TIERS_DISK_READ_HELPERS_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

namespace pagedkv {

class ReadHelpers {
 public:
  // Starts `num_helpers` threads (0 runs every job on the caller). InvalidArgument for a negative
  // count, ResourceExhausted when the system starts no more threads.
  static absl::StatusOr<std::unique_ptr<ReadHelpers>> Create(int32_t num_helpers);
  // Stops and joins the threads.
  ~ReadHelpers();
  ReadHelpers(const ReadHelpers&) = delete;
  ReadHelpers& operator=(const ReadHelpers&) = delete;

  int32_t num_helpers() const { return static_cast<int32_t>(threads_.size()); }

  // Runs job(i) once for every i in [0, num_jobs) (here or on a helper); returns when all have
  // returned.
  void Run(size_t num_jobs, absl::FunctionRef<void(size_t)> job);
  // No batch follows soon: helpers sleep now instead of spinning (the next Run wakes them).
  void Rest() { resting_.store(true, std::memory_order_relaxed); }

 private:
  ReadHelpers() = default;
  // A helper's loop: waits for a new batch, then claims its jobs, until stop_.
  void Loop();
  // Claims and runs jobs of the current batch until none is left unclaimed.
  void Work();

  std::mutex mu_;
  std::condition_variable batch_cv_;  // a new batch (generation_ moved), or stop_
  std::condition_variable done_cv_;   // the batch's last job finished
  const absl::FunctionRef<void(size_t)>* job_ = nullptr;  // under mu_: the batch's
  size_t num_jobs_ = 0;                                   // under mu_
  size_t next_job_ = 0;                                   // under mu_: the first unclaimed
  std::atomic<size_t> unfinished_{0};                     // the batch's jobs not yet returned
  std::atomic<uint64_t> generation_{0};                   // batches started (set under mu_)
  std::atomic<bool> resting_{false};                      // Rest() since the last Run
  bool stop_ = false;                                     // under mu_
  std::vector<std::thread> threads_;
};

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_TIERS_DISK_READ_HELPERS_H_
