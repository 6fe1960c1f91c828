// Copyright 2026 The pagedkv Authors.
//
// ReadHelpers. Invariant: a job is claimed under mu_ from the batch job_ names, so a helper that
// wakes late (after its batch ended, or into the next one) only ever claims jobs of the batch
// that is current then, and none once they are all claimed.
#include "cache/tiers/disk/read_helpers.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace pagedkv {
namespace {

// How long a helper polls for the next batch, and Run for its batch's end, before sleeping:
// longer than the gap between LoadPrefix's batches, short enough not to hold a core between steps.
constexpr std::chrono::microseconds kSpin{50};

// Polls `done` for up to kSpin, yielding the core between polls (a thread of the engine's step
// may want it); whether it turned true.
template <typename Done>
bool SpinUntil(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (;;) {
    if (done()) return true;
    std::this_thread::yield();
    if (std::chrono::steady_clock::now() > deadline) return done();
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<ReadHelpers>> ReadHelpers::Create(int32_t num_helpers) {
  if (num_helpers < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReadHelpers: num_helpers must be >= 0, got ", num_helpers));
  }
  std::unique_ptr<ReadHelpers> helpers(new ReadHelpers());
  try {
    helpers->threads_.reserve(static_cast<size_t>(num_helpers));
    for (int32_t i = 0; i < num_helpers; ++i) {
      helpers->threads_.emplace_back([raw = helpers.get()] { raw->Loop(); });
    }
  } catch (const std::system_error& e) {  // the threads started so far are joined below
    return absl::ResourceExhaustedError(
        absl::StrCat("ReadHelpers: cannot start ", num_helpers, " threads: ", e.what()));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("ReadHelpers: out of memory");
  }
  return helpers;
}

ReadHelpers::~ReadHelpers() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  batch_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ReadHelpers::Run(size_t num_jobs, absl::FunctionRef<void(size_t)> job) {
  if (num_jobs == 0) return;
  {
    std::lock_guard lock(mu_);
    job_ = &job;
    num_jobs_ = num_jobs;
    resting_.store(false, std::memory_order_relaxed);
    next_job_ = 0;
    unfinished_.store(num_jobs, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  if (num_jobs > 1) batch_cv_.notify_all();
  Work();
  const auto finished = [this] { return unfinished_.load(std::memory_order_acquire) == 0; };
  if (!SpinUntil(finished)) {
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, finished);
  }
  std::lock_guard lock(mu_);
  job_ = nullptr;  // `job` goes out of scope with this call
  num_jobs_ = 0;
}

void ReadHelpers::Work() {
  for (;;) {
    const absl::FunctionRef<void(size_t)>* job = nullptr;
    size_t index = 0;
    {
      std::lock_guard lock(mu_);
      if (next_job_ >= num_jobs_) return;
      job = job_;
      index = next_job_++;
    }
    (*job)(index);
    if (unfinished_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard lock(mu_);  // Run checks `finished` under mu_ before it sleeps
      done_cv_.notify_all();
    }
  }
}

void ReadHelpers::Loop() {
  uint64_t seen = 0;
  for (;;) {
    const auto moved = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    SpinUntil([&] { return moved() || resting_.load(std::memory_order_relaxed); });
    if (!moved()) {
      std::unique_lock lock(mu_);
      batch_cv_.wait(lock, [&] { return stop_ || moved(); });
      if (stop_) return;
    }
    seen = generation_.load(std::memory_order_acquire);
    Work();
  }
}

}  // namespace pagedkv
