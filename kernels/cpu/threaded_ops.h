// Copyright 2026 The pagedkv Authors.
//
// The CPU ops of pagedkv/kernels/cpu_ops.h with their work split over a ThreadPool: the CPU
// backend's entry points (threads are a property of the backend, not of the op arguments). Each
// validates exactly as the public op does and leaves every output untouched on error. Work is split
// by output columns (Linear, LmHead), rows (RmsNorm, SwiGlu, Sample) or (run of query tokens, KV
// head) pairs (PagedAttention), and only when there is enough of it to pay for waking the workers;
// every output element is computed by one thread the same way, so results are bit-identical for any
// pool size (and for a null pool, which runs everything on the calling thread).
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<cpu::ThreadPool> pool, cpu::ThreadPool::Create(4));
//   PAGEDKV_RETURN_IF_ERROR(cpu::Linear(args, pool.get()));
#ifndef PAGEDKV_KERNELS_CPU_THREADED_OPS_H_
#define PAGEDKV_KERNELS_CPU_THREADED_OPS_H_

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/thread_pool.h"
#include "pagedkv/export.h"
#include "pagedkv/kernels/op_args.h"

namespace pagedkv::cpu {

PAGEDKV_EXPORT absl::Status Linear(const LinearArgs& args, ThreadPool* pool);
PAGEDKV_EXPORT absl::Status LmHead(const LmHeadArgs& args, ThreadPool* pool);
PAGEDKV_EXPORT absl::Status RmsNorm(const RmsNormArgs& args, ThreadPool* pool);
PAGEDKV_EXPORT absl::Status SwiGlu(const SwiGluArgs& args, ThreadPool* pool);
PAGEDKV_EXPORT absl::Status PagedAttention(const PagedAttentionArgs& args, ThreadPool* pool);
// Rows split over threads; every row draws from its own seed and counter, so the same tokens.
// ResourceExhausted (out_tokens untouched) when a thread's scratch cannot be allocated.
PAGEDKV_EXPORT absl::Status Sample(const SampleArgs& args, ThreadPool* pool);

// Multiply-adds (or elements) a range must hold before work is split off to another thread.
inline constexpr int64_t kMinWorkPerThread = int64_t{1} << 16;

// Items a ParallelFor range must hold so that it does kMinWorkPerThread of work (at least 1).
// work_per_item in double: a shape the caller validated but did not size may overflow int64.
inline int64_t MinItemsPerRange(double work_per_item) {
  return static_cast<int64_t>(
      std::max(1.0, static_cast<double>(kMinWorkPerThread) / std::max(work_per_item, 1.0)));
}

}  // namespace pagedkv::cpu

#endif  // PAGEDKV_KERNELS_CPU_THREADED_OPS_H_
