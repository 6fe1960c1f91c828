"""bench/serve/calibrate_serve.py: the fit recovers a known profile, and the profile it writes
makes `pagedkv replay --hardware-profile` time a step exactly as the fit does (no server
needed)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

SERVE = pathlib.Path(__file__).resolve().parents[2] / "bench" / "serve"
sys.path.insert(0, str(SERVE))

import calibrate_serve  # noqa: E402

SMOL = calibrate_serve.MODEL_SHAPES["smollm2-135m"]


def _rows(coef: list[float]) -> list[dict]:
    counter = calibrate_serve.StepCounter(SMOL, kv_bytes=4, weight_bytes=4)
    rows = []
    for seqs in ([(0, 64)], [(0, 512)], [(24, 1)], [(24, 1)] * 8, [(400, 1)] * 8, [(400, 1)]):
        linear, attention, nbytes = counter.work(seqs)
        row = dict(flops=linear, attention_flops=attention, bytes=nbytes, sequences=len(seqs))
        row["seconds"] = sum(row[c] * k for c, k in zip(calibrate_serve.COLUMNS, coef))
        rows.append(row)
    return rows


def test_the_fit_recovers_the_coefficients_that_made_the_times() -> None:
    coef = [1 / 2.5e11, 1 / 3e10, 1 / 3e10, 2e-4]
    assert calibrate_serve.fit(_rows(coef)) == pytest.approx(coef, rel=1e-6)


def test_a_term_that_would_be_negative_is_dropped() -> None:
    coef = [1 / 2.5e11, 0.0, 1 / 3e10, 0.0]
    got = calibrate_serve.fit(_rows(coef))
    assert min(got) >= 0
    assert got[0] == pytest.approx(coef[0], rel=1e-6)
    assert got[2] == pytest.approx(coef[2], rel=1e-6)


def test_replay_times_a_lone_prefill_as_the_fit_does(cli, tmp_path) -> None:
    f, fa, b, s = 2.5e11, 3e10, 3e10, 2e-4
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({
        "name": "fit-check", "model": "smollm2-135m", "peak_flops": f, "attention_flops": fa,
        "memory_bandwidth": b, "memory_bytes": 1e12, "per_sequence_s": s, "additive": True,
        "kv_bytes_per_element": 4, "weight_bytes_per_parameter": 4}))
    # One request of 3 blocks (48 tokens) and 1 output token: its TTFT is one prefill step.
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps({"timestamp": 0, "input_length": 48, "output_length": 1,
                                 "hash_ids": [1, 2, 3]}) + "\n")
    out = subprocess.run([str(cli), "replay", "--trace", str(trace), "--trace-block-size", "16",
                          "--block-size", "16", "--mode", "serve", "--hardware-profile",
                          str(profile), "--capacity-blocks", "64", "--json", "--no-progress"],
                         check=True, text=True, stdout=subprocess.PIPE).stdout
    replay = json.loads(out)
    counter = calibrate_serve.StepCounter(SMOL, kv_bytes=4, weight_bytes=4)
    linear, attention, nbytes = counter.work([(0, 48)])
    expected = linear / f + attention / fa + nbytes / b + s
    assert replay["gpu"] == "fit-check"
    assert replay["ttft_p50_s"] == pytest.approx(expected, rel=1e-9)
