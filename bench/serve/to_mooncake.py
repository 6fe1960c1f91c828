#!/usr/bin/python3
"""Writes what a load_client.py run sent as a Mooncake trace, for `pagedkv replay --trace`.

  /usr/bin/python3 bench/serve/to_mooncake.py RUN.json TRACE.jsonl [--block-tokens 16]
  build/pagedkv replay --trace TRACE.jsonl --trace-block-size 16 --block-size 16 --mode serve \\
      --instances 4 --router prefix-aware --json

The run's workload is rebuilt from the configuration in RUN.json (a pure function of its
flags), so only built-in workloads with token-id prompts (no --text) are accepted. One line per
request that completed, in send order: `timestamp` (ms since the first send), `input_length` (the
prompt's tokens), `output_length` (the tokens the server generated) and `hash_ids`: one id per
full block of --block-tokens tokens, the same id exactly when the whole prefix up to the end of
that block is the same (the chain pagedkv hashes); a trailing partial block gets an id of its own,
since pagedkv caches full blocks only.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import load_client  # noqa: E402


def chain_ids(prompt: list[int], block_tokens: int, ids: dict) -> list[int]:
    out = []
    full = len(prompt) // block_tokens
    for j in range(full):
        key = tuple(prompt[:(j + 1) * block_tokens])
        out.append(ids.setdefault(key, len(ids)))
    if len(prompt) % block_tokens:
        out.append(ids.setdefault(("tail", len(ids)), len(ids)))
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run_json", type=pathlib.Path)
    p.add_argument("trace", type=pathlib.Path)
    p.add_argument("--block-tokens", type=int, default=16)
    args = p.parse_args(argv)
    run = json.loads(args.run_json.read_text())
    # The run's flags over today's defaults: a run recorded before a flag existed gets its default.
    defaults = vars(load_client.parse_args(["--base-url", "http://127.0.0.1:1"]))
    cfg = argparse.Namespace(**{**defaults, **run["config"]})
    if cfg.text or cfg.workload == "mooncake":
        print("to_mooncake: needs a built-in workload with token-id prompts (no --text); a "
              "mooncake run already has its trace", file=sys.stderr)
        return 2
    sessions, _ = load_client.build(cfg)
    prompts = {(r.session, r.turn): r.prompt for s in sessions for r in s.requests}
    done = sorted((r for r in run["requests"] if r["error"] is None and not r["unfinished"]),
                  key=lambda r: r["start"])
    t0 = done[0]["start"]
    ids: dict = {}
    with open(args.trace, "w") as f:
        for r in done:
            prompt = prompts[(r["session"], r["turn"])]
            f.write(json.dumps({"timestamp": round((r["start"] - t0) * 1000, 3),
                                "input_length": len(prompt),
                                "output_length": r["completion_tokens"],
                                "hash_ids": chain_ids(prompt, args.block_tokens, ids)}) + "\n")
    print(f"to_mooncake: {len(done)} requests, {len(ids)} block ids -> {args.trace}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
