// Copyright 2026 The pagedkv Authors.
//
// CUDA kernel throughput, timed with CUDA events: KV write, re-rotation, embedding gather and
// paged decode attention in GB/s next to a device-to-device copy measured in the same run, and
// the LM head in TFLOP/s next to cuBLAS (SGEMM direct, and TF32 as the shape's faster ceiling).
// Index-reading ops run twice: "trusted" (ContentCheck::kTrusted, the kernels alone) and
// "validated" (the default: device content check + one host synchronisation per call); the
// decode-size KV write and attention also "deferred" (ContentCheck::kDeferred: the check kernel
// and a one-thread commit, no synchronisation).
// Exits with a message (status 0) when no CUDA device is visible.
//   ./build/bench/kernels/cuda_kernels_bench
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cuda/cublas_handle.h"
#include "kernels/cuda/cuda_check.h"
#include "pagedkv/kernels/cuda_ops.h"
#include "pagedkv/kernels/rope_table.h"
#include "pagedkv/status_macros.h"
#include "tests/kernels/cuda_array.h"

namespace pagedkv::cuda {
namespace {

constexpr int kWarmup = 3;
constexpr int kIters = 20;
const LaunchOptions kTrusted{.check = ContentCheck::kTrusted};
const LaunchOptions kDeferredCheck{.check = ContentCheck::kDeferred};

// Mean milliseconds of `fn` over kIters launches after kWarmup.
absl::StatusOr<double> TimeMs(const std::function<absl::Status()>& fn) {
  for (int i = 0; i < kWarmup; ++i) PAGEDKV_RETURN_IF_ERROR(fn());
  cudaEvent_t start, stop;
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaEventRecord(start));
  for (int i = 0; i < kIters; ++i) PAGEDKV_RETURN_IF_ERROR(fn());
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop));
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop));
  float ms = 0.0f;
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start, stop));
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaEventDestroy(start));
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaEventDestroy(stop));
  return ms / kIters;
}

template <typename T>
absl::StatusOr<CudaArray<T>> Filled(size_t n, T value) {
  return CudaArray<T>::FromHost(std::vector<T>(n, value));
}

void Report(const char* name, double bytes, double ms, double copy_gbs) {
  const double gbs = bytes / (ms * 1e6);
  std::printf("%-44s %9.3f ms %9.1f GB/s  %5.1f%% of D2D copy\n", name, ms, gbs,
              100.0 * gbs / copy_gbs);
}

