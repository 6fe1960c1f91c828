// Copyright 2026 The pagedkv Authors.
//
// Argument structs of the compute ops, shared by the CPU reference (pagedkv::cpu, host pointers)
// and the CUDA backend (pagedkv::cuda, device pointers). Activations and weights are fp32
// row-major; K/V pages are fp32, fp16 or bf16 (PagedKvLayout::dtype). Shapes are written as
// [dim0, dim1, ...]; a "row stride" of 0 means contiguous rows.
//
// Example (one layer's attention input side, CPU):
//   pagedkv::ReshapeAndCacheArgs w{.q = q, .k = k, .v = v, .positions = pos,
//                                  .slot_mapping = slots, .num_tokens = n, .num_q_heads = 32,
//                                  .rope = table.View(), .cache = layer_cache};
//   PAGEDKV_RETURN_IF_ERROR(pagedkv::cpu::ReshapeAndCache(w));
#ifndef PAGEDKV_KERNELS_OP_ARGS_H_
#define PAGEDKV_KERNELS_OP_ARGS_H_

#include <cstdint>

#include "pagedkv/dtype.h"
#include "pagedkv/export.h"
#include "pagedkv/kernels/activation_type.h"
#include "pagedkv/kernels/paged_kv_layout.h"
#include "pagedkv/kernels/quant_blocks.h"
#include "pagedkv/kernels/rope_table.h"

