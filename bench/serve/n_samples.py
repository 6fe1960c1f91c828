#!/usr/bin/env python3
"""Time to the last token of `n` samples of one prompt against one sample (issue 42's target:
`n = 8` on a 1,000-token prompt at most 1.5x the time of `n = 1`).

Starts `pagedkv serve` once, then sends pairs of requests, one with n = 1 and one with n = --n,
each on a fresh random prompt of --prompt-tokens ids (so neither finds the other's blocks), in
alternating order (pair k starts with n = 1 when k is even). Every request samples
(temperature 0.8, a seed, ignore_eos) --max-tokens tokens per choice and is not streamed, so its
latency is its time to the last token. Prints each pair, the ratio of the medians, and the
prompt tokens the server reports as cached for the n > 1 request (the samples after the first
find the prompt's full blocks). Standard library only (any python3).

  python3 bench/serve/n_samples.py --cli build/pagedkv \\
      --model ~/.cache/pagedkv/models/SmolLM2-135M-Instruct.Q4_1.gguf --pairs 5
"""

from __future__ import annotations

import argparse
import random
import statistics

from serve_process import post_json, start


def complete(port: int, body: dict) -> tuple[float, dict]:
    return post_json(port, "/v1/completions", body)


def request(rng: random.Random, args: argparse.Namespace, n: int, seed: int) -> dict:
    return {"prompt": [rng.randrange(args.min_id, args.vocab) for _ in range(args.prompt_tokens)],
            "n": n, "max_tokens": args.max_tokens, "temperature": 0.8, "seed": seed,
            "ignore_eos": True}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cli", default="build/pagedkv")
    parser.add_argument("--model", required=True)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--prompt-tokens", type=int, default=1000)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=49152, help="prompt ids are below this")
    parser.add_argument("--min-id", type=int, default=100, help="and at least this (no specials)")
    parser.add_argument("--serve-arg", action="append", default=[],
                        help="one more `pagedkv serve` argument (repeatable)")
    args = parser.parse_args()
    rng = random.Random(1)
    proc, port = start(args.cli, ["--model", args.model, *args.serve_arg])
    times: dict[int, list[float]] = {1: [], args.n: []}
    try:
        complete(port, request(rng, args, 1, 0))  # warm-up: pages, threads, first allocations
        for k in range(args.pairs):
            order = [1, args.n] if k % 2 == 0 else [args.n, 1]
            line = []
            for n in order:
                seconds, reply = complete(port, request(rng, args, n, k))
                times[n].append(seconds)
                usage = reply.get("usage", {})
                cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
                line.append(f"n={n}: {seconds:.2f} s, {len(reply['choices'])} choices, "
                            f"{usage.get('completion_tokens')} completion tokens, "
                            f"{cached} cached prompt tokens")
            print(f"pair {k}: " + "; ".join(line), flush=True)
    finally:
        proc.terminate()
        proc.wait()
    one, many = statistics.median(times[1]), statistics.median(times[args.n])
    print(f"median time to the last token: n=1 {one:.2f} s, n={args.n} {many:.2f} s "
          f"({many / one:.2f}x)")


if __name__ == "__main__":
    main()
