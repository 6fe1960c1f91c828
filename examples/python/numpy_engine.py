#!/usr/bin/env python3
"""A complete serving loop in Python on pagedkv: its own numpy forward pass of a llama2.c model,
driven by pagedkv.Scheduler with prefix caching on.

The model keeps paged K/V arrays, one row per KV slot ([n_layers, num_blocks * block_size,
kv_dim]); every step it takes the scheduler's flat batch (token ids, position ids, slot mapping,
block tables), applies RoPE by position id, writes the batch's keys and values into the slots of
its slot mapping (keys after RoPE), and attends through each sequence's block table. Greedy ids
match `pagedkv generate` (tests/python/test_numpy_engine.py checks it on aidreams260K).

    PYTHONPATH=build/python /usr/bin/python3 examples/python/numpy_engine.py \
        --model ../shared/data/aidreams260K/aidreams260K.bin \
        --tokenizer ../shared/data/aidreams260K/tok512.bin \
        --prompt "Echoes of vectors" --prompt "Echoes of vectors unfold" -n 24
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Dict, List, Sequence

import numpy as np

import pagedkv

BOS, EOS = 1, 2


@dataclasses.dataclass
class Llama2cWeights:
    """A llama2.c legacy (v0) checkpoint: 7 int32 header fields, then fp32 weights."""

    dim: int
    hidden_dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    vocab_size: int
    seq_len: int
    token_embedding: np.ndarray  # [vocab, dim]
    rms_att: np.ndarray  # [layers, dim]
    wq: np.ndarray  # [layers, dim, dim]
    wk: np.ndarray  # [layers, kv_dim, dim]
    wv: np.ndarray  # [layers, kv_dim, dim]
    wo: np.ndarray  # [layers, dim, dim]
    rms_ffn: np.ndarray  # [layers, dim]
    w1: np.ndarray  # [layers, hidden, dim]
    w2: np.ndarray  # [layers, dim, hidden]
    w3: np.ndarray  # [layers, hidden, dim]
    rms_final: np.ndarray  # [dim]
    classifier: np.ndarray  # [vocab, dim]

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    @property
    def kv_dim(self) -> int:
        return self.n_kv_heads * self.head_dim


def load_llama2c(path: str) -> Llama2cWeights:
    """Reads a llama2.c v0 checkpoint (run.c's order; a negative vocab size means a separate
    classifier at the end)."""
    header = np.fromfile(path, dtype=np.int32, count=7)
    dim, hidden, layers, heads, kv_heads, vocab, seq_len = (int(v) for v in header)
    shared = vocab > 0
    vocab = abs(vocab)
    data = np.fromfile(path, dtype=np.float32, offset=7 * 4)
    head_dim = dim // heads
    kv_dim = kv_heads * head_dim
    pos = 0

    def take(*shape: int) -> np.ndarray:
        nonlocal pos
        n = int(np.prod(shape))
        if pos + n > data.size:
            raise ValueError(f"{path}: truncated checkpoint")
        out = data[pos : pos + n].reshape(shape)
        pos += n
        return out

    emb = take(vocab, dim)
    parts = dict(
        rms_att=take(layers, dim),
        wq=take(layers, dim, dim),
        wk=take(layers, kv_dim, dim),
        wv=take(layers, kv_dim, dim),
        wo=take(layers, dim, dim),
        rms_ffn=take(layers, dim),
        w1=take(layers, hidden, dim),
        w2=take(layers, dim, hidden),
        w3=take(layers, hidden, dim),
        rms_final=take(dim),
    )
    take(seq_len, head_dim // 2)  # freq_cis_real (unused: RoPE is computed from positions)
    take(seq_len, head_dim // 2)  # freq_cis_imag
    classifier = emb if shared else take(vocab, dim)
    if pos != data.size:
        raise ValueError(f"{path}: {data.size - pos} floats past the weights")
    return Llama2cWeights(dim, hidden, layers, heads, kv_heads, vocab, seq_len, emb,
                          classifier=classifier, **parts)


def rmsnorm(x: np.ndarray, weight: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def rope(x: np.ndarray, positions: np.ndarray, head_dim: int, base: float = 10000.0) -> None:
    """llama2.c's RoPE in place: interleaved pairs (2i, 2i+1) of every head rotated by
    position * base^(-2i / head_dim). x: [tokens, heads * head_dim]."""
    pair = (np.arange(0, x.shape[1], 2) % head_dim).astype(np.float64)
    freq = 1.0 / np.power(base, pair / head_dim)
    angle = positions.astype(np.float64)[:, None] * freq[None, :]
    cos, sin = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
    even, odd = x[:, 0::2].copy(), x[:, 1::2].copy()
    x[:, 0::2] = even * cos - odd * sin
    x[:, 1::2] = even * sin + odd * cos


class NumpyPagedModel:
    """The forward pass over paged K/V arrays indexed by pagedkv's slots and block tables."""

    def __init__(self, w: Llama2cWeights, num_blocks: int, block_size: int):
        self.w = w
        self.block_size = block_size
        slots = num_blocks * block_size
        # [n_layers, num_blocks * block_size, kv_dim]: row s is KV slot s (keys after RoPE).
        self.k_cache = np.zeros((w.n_layers, slots, w.kv_dim), np.float32)
        self.v_cache = np.zeros((w.n_layers, slots, w.kv_dim), np.float32)

    def _context_slots(self, table: np.ndarray, length: int) -> np.ndarray:
        pos = np.arange(length)
        return table[pos // self.block_size].astype(np.int64) * self.block_size + pos % self.block_size

    def _attention(self, layer: int, q: np.ndarray, batch: pagedkv.ScheduledBatch) -> np.ndarray:
        w = self.w
        hd, group = w.head_dim, w.n_heads // w.n_kv_heads
        out = np.zeros_like(q)
        for i, seq in enumerate(batch.sequences):
            a, n = seq.query_start, seq.num_scheduled_tokens
            slots = self._context_slots(batch.block_table(i), seq.seq_len)
            k = self.k_cache[layer, slots].reshape(seq.seq_len, w.n_kv_heads, hd)
            v = self.v_cache[layer, slots].reshape(seq.seq_len, w.n_kv_heads, hd)
            k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
            qs = q[a : a + n].reshape(n, w.n_heads, hd)
            scores = np.einsum("thd,chd->htc", qs, k) / np.sqrt(hd)
            query_pos = seq.num_computed_tokens + np.arange(n)
            scores[:, np.arange(seq.seq_len)[None, :] > query_pos[:, None]] = -np.inf
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            out[a : a + n] = np.einsum("htc,chd->thd", scores, v).reshape(n, w.dim)
        return out

    def forward(self, batch: pagedkv.ScheduledBatch) -> Dict[int, np.ndarray]:
        """Runs the batch; returns the logits of each sampling sequence, by request id."""
        w = self.w
        x = w.token_embedding[batch.token_ids].astype(np.float32)
        positions, slots = batch.positions, batch.slot_mapping
        for l in range(w.n_layers):
            xb = rmsnorm(x, w.rms_att[l])
            q, k, v = xb @ w.wq[l].T, xb @ w.wk[l].T, xb @ w.wv[l].T
            rope(q, positions, w.head_dim)
            rope(k, positions, w.head_dim)
            # The whole batch's KV first: a later sequence's prefix hit may read it.
            self.k_cache[l, slots] = k
            self.v_cache[l, slots] = v
            x = x + self._attention(l, q, batch) @ w.wo[l].T
            xb = rmsnorm(x, w.rms_ffn[l])
            gate, up = xb @ w.w1[l].T, xb @ w.w3[l].T
            x = x + (gate / (1.0 + np.exp(-gate)) * up) @ w.w2[l].T
        logits = {}
        for seq in batch.sequences:
            if seq.samples:
                row = rmsnorm(x[seq.query_start + seq.num_scheduled_tokens - 1], w.rms_final)
                logits[seq.request_id] = w.classifier @ row
        return logits


@dataclasses.dataclass
class EngineRun:
    outputs: List[List[int]]  # generated ids per prompt (the stop token kept, as pagedkv's)
    prompt_tokens: int  # tokens over all prompts
    prefill_tokens: int  # prompt tokens the model computed (the rest were prefix-cache hits)
    prefix_hit_tokens: int
    steps: int


def run_engine(weights: Llama2cWeights, prompts: Sequence[Sequence[int]], max_new_tokens: int,
               block_size: int = 16, num_blocks: int = 256,
               max_num_batched_tokens: int = 2048) -> EngineRun:
    """Greedy generation for every prompt at once (continuous batching, prefix caching)."""
    cache = pagedkv.KvCacheManager(num_blocks=num_blocks, block_size=block_size,
                                   vocab_size=weights.vocab_size, model_fingerprint="numpy-llama2c",
                                   record_events=False)
    scheduler = pagedkv.Scheduler(cache, max_num_batched_tokens=max_num_batched_tokens,
                                  max_model_len=weights.seq_len)
    model = NumpyPagedModel(weights, num_blocks, block_size)
    for i, prompt in enumerate(prompts):
        scheduler.add_request(i, list(prompt), max_new_tokens=max_new_tokens, eos_token=EOS,
                              stop_tokens=[BOS])
    outputs: Dict[int, List[int]] = {}
    steps = 0
    while scheduler.has_unfinished_requests():
        batch = scheduler.schedule()
        steps += 1
        logits = model.forward(batch) if not batch.empty else {}
        sampled = {rid: int(np.argmax(row)) for rid, row in logits.items()}
        for out in scheduler.update_from_output(sampled):
            if out.finished:
                outputs[out.request_id] = list(out.output_tokens)
    stats = scheduler.stats
    prompt_tokens = sum(len(p) for p in prompts)
    return EngineRun(outputs=[outputs[i] for i in range(len(prompts))],
                     prompt_tokens=prompt_tokens,
                     prefill_tokens=stats.num_admitted_tokens - stats.num_prefix_hit_tokens,
                     prefix_hit_tokens=stats.num_prefix_hit_tokens, steps=steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="llama2.c checkpoint (.bin)")
    parser.add_argument("--tokenizer", required=True, help="llama2.c tokenizer (.bin)")
    parser.add_argument("--prompt", action="append", default=[], help="repeat for a batch")
    parser.add_argument("-n", "--max-new-tokens", type=int, default=32)
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--num-blocks", type=int, default=256)
    args = parser.parse_args()
    weights = load_llama2c(args.model)
    tok = pagedkv.Tokenizer.load(args.tokenizer, weights.vocab_size)
    prompts = [tok.encode(p) for p in (args.prompt or [""])]
    run = run_engine(weights, prompts, args.max_new_tokens, args.block_size, args.num_blocks)
    for prompt, out in zip(prompts, run.outputs):
        print(tok.decode(prompt) + tok.decode(out, prev=prompt[-1]))
        print("output ids:", " ".join(map(str, out)))
    print(f"prompt tokens {run.prompt_tokens}, prefill computed {run.prefill_tokens}, "
          f"prefix-cache hits {run.prefix_hit_tokens}, steps {run.steps}")


if __name__ == "__main__":
    main()
