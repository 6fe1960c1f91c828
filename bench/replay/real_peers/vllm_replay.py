#!/usr/bin/env python3
"""Replays a Mooncake trace through vLLM's real v1 KVCacheManager (Python, CPU) and prints its
prefix hits, beside which `pagedkv replay` is compared (see compare.sh and docs/replay.md).

Run it inside the throwaway venv that install_peers.sh makes (vLLM is never part of this repo):
  /tmp/pagedkv-peers/bin/python bench/replay/real_peers/vllm_replay.py \
      --trace ../shared/data/traces/conversation_trace.jsonl.gz --capacity 4096 16384

Two block models, one row each:
  serve:    what vLLM does as it serves: real prompt lengths, vLLM's own block hashing
            (sha256_cbor by default, chained, full blocks only), get_computed_blocks (hit capped
            at num_tokens - 1), allocate_slots for the whole prompt, free.
  pagedkv:  vLLM fed pagedkv's old block model (--cache-partial-tail): every hash id is one full
            block of trace_block_size tokens, and get_computed_blocks is called with
            max_cache_hit_length = num_tokens, so no hit is capped.
Each request runs alone, in file order (no timing), as pagedkv's cache mode does. A pagedkv
capacity of N blocks is vLLM with num_gpu_blocks = N + 1 (vLLM reserves block 0 as its null
block). Tokens: block j of a request is trace_block_size copies of its hash id, so equal hash-id
prefixes are equal token prefixes and nothing else is (hash ids are never 0-collided this way
because the chain hash covers every earlier block too).
"""

import argparse
import gzip
import json
import sys
import time


def load_trace(path, limit):
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    rows = []
    with opener(path, "rt") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            j = json.loads(line)
            rows.append((int(j["input_length"]), [int(h) for h in j["hash_ids"]]))
            if limit and len(rows) >= limit:
                break
    return rows


def make_manager(num_gpu_blocks, block_size):
    import torch
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.kv_cache_interface import (FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec)

    spec = FullAttentionSpec(block_size=block_size, num_kv_heads=1, head_size=1,
                             dtype=torch.float32)
    config = KVCacheConfig(num_blocks=num_gpu_blocks, kv_cache_tensors=[],
                           kv_cache_groups=[KVCacheGroupSpec(["layer0"], spec)])
    return KVCacheManager(config, max_model_len=1 << 24, scheduler_block_size=block_size,
                          hash_block_size=block_size, enable_caching=True)


def replay(rows, capacity, block_size, trace_block_size, model, hash_name):
    from vllm import SamplingParams
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.request import Request

    hash_fn = get_hash_fn_by_name(hash_name)
    init_none_hash(hash_fn)
    hasher = get_request_block_hasher(block_size, hash_fn)
    manager = make_manager(capacity + 1, block_size)
    params = SamplingParams(max_tokens=1)
    hit_tokens = total_tokens = hit_blocks = blocks = 0
    start = time.perf_counter()
    for i, (input_length, hash_ids) in enumerate(rows):
        if model == "pagedkv":
            # Whole blocks, and no hit cap (pagedkv's old model caps nothing).
            tokens = [h for h in hash_ids for _ in range(trace_block_size)]
        else:
            tokens = []
            for j, h in enumerate(hash_ids):
                n = min(trace_block_size, input_length - j * trace_block_size)
                tokens.extend([h] * n)
        request = Request(str(i), tokens, params, None, block_hasher=hasher)
        cap = len(tokens) if model == "pagedkv" else None
        computed, num_computed, _ = manager.get_computed_blocks(request, max_cache_hit_length=cap)
        new_tokens = len(tokens) - num_computed
        allocated = manager.allocate_slots(request, new_tokens, num_computed, computed)
        if allocated is None:
            print(f"request {i}: allocate_slots refused ({len(tokens)} tokens)", file=sys.stderr)
            sys.exit(1)
        request.num_computed_tokens = len(tokens)
        manager.free(request)
        hb = num_computed // block_size
        hit_blocks += hb
        if model == "pagedkv":
            # pagedkv's old model weighs a hit partial last hash id by its real tokens.
            full = len(hash_ids)
            hit_tokens += sum(min(trace_block_size, input_length - j * trace_block_size)
                              for j in range(hb))
            blocks += full
        else:
            hit_tokens += num_computed
            blocks += input_length // block_size
        total_tokens += input_length
    seconds = time.perf_counter() - start
    return {"capacity_blocks": capacity, "model": model, "hit_blocks": hit_blocks,
            "blocks": blocks, "hit_tokens": hit_tokens, "total_tokens": total_tokens,
            "token_hit_rate": hit_tokens / total_tokens, "seconds": seconds,
            "blocks_per_second": blocks / seconds}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trace", required=True)
    p.add_argument("--capacity", type=int, nargs="+", default=[4096, 16384])
    p.add_argument("--block-size", type=int, default=512)
    p.add_argument("--trace-block-size", type=int, default=512)
    p.add_argument("--models", nargs="+", default=["serve", "pagedkv"])
    p.add_argument("--hash", default="sha256_cbor", help="vLLM's --prefix-caching-hash-algo")
    p.add_argument("--limit", type=int, default=0, help="first N requests only (0: all)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    a = p.parse_args()
    rows = load_trace(a.trace, a.limit)
    import vllm
    for cap in a.capacity:
        for model in a.models:
            if model == "pagedkv" and a.block_size != a.trace_block_size:
                continue
            r = replay(rows, cap, a.block_size, a.trace_block_size, model, a.hash)
            r.update(vllm=vllm.__version__, block_size=a.block_size,
                     trace_block_size=a.trace_block_size, hash=a.hash)
            if a.json:
                print(json.dumps(r), flush=True)
            else:
                print(f"vllm {r['vllm']} {model:8s} capacity {cap:>7,}: {r['hit_blocks']:>8,} hit "
                      f"blocks of {r['blocks']:,}, token hit rate {r['token_hit_rate']:.4f}, "
                      f"{r['blocks_per_second']:,.0f} blocks/s", flush=True)


if __name__ == "__main__":
    main()
