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

// Prints the device's name, compute capability and memory.
absl::Status PrintDevice() {
  int device = 0;
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  cudaDeviceProp prop;
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  std::printf("device: %s (sm_%d%d, %.0f GiB)\n", prop.name, prop.major, prop.minor,
              prop.totalGlobalMem / 1073741824.0);
  return absl::OkStatus();
}

// The floor: a device-to-device copy (bytes read + written). Returns its GB/s.
absl::StatusOr<double> BenchCopy() {
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
  return copy_gbs;
}

// Llama-3-8B-like layer: 8 KV heads x 128, bf16 pages of 16 tokens, 32 query heads.
constexpr int32_t kKvHeads = 8, kHeadDim = 128, kBlockSize = 16, kQHeads = 32;
constexpr int64_t kTokens = 32768;
constexpr int64_t kRow = int64_t{kKvHeads} * kHeadDim;
// Llama-3 vocabulary and model width (embedding table, LM head).
constexpr int64_t kVocab = 128256, kDModel = 4096;

// One layer's pages (room for 2 x kTokens), its RoPE table, and kTokens of fp32 K and V written
// to shuffled slots at positions 0, 1, ...
struct KvLayer {
  DeviceRopeTable rope;
  PagedKvLayout layout;
  CudaArray<uint16_t> k_pages, v_pages;
  CudaArray<float> k_in, v_in;
  CudaArray<int32_t> positions;
  CudaArray<int64_t> slots;
};

absl::StatusOr<KvLayer> MakeKvLayer() {
  KvLayer l;
  RopeConfig rope_config;
  rope_config.head_dim = kHeadDim;
  rope_config.base = 500000.0;
  PAGEDKV_ASSIGN_OR_RETURN(RopeTable table, RopeTable::Create(rope_config, 65536));
  PAGEDKV_ASSIGN_OR_RETURN(l.rope, DeviceRopeTable::Upload(table));
  l.layout = {.dtype = DType::kBF16,
              .num_blocks = static_cast<int32_t>(2 * kTokens / kBlockSize),
              .block_size = kBlockSize,
              .num_kv_heads = kKvHeads,
              .head_dim = kHeadDim};
  PAGEDKV_ASSIGN_OR_RETURN(l.k_pages, Filled<uint16_t>(l.layout.NumElements(), 0x3c00));
  PAGEDKV_ASSIGN_OR_RETURN(l.v_pages, Filled<uint16_t>(l.layout.NumElements(), 0x3c00));
  l.layout.k = l.k_pages.data();
  l.layout.v = l.v_pages.data();
  PAGEDKV_ASSIGN_OR_RETURN(l.k_in, Filled<float>(kTokens * kRow, 0.5f));
  PAGEDKV_ASSIGN_OR_RETURN(l.v_in, Filled<float>(kTokens * kRow, 0.25f));
  std::vector<int32_t> positions(kTokens);
  std::iota(positions.begin(), positions.end(), 0);
  std::vector<int64_t> slots(kTokens);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937(1));
  PAGEDKV_ASSIGN_OR_RETURN(l.positions, CudaArray<int32_t>::FromHost(positions));
  PAGEDKV_ASSIGN_OR_RETURN(l.slots, CudaArray<int64_t>::FromHost(slots));
  return l;
}

// KV write: read fp32 K and V, rotate K, write bf16 K and V; then a decode-size write, trusted,
// validated and deferred.
absl::Status BenchKvWrite(const KvLayer& l, double copy_gbs) {
  ReshapeAndCacheArgs write{.k = l.k_in.data(),
                            .v = l.v_in.data(),
                            .positions = l.positions.data(),
                            .slot_mapping = l.slots.data(),
                            .num_tokens = kTokens,
                            .rope = l.rope.View(),
                            .cache = l.layout};
  PAGEDKV_ASSIGN_OR_RETURN(double write_ms,
                           TimeMs([&] { return ReshapeAndCache(write, nullptr, kTrusted); }));
  Report("KV write 32768 tok, 8x128, f32 -> bf16", 2.0 * kTokens * kRow * (4 + 2), write_ms,
         copy_gbs);
  PAGEDKV_ASSIGN_OR_RETURN(double write_checked_ms, TimeMs([&] { return ReshapeAndCache(write); }));
  Report("  same, validated", 2.0 * kTokens * kRow * (4 + 2), write_checked_ms, copy_gbs);
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
  return absl::OkStatus();
}

