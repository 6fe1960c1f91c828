#!/usr/bin/env python3
"""Time to first token after a restart with the disk tier (issue 43's target: a request whose
2,000-token prefix is on disk answers in at most 0.3x a cold server's TTFT).

Runs `pagedkv serve` three times on one model: (1) cold, no disk tier; (2) with --disk-cache on an
empty folder (stores the prompt's blocks), then SIGTERM; (3) again on the same folder, with
--disk-cache-read-threads N (--read-threads; default 2). Each run sends the same prompt with
max_tokens 1 (the answer's latency is its TTFT) and prints the seconds and cached_tokens.
--drop-caches empties the page cache before (3) (sync, then /proc/sys/vm/drop_caches; root only),
so the restarted server reads its files from the device, as after a reboot. Standard library only
(any python3).

  python3 bench/serve/disk_restart_ttft.py --cli build/pagedkv \\
      --model ~/.cache/pagedkv/models/SmolLM2-135M-Instruct.Q4_1.gguf --tokens 2000
"""

from __future__ import annotations

import argparse
import os
import tempfile

from serve_process import post_json, start


def complete(port: int, prompt: list[int]) -> tuple[float, dict]:
    return post_json(port, "/v1/completions", {"prompt": prompt, "max_tokens": 1, "temperature": 0})


def run(cli: str, args: list[str], prompt: list[int]) -> tuple[float, int]:
    proc, port = start(cli, args)
    try:
        seconds, reply = complete(port, prompt)
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    return seconds, reply["usage"]["prompt_tokens_details"]["cached_tokens"]


def drop_caches() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w", encoding="ascii") as f:
        f.write("3\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cli", default="build/pagedkv")
    p.add_argument("--model", required=True)
    p.add_argument("--tokens", type=int, default=2000, help="prompt length in tokens")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--read-threads", type=int, default=2,
                   help="--disk-cache-read-threads of the restarted server")
    p.add_argument("--drop-caches", action="store_true",
                   help="empty the page cache before the restart (root only)")
    a = p.parse_args()
    prompt = [100 + (i * 7919) % 20000 for i in range(a.tokens)]  # token ids: no tokenizer rules
    base = ["--model", a.model]
    for r in range(a.repeats):
        with tempfile.TemporaryDirectory() as folder:
            disk = [*base, "--disk-cache", folder, "--disk-cache-size", "4G"]
            cold, _ = run(a.cli, base, prompt)
            stored, _ = run(a.cli, disk, prompt)
            if a.drop_caches:
                drop_caches()
            warm, cached = run(a.cli, [*disk, "--disk-cache-read-threads", str(a.read_threads)],
                               prompt)
        print(f"repeat {r}: cold {cold:.3f} s, storing {stored:.3f} s, after restart {warm:.3f} s "
              f"({cached} cached tokens): {warm / cold:.3f}x")


if __name__ == "__main__":
    main()
