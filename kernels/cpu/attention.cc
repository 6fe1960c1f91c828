// Copyright 2026 The pagedkv Authors.
//
// CPU paged attention: for each query token and KV head, one pass over the sequence's cached keys
// through its block table, updating an online softmax for every query head of the GQA group.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/attention_split.h"
#include "kernels/content_checks.h"
#include "kernels/op_validate.h"
#include "kernels/softmax_math.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cpu {
namespace {

// Dot product with 8 independent partial sums (hd is even; vectorisable without -ffast-math).
float Dot(const float* a, const float* b, int32_t n) {
  float partial[8] = {};
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) partial[l] += a[i + l] * b[i + l];
  }
  float sum = ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
              ((partial[4] + partial[5]) + (partial[6] + partial[7]));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

absl::Status PagedAttention(const PagedAttentionArgs& args) {
  PAGEDKV_RETURN_IF_ERROR(ValidatePagedAttention(args));
  PAGEDKV_RETURN_IF_ERROR(CheckPagedAttentionContents(args));
  const PagedKvLayout cache = args.cache.Resolved();
  const int32_t hd = cache.head_dim;
  const int32_t group = args.num_q_heads / cache.num_kv_heads;
  const float scale = args.scale > 0.0f ? args.scale : 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> acc(static_cast<size_t>(group) * hd);
  std::vector<OnlineSoftmax> softmax(group);
  float k_row[kMaxHeadDim];
  float v_row[kMaxHeadDim];
  for (int32_t s = 0; s < args.num_seqs; ++s) {
    const int32_t* table = args.block_tables + int64_t{s} * args.max_blocks_per_seq;
    const int32_t kv_len = args.kv_lens[s];
    for (int64_t t = args.query_start_loc[s]; t < args.query_start_loc[s + 1]; ++t) {
      const int64_t last = AttentionLastKey(args.causal, args.positions[t], kv_len);
      for (int32_t kvh = 0; kvh < cache.num_kv_heads; ++kvh) {
        const float* q = args.q + (t * args.num_q_heads + int64_t{kvh} * group) * hd;
        std::fill(acc.begin(), acc.end(), 0.0f);
        std::fill(softmax.begin(), softmax.end(), OnlineSoftmax{});
        for (int64_t j = 0; j <= last; ++j) {
          const int64_t base = cache.PositionOffset(table, j) + kvh * cache.head_stride;
          LoadRow(cache.k, cache.dtype, base, hd, k_row);
          LoadRow(cache.v, cache.dtype, base, hd, v_row);
          for (int32_t g = 0; g < group; ++g) {
            const float dot = Dot(q + int64_t{g} * hd, k_row, hd);
            float rescale, p;
            softmax[g].Update(dot * scale, &rescale, &p);
            float* ag = acc.data() + int64_t{g} * hd;
            for (int32_t d = 0; d < hd; ++d) ag[d] = ag[d] * rescale + p * v_row[d];
          }
        }
        for (int32_t g = 0; g < group; ++g) {
          float* out = args.out + (t * args.num_q_heads + int64_t{kvh} * group + g) * hd;
          const float inv = softmax[g].InverseSum();
          for (int32_t d = 0; d < hd; ++d) out[d] = acc[int64_t{g} * hd + d] * inv;
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace pagedkv::cpu
