"""pagedkv.replay: run / sweep against `pagedkv replay --json` on the same input, cache-mode
replay of Workload objects, the generators, errors, and GIL release during a long replay."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest

import pagedkv
from pagedkv import _pagedkv


def timeless(value):
    """`value` without the fields that measure time (they differ run to run)."""
    if isinstance(value, dict):
        return {k: timeless(v) for k, v in value.items()
                if "wall" not in k and not k.endswith("cpu_seconds") and k != "expansion_seconds"
                and k != "blocks_per_second" and k not in ("csv", "plot")}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


def cli_json(cli, *args):
    out = subprocess.run([str(cli), "replay", "--json", "--no-progress", *args], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def test_run_matches_cli_cache_mode(cli):
    py = pagedkv.replay.run(workload="rag", requests=80, capacity_blocks=3000, policies=["lfu"])
    ref = cli_json(cli, "--workload", "rag", "--requests", "80", "--capacity-blocks", "3000",
                   "--policies", "lfu")
    assert timeless(py) == timeless(ref)
    assert py["policy"] == "lfu" and 0 < py["block_hit_rate"] < 1 and py["shifted_counted"]


def test_run_matches_cli_serve_mode(cli):
    py = pagedkv.replay.run(workload="system-prompt", requests=40, mode="serve", gpu="H100")
    ref = cli_json(cli, "--workload", "system-prompt", "--requests", "40", "--mode", "serve",
                   "--gpu", "H100")
    assert timeless(py) == timeless(ref)
    assert py["mode"] == "serve" and py["finished"] == py["requests"]


def test_sweep_matches_cli(cli, tmp_path):
    py = pagedkv.replay.sweep([500, 2000], ["lru", "belady"], workload="conversation",
                              requests=60)
    ref = cli_json(cli, "--workload", "conversation", "--requests", "60", "--sweep", "500,2000",
                   "--policies", "lru,belady", "--out-dir", str(tmp_path))
    assert timeless(py) == timeless(ref)
    assert [(r["capacity_blocks"], r["policy"]) for r in py["runs"]] == [
        (500, "lru"), (500, "belady"), (2000, "lru"), (2000, "belady")]
    assert "csv" not in py  # no files unless asked
    csv = tmp_path / "mine.csv"
    pagedkv.replay.sweep([500], ["lru"], workload="conversation", requests=60, csv=str(csv))
    assert csv.read_text().count("\n") == 2


def test_trace_file_matches_cli(cli, tmp_path):
    lines = [{"timestamp": 0, "input_length": 40, "output_length": 4, "hash_ids": [1, 2, 3]},
             {"timestamp": 5, "input_length": 36, "output_length": 4, "hash_ids": [1, 2, 4]},
             {"timestamp": 9, "input_length": 20, "output_length": 4, "hash_ids": [1, 5]}]
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps(l) + "\n" for l in lines))
    opts = dict(trace=str(trace), trace_block_size=16, block_size=8, capacity_blocks=64)
    py = pagedkv.replay.run(**opts)
    ref = cli_json(cli, "--trace", str(trace), "--trace-block-size", "16", "--block-size", "8",
                   "--capacity-blocks", "64")
    assert timeless(py) == timeless(ref) and py["requests"] == 3 and py["hit_blocks"] == 6
    w = pagedkv.replay.load_trace(str(trace), trace_block_size=16)
    assert len(w) == 3 and w.requests[1].input_length == 36 and w.trace_block_size == 16
    assert timeless(pagedkv.replay.run_cache(w, capacity_blocks=64, block_size=8)) == {
        k: v for k, v in timeless(py).items()
        if k not in ("workload", "mode", "block_size", "trace_block_size", "skipped_lines",
                     "distinct_blocks", "block_rules")}


def test_errors():
    with pytest.raises(pagedkv.InvalidArgumentError, match="unknown option"):
        pagedkv.replay.run(capacity_blok=3)
    with pytest.raises(pagedkv.InvalidArgumentError, match="policy"):
        pagedkv.replay.run(workload="rag", requests=10, capacity_blocks=10, policies=["x"])
    with pytest.raises(pagedkv.NotFoundError):
        pagedkv.replay.run(trace="/nonexistent/trace.jsonl", capacity_blocks=10)
    with pytest.raises(pagedkv.InvalidArgumentError, match="wrong type"):
        pagedkv.replay.run(requests="many")
    with pytest.raises(pagedkv.InvalidArgumentError):
        pagedkv.replay.generate("nope")


def test_generators_are_deterministic_and_replayable():
    assert set(pagedkv.replay.builtin_workload_names()) >= {"rag", "mixed", "conversation"}
    a = pagedkv.replay.generate("rag", num_requests=30, seed=4)
    b = pagedkv.replay.generate("rag", num_requests=30, seed=4)
    assert a.requests == b.requests and len(a) > 0
    assert any(r.chunks for r in a.requests)
    conv = pagedkv.replay.conversation_workload(num_conversations=5, turns=(2, 2), seed=1)
    assert len(conv) == 10
    r0 = conv.requests[0]
    prompt = pagedkv.replay.materialize_prompt(r0, 1000)
    assert len(prompt) == r0.input_length and prompt.max() < 1000
    sp = pagedkv.replay.system_prompt_workload(num_requests=20, num_system_prompts=1)
    assert timeless(pagedkv.replay.run_cache(sp, capacity_blocks=10_000))["hit_blocks"] > 0
    with pytest.raises(pagedkv.InvalidArgumentError, match="unknown option"):
        pagedkv.replay.rag_workload(documents=3)


def test_python_built_workload():
    seg = pagedkv.replay.Segment(content_id=7, length=32)
    reqs = [pagedkv.replay.ReplayRequest(arrival_ms=i, input_length=32, output_length=1,
                                         segments=[seg]) for i in range(3)]
    w = pagedkv.replay.Workload("mine", reqs)
    # vLLM's rules (default): a hit leaves the last token to compute, so each whole-block
    # repeat hits 1 of its 2 blocks; the old model (cache_partial_tail) hits both.
    r = pagedkv.replay.run_cache(w, capacity_blocks=8, block_size=16)
    assert r["blocks"] == 6 and r["hit_blocks"] == 2 and r["misses"]["hit_capped_blocks"] == 2
    old = pagedkv.replay.run_cache(w, capacity_blocks=8, block_size=16, cache_partial_tail=True)
    assert old["blocks"] == 6 and old["hit_blocks"] == 4
    bad = pagedkv.replay.Workload("bad", [pagedkv.replay.ReplayRequest(input_length=5)])
    with pytest.raises(pagedkv.InvalidArgumentError):
        pagedkv.replay.run_cache(bad, capacity_blocks=8)


def test_replay_releases_the_gil():
    """A second Python thread keeps running while a long replay runs in C++."""
    stop = threading.Event()
    ticks = []

    def spin():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    thread = threading.Thread(target=spin)
    thread.start()
    try:
        start = time.perf_counter()
        _pagedkv.replay.run_json({"workload": "mixed", "capacity_blocks": 4000,
                                  "policies": ["belady"]})
        end = time.perf_counter()
    finally:
        stop.set()
        thread.join()
    duration = end - start
    assert duration > 0.05, "the replay was too short to tell"
    inside = [t for t in ticks if start + 0.25 * duration < t < end - 0.25 * duration]
    assert len(inside) >= 5, (duration, len(ticks))
