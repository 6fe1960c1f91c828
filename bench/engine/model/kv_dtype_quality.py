#!/usr/bin/env python3
"""Quality of quantized KV caches against the fp32-KV (or --reference) run of the same model (issue 41).

32 prompts generate --tokens greedy tokens each (EOS ignored) with fp32 KV. Then, per dtype of
--dtypes (one name for K and V, or "K/V" such as q8_0/q4_0, llama.cpp's -ctk / -ctv):
  - top-1 agreement, teacher-forced: every prompt + its fp32 continuation is run as one prompt with
    prompt_logprobs=1; the share of continuation positions whose most probable next token equals
    the one the fp32-KV engine gives on the same input (so a divergence does not cascade);
  - free-running: the dtype's engine generates in lockstep with an fp32-KV engine; tokens before
    each prompt's first divergence / all tokens, prompts that never diverge, and the mean and max
    KL(p_fp32 || p_dtype) of the next-token distribution over the steps whose contexts are still
    identical.

Every run uses --activations (int8, the engine's default for quantized weights, or f32): int8
activations round each linear layer's input, which magnifies any change in the KV; f32 measures
the KV dtype alone.

Runs with the interpreter the pagedkv module was built for (scripts/test.sh uses /usr/bin/python3):
  PYTHONPATH=build/python /usr/bin/python3 bench/engine/model/kv_dtype_quality.py \\
      --model ~/.cache/pagedkv/models/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import argparse
import json
import os
import sys

import numpy as np

import pagedkv

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kv_dtype_prompts import PROMPTS  # noqa: E402  (shared with kv_dtype_vs_llamacpp.py)


def log_softmax(rows):
    rows = rows.astype(np.float64)
    shifted = rows - rows.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def load(args, dtype):
    """An engine whose KV is `dtype`: one name for K and V, or "K/V" (e.g. q8_0/q4_0) for each."""
    k, _, v = dtype.partition("/")
    return pagedkv.Engine.load(args.model, args.tokenizer, num_threads=args.threads,
                               kv_cache_dtype=k, kv_cache_dtype_v=v, return_logits=True,
                               activations=args.activations,
                               max_num_seqs=len(PROMPTS))


def add_prompts(engine, tokens):
    return [engine.add_request(prompt_text=p, max_new_tokens=tokens, stop_at_eos=False)
            for p in PROMPTS]


def step_rows(engine):
    """One step: {request_id: (token, logits row)}."""
    out = engine.step()
    rows = {}
    for i, t in enumerate(out.tokens):
        rows[t.request_id] = (t.token, out.logits[i])
    return rows


def forced_top1(engine, sequences, prompt_lengths):
    """The most probable next token at every continuation position of each sequence."""
    requests = [pagedkv.GenerationRequest(prompt_tokens=seq, max_new_tokens=1, stop_at_eos=False,
                                          prompt_logprobs=1) for seq in sequences]
    tops = []
    for result, n in zip(engine.generate(requests), prompt_lengths):
        # prompt_logprobs[i] describes token i + 1 given tokens [0, i].
        tops.append([top[0][0] for _, top in result.prompt_logprobs[n - 1:-1]])
    return tops


def teacher_forced(args, dtypes):
    """{dtype: top-1 agreement with fp32 KV} over the fp32 run's continuations."""
    ref = load(args, args.reference)
    results = ref.generate([pagedkv.GenerationRequest(prompt_text=p, max_new_tokens=args.tokens,
                                                      stop_at_eos=False) for p in PROMPTS])
    sequences = [r.prompt_tokens + r.output_tokens for r in results]
    lengths = [len(r.prompt_tokens) for r in results]
    base = forced_top1(ref, sequences, lengths)
    agreement = {}
    for dtype in dtypes:
        try:
            tops = forced_top1(load(args, dtype), sequences, lengths)
        except ValueError as e:  # a dtype the model cannot hold (head size)
            print(f"{dtype}: {e}", file=sys.stderr)
            continue
        same = sum(a == b for x, y in zip(base, tops) for a, b in zip(x, y))
        agreement[dtype] = same / sum(len(x) for x in base)
    return agreement


def bucketed_kl(pa, pb, top=100):
    """KL over the tokens in both distributions' top `top`, the rest of each side as one outcome:
    the estimator kv_dtype_vs_llamacpp.py can apply to llama.cpp's top lists."""
    shared = np.intersect1d(np.argpartition(-pa, top)[:top], np.argpartition(-pb, top)[:top])
    kl = float(np.sum(np.exp(pa[shared]) * (pa[shared] - pb[shared])))
    p_rest = max(1.0 - float(np.sum(np.exp(pa[shared]))), 1e-12)
    q_rest = max(1.0 - float(np.sum(np.exp(pb[shared]))), 1e-12)
    return kl + p_rest * np.log(p_rest / q_rest)


def compare(args, dtype):
    ref, test = load(args, args.reference), load(args, dtype)
    ref_ids, test_ids = add_prompts(ref, args.tokens), add_prompts(test, args.tokens)
    diverged = [False] * len(PROMPTS)
    agreeing = 0
    kls, top_kls = [], []
    while ref.has_unfinished_requests() or test.has_unfinished_requests():
        a, b = step_rows(ref), step_rows(test)
        for i, (ra, rb) in enumerate(zip(ref_ids, test_ids)):
            if diverged[i] or ra not in a or rb not in b:
                continue
            (ta, la), (tb, lb) = a[ra], b[rb]
            pa, pb = log_softmax(np.stack([la, lb]))
            kls.append(float(np.sum(np.exp(pa) * (pa - pb))))
            top_kls.append(bucketed_kl(pa, pb))
            if ta == tb:
                agreeing += 1
            else:
                diverged[i] = True
    total = len(PROMPTS) * args.tokens
    return {"dtype": dtype, "bytes_per_token": test.kv_pool["bytes_per_token"],
            "agreement": agreeing / total, "prompts_never_diverging": diverged.count(False),
            "mean_kl": float(np.mean(kls)), "max_kl": float(np.max(kls)),
            "mean_kl_top100": float(np.mean(top_kls)),
            "kl_tokens": len(kls)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--tokenizer", default="")
    parser.add_argument("--dtypes", default="bf16,int8,fp8_e4m3,fp8_e5m2,q8_0,q4_0,q4_1")
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--reference", default="f32",
                        help="the KV dtype compared against (f16: llama.cpp's default KV)")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--activations", default="int8", choices=["int8", "f32"],
                        help="the linear layers' activations in every run, reference included")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = []
    forced = teacher_forced(args, args.dtypes.split(","))
    for dtype in forced:
        results.append(compare(args, dtype))
        r = results[-1]
        r["forced_top1_agreement"] = forced[dtype]
        if not args.json:
            print(f"{r['dtype']:9s} {r['bytes_per_token']:7d} B/token  forced top-1 "
                  f"{100 * r['forced_top1_agreement']:6.2f}%  free-running: before divergence "
                  f"{100 * r['agreement']:6.2f}%, never diverging {r['prompts_never_diverging']:2d}"
                  f"/{len(PROMPTS)}, mean KL {r['mean_kl']:.2e} (top-100 estimator "
                  f"{r['mean_kl_top100']:.2e}), max KL {r['max_kl']:.2e}",
                  flush=True)
    if args.json:
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
