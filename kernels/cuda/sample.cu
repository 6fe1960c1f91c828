// Copyright 2026 The pagedkv Authors.
//
// CUDA sampling, one block per row and no temporary memory: a CUB block reduction gives the
// row's (max logit, argmax) (ties to the lower index, like the CPU); greedy rows take the argmax,
// the others drop what min_p and top_k drop (top_k's k-th largest logit found by bisection on the
// order-preserving key of the fp32 bits: the largest t with at least k logits >= t, the CPU's
// nth_element), compute the softmax normaliser of the rest, the top-p threshold found by bisection
// on the fp32 bit pattern (the largest t whose mass of p >= t still reaches top_p, i.e. the CPU's
// sorted-cumsum threshold), and the draw by a CUB block scan over the kept tokens in index order
// with the counter-based uniform of kernels/sample_math.h. A dropped token's probability reads as
// -1, which no threshold keeps (as on the CPU).
#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "kernels/content_checks.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/content_check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/op_validate.h"
#include "kernels/sample_math.h"
#include "pagedkv/kernels/cuda_ops.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cuda {
namespace {

constexpr int kThreads = 256;

// A logit and its index.
struct ArgMaxPair {
  float value;
  int32_t index;
};

// Larger logit wins; ties go to the lower index (the CPU's first maximum).
struct ArgMaxOp {
  __device__ __forceinline__ ArgMaxPair operator()(const ArgMaxPair& a, const ArgMaxPair& b) const {
    if (a.value > b.value) return a;
    if (b.value > a.value) return b;
    return a.index < b.index ? a : b;
  }
};

// What min_p and top_k keep of a row: tokens whose logit is >= min_logit (top_k's k-th largest;
// -inf when off) and whose probability relative to the largest is >= min_p (0 when off).
struct RowFilter {
  float max_logit;
  float inv_t;
  float min_logit;
  float min_p;
};

// exp((l_i - max) / T), or -1 when min_p or top_k drop token i.
__device__ __forceinline__ float Prob(const float* row, int64_t i, const RowFilter& f) {
  const float p = expf((row[i] - f.max_logit) * f.inv_t);
  return (p < f.min_p || row[i] < f.min_logit) ? -1.0f : p;
}

// Sum over the row of p_i for p_i >= threshold.
__device__ double MassAbove(const float* row, int64_t vocab, const RowFilter& f, float threshold,
                            double* scratch) {
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float p = Prob(row, i, f);
    if (p >= threshold) sum += p;
  }
  return BlockSum(sum, scratch);
}

// Logits of the row whose OrderedKey is >= key.
__device__ double CountKeysAtLeast(const float* row, int64_t vocab, uint32_t key, double* scratch) {
  double count = 0.0;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    if (OrderedKey(row[i]) >= key) count += 1.0;
  }
  return BlockSum(count, scratch);
}

// The k-th largest logit: the largest key with at least k logits at or above it, by bisection
// (32 passes). REQUIRES: 1 <= k <= vocab.
__device__ float KthLargestLogit(const float* row, int64_t vocab, int32_t k, double* scratch) {
  uint64_t lo = 0;           // every logit's key is >= 0
  uint64_t hi = 1ull << 32;  // no key reaches it
  while (hi - lo > 1u) {
    const uint64_t mid = lo + (hi - lo) / 2u;
    if (CountKeysAtLeast(row, vocab, static_cast<uint32_t>(mid), scratch) >= k) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return OrderedFloat(static_cast<uint32_t>(lo));
}

using BlockScan = cub::BlockScan<double, kThreads>;
using BlockReduce = cub::BlockReduce<ArgMaxPair, kThreads>;

// Shared memory of one SampleKernel block.
struct SampleShared {
  union {
    typename BlockScan::TempStorage scan;
    typename BlockReduce::TempStorage reduce;
  } storage;
  double scratch[32];  // BlockSum
  int32_t found;       // the drawn (or last kept) token
  double chunk_total;  // mass of the current chunk of the scan
  ArgMaxPair best;     // the row's (max logit, argmax)
};

// The row's (max logit, argmax), the same in every thread.
__device__ ArgMaxPair RowArgMax(const float* row, int64_t vocab, SampleShared& shared) {
  ArgMaxPair mine{-INFINITY, INT32_MAX};  // loses to every real entry
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    mine = ArgMaxOp()(mine, ArgMaxPair{row[i], static_cast<int32_t>(i)});
  }
  const ArgMaxPair reduced = BlockReduce(shared.storage.reduce).Reduce(mine, ArgMaxOp());
  if (threadIdx.x == 0) shared.best = reduced;  // the aggregate is valid in thread 0
  __syncthreads();
  return shared.best;
}

