#!/usr/bin/env python3
"""Replays a Mooncake trace through SGLang's real RadixCache (Python, CPU, no GPU) and prints its
prefix hits, for the comparison in docs/replay.md. Run it in the venv of install_peers.sh:
  /tmp/pagedkv-peers/bin/python bench/replay/real_peers/sglang_replay.py \
      --trace ../shared/data/traces/conversation_trace.jsonl.gz --capacity 4096 16384

"As it serves", one request at a time in file order, following SGLang's scheduler steps:
match_prefix on the first num_tokens - 1 tokens (page-aligned by the tree), lock the matched
node, make room with the tree's own evict() for the new pages plus one page (what SGLang's
paged allocation reserves per request), allocate, then on finish insert the page-aligned prompt
(pages the tree already held and the partial tail page go back to the allocator) and unlock.
Capacity is in pages of --page-size tokens; the allocator below only counts free pages (the
tree's values are placeholder slot indices), which is all the tree's eviction sees.
"""

import argparse
import gzip
import json
import time


def load_trace(path, limit):
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    rows = []
    with opener(path, "rt") as f:
        for line in f:
            if line.strip():
                j = json.loads(line)
                rows.append((int(j["input_length"]), [int(h) for h in j["hash_ids"]]))
                if limit and len(rows) >= limit:
                    break
    return rows


class CountingAllocator:
    """Free-token count for RadixCache.create_simulated: what the tree frees comes back here."""

    device = "cpu"

    def __init__(self, tokens):
        self.free_tokens = tokens

    def available_size(self):
        return self.free_tokens

    def free_segment(self, value, start_pos=0):
        self.free_tokens += len(value) - start_pos

    def free(self, value):
        self.free_tokens += len(value)


def replay(rows, capacity, page, trace_block_size):
    import torch
    from sglang.srt.mem_cache.base_prefix_cache import (EvictParams, InsertParams,
                                                        MatchPrefixParams)
    from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey

    alloc = CountingAllocator(capacity * page)
    cache = RadixCache.create_simulated(mock_allocator=alloc, page_size=page)
    hit_tokens = total_tokens = 0
    start = time.perf_counter()
    for input_length, hash_ids in rows:
        tokens = []
        for j, h in enumerate(hash_ids):
            tokens.extend([h] * min(trace_block_size, input_length - j * trace_block_size))
        m = cache.match_prefix(MatchPrefixParams(key=RadixKey(tokens[: input_length - 1])))
        prefix = m.device_prefix_len
        node = m.last_device_node
        cache.inc_lock_ref(node)
        pages = -(-input_length // page) - prefix // page
        shortfall = (pages + 1) * page - alloc.available_size()
        if shortfall > 0:
            cache.evict(EvictParams(num_tokens=shortfall))
        if alloc.available_size() < pages * page:
            raise SystemExit(f"request of {input_length} tokens does not fit {capacity} pages")
        alloc.free_tokens -= pages * page
        # Finished: cache the full pages; the tree reports how many it already held.
        aligned = input_length // page * page
        value = torch.zeros(aligned, dtype=torch.int64)
        res = cache.insert(InsertParams(key=RadixKey(tokens[:aligned]), value=value))
        # Pages the tree already had beyond the match, and the partial tail page, are freed.
        alloc.free_tokens += max(0, res.prefix_len - prefix) + (pages * page - (aligned - prefix))
        cache.dec_lock_ref(node)
        hit_tokens += prefix
        total_tokens += input_length
    seconds = time.perf_counter() - start
    blocks = sum(n // page for n, _ in rows)
    return {"capacity_blocks": capacity, "hit_blocks": hit_tokens // page, "blocks": blocks,
            "hit_tokens": hit_tokens, "total_tokens": total_tokens,
            "token_hit_rate": hit_tokens / total_tokens, "seconds": seconds,
            "blocks_per_second": blocks / seconds}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trace", required=True)
    p.add_argument("--capacity", type=int, nargs="+", default=[4096, 16384])
    p.add_argument("--page-size", type=int, default=512)
    p.add_argument("--trace-block-size", type=int, default=512)
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    rows = load_trace(a.trace, a.limit)
    import sglang
    for cap in a.capacity:
        r = replay(rows, cap, a.page_size, a.trace_block_size)
        r.update(sglang=sglang.__version__, page_size=a.page_size)
        if a.json:
            print(json.dumps(r), flush=True)
        else:
            print(f"sglang {r['sglang']} serve    capacity {cap:>7,}: {r['hit_blocks']:>8,} hit "
                  f"blocks of {r['blocks']:,}, token hit rate {r['token_hit_rate']:.4f}, "
                  f"{r['blocks_per_second']:,.0f} blocks/s", flush=True)


if __name__ == "__main__":
    main()
