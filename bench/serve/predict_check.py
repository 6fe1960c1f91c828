#!/usr/bin/python3
"""Replay's serve-mode prediction against a measured `pagedkv serve` (issue #29).

  /usr/bin/python3 bench/serve/predict_check.py --out out/predict [--threads 2] [--weights f32]

Starts one `pagedkv serve` of SmolLM2-135M (scripts/fetch_models.sh), fits a hardware profile
from it (calibrate_serve.py), then for each load point runs a shared-prefix workload with
Poisson arrivals (load_client.py), rebuilds what was sent as a Mooncake trace (to_mooncake.py)
and replays that trace with `pagedkv replay --mode serve --hardware-profile` on the server's pool
and scheduler limits. Prints predicted against measured TTFT p50 / p99 and throughput, and writes
everything to OUT/summary.json. The arrival times come from the workload's seeded Poisson draw,
not from the server, so nothing measured leaks into the prediction but the profile.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import subprocess
import sys
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVE = ROOT / "bench" / "serve"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=pathlib.Path, default=ROOT / "out" / "predict")
    p.add_argument("--pagedkv", type=pathlib.Path, default=ROOT / "build" / "pagedkv")
    p.add_argument("--port", type=int, default=18431)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--weights", default="f32", help="the server's --weights (f32 or native)")
    p.add_argument("--weight-bytes", type=float, help="bytes per weight for the profile "
                   "(default: 4 for f32, 0.72 for a native Q4_1 file)")
    p.add_argument("--rates", default="0.5,2", help="load points: sessions (requests) per second")
    p.add_argument("--num-requests", type=int, default=24)
    p.add_argument("--system-tokens", type=int, default=192)
    p.add_argument("--user-tokens", type=int, default=64)
    p.add_argument("--output-tokens", type=int, default=24)
    p.add_argument("--server-cpus", help="taskset CPU list for the server (e.g. 0)")
    p.add_argument("--client-cpus", help="taskset CPU list for the clients (e.g. 1)")
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--max-batched-tokens", type=int, default=2048)
    return p.parse_args(argv)


def start_server(args: argparse.Namespace, model: str, log: pathlib.Path) -> subprocess.Popen:
    argv = pinned(args.server_cpus) + [str(args.pagedkv), "serve", "--model", model, "--port", str(args.port),
            "--threads", str(args.threads), "--weights", args.weights,
            "--max-num-seqs", str(args.max_num_seqs),
            "--max-batched-tokens", str(args.max_batched_tokens)]
    out = log.open("w")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"pagedkv serve exited: see {log}")
        if re.search(r"\bready:", log.read_text()):
            return proc
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"pagedkv serve not ready in 120 s: see {log}")


def pinned(cpus: str | None) -> list[str]:
    """The taskset prefix that runs a command on `cpus` (none when not given)."""
    return ["taskset", "-c", cpus] if cpus else []


def run(argv: list[str], **kw) -> str:
    print("+ " + " ".join(argv), flush=True)
    return subprocess.run(argv, check=True, text=True, stdout=subprocess.PIPE, **kw).stdout


def kv_blocks(base_url: str) -> int:
    with urllib.request.urlopen(base_url + "/metrics", timeout=10) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith("pagedkv_kv_cache_blocks "):
                return int(float(line.split()[-1]))
    raise RuntimeError("the server's /metrics has no pagedkv_kv_cache_blocks")


def load_point(args: argparse.Namespace, base_url: str, rate: float, seed: int,
               profile: pathlib.Path, blocks: int) -> dict:
    tag = f"rate{rate:g}"
    run_json, trace = args.out / f"{tag}.json", args.out / f"{tag}.jsonl"
    py = sys.executable
    run(pinned(args.client_cpus) + [py, str(SERVE / "load_client.py"), "--base-url", base_url, "--workload", "shared-prefix",
         "--num-requests", str(args.num_requests), "--system-tokens", str(args.system_tokens),
         "--user-tokens", str(args.user_tokens), "--output-tokens", str(args.output_tokens),
         "--rate", str(rate), "--vocab", "49152", "--seed", str(seed), "--json", str(run_json)])
    run([py, str(SERVE / "to_mooncake.py"), str(run_json), str(trace)])
    replay = json.loads(run([str(args.pagedkv), "replay", "--trace", str(trace),
                             "--trace-block-size", "16", "--block-size", "16", "--mode", "serve",
                             "--hardware-profile", str(profile), "--capacity-blocks", str(blocks),
                             "--max-num-seqs", str(args.max_num_seqs),
                             "--max-num-batched-tokens", str(args.max_batched_tokens),
                             "--json", "--no-progress"]))
    measured = json.loads(run_json.read_text())["summary"]
    return {
        "rate": rate,
        "measured": {"ttft_p50_s": measured["ttft_s"]["p50"], "ttft_p99_s": measured["ttft_s"]["p99"],
                     "output_tokens_per_second": measured["output_token_throughput_tps"],
                     "duration_s": measured["duration_s"], "cached_share": measured["cached_share"]},
        "predicted": {"ttft_p50_s": replay["ttft_p50_s"], "ttft_p99_s": replay["ttft_p99_s"],
                      "output_tokens_per_second": replay["output_tokens_per_second"],
                      "duration_s": replay["simulated_seconds"],
                      "cached_share": replay["prefix_hit_rate"]},
    }


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    model = run(["bash", str(ROOT / "scripts" / "fetch_models.sh")]).strip()
    weight_bytes = args.weight_bytes or (4.0 if args.weights == "f32" else 0.72)
    base_url = f"http://127.0.0.1:{args.port}"
    server = start_server(args, model, args.out / "serve.log")
    try:
        profile = args.out / "profile.json"
        run(pinned(args.client_cpus) + [sys.executable, str(SERVE / "calibrate_serve.py"),
             "--base-url", base_url,
             "--weight-bytes", str(weight_bytes), "--out", str(profile)])
        blocks = kv_blocks(base_url)
        points = [load_point(args, base_url, float(r), seed, profile, blocks)
                  for seed, r in enumerate(args.rates.split(","), start=1)]
    finally:
        server.terminate()
        server.wait(timeout=60)
    summary = {"threads": args.threads, "weights": args.weights, "kv_blocks": blocks,
               "profile": json.loads(profile.read_text()), "points": points}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print("| rate (req/s) | metric | measured | predicted | error |")
    print("| ---: | --- | ---: | ---: | ---: |")
    for p in points:
        for key in ("ttft_p50_s", "ttft_p99_s", "output_tokens_per_second", "duration_s"):
            m, q = p["measured"][key], p["predicted"][key]
            print(f"| {p['rate']:g} | {key} | {m:.3f} | {q:.3f} | {q / m - 1:+.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