// The largest t whose mass of p >= t still reaches top_p of the kept total, by bisection on the
// fp32 bit pattern.
__device__ float TopPThreshold(const float* row, int64_t vocab, const RowFilter& f, float top_p,
                               SampleShared& shared) {
  const double total = MassAbove(row, vocab, f, 0.0f, shared.scratch);
  const double target = static_cast<double>(top_p) * total;
  uint32_t lo = 0;                       // mass(p >= 0) = total >= target
  uint32_t hi = FloatToBits(1.0f) + 1u;  // no p exceeds 1
  while (hi - lo > 1u) {
    const uint32_t mid = lo + (hi - lo) / 2u;
    if (MassAbove(row, vocab, f, BitsToFloat(mid), shared.scratch) >= target) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return BitsToFloat(lo);
}

// The first kept token (p >= threshold) whose running mass, in index order, passes u; INT32_MAX
// when rounding leaves u past the last one.
__device__ int32_t DrawKept(const float* row, int64_t vocab, const RowFilter& f, float threshold,
                            double u, SampleShared& shared) {
  double running = 0.0;
  for (int64_t base = 0; base < vocab; base += blockDim.x) {
    const int64_t i = base + threadIdx.x;
    double p = 0.0;
    if (i < vocab) {
      const float pf = Prob(row, i, f);
      if (pf >= threshold) p = pf;
    }
    double inclusive;
    BlockScan(shared.storage.scan).InclusiveSum(p, inclusive);
    if (threadIdx.x == 0) shared.found = INT32_MAX;
    if (threadIdx.x == blockDim.x - 1) shared.chunk_total = inclusive;
    __syncthreads();
    if (p > 0.0 && running + inclusive > u) atomicMin(&shared.found, static_cast<int32_t>(i));
    __syncthreads();
    const int32_t hit = shared.found;
    const double total = shared.chunk_total;
    __syncthreads();
    if (hit != INT32_MAX) return hit;
    running += total;
  }
  return INT32_MAX;
}

// The last kept token, -1 when none is.
__device__ int32_t LastKept(const float* row, int64_t vocab, const RowFilter& f, float threshold,
                            SampleShared& shared) {
  int32_t last_kept = -1;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    if (Prob(row, i, f) >= threshold) last_kept = static_cast<int32_t>(i);
  }
  if (threadIdx.x == 0) shared.found = -1;
  __syncthreads();
  atomicMax(&shared.found, last_kept);
  __syncthreads();
  return shared.found;
}

__global__ void __launch_bounds__(kThreads) SampleKernel(SampleArgs a) {
  __shared__ SampleShared shared;
  const int64_t s = blockIdx.x;
  const SamplingParams params = a.params[s];
  // Only reachable with ContentCheck::kTrusted or kDeferred: the row is skipped (not written).
  if (!SamplingParamsValid(params)) return;
  const float* row = a.logits + s * a.vocab_size;
  const ArgMaxPair best = RowArgMax(row, a.vocab_size, shared);
  if (IsGreedyTemperature(params.temperature)) {
    if (threadIdx.x == 0) a.out_tokens[s] = best.index;
    return;
  }
  RowFilter filter{.max_logit = best.value,
                   .inv_t = 1.0f / params.temperature,
                   .min_logit = -INFINITY,
                   .min_p = params.min_p};
  if (TopKActive(params.top_k, a.vocab_size)) {
    filter.min_logit = KthLargestLogit(row, a.vocab_size, params.top_k, shared.scratch);
  }
  const float threshold =
      params.top_p < 1.0f ? TopPThreshold(row, a.vocab_size, filter, params.top_p, shared) : 0.0f;
  const double kept = MassAbove(row, a.vocab_size, filter, threshold, shared.scratch);
  const double u = SampleUniform(params.seed, params.counter) * kept;
  const int32_t hit = DrawKept(row, a.vocab_size, filter, threshold, u, shared);
  if (hit != INT32_MAX) {
    if (threadIdx.x == 0) a.out_tokens[s] = hit;
    return;
  }
  // u fell past the last kept token by rounding: take the last kept token, like the CPU.
  const int32_t last = LastKept(row, a.vocab_size, filter, threshold, shared);
  if (threadIdx.x == 0) a.out_tokens[s] = last < 0 ? best.index : last;
}

}  // namespace

absl::Status Sample(const SampleArgs& args, cudaStream_t stream, const LaunchOptions& options) {
  PAGEDKV_RETURN_IF_ERROR(ValidateSample(args));
  if (args.num_seqs == 0) return absl::OkStatus();
  if (args.num_seqs > INT32_MAX) {
    return absl::InvalidArgumentError("Sample: num_seqs must be < 2^31");
  }
  if (options.check != ContentCheck::kTrusted) {
    PAGEDKV_ASSIGN_OR_RETURN(Workspace * workspace, WorkspaceOrDefault(options.workspace, stream));
    absl::MutexLock lock(&workspace->mutex());
    PAGEDKV_RETURN_IF_ERROR(CheckSampleOnDevice(args, stream, *workspace, options));
  }
  SampleKernel<<<static_cast<unsigned>(args.num_seqs), kThreads, 0, stream>>>(args);
  PAGEDKV_CUDA_CHECK_LAUNCH("SampleKernel");
  return absl::OkStatus();
}

}  // namespace pagedkv::cuda
