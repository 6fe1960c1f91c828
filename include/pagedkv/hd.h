// Copyright 2026 The pagedkv Authors.
//
// PAGEDKV_HD marks functions that compile for both host and device.
//
// Under nvcc it expands to `__host__ __device__ __forceinline__`; under a plain C++ compiler to
// `inline`. Every header that holds per-element math or layout arithmetic uses it, so the CPU
// reference backend and the CUDA kernels call the very same code.
//
// Example:
//   PAGEDKV_HD float Square(float x) { return x * x; }
#ifndef PAGEDKV_HD_H_
#define PAGEDKV_HD_H_

#if defined(__CUDACC__)
#define PAGEDKV_HD __host__ __device__ __forceinline__
#else
#define PAGEDKV_HD inline
#endif

#endif  // PAGEDKV_HD_H_
