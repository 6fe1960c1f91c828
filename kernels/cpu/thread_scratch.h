// Copyright 2026 The pagedkv Authors.
//
// ThreadScratch: a calling thread's reusable scratch buffer for a kernel, 64-byte aligned and kept
// between calls (grown, never shrunk), one per Tag type so that buffers live at the same time on
// one thread (the int8 kernels' quantized x and their decoded panels) never share memory.
// Allocation failure is a null pointer, never an exception: the caller falls back or reports it.
//
// Example:
//   struct PanelTag {};
//   float* panel = reinterpret_cast<float*>(ThreadScratch<PanelTag>(width * k * sizeof(float)));
//   if (panel == nullptr) return RunWithoutPanel();
#ifndef PAGEDKV_KERNELS_CPU_THREAD_SCRATCH_H_
#define PAGEDKV_KERNELS_CPU_THREAD_SCRATCH_H_

#include <cstddef>
#include <cstdlib>
#include <memory>

namespace pagedkv::cpu {

struct FreeScratch {
  void operator()(unsigned char* p) const { std::free(p); }
};

// At least `bytes` bytes, 64-byte aligned, owned by this thread until its next call with the same
// Tag; null when they cannot be allocated (the previous buffer is then released).
template <typename Tag>
unsigned char* ThreadScratch(size_t bytes) {
  thread_local std::unique_ptr<unsigned char, FreeScratch> buffer;
  thread_local size_t capacity = 0;
  if (capacity < bytes) {
    const size_t rounded = (bytes + 63) / 64 * 64;
    buffer.reset(static_cast<unsigned char*>(std::aligned_alloc(64, rounded)));
    capacity = buffer == nullptr ? 0 : rounded;
  }
  return buffer.get();
}

}  // namespace pagedkv::cpu

#endif  // PAGEDKV_KERNELS_CPU_THREAD_SCRATCH_H_
