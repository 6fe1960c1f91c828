#!/usr/bin/env python3
"""llama.cpp's own quantized-KV cost, for beside pagedkv's (issue 41; kv_dtype_quality.py).

Starts `llama-server` (built from llama.cpp by hand; not part of this project) twice on the same
GGUF file, with flash attention in both: once with its f16 KV cache and once with `-ctk q8_0
-ctv q8_0` (or --cache-type). The 32 prompts of kv_dtype_quality.py generate --tokens greedy
tokens each (EOS ignored) with the top --n-probs log-probabilities of every step. Per prompt, the
steps before the first divergence of the two runs have identical contexts; over those steps it
prints the mean KL(p_f16 || p_q8_0) (over the tokens in both top lists, the rest of each side's
mass as one more outcome: a lower bound of the full KL), the
tokens before the first divergence / all tokens, and prompts that never diverge.

  /usr/bin/python3 bench/engine/model/kv_dtype_vs_llamacpp.py --server PATH/llama-server \\
      --model ~/.cache/pagedkv/models/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kv_dtype_prompts import PROMPTS  # noqa: E402  (kv_dtype_quality.py's prompts)


def start_server(args, cache_type, port):
    cmd = [args.server, "-m", args.model, "--port", str(port), "-t", str(args.threads),
           "-c", "4096", "-fa", "--parallel", "1", "-ctk", cache_type, "-ctv", cache_type]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"llama-server with {cache_type} KV did not start")


def complete(port, prompt, args):
    body = {"prompt": prompt, "n_predict": args.tokens, "temperature": 0.0, "ignore_eos": True,
            "n_probs": args.n_probs, "cache_prompt": False}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        steps = json.load(r)["completion_probabilities"]
    return [(s["id"], {t["id"]: t["logprob"] for t in s["top_logprobs"]}) for s in steps]


def run(args, cache_type, port):
    proc = start_server(args, cache_type, port)
    try:
        return [complete(port, p, args) for p in PROMPTS]
    finally:
        proc.terminate()
        proc.wait()


def bucketed_kl(p, q):
    """KL(p || q) over the tokens in both top lists plus one outcome for the rest of each side's
    mass (merging outcomes never raises KL: a lower bound of the full KL)."""
    shared = set(p) & set(q)
    kl = sum(math.exp(p[i]) * (p[i] - q[i]) for i in shared)
    p_rest = max(1.0 - sum(math.exp(p[i]) for i in shared), 1e-12)
    q_rest = max(1.0 - sum(math.exp(q[i]) for i in shared), 1e-12)
    return kl + p_rest * math.log(p_rest / q_rest)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", required=True, help="llama-server binary")
    parser.add_argument("--model", required=True)
    parser.add_argument("--cache-type", default="q8_0")
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--n-probs", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--port", type=int, default=18471)
    args = parser.parse_args()
    ref = run(args, "f16", args.port)
    test = run(args, args.cache_type, args.port + 1)
    agreeing, never, kls = 0, 0, []
    for a, b in zip(ref, test):
        diverged = False
        for (ta, pa), (tb, pb) in zip(a, b):
            kls.append(bucketed_kl(pa, pb))
            if ta != tb:
                diverged = True
                break
            agreeing += 1
        never += not diverged
    total = len(PROMPTS) * args.tokens
    print(f"llama.cpp {args.cache_type} KV vs its f16 KV (flash attention): before divergence "
          f"{100 * agreeing / total:.2f}%, never diverging {never}/{len(PROMPTS)}, mean KL "
          f"{sum(kls) / len(kls):.2e} over {len(kls)} steps, max KL {max(kls):.2e}")


if __name__ == "__main__":
    main()
