#!/usr/bin/env python3
"""An idle `pagedkv serve`: resident memory next to the model's weights, and /health latency.

Starts the server on a free loopback port, waits for "ready:" on its stderr, then reports
  - VmRSS right after loading, and after one warm-up request (which packs the weights the CPU
    backend's kernels read);
  - /health latency over --probes requests, each on a new connection and on one kept-alive
    connection: p50, p99, max in milliseconds.

Usage: /usr/bin/python3 bench/serve/idle_check.py --cli build/pagedkv -- --model M [serve flags]
Standard library only.
"""
from __future__ import annotations

import argparse
import http.client
import json
import pathlib
import re
import statistics
import subprocess
import sys
import time


def rss_mb(pid: int) -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def percentiles(ms: list[float]) -> dict[str, float]:
    s = sorted(ms)
    return {"p50": statistics.median(s), "p99": s[min(len(s) - 1, int(0.99 * len(s)))],
            "max": s[-1]}


def probe(host: str, port: int, n: int, keep_alive: bool) -> list[float]:
    times = []
    conn = http.client.HTTPConnection(host, port, timeout=10)
    for _ in range(n):
        if not keep_alive:
            conn = http.client.HTTPConnection(host, port, timeout=10)
        start = time.perf_counter()
        conn.request("GET", "/health")
        resp = conn.getresponse()
        resp.read()
        times.append(1000 * (time.perf_counter() - start))
        assert resp.status == 200, resp.status
        if not keep_alive:
            conn.close()
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", default="build/pagedkv")
    ap.add_argument("--probes", type=int, default=500)
    ap.add_argument("serve_args", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    serve_args = [a for a in args.serve_args if a != "--"]
    proc = subprocess.Popen([args.cli, "serve", "--port", "0", *serve_args],
                            stderr=subprocess.PIPE, text=True)
    host, port = "", 0
    for line in proc.stderr:
        m = re.search(r"listening on http://([0-9.]+):(\d+)", line)
        if m:
            host, port = m.group(1), int(m.group(2))
        if "ready:" in line:
            break
    else:
        print("the server did not start", file=sys.stderr)
        return 1
    try:
        report = {"rss_after_load_mb": rss_mb(proc.pid)}
        conn = http.client.HTTPConnection(host, port, timeout=600)
        conn.request("POST", "/v1/completions", json.dumps(
            {"prompt": "The capital of France is", "max_tokens": 4, "temperature": 0}))
        assert conn.getresponse().read()
        report["rss_after_first_request_mb"] = rss_mb(proc.pid)
        report["health_new_connection_ms"] = percentiles(probe(host, port, args.probes, False))
        report["health_keep_alive_ms"] = percentiles(probe(host, port, args.probes, True))
        print(json.dumps(report, indent=2))
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