absl::Status Run() {
  int device = 0;
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  cudaDeviceProp prop;
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  std::printf("device: %s (sm_%d%d, %.0f GiB)\n", prop.name, prop.major, prop.minor,
              prop.totalGlobalMem / 1073741824.0);

  // Floor: device-to-device copy (bytes read + written).
  const size_t copy_bytes = size_t{512} << 20;
  PAGEDKV_ASSIGN_OR_RETURN(auto copy_src, CudaArray<char>::Create(copy_bytes));
  PAGEDKV_ASSIGN_OR_RETURN(auto copy_dst, CudaArray<char>::Create(copy_bytes));
  PAGEDKV_ASSIGN_OR_RETURN(
      double copy_ms, TimeMs([&]() -> absl::Status {
        PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(copy_dst.data(), copy_src.data(), copy_bytes,
                                                     cudaMemcpyDeviceToDevice));
        return absl::OkStatus();
      }));
  const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e6);
  std::printf("%-44s %9.3f ms %9.1f GB/s\n", "D2D copy 512 MiB (read+write)", copy_ms, copy_gbs);

  // Llama-3-8B-like layer: 8 KV heads x 128, bf16 pages of 16 tokens.
  const int32_t kv_heads = 8, head_dim = 128, block_size = 16, q_heads = 32;
  const int64_t tokens = 32768;
  const int32_t num_blocks = static_cast<int32_t>(2 * tokens / block_size);
  RopeConfig rope_config;
  rope_config.head_dim = head_dim;
  rope_config.base = 500000.0;
  PAGEDKV_ASSIGN_OR_RETURN(RopeTable table, RopeTable::Create(rope_config, 65536));
  PAGEDKV_ASSIGN_OR_RETURN(DeviceRopeTable dtable, DeviceRopeTable::Upload(table));
  PagedKvLayout layout{.dtype = DType::kBF16,
                       .num_blocks = num_blocks,
                       .block_size = block_size,
                       .num_kv_heads = kv_heads,
                       .head_dim = head_dim};
  PAGEDKV_ASSIGN_OR_RETURN(auto k_pages, Filled<uint16_t>(layout.NumElements(), 0x3c00));
  PAGEDKV_ASSIGN_OR_RETURN(auto v_pages, Filled<uint16_t>(layout.NumElements(), 0x3c00));
  layout.k = k_pages.data();
  layout.v = v_pages.data();
  const int64_t row = int64_t{kv_heads} * head_dim;
  PAGEDKV_ASSIGN_OR_RETURN(auto k_in, Filled<float>(tokens * row, 0.5f));
  PAGEDKV_ASSIGN_OR_RETURN(auto v_in, Filled<float>(tokens * row, 0.25f));
  std::vector<int32_t> positions(tokens);
  std::iota(positions.begin(), positions.end(), 0);
  std::vector<int64_t> slots(tokens);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937(1));
  PAGEDKV_ASSIGN_OR_RETURN(auto dpos, CudaArray<int32_t>::FromHost(positions));
  PAGEDKV_ASSIGN_OR_RETURN(auto dslots, CudaArray<int64_t>::FromHost(slots));

  // KV write: read fp32 K and V, rotate K, write bf16 K and V.
  ReshapeAndCacheArgs write{.k = k_in.data(),
                            .v = v_in.data(),
                            .positions = dpos.data(),
                            .slot_mapping = dslots.data(),
                            .num_tokens = tokens,
                            .rope = dtable.View(),
                            .cache = layout};
  PAGEDKV_ASSIGN_OR_RETURN(double write_ms,
                           TimeMs([&] { return ReshapeAndCache(write, nullptr, kTrusted); }));
  Report("KV write 32768 tok, 8x128, f32 -> bf16", 2.0 * tokens * row * (4 + 2), write_ms,
         copy_gbs);
  PAGEDKV_ASSIGN_OR_RETURN(double write_checked_ms, TimeMs([&] { return ReshapeAndCache(write); }));
  Report("  same, validated", 2.0 * tokens * row * (4 + 2), write_checked_ms, copy_gbs);
  ReshapeAndCacheArgs decode_write = write;
  decode_write.num_tokens = 64;
  PAGEDKV_ASSIGN_OR_RETURN(
      double small_ms, TimeMs([&] { return ReshapeAndCache(decode_write, nullptr, kTrusted); }));
  PAGEDKV_ASSIGN_OR_RETURN(double small_checked_ms,
                           TimeMs([&] { return ReshapeAndCache(decode_write); }));
  PAGEDKV_ASSIGN_OR_RETURN(double small_deferred_ms, TimeMs([&] {
                             return ReshapeAndCache(decode_write, nullptr, kDeferredCheck);
                           }));
  PAGEDKV_RETURN_IF_ERROR(ReadAndClearDeferredCheck(static_cast<Workspace*>(nullptr), nullptr));
  std::printf("%-44s %9.3f ms trusted, %9.3f ms validated (check + sync cost %.1f us)\n",
              "KV write 64 tok (decode step)", small_ms, small_checked_ms,
              1000.0 * (small_checked_ms - small_ms));
  std::printf("%-44s %9.3f ms deferred (check cost %.1f us)\n", "", small_deferred_ms,
              1000.0 * (small_deferred_ms - small_ms));

  // Re-rotation out of place: read and write bf16 K (rotated) and V (copied).
  std::vector<int64_t> src(tokens), dst(tokens);
  std::vector<int32_t> new_pos(tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    src[t] = t;
    dst[t] = tokens + t;
    new_pos[t] = static_cast<int32_t>(t + 1000);
  }
  PAGEDKV_ASSIGN_OR_RETURN(auto dsrc, CudaArray<int64_t>::FromHost(src));
  PAGEDKV_ASSIGN_OR_RETURN(auto ddst, CudaArray<int64_t>::FromHost(dst));
  PAGEDKV_ASSIGN_OR_RETURN(auto dnew, CudaArray<int32_t>::FromHost(new_pos));
  ReRotateArgs shift{.src_slots = dsrc.data(),
                     .dst_slots = ddst.data(),
                     .old_positions = dpos.data(),
                     .new_positions = dnew.data(),
                     .num_tokens = tokens,
                     .rope = dtable.View(),
                     .cache = layout};
  PAGEDKV_ASSIGN_OR_RETURN(double shift_ms,
                           TimeMs([&] { return ReRotate(shift, nullptr, kTrusted); }));
  Report("re-rotation 32768 tok, bf16, out of place", 2.0 * 2.0 * tokens * row * 2, shift_ms,
         copy_gbs);
  ReRotateArgs in_place = shift;
  in_place.dst_slots = dsrc.data();
  PAGEDKV_ASSIGN_OR_RETURN(double inplace_ms,
                           TimeMs([&] { return ReRotate(in_place, nullptr, kTrusted); }));
  Report("re-rotation 32768 tok, bf16, in place (K only)", 2.0 * tokens * row * 2, inplace_ms,
         copy_gbs);

  // Embedding gather: 16384 tokens of a 128256 x 4096 fp32 table.
  const int64_t vocab = 128256, d_model = 4096, gather_tokens = 16384;
  PAGEDKV_ASSIGN_OR_RETURN(auto emb, Filled<float>(vocab * d_model, 0.1f));
  std::vector<int32_t> ids(gather_tokens);
  std::mt19937 rng(2);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % vocab);
  PAGEDKV_ASSIGN_OR_RETURN(auto dids, CudaArray<int32_t>::FromHost(ids));
  PAGEDKV_ASSIGN_OR_RETURN(auto gathered, CudaArray<float>::Create(gather_tokens * d_model));
  EmbeddingGatherArgs gather{.table = emb.data(),
                             .token_ids = dids.data(),
                             .out = gathered.data(),
                             .num_tokens = gather_tokens,
                             .vocab_size = vocab,
                             .dim = d_model};
  PAGEDKV_ASSIGN_OR_RETURN(double gather_ms,
                           TimeMs([&] { return EmbeddingGather(gather, nullptr, kTrusted); }));
  Report("embedding gather 16384 x 4096 f32", 2.0 * gather_tokens * d_model * 4, gather_ms,
         copy_gbs);

  // Paged decode attention: one query token per sequence, bf16 KV; few long sequences take the
  // split-K path.
  struct DecodeShape {
    int32_t seqs, kv_len;
  };
  for (const DecodeShape shape :
       {DecodeShape{32, 1024}, DecodeShape{32, 4096}, DecodeShape{32, 16384}, DecodeShape{4, 32768},
        DecodeShape{1, 131072}}) {
    const int32_t seqs = shape.seqs, kv_len = shape.kv_len;
    const int32_t blocks_per_seq = kv_len / block_size;
    PagedKvLayout attn_layout = layout;
    attn_layout.num_blocks = seqs * blocks_per_seq;
    PAGEDKV_ASSIGN_OR_RETURN(auto ak, Filled<uint16_t>(attn_layout.NumElements(), 0x3c00));
    PAGEDKV_ASSIGN_OR_RETURN(auto av, Filled<uint16_t>(attn_layout.NumElements(), 0x3c00));
    attn_layout.k = ak.data();
    attn_layout.v = av.data();
    std::vector<int32_t> tables(int64_t{seqs} * blocks_per_seq);
    std::iota(tables.begin(), tables.end(), 0);
    std::shuffle(tables.begin(), tables.end(), std::mt19937(3));
    std::vector<int32_t> qsl(seqs + 1), lens(seqs, kv_len), qpos(seqs, kv_len - 1);
    std::iota(qsl.begin(), qsl.end(), 0);
    PAGEDKV_ASSIGN_OR_RETURN(auto dtables, CudaArray<int32_t>::FromHost(tables));
    PAGEDKV_ASSIGN_OR_RETURN(auto dqsl, CudaArray<int32_t>::FromHost(qsl));
    PAGEDKV_ASSIGN_OR_RETURN(auto dlens, CudaArray<int32_t>::FromHost(lens));
    PAGEDKV_ASSIGN_OR_RETURN(auto dqpos, CudaArray<int32_t>::FromHost(qpos));
    PAGEDKV_ASSIGN_OR_RETURN(auto dq, Filled<float>(int64_t{seqs} * q_heads * head_dim, 0.01f));
    PAGEDKV_ASSIGN_OR_RETURN(auto dout, CudaArray<float>::Create(dq.size()));
    PagedAttentionArgs attn{.q = dq.data(),
                            .out = dout.data(),
                            .positions = dqpos.data(),
                            .query_start_loc = dqsl.data(),
                            .kv_lens = dlens.data(),
                            .block_tables = dtables.data(),
                            .num_tokens = seqs,
                            .num_seqs = seqs,
                            .num_q_heads = q_heads,
                            .max_blocks_per_seq = blocks_per_seq,
                            .cache = attn_layout};
    const double kv_bytes = 2.0 * seqs * kv_len * row * 2;
    PAGEDKV_ASSIGN_OR_RETURN(double attn_ms,
                             TimeMs([&] { return PagedAttention(attn, nullptr, kTrusted); }));
    char name[96];
    std::snprintf(name, sizeof(name), "paged decode attention %d seq x %d, bf16", seqs, kv_len);
    Report(name, kv_bytes, attn_ms, copy_gbs);
    PAGEDKV_ASSIGN_OR_RETURN(double checked_ms, TimeMs([&] { return PagedAttention(attn); }));
    Report("  same, validated", kv_bytes, checked_ms, copy_gbs);
    PAGEDKV_ASSIGN_OR_RETURN(double deferred_ms,
                             TimeMs([&] { return PagedAttention(attn, nullptr, kDeferredCheck); }));
    Report("  same, deferred check", kv_bytes, deferred_ms, copy_gbs);
  }

  // LM head: [rows, 4096] x [128256, 4096]^T in fp32.
  PAGEDKV_ASSIGN_OR_RETURN(CublasHandle cublas, CublasHandle::Create());
  for (int64_t rows : {1, 32, 256}) {
    PAGEDKV_ASSIGN_OR_RETURN(auto hidden, Filled<float>(rows * d_model, 0.01f));
    PAGEDKV_ASSIGN_OR_RETURN(auto logits, CudaArray<float>::Create(rows * vocab));
    LmHeadArgs head{.hidden = hidden.data(),
                    .weight = emb.data(),
                    .logits = logits.data(),
                    .num_rows = rows,
                    .d_model = d_model,
                    .vocab_size = vocab};
    PAGEDKV_ASSIGN_OR_RETURN(double ours_ms, TimeMs([&] { return LmHead(head, cublas.get()); }));
    const float alpha = 1.0f, beta = 0.0f;
    const int m = static_cast<int>(rows), n = static_cast<int>(vocab),
              k = static_cast<int>(d_model);
    PAGEDKV_ASSIGN_OR_RETURN(
        double tf32_ms, TimeMs([&]() -> absl::Status {
          PAGEDKV_CUBLAS_RETURN_IF_ERROR(
              cublasGemmEx(cublas.get(), CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, emb.data(),
                           CUDA_R_32F, k, hidden.data(), CUDA_R_32F, k, &beta, logits.data(),
                           CUDA_R_32F, n, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
          return absl::OkStatus();
        }));
    const double flops = 2.0 * rows * vocab * d_model;
    const double weight_gbs = vocab * d_model * 4.0 / (ours_ms * 1e6);
    std::printf(
        "LM head %4lld x 4096 x 128256 f32: %8.3f ms %7.2f TFLOP/s (%6.1f GB/s of W, %5.1f%% of "
        "copy) | cuBLAS TF32 %7.2f TFLOP/s\n",
        static_cast<long long>(rows), ours_ms, flops / (ours_ms * 1e9), weight_gbs,
        100.0 * weight_gbs / copy_gbs, flops / (tf32_ms * 1e9));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace pagedkv::cuda

int main() {
  if (pagedkv::cuda::VisibleDeviceCount() == 0) {
    std::printf("cuda_kernels_bench: no CUDA device visible; this benchmark needs a GPU.\n");
    return 0;
  }
  const absl::Status status = pagedkv::cuda::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "cuda_kernels_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
