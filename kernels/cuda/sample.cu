// Copyright 2026 The pagedkv Authors.
//
// CUDA sampling. Thrust's reduce_by_key gives every row's (max logit, argmax) in one pass; greedy
// rows take the argmax, the others run one block per row: the softmax normaliser, the top-p
// threshold found by bisection on the fp32 bit pattern (the largest t whose mass of p >= t still
// reaches top_p, i.e. the CPU's sorted-cumsum threshold), and the draw by a block scan over the
// kept tokens in index order with the counter-based uniform of kernels/sample_math.h.
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/reduce.h>
#include <thrust/tuple.h>

#include <cstdint>
#include <cub/block/block_scan.cuh>
#include <exception>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/ops.h"
#include "kernels/dtype_convert.h"
#include "kernels/op_validate.h"
#include "kernels/sample_math.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cuda {
namespace {

constexpr int kThreads = 256;

struct RowOf {
  int64_t vocab;
  __host__ __device__ int64_t operator()(int64_t i) const { return i / vocab; }
};

struct ColumnOf {
  int64_t vocab;
  __host__ __device__ int32_t operator()(int64_t i) const {
    return static_cast<int32_t>(i % vocab);
  }
};

// Larger logit wins; ties go to the lower index (the CPU's first maximum).
struct ArgMax {
  __host__ __device__ thrust::tuple<float, int32_t> operator()(
      const thrust::tuple<float, int32_t>& a, const thrust::tuple<float, int32_t>& b) const {
    const float va = thrust::get<0>(a);
    const float vb = thrust::get<0>(b);
    if (va > vb) return a;
    if (vb > va) return b;
    return thrust::get<1>(a) < thrust::get<1>(b) ? a : b;
  }
};

__device__ __forceinline__ float Prob(const float* row, int64_t i, float max_logit, float inv_t) {
  return expf((row[i] - max_logit) * inv_t);
}

// Sum over the row of p_i for p_i >= threshold.
__device__ double MassAbove(const float* row, int64_t vocab, float max_logit, float inv_t,
                            float threshold, double* scratch) {
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float p = Prob(row, i, max_logit, inv_t);
    if (p >= threshold) sum += p;
  }
  return BlockSum(sum, scratch);
}

__global__ void __launch_bounds__(kThreads)
    SampleKernel(SampleArgs a, const float* max_logits, const int32_t* argmax) {
  using BlockScan = cub::BlockScan<double, kThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  __shared__ double scratch[32];
  __shared__ int32_t found;
  __shared__ double chunk_total;
  const int64_t s = blockIdx.x;
  const SamplingParams params = a.params[s];
  if (params.temperature <= 0.0f) {
    if (threadIdx.x == 0) a.out_tokens[s] = argmax[s];
    return;
  }
  const float* row = a.logits + s * a.vocab_size;
  const float max_logit = max_logits[s];
  const float inv_t = 1.0f / params.temperature;
  float threshold = 0.0f;
  if (params.top_p < 1.0f) {
    const double total = MassAbove(row, a.vocab_size, max_logit, inv_t, 0.0f, scratch);
    const double target = static_cast<double>(params.top_p) * total;
    uint32_t lo = 0;                       // mass(p >= 0) = total >= target
    uint32_t hi = FloatToBits(1.0f) + 1u;  // no p exceeds 1
    while (hi - lo > 1u) {
      const uint32_t mid = lo + (hi - lo) / 2u;
      if (MassAbove(row, a.vocab_size, max_logit, inv_t, BitsToFloat(mid), scratch) >= target) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    threshold = BitsToFloat(lo);
  }
  const double kept = MassAbove(row, a.vocab_size, max_logit, inv_t, threshold, scratch);
  const double u = SampleUniform(params.seed, params.counter) * kept;
  double running = 0.0;
  for (int64_t base = 0; base < a.vocab_size; base += blockDim.x) {
    const int64_t i = base + threadIdx.x;
    double p = 0.0;
    if (i < a.vocab_size) {
      const float pf = Prob(row, i, max_logit, inv_t);
      if (pf >= threshold) p = pf;
    }
    double inclusive;
    BlockScan(scan_storage).InclusiveSum(p, inclusive);
    if (threadIdx.x == 0) found = INT32_MAX;
    if (threadIdx.x == blockDim.x - 1) chunk_total = inclusive;
    __syncthreads();
    if (p > 0.0 && running + inclusive > u) atomicMin(&found, static_cast<int32_t>(i));
    __syncthreads();
    const int32_t hit = found;
    const double total = chunk_total;
    __syncthreads();
    if (hit != INT32_MAX) {
      if (threadIdx.x == 0) a.out_tokens[s] = hit;
      return;
    }
    running += total;
  }
  // u fell past the last kept token by rounding: take the last kept token, like the CPU.
  int32_t mine = -1;
  for (int64_t i = threadIdx.x; i < a.vocab_size; i += blockDim.x) {
    if (Prob(row, i, max_logit, inv_t) >= threshold) mine = static_cast<int32_t>(i);
  }
  if (threadIdx.x == 0) found = -1;
  __syncthreads();
  atomicMax(&found, mine);
  __syncthreads();
  if (threadIdx.x == 0) a.out_tokens[s] = found < 0 ? argmax[s] : found;
}

}  // namespace

absl::Status Sample(const SampleArgs& args, cudaStream_t stream) {
  PAGEDKV_RETURN_IF_ERROR(ValidateSample(args));
  if (args.num_seqs == 0) return absl::OkStatus();
  if (args.num_seqs > INT32_MAX) return absl::InvalidArgumentError("Sample: too many sequences");
  PAGEDKV_ASSIGN_OR_RETURN(auto max_logits, DeviceBuffer<float>::Create(args.num_seqs));
  PAGEDKV_ASSIGN_OR_RETURN(auto argmax, DeviceBuffer<int32_t>::Create(args.num_seqs));
  PAGEDKV_ASSIGN_OR_RETURN(auto row_keys, DeviceBuffer<int64_t>::Create(args.num_seqs));
  const int64_t n = args.num_seqs * args.vocab_size;
  auto counting = thrust::make_counting_iterator<int64_t>(0);
  auto keys = thrust::make_transform_iterator(counting, RowOf{args.vocab_size});
  auto values = thrust::make_zip_iterator(thrust::make_tuple(
      args.logits, thrust::make_transform_iterator(counting, ColumnOf{args.vocab_size})));
  auto out_values = thrust::make_zip_iterator(thrust::make_tuple(max_logits.data(), argmax.data()));
  try {
    thrust::reduce_by_key(thrust::cuda::par.on(stream), keys, keys + n, values, row_keys.data(),
                          out_values, thrust::equal_to<int64_t>(), ArgMax());
  } catch (const std::exception& e) {  // Thrust reports CUDA errors by throwing
    return absl::InternalError(absl::StrCat("Sample: thrust::reduce_by_key failed: ", e.what()));
  }
  PAGEDKV_CUDA_CHECK_LAUNCH("thrust::reduce_by_key");
  SampleKernel<<<static_cast<unsigned>(args.num_seqs), kThreads, 0, stream>>>(
      args, max_logits.data(), argmax.data());
  PAGEDKV_CUDA_CHECK_LAUNCH("SampleKernel");
  // The temporaries are freed on return: wait for the kernels that read them.
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

}  // namespace pagedkv::cuda