// Re-rotation of every written token: out of place (bf16 K rotated and V copied, read and
// written), then in place (K only).
absl::Status BenchReRotate(const KvLayer& l, double copy_gbs) {
  std::vector<int64_t> src(kTokens), dst(kTokens);
  std::vector<int32_t> new_pos(kTokens);
  for (int64_t t = 0; t < kTokens; ++t) {
    src[t] = t;
    dst[t] = kTokens + t;
    new_pos[t] = static_cast<int32_t>(t + 1000);
  }
  PAGEDKV_ASSIGN_OR_RETURN(auto dsrc, CudaArray<int64_t>::FromHost(src));
  PAGEDKV_ASSIGN_OR_RETURN(auto ddst, CudaArray<int64_t>::FromHost(dst));
  PAGEDKV_ASSIGN_OR_RETURN(auto dnew, CudaArray<int32_t>::FromHost(new_pos));
  ReRotateArgs shift{.src_slots = dsrc.data(),
                     .dst_slots = ddst.data(),
                     .old_positions = l.positions.data(),
                     .new_positions = dnew.data(),
                     .num_tokens = kTokens,
                     .rope = l.rope.View(),
                     .cache = l.layout};
  PAGEDKV_ASSIGN_OR_RETURN(double shift_ms,
                           TimeMs([&] { return ReRotate(shift, nullptr, kTrusted); }));
  Report("re-rotation 32768 tok, bf16, out of place", 2.0 * 2.0 * kTokens * kRow * 2, shift_ms,
         copy_gbs);
  ReRotateArgs in_place = shift;
  in_place.dst_slots = dsrc.data();
  PAGEDKV_ASSIGN_OR_RETURN(double inplace_ms,
                           TimeMs([&] { return ReRotate(in_place, nullptr, kTrusted); }));
  Report("re-rotation 32768 tok, bf16, in place (K only)", 2.0 * kTokens * kRow * 2, inplace_ms,
         copy_gbs);
  return absl::OkStatus();
}

// Embedding gather: 16384 tokens of the [kVocab, kDModel] fp32 table `emb`.
absl::Status BenchEmbeddingGather(const CudaArray<float>& emb, double copy_gbs) {
  const int64_t gather_tokens = 16384;
  std::vector<int32_t> ids(gather_tokens);
  std::mt19937 rng(2);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % kVocab);
  PAGEDKV_ASSIGN_OR_RETURN(auto dids, CudaArray<int32_t>::FromHost(ids));
  PAGEDKV_ASSIGN_OR_RETURN(auto gathered, CudaArray<float>::Create(gather_tokens * kDModel));
  EmbeddingGatherArgs gather{.table = emb.data(),
                             .token_ids = dids.data(),
                             .out = gathered.data(),
                             .num_tokens = gather_tokens,
                             .vocab_size = kVocab,
                             .dim = kDModel};
  PAGEDKV_ASSIGN_OR_RETURN(double gather_ms,
                           TimeMs([&] { return EmbeddingGather(gather, nullptr, kTrusted); }));
  Report("embedding gather 16384 x 4096 f32", 2.0 * gather_tokens * kDModel * 4, gather_ms,
         copy_gbs);
  return absl::OkStatus();
}

// Paged decode attention: one query token per sequence over bf16 pages of `l`'s shape, trusted,
// validated and deferred; few long sequences take the split-K path.
struct DecodeShape {
  int32_t seqs, kv_len;
};

absl::Status BenchDecodeAttention(const KvLayer& l, DecodeShape shape, double copy_gbs) {
  const int32_t seqs = shape.seqs, kv_len = shape.kv_len;
  const int32_t blocks_per_seq = kv_len / kBlockSize;
  PagedKvLayout attn_layout = l.layout;
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
  PAGEDKV_ASSIGN_OR_RETURN(auto dq, Filled<float>(int64_t{seqs} * kQHeads * kHeadDim, 0.01f));
  PAGEDKV_ASSIGN_OR_RETURN(auto dout, CudaArray<float>::Create(dq.size()));
  PagedAttentionArgs attn{.q = dq.data(),
                          .out = dout.data(),
                          .positions = dqpos.data(),
                          .query_start_loc = dqsl.data(),
                          .kv_lens = dlens.data(),
                          .block_tables = dtables.data(),
                          .num_tokens = seqs,
                          .num_seqs = seqs,
                          .num_q_heads = kQHeads,
                          .max_blocks_per_seq = blocks_per_seq,
                          .cache = attn_layout};
  const double kv_bytes = 2.0 * seqs * kv_len * kRow * 2;
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
  return absl::OkStatus();
}

