#!/usr/bin/python3
"""Fits a hardware profile for `pagedkv replay --mode serve --hardware-profile` from a running
`pagedkv serve` (or any OpenAI-compatible server that streams one token per chunk).

  /usr/bin/python3 bench/serve/calibrate_serve.py --base-url http://127.0.0.1:8080 \\
      --model-preset smollm2-135m --kv-bytes 4 --weight-bytes 4 --out profile.json

It measures, with unique random token-id prompts (nothing cached):
  - prefill: the time to first token of prompts of --prefill-lengths tokens, max_tokens 1
    (each --repeats times; the fastest counts: it is the least disturbed);
  - decode: the median inter-token gap of --decode-batch-sizes streams running together (at a
    short context and at --long-context).
Each measurement is one engine step (or a run of equal ones) whose FLOPs and bytes the replay's
cost model (engine/tools/replay/serve_mode/cost_model.h) counts; the script fits
  step seconds = linear FLOPs / F + attention FLOPs / Fa + bytes / B + sequences * s
(the cost model's "additive" form) by least squares (F, B > 0; Fa, s >= 0) and writes F and Fa
(achieved FLOP/s), B (achieved bytes/s; it also carries the fixed per-step cost, which the
weights' bytes hide) and s (sampling and streaming per sequence), with every measurement and
the fit's error on each. Decode is measured at a short and at a long context (--long-context),
so attention's own rate can be told apart. Standard library + numpy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import statistics
import sys
import time
import urllib.request

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import load_client  # noqa: E402
import sse_http  # noqa: E402
import stats  # noqa: E402
import workloads  # noqa: E402

# Model shapes, the same numbers as engine/tools/replay/serve_mode/cost_model.cc's presets of these
# names.
MODEL_SHAPES = {
    "smollm2-135m": dict(params=134.5e6, layers=30, q_heads=9, kv_heads=3, head_dim=64),
    "llama-3-8b": dict(params=8.03e9, layers=32, q_heads=32, kv_heads=8, head_dim=128),
}


class StepCounter:
    """FLOPs and bytes of one step as the replay's cost model counts them."""

    def __init__(self, shape: dict, kv_bytes: float, weight_bytes: float):
        self.s = shape
        self.kv_per_token = 2 * shape["layers"] * shape["kv_heads"] * shape["head_dim"] * kv_bytes
        self.weight_bytes = shape["params"] * weight_bytes

    def work(self, seqs: list[tuple[int, int]]) -> tuple[float, float, float]:
        """(linear FLOPs, attention FLOPs, bytes) of a step computing n new tokens after c cached
        ones, per (c, n)."""
        tokens = sum(n for _, n in seqs)
        context = sum(n * c + n * (n + 1) / 2 for c, n in seqs)
        read = sum(c + n for c, n in seqs)
        s = self.s
        linear = 2 * s["params"] * tokens
        attention = 4 * s["layers"] * s["q_heads"] * s["head_dim"] * context
        return linear, attention, self.weight_bytes + self.kv_per_token * (read + tokens)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base-url", required=True)
    p.add_argument("--model-preset", default="smollm2-135m", choices=sorted(MODEL_SHAPES))
    p.add_argument("--kv-bytes", type=int, default=4, help="bytes per KV element (CPU: fp32)")
    p.add_argument("--weight-bytes", type=float, default=4.0,
                   help="bytes per weight (--weights f32: 4; GGUF Q4_1 kept native: ~0.72)")
    p.add_argument("--prefill-lengths", default="64,256,512")
    p.add_argument("--decode-batch-sizes", default="1,4,8,16")
    p.add_argument("--long-context", type=int, default=400,
                   help="prompt tokens of the long-context decode measurements")
    p.add_argument("--long-batch-sizes", default="1,8,16")
    p.add_argument("--decode-tokens", type=int, default=32)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--vocab", type=int, default=49152)
    p.add_argument("--name", default="cpu-measured")
    p.add_argument("--out", type=pathlib.Path, required=True)
    return p.parse_args(argv)


class Prompts:
    """Unique random token-id prompts (never a cached prefix)."""

    def __init__(self, vocab: int):
        self.space = workloads.TokenSpace(vocab=vocab, seed=int(time.time()))
        self.n = 0

    def next(self, length: int) -> list[int]:
        self.n += 1
        return workloads.random_ids(self.space, f"calibrate:{self.n}", length)


async def run_batch(cfg: load_client.ClientConfig, prompts: list[list[int]],
                    max_tokens: int) -> list[stats.RequestResult]:
    results = [stats.RequestResult(session=i, turn=0, prompt_len=len(p), max_tokens=max_tokens)
               for i, p in enumerate(prompts)]
    await asyncio.gather(*(load_client.send(workloads.Request(p, max_tokens, session=i), cfg, r)
                           for i, (p, r) in enumerate(zip(prompts, results))))
    for r in results:
        if r.error:
            raise RuntimeError(f"calibration request failed: {r.error}")
    return results


