#!/usr/bin/env python3
"""Writes the small Mooncake-format trace that tests/engine/tools/replay/vllm_reference_test.cc replays
(tests/engine/tools/replay/data/small_trace.jsonl): deterministic (fixed seed, Python's own Mersenne
Twister), 16-token hash ids, multi-turn conversations under a few shared system prompts, so that
prefixes are shared, caches evict at small capacities, and prompts end both inside a block and on
a block boundary (where vLLM's hit cap, num_tokens - 1, binds).

  python3 bench/replay/real_peers/make_small_trace.py > tests/engine/tools/replay/data/small_trace.jsonl
"""

import json
import random
import sys

TRACE_BLOCK = 16


def main():
    rng = random.Random(29)
    next_id = [0]

    def new_ids(n):
        ids = list(range(next_id[0], next_id[0] + n))
        next_id[0] += n
        return ids

    systems = [new_ids(rng.randint(2, 6)) for _ in range(4)]
    sessions = []  # (tokens so far as whole-id list, tail length of the last partial id)
    out = []
    t = 0
    for _ in range(600):
        t += rng.randint(0, 40)
        if not sessions or rng.random() < 0.3:
            # A new conversation: a system prompt, then a user message.
            ids = list(systems[rng.randrange(len(systems))]) + new_ids(rng.randint(1, 8))
            sessions.append(ids)
            if len(sessions) > 40:
                sessions.pop(0)
        else:
            # The next turn of a recent conversation: its prompt, an answer, a new message.
            k = len(sessions) - 1 - min(int(rng.expovariate(0.15)), len(sessions) - 1)
            ids = sessions[k] + new_ids(rng.randint(1, 5))
            sessions[k] = ids
        # Whole ids are full blocks; the last one is partial three times in four.
        tail = TRACE_BLOCK if rng.random() < 0.25 else rng.randint(1, TRACE_BLOCK - 1)
        input_length = (len(ids) - 1) * TRACE_BLOCK + tail
        # A partial last id names that request's own tokens: a fresh id, never shared.
        hash_ids = ids if tail == TRACE_BLOCK else ids[:-1] + new_ids(1)
        out.append({"timestamp": t, "input_length": input_length, "output_length": 8,
                    "hash_ids": hash_ids})
    for row in out:
        sys.stdout.write(json.dumps(row, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