// LM head: [rows, kDModel] x [kVocab, kDModel]^T in fp32 over the table `emb`, next to cuBLAS
// with TF32.
absl::Status BenchLmHead(const CudaArray<float>& emb, int64_t rows, const CublasHandle& cublas,
                         double copy_gbs) {
  PAGEDKV_ASSIGN_OR_RETURN(auto hidden, Filled<float>(rows * kDModel, 0.01f));
  PAGEDKV_ASSIGN_OR_RETURN(auto logits, CudaArray<float>::Create(rows * kVocab));
  LmHeadArgs head{.hidden = hidden.data(),
                  .weight = emb.data(),
                  .logits = logits.data(),
                  .num_rows = rows,
                  .d_model = kDModel,
                  .vocab_size = kVocab};
  PAGEDKV_ASSIGN_OR_RETURN(double ours_ms, TimeMs([&] { return LmHead(head, cublas.get()); }));
  const float alpha = 1.0f, beta = 0.0f;
  const int m = static_cast<int>(rows), n = static_cast<int>(kVocab), k = static_cast<int>(kDModel);
  PAGEDKV_ASSIGN_OR_RETURN(
      double tf32_ms, TimeMs([&]() -> absl::Status {
        PAGEDKV_CUBLAS_RETURN_IF_ERROR(
            cublasGemmEx(cublas.get(), CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, emb.data(),
                         CUDA_R_32F, k, hidden.data(), CUDA_R_32F, k, &beta, logits.data(),
                         CUDA_R_32F, n, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
        return absl::OkStatus();
      }));
  const double flops = 2.0 * rows * kVocab * kDModel;
  const double weight_gbs = kVocab * kDModel * 4.0 / (ours_ms * 1e6);
  std::printf(
      "LM head %4lld x 4096 x 128256 f32: %8.3f ms %7.2f TFLOP/s (%6.1f GB/s of W, %5.1f%% of "
      "copy) | cuBLAS TF32 %7.2f TFLOP/s\n",
      static_cast<long long>(rows), ours_ms, flops / (ours_ms * 1e9), weight_gbs,
      100.0 * weight_gbs / copy_gbs, flops / (tf32_ms * 1e9));
  return absl::OkStatus();
}

absl::Status Run() {
  PAGEDKV_RETURN_IF_ERROR(PrintDevice());
  PAGEDKV_ASSIGN_OR_RETURN(const double copy_gbs, BenchCopy());
  PAGEDKV_ASSIGN_OR_RETURN(const KvLayer layer, MakeKvLayer());
  PAGEDKV_RETURN_IF_ERROR(BenchKvWrite(layer, copy_gbs));
  PAGEDKV_RETURN_IF_ERROR(BenchReRotate(layer, copy_gbs));
  PAGEDKV_ASSIGN_OR_RETURN(auto emb, Filled<float>(kVocab * kDModel, 0.1f));
  PAGEDKV_RETURN_IF_ERROR(BenchEmbeddingGather(emb, copy_gbs));
  for (const DecodeShape shape :
       {DecodeShape{32, 1024}, DecodeShape{32, 4096}, DecodeShape{32, 16384}, DecodeShape{4, 32768},
        DecodeShape{1, 131072}}) {
    PAGEDKV_RETURN_IF_ERROR(BenchDecodeAttention(layer, shape, copy_gbs));
  }
  PAGEDKV_ASSIGN_OR_RETURN(CublasHandle cublas, CublasHandle::Create());
  for (int64_t rows : {1, 32, 256}) {
    PAGEDKV_RETURN_IF_ERROR(BenchLmHead(emb, rows, cublas, copy_gbs));
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