async def measure(args: argparse.Namespace, counter: StepCounter) -> list[dict]:
    cfg = load_client.ClientConfig(endpoint=sse_http.Endpoint.parse(args.base_url))
    cfg.model = await load_client.discover_model(cfg.endpoint, None)
    prompts = Prompts(args.vocab)
    await run_batch(cfg, [prompts.next(32)], 4)  # warm-up: first-request costs
    rows = []
    for length in (int(x) for x in args.prefill_lengths.split(",")):
        ttfts = [(await run_batch(cfg, [prompts.next(length)], 1))[0].ttft
                 for _ in range(args.repeats)]
        linear, attention, nbytes = counter.work([(0, length)])
        rows.append(dict(kind="prefill", tokens=length, seconds=min(ttfts), flops=linear,
                         attention_flops=attention, bytes=nbytes, sequences=1, samples=ttfts))
    for prompt_len, batches in ((16, args.decode_batch_sizes), (args.long_context,
                                                                  args.long_batch_sizes)):
        for batch in (int(x) for x in batches.split(",")):
            gaps = []
            for _ in range(args.repeats):
                res = await run_batch(cfg, [prompts.next(prompt_len) for _ in range(batch)],
                                      args.decode_tokens)
                # the median gap: a pure decode step (a prefill step of streams that started
                # later can fall between two tokens of those that started first)
                gaps.append(statistics.median(g for r in res for g in r.itl))
            mid = prompt_len + args.decode_tokens // 2  # the mean context of a decode step
            linear, attention, nbytes = counter.work([(mid, 1)] * batch)
            rows.append(dict(kind="decode", batch=batch, context=mid, seconds=min(gaps),
                             flops=linear, attention_flops=attention, bytes=nbytes,
                             sequences=batch, samples=gaps))
    return rows


COLUMNS = ("flops", "attention_flops", "bytes", "sequences")


def fit(rows: list[dict]) -> list[float]:
    """Least squares of seconds = sum over COLUMNS of row[column] * coefficient, each row divided
    by its seconds (relative errors weigh the same), coefficients >= 0 (one that comes out
    negative is dropped and the rest refitted). The weights dominate every step's bytes, so a
    fixed per-step cost cannot be told apart from streaming them: the memory term carries both.
    Returns the coefficients in COLUMNS order."""
    a = np.array([[r[c] for c in COLUMNS] for r in rows], dtype=float)
    t = np.array([r["seconds"] for r in rows])
    scale = a.max(axis=0)
    a_w, ones = a / scale / t[:, None], np.ones_like(t)
    active = list(range(len(COLUMNS)))
    while True:
        coef, *_ = np.linalg.lstsq(a_w[:, active], ones, rcond=None)
        if (coef >= 0).all():
            break
        active.pop(int(np.argmin(coef)))
    full = np.zeros(len(COLUMNS))
    full[active] = coef
    return [float(v) for v in full / scale]


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    counter = StepCounter(MODEL_SHAPES[args.model_preset], args.kv_bytes, args.weight_bytes)
    rows = asyncio.run(measure(args, counter))
    coef = fit(rows)
    x, xa, y, z = coef
    if x <= 0 or y <= 0:
        print(f"calibrate_serve: the fit gave no {'compute' if x <= 0 else 'memory'} term "
              f"({dict(zip(COLUMNS, coef))}); measure more lengths / batch sizes",
              file=sys.stderr)
        return 1
    for r in rows:
        r["predicted_seconds"] = sum(r[c] * k for c, k in zip(COLUMNS, coef))
        r["error"] = r["predicted_seconds"] / r["seconds"] - 1
    with urllib.request.urlopen(args.base_url.rstrip("/") + "/metrics", timeout=10) as resp:
        metrics = resp.read().decode()
    blocks = next((int(float(line.split()[-1])) for line in metrics.splitlines()
                   if line.startswith("pagedkv_kv_cache_blocks ")), None)
    profile = {
        "name": args.name,
        "model": args.model_preset,
        "peak_flops": 1 / x,
        # attention at the linear layers' rate when the fit finds no cost of its own
        "attention_flops": 1 / xa if xa > 0 else 1 / x,
        "memory_bandwidth": 1 / y,
        "memory_bytes": 1e12,  # unused with --capacity-blocks; the server's pool is below
        "step_overhead_s": 0.0,
        "per_sequence_s": z,
        "additive": True,
        "kv_bytes_per_element": args.kv_bytes,
        "weight_bytes_per_parameter": args.weight_bytes,
        "measured": {"base_url": args.base_url, "server_kv_blocks": blocks, "steps": rows,
                     "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
    }
    args.out.write_text(json.dumps(profile, indent=2) + "\n")
    print(f"achieved {1 / x / 1e9:.2f} GFLOP/s (attention "
          f"{profile['attention_flops'] / 1e9:.2f}), {1 / y / 1e9:.2f} GB/s, "
          f"{z * 1e3:.2f} ms per sequence in a step; server pool {blocks} blocks")
    for r in rows:
        what = (f"prefill {r['tokens']}" if r["kind"] == "prefill"
                else f"decode x{r['batch']} at {r['context']}")
        print(f"  {what:>18}: measured {r['seconds'] * 1e3:8.1f} ms, fitted "
              f"{r['predicted_seconds'] * 1e3:8.1f} ms ({r['error']:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
