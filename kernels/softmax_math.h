// Copyright 2026 The pagedkv Authors.
//
// Online (streaming) softmax in fp32, host and device. Keeps a running max `m` and normaliser `l`
// so attention over a sequence needs one pass:
//   OnlineSoftmax st;                        // m = -inf, l = 0
//   for each key j:  float rescale, p;
//                    st.Update(score_j, &rescale, &p);
//                    acc = acc * rescale + p * v_j;
//   out = acc / st.l;
// Two partial states over disjoint key sets combine with Merge; MergeAttentionState folds a
// partial (state, unnormalised accumulator) into a running one (split-K attention: each partition
// of the keys yields a partial, the partials are merged in any order):
//   OnlineSoftmax total;  float acc[hd] = {};
//   for each partition p:  MergeAttentionState(&total, acc, part_state[p], part_acc[p], hd);
//   out = acc * total.InverseSum();
#ifndef PAGEDKV_KERNELS_SOFTMAX_MATH_H_
#define PAGEDKV_KERNELS_SOFTMAX_MATH_H_

#include <math.h>

#include "pagedkv/export.h"
#include "pagedkv/hd.h"

namespace pagedkv {

struct PAGEDKV_EXPORT OnlineSoftmax {
  float m = -INFINITY;  // running max of scores seen
  float l = 0.0f;       // running sum of exp(score - m)

  // Adds one score; `rescale` multiplies the existing accumulator, `p` weights the new value.
  PAGEDKV_HD void Update(float score, float* rescale, float* p) {
    const float new_m = m > score ? m : score;
    *rescale = expf(m - new_m);  // exp(-inf) = 0 on the first call
    *p = expf(score - new_m);
    l = l * *rescale + *p;
    m = new_m;
  }

  // Folds in `other` (over a disjoint key set). `self_scale` multiplies this side's accumulator,
  // `other_scale` the other side's, before they are added.
  PAGEDKV_HD void Merge(const OnlineSoftmax& other, float* self_scale, float* other_scale) {
    const float new_m = m > other.m ? m : other.m;
    if (new_m == -INFINITY) {
      *self_scale = 0.0f;
      *other_scale = 0.0f;
      return;
    }
    *self_scale = expf(m - new_m);
    *other_scale = expf(other.m - new_m);
    l = l * *self_scale + other.l * *other_scale;
    m = new_m;
  }

  // 1 / l, or 0 when no key was seen.
  PAGEDKV_HD float InverseSum() const { return l > 0.0f ? 1.0f / l : 0.0f; }

  // True once a key was seen (a partition with no keys stays empty).
  PAGEDKV_HD bool Empty() const { return !(l > 0.0f); }
};

// Folds the partial `part` (softmax state over a disjoint key set, with its unnormalised
// accumulator part_acc[0, n)) into (*total, acc[0, n)). An empty part is skipped without reading
// part_acc, so a partition that saw no key need not write its accumulator. The CPU split-K test
// and the CUDA merge kernel (n = 1 per thread) call this same function.
PAGEDKV_HD void MergeAttentionState(OnlineSoftmax* total, float* acc, const OnlineSoftmax& part,
                                    const float* part_acc, int n) {
  if (part.Empty()) return;
  float self_scale, part_scale;
  total->Merge(part, &self_scale, &part_scale);
  for (int i = 0; i < n; ++i) acc[i] = acc[i] * self_scale + part_acc[i] * part_scale;
}

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_SOFTMAX_MATH_H_