namespace pagedkv {

// y = x W^T (+ y when accumulate). The model's projections and the LM head.
struct PAGEDKV_EXPORT LinearArgs {
  const float* x = nullptr;  // [m, k]
  const float* w = nullptr;  // [n, k] (PyTorch nn.Linear weight layout)
  float* y = nullptr;        // [m, n]; must not alias x or w
  int64_t m = 0;             // rows of x (tokens)
  int64_t n = 0;             // output features
  int64_t k = 0;             // input features
  bool accumulate = false;   // true: y += x W^T (fused residual add)
};

// y = x W^T (+ y when accumulate) with W [n, k] kept in its file's block format (w_type, see
// pagedkv/kernels/quant_blocks.h): weights are decoded on the fly, products summed in fp32.
struct PAGEDKV_EXPORT QuantLinearArgs {
  const float* x = nullptr;               // [m, k]
  const void* w = nullptr;                // n rows of WeightRowBytes(w_type, k) bytes
  WeightType w_type = WeightType::kQ4_1;  // not kF32; k a multiple of QuantBlockValuesOf
  float* y = nullptr;                     // [m, n]; must not alias x or w
  int64_t m = 0;                          // rows of x (tokens)
  int64_t n = 0;                          // output features
  int64_t k = 0;                          // input features
  bool accumulate = false;                // true: y += x W^T (fused residual add)
  ActivationType activations = ActivationType::kF32;  // kInt8: see ActivationType
};

// out[t] = table[token_ids[t]].
struct PAGEDKV_EXPORT EmbeddingGatherArgs {
  const float* table = nullptr;        // [vocab_size, dim]
  const int32_t* token_ids = nullptr;  // [num_tokens], each in [0, vocab_size)
  float* out = nullptr;                // [num_tokens, dim]
  int64_t num_tokens = 0;
  int64_t vocab_size = 0;
  int64_t dim = 0;
};

// out[t] = fp32(table[token_ids[t]]) with the table in block format (QuantLinearArgs' rows).
struct PAGEDKV_EXPORT QuantEmbeddingGatherArgs {
  const void* table = nullptr;                // vocab_size rows of WeightRowBytes(type, dim)
  WeightType table_type = WeightType::kQ8_0;  // not kF32; dim a multiple of QuantBlockValuesOf
  const int32_t* token_ids = nullptr;         // [num_tokens], each in [0, vocab_size)
  float* out = nullptr;                       // [num_tokens, dim]
  int64_t num_tokens = 0;
  int64_t vocab_size = 0;
  int64_t dim = 0;
};

// out[i] = fp32(src[rows[i]]): a batched row gather from a table of fp32, fp16 or bf16 rows, e.g.
// the K or V of a list of slots of a layer's pages (row = slot, width = num_kv_heads * head_dim),
// or the kept rows of the activations. One launch for the whole list.
struct PAGEDKV_EXPORT GatherRowsArgs {
  const void* src = nullptr;      // [num_src_rows, width] of src_dtype, row stride src_stride
  const int64_t* rows = nullptr;  // [num_rows], each in [0, num_src_rows)
  float* out = nullptr;           // [num_rows, width] contiguous; must not overlap src
  int64_t num_rows = 0;
  int64_t num_src_rows = 0;
  int64_t width = 0;              // elements gathered per row; > 0
  int64_t src_stride = 0;         // elements between rows of src (0: width); >= width otherwise
  DType src_dtype = DType::kF32;  // element type of src; out is always fp32
};

// out = x / sqrt(mean(x^2) + eps) * weight, per row.
struct PAGEDKV_EXPORT RmsNormArgs {
  const float* x = nullptr;       // [num_rows, dim]
  const float* weight = nullptr;  // [dim]
  float* out = nullptr;           // [num_rows, dim]; may equal x
  int64_t num_rows = 0;
  int64_t dim = 0;
  float eps = 1e-5f;  // added to the mean square
};

// out = silu(gate) * up, silu(g) = g / (1 + exp(-g)).
struct PAGEDKV_EXPORT SwiGluArgs {
  const float* gate = nullptr;  // [num_rows, dim] (row stride gate_stride)
  const float* up = nullptr;    // [num_rows, dim] (row stride up_stride)
  float* out = nullptr;         // [num_rows, dim] contiguous; may equal gate or up when contiguous
  int64_t num_rows = 0;
  int64_t dim = 0;
  int64_t gate_stride = 0;  // elements between rows of gate (0: dim)
  int64_t up_stride = 0;    // elements between rows of up (0: dim)
};

// logits = hidden W^T for a separate LM head or the tied embedding table (same [vocab, d_model]
// shape either way).
struct PAGEDKV_EXPORT LmHeadArgs {
  const float* hidden = nullptr;  // [num_rows, d_model]
  const float* weight = nullptr;  // [vocab_size, d_model]: lm_head.weight or the embedding table
  float* logits = nullptr;        // [num_rows, vocab_size]
  int64_t num_rows = 0;
  int64_t d_model = 0;
  int64_t vocab_size = 0;
};

// Rotates q and k in place by each token's own position (YaRN attention factor applied).
struct PAGEDKV_EXPORT RopeArgs {
  float* q = nullptr;                  // [num_tokens, num_q_heads, head_dim] (row stride q_stride)
  float* k = nullptr;                  // [num_tokens, num_kv_heads, head_dim] (k_stride); nullable
  const int32_t* positions = nullptr;  // [num_tokens], >= 0
  int64_t num_tokens = 0;
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;  // ignored when k is null
  int64_t q_stride = 0;      // elements between tokens of q (0: num_q_heads * head_dim)
  int64_t k_stride = 0;      // elements between tokens of k (0: num_kv_heads * head_dim)
  RopeTableView rope;        // head_dim comes from here
};

// KV write: rotates q in place (when non-null) and k (into the cache, the input is not modified)
// by each token's position, stores k and v at slot_mapping[t]; tokens with slot -1 are skipped
// (their q is still rotated). Head counts and head_dim of k/v come from `cache`.
struct PAGEDKV_EXPORT ReshapeAndCacheArgs {
  float* q = nullptr;                     // [num_tokens, num_q_heads, head_dim]; nullable
  const float* k = nullptr;               // [num_tokens, num_kv_heads, head_dim]
  const float* v = nullptr;               // [num_tokens, num_kv_heads, head_dim]
  const int32_t* positions = nullptr;     // [num_tokens], >= 0
  const int64_t* slot_mapping = nullptr;  // [num_tokens], in [0, cache.NumSlots()) or -1
  int64_t num_tokens = 0;
  int32_t num_q_heads = 0;  // ignored when q is null
  int64_t q_stride = 0;     // elements between tokens of q (0: contiguous)
  int64_t k_stride = 0;     // elements between tokens of k (0: contiguous)
  int64_t v_stride = 0;     // elements between tokens of v (0: contiguous)
  bool rotate = true;       // false: no RoPE (k written as given, q untouched)
  RopeTableView rope;       // ignored when rotate is false
  PagedKvLayout cache;      // destination layer
  // Nullable; [num_tokens, cache.num_kv_heads, head_dim], contiguous: receives each stored
  // token's key as the cache row rounds it (rotated, before the storage rounding), so a caller
  // can keep the float key of a quantized row (ReRotateArgs::src_keys). Rows of tokens with slot
  // -1 are left as they are.
  float* rotated_k = nullptr;
};

// Shifted reuse: for each token t, cache[dst_slots[t]].k = R(new) R(old)^T cache[src_slots[t]].k
// (in fp32, rounded once to the storage dtype) and cache[dst].v = cache[src].v. In place when
// src == dst. The YaRN attention factor is already in the cached key and is not applied again.
// With src_keys, the key rotated is token t's float key there instead of the cached one (which a
// quantized dtype has rounded): one rounding in all, as when the key was first written.
// REQUIRES: no token's dst slot is another token's src slot (each token reads its own source).
struct PAGEDKV_EXPORT ReRotateArgs {
  const int64_t* src_slots = nullptr;      // [num_tokens], in [0, cache.NumSlots())
  const int64_t* dst_slots = nullptr;      // [num_tokens], in [0, cache.NumSlots())
  const int32_t* old_positions = nullptr;  // [num_tokens], >= 0: position the key was cached at
  const int32_t* new_positions = nullptr;  // [num_tokens], >= 0: position it is reused at
  int64_t num_tokens = 0;
  ReRotateMode mode = ReRotateMode::kCompose;
  RopeTableView rope;   // the table the keys were written with
  PagedKvLayout cache;  // the layer (src and dst in the same pool)
  // Nullable; [num_tokens, cache.num_kv_heads, head_dim], contiguous: token t's float key,
  // rotated for old_positions[t] (ReshapeAndCacheArgs::rotated_k of the pass that computed it).
  // V is still copied from src_slots[t].
  const float* src_keys = nullptr;
};

// Paged attention over a flat batch: sequence s owns query tokens
// [query_start_loc[s], query_start_loc[s + 1]) and kv_lens[s] cached tokens, logical position j at
// slot cache.SlotForPosition(block_tables + s * max_blocks_per_seq, j). A query token at position
// p attends to kv positions [0, min(p, kv_lens[s] - 1)] (causal) or [0, kv_lens[s]) (not causal).
// A sliding window W > 0 (causal only) drops keys more than W - 1 positions back: the query at p
// reads keys j with j <= p and p - j < W, i.e. [max(0, p - W + 1), min(p, kv_lens[s] - 1)]
// (transformers' sliding-window causal mask; Mistral, Qwen2). GQA: query head h reads kv head h /
// (num_q_heads / num_kv_heads). Online softmax in fp32.
struct PAGEDKV_EXPORT PagedAttentionArgs {
  const float* q = nullptr;                  // [num_tokens, num_q_heads, head_dim], rotated
  float* out = nullptr;                      // [num_tokens, num_q_heads, head_dim]
  const int32_t* positions = nullptr;        // [num_tokens]: each query token's position
  const int32_t* query_start_loc = nullptr;  // [num_seqs + 1], from 0 to num_tokens
  const int32_t* kv_lens = nullptr;          // [num_seqs]: cached tokens incl. this step's, >= 1
  const int32_t* block_tables = nullptr;     // [num_seqs, max_blocks_per_seq]
  int64_t num_tokens = 0;
  int32_t num_seqs = 0;
  int32_t num_q_heads = 0;         // multiple of cache.num_kv_heads
  int32_t max_blocks_per_seq = 0;  // row stride of block_tables
  float scale = 0.0f;              // score scale; 0 means 1 / sqrt(head_dim)
  bool causal = true;              // false: attend to all kv_lens[s] tokens
  int32_t sliding_window = 0;      // >= 0; W > 0: keys j with p - j < W only (needs causal)
  PagedKvLayout cache;             // the layer's pages
};

// Per-sequence sampling settings.
struct PAGEDKV_EXPORT SamplingParams {
  float temperature = 0.0f;  // < 1e-5 (incl. <= 0): greedy (argmax, lowest index on ties)
  float top_p = 1.0f;        // nucleus mass in (0, 1]: keep tokens with p >= the p where the
                             // descending cumulative mass first reaches top_p
  uint64_t seed = 0;         // random stream of the request
  uint64_t counter = 0;      // draw index in the stream (e.g. tokens generated so far)
  // vLLM's top_k: 0 (or >= vocab_size) off; k >= 1 keeps the tokens whose logit is >= the k-th
  // largest (ties kept). Not for greedy rows.
  int32_t top_k = 0;
  // vLLM's min_p in [0, 1]: 0 off; else drops the tokens whose probability (after temperature) is
  // < min_p times the largest. Applied with top_k before top_p, which renormalises over the rest.
  float min_p = 0.0f;
};

// One token per sequence from its logits row.
struct PAGEDKV_EXPORT SampleArgs {
  const float* logits = nullptr;           // [num_seqs, vocab_size]
  const SamplingParams* params = nullptr;  // [num_seqs]
  int32_t* out_tokens = nullptr;           // [num_seqs]
  int64_t num_seqs = 0;
  int64_t vocab_size = 0;
};

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_OP_ARGS_H_
