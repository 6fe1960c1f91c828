#!/usr/bin/env python3
"""Issue #16's target ratios from an engine_benchmark JSON file (--benchmark_out_format=json).

For each model: engine single-sequence decode (1 thread, all cores) and 32 concurrent sequences'
aggregate tokens/s (1 thread, all cores), each divided by the plain single-sequence rate of the
same run (targets: decode >= 1.5x, concurrent >= 8x). Medians when the run has repetitions.
Wall-clock ratios first; for the 1-thread rows also the ratio by CPU time of the benchmark thread
(tokens per CPU second), which is steadier on a loaded machine (the all-cores rows have workers
whose time the benchmark thread's CPU clock misses, so they get no CPU-time ratio).

Usage: cpu_speed_ratios.py engine.json
"""
import json
import sys


def rows(path):
    with open(path) as f:
        data = json.load(f)
    out = {}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        name = b.get("run_name", b["name"])
        rate = b.get("tokens_per_s", b.get("gen_tokens_per_s"))
        if rate is None or b.get("error_occurred"):
            continue
        cpu_rate = rate * b["real_time"] / b["cpu_time"] if b["cpu_time"] > 0 else 0.0
        out[name] = (rate, cpu_rate)
    return out


def main():
    r = rows(sys.argv[1])
    targets = {"Decode": 1.5, "Concurrent": 8.0}
    print(f"{'model':<16} {'run':<34} {'tokens/s':>10} {'x plain':>8} {'x plain (CPU)':>14} target")
    for name in sorted(k for k in r if k.startswith("BM_PlainDecode/")):
        model = name.split("/")[1]
        plain, plain_cpu = r[name]
        print(f"{model:<16} {'plain single-sequence':<34} {plain:>10.0f}")
        for kind, suffixes in (("Decode", ("threads:1", "threads:0")),
                               ("Concurrent", ("requests:32/threads:1", "requests:32/threads:0"))):
            for suffix in suffixes:
                key = f"BM_Engine{kind}/{model}/{suffix}/real_time"
                if key not in r:
                    continue
                rate, cpu_rate = r[key]
                cpu = f"{cpu_rate / plain_cpu:>13.2f}x" if suffix.endswith("threads:1") else " " * 14
                label = f"{kind} {suffix}"
                print(f"{'':<16} {label:<34} {rate:>10.0f} {rate / plain:>7.2f}x {cpu} "
                      f">= {targets[kind]}x")


if __name__ == "__main__":
    main()
